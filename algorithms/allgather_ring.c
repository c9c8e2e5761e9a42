/*
 * allgather_ring.c -- ring all-gather.
 *
 * Each rank's block (sendcount elements) is split across channels; on a channel, the part of
 * the block of the rank at position q travels from q around the ring:
 *   step 0          send             own part (from sendbuf); plus a copy into recvbuf
 *                                    unless in place
 *   steps 1..n-2    recv-copy-send   block of position p-k, into recvbuf
 *   step n-1        recv             block of position p+1, into recvbuf
 * Block of rank r lands at recvbuf[r * sendcount]. n == 1: the copy alone.
 */
#include "algorithms/algorithms.h"

void tt_allgather_ring(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos, me = tt_ring_at(r, pos);
        int next = tt_ring_at(r, pos + 1), prev = tt_ring_at(r, pos - 1);
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        tt_plan_self_copy(p, a, off, (size_t)me * a->count + off, cnt, 0); /* own block */
        if (n == 1)
            continue;
        for (int k = 0; k < n; k++) {
            struct tt_step s = {.src = TT_BUF_SEND,
                                .dst = TT_BUF_RECV,
                                .send_peer = next,
                                .recv_peer = prev,
                                .count = cnt};
            int owner = tt_ring_at(r, pos - k);

            s.prim = k == 0 ? TT_PRIM_SEND : k < n - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
            s.src_off = off;
            s.dst_off = (size_t)owner * a->count + off;
            tt_plan_step(p, &s);
        }
    }
}
