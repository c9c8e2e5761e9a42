/*
 * allgather_direct.c -- direct all-gather: every rank sends its block to each other rank and
 * receives theirs. One hop deep.
 *
 * The companion of reducescatter_direct.c: where a hop costs a context switch the ring's
 * small calls pay n-1 of them, here every message leaves at once. Each rank moves (n-1)/n of
 * the data, as on the ring, talking to every other rank (up to TT_DIRECT_MAX_RANKS).
 * Rank me sends to me+1, me+2, ... and receives from me-1, me-2, ...; block of rank r lands
 * at recvbuf[r * sendcount]. In place the own block is already there, and is only read.
 */
#include "algorithms.h"

void tt_allgather_direct(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        tt_plan_self_copy(p, a, off, (size_t)me * a->count + off, cnt, 0); /* own block */
        for (int k = 1; k < n; k++)
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_SEND,
                                              .send_peer = (me + k) % n,
                                              .src_off = off,
                                              .count = cnt});
        for (int k = 1; k < n; k++) {
            int from = (me - k + n) % n;
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = from,
                                              .dst_off = (size_t)from * a->count + off,
                                              .count = cnt});
        }
    }
}
