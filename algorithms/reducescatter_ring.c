/*
 * reducescatter_ring.c -- ring reduce-scatter.
 *
 * Block b (recvcount elements of sendbuf, at b * recvcount) ends reduced on rank b. On a
 * channel, with blk(q) the channel's part of the block of the rank at position q:
 *   step 0          send               blk(p-1)  (from sendbuf)
 *   steps 1..n-2    recv-reduce-send   blk(p-1-k)
 *   step n-1        recv-reduce-copy   blk(p)    final value: POSTOP, into recvbuf
 * n == 1: a copy of the own block (POSTOP), none in place.
 * In place (recvbuf == sendbuf + rank * recvcount): the own block is read only by the last
 * step, which writes the same elements it reads.
 */
#include "algorithms/algorithms.h"

void tt_reducescatter_ring(struct tt_plan *p, const struct tt_ring *rings,
                           const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos, me = tt_ring_at(r, pos);
        int next = tt_ring_at(r, pos + 1), prev = tt_ring_at(r, pos - 1);
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, (size_t)me * a->count + off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int k = 0; k < n; k++) {
            struct tt_step s = {.src = TT_BUF_SEND,
                                .dst = TT_BUF_RECV,
                                .send_peer = next,
                                .recv_peer = prev,
                                .count = cnt,
                                .dst_off = off};
            int owner = tt_ring_at(r, pos - 1 - k);

            if (k == 0)
                s.prim = TT_PRIM_SEND;
            else if (k < n - 1)
                s.prim = TT_PRIM_RECV_REDUCE_SEND;
            else {
                s.prim = TT_PRIM_RECV_REDUCE_COPY;
                s.flags = TT_STEP_POSTOP;
            }
            s.src_off = (size_t)owner * a->count + off;
            tt_plan_step(p, &s);
        }
    }
}
