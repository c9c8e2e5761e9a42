/*
 * reduce_chain.c -- pipelined chain reduce along the ring, ending at the root.
 *
 * With d = distance from the root along the ring, data flows d = 1 -> 2 -> ... -> n-1 -> 0:
 *   d == 1        send from sendbuf
 *   1 < d         recv-reduce-send
 *   d == 0        recv-reduce-copy into recvbuf: final value, POSTOP
 * n == 1: a copy (POSTOP), none in place. Only the root touches recvbuf.
 */
#include "algorithms/algorithms.h"

void tt_reduce_chain(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos, d = tt_ring_dist(r, a->root);
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        struct tt_step s = {.src = TT_BUF_SEND,
                            .dst = TT_BUF_RECV,
                            .src_off = off,
                            .dst_off = off,
                            .count = cnt,
                            .send_peer = tt_ring_at(r, pos + 1),
                            .recv_peer = tt_ring_at(r, pos - 1)};
        if (d == 0) {
            s.prim = TT_PRIM_RECV_REDUCE_COPY;
            s.flags = TT_STEP_POSTOP;
        } else {
            s.prim = d == 1 ? TT_PRIM_SEND : TT_PRIM_RECV_REDUCE_SEND;
        }
        tt_plan_step(p, &s);
    }
}
