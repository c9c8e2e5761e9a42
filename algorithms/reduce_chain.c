/*
 * reduce_chain.c -- pipelined chain reduce along the ring, ending at the root.
 *
 * With d = distance from the root along the ring, data flows d = 1 -> 2 -> ... -> n-1 -> 0:
 *   d == 1        send from sendbuf
 *   1 < d         recv-reduce-send
 *   d == 0        recv-reduce-copy into recvbuf: final value, POSTOP
 * n == 1: a copy (POSTOP), none in place. Only the root touches recvbuf.
 */
#include "algorithms.h"

void tt_reduce_chain(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos, rootpos = 0;
        size_t off, cnt;
        struct tt_step s = {.src = TT_BUF_SEND, .dst = TT_BUF_RECV};

        for (int k = 0; k < n; k++)
            if (r->order[k] == a->root)
                rootpos = k;
        tt_plan_lane(p, ch);
        tt_split(a->count, a->nchannels, ch, &off, &cnt);
        int d = ((pos - rootpos) % n + n) % n;
        s.src_off = s.dst_off = off;
        s.count = cnt;
        s.send_peer = tt_ring_at(r, pos + 1);
        s.recv_peer = tt_ring_at(r, pos - 1);
        if (n == 1) {
            if (!a->inplace) {
                s.prim = TT_PRIM_COPY;
                s.flags = TT_STEP_POSTOP;
                tt_plan_step(p, &s);
            }
            continue;
        }
        if (d == 0) {
            s.prim = TT_PRIM_RECV_REDUCE_COPY;
            s.flags = TT_STEP_POSTOP;
        } else {
            s.prim = d == 1 ? TT_PRIM_SEND : TT_PRIM_RECV_REDUCE_SEND;
        }
        tt_plan_step(p, &s);
    }
}
