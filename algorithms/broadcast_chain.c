/*
 * broadcast_chain.c -- pipelined chain broadcast along the ring, starting at the root.
 *
 * With d = distance from the root along the ring (0 = root, n-1 = last):
 *   d == 0        send from sendbuf (plus a copy into recvbuf unless in place)
 *   0 < d < n-1   recv-copy-send into recvbuf
 *   d == n-1      recv into recvbuf
 * Chunks stream down the chain, so every link is busy once the pipe is full: time is
 * about size/bandwidth + (n-1) * chunk latency.
 */
#include "algorithms/algorithms.h"

void tt_broadcast_chain(struct tt_plan *p, const struct tt_ring *rings,
                        const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos, d = tt_ring_dist(r, a->root);
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        struct tt_step s = {.src = TT_BUF_SEND,
                            .dst = TT_BUF_RECV,
                            .src_off = off,
                            .dst_off = off,
                            .count = cnt,
                            .send_peer = tt_ring_at(r, pos + 1),
                            .recv_peer = tt_ring_at(r, pos - 1)};
        if (d == 0) {
            tt_plan_self_copy(p, a, off, off, cnt, 0);
            if (n == 1)
                continue;
            s.prim = TT_PRIM_SEND;
        } else {
            s.prim = d < n - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
        }
        tt_plan_step(p, &s);
    }
}
