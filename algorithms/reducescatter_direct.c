/*
 * reducescatter_direct.c -- direct reduce-scatter: every rank sends each other rank its
 * block, and folds the n-1 blocks it receives into its own. One hop deep.
 *
 * The ring moves partial sums n-1 hops, one after the other: where a hop costs a context
 * switch (more ranks than cores) its small calls pay n-1 of them. Here every message leaves
 * at once and only the arrivals are waited for, so a small call costs about one hop
 * (measured on 4 ranks / 2 cores: 10 us where the ring took 17 us, BENCHMARKS.md). Each rank
 * moves (n-1)/n of the data, as on the ring, but talks to every other rank, so the table
 * offers it for up to TT_DIRECT_MAX_RANKS ranks (a connection per peer and channel).
 *
 * Rank me sends to me+1, me+2, ... and folds from me-1, me-2, ...: the first message each
 * rank sends is the first its receiver folds, and no rank is everyone's first destination.
 * The first fold reads the own block of sendbuf; in place (recvbuf == sendbuf + me * count)
 * that is the block it writes, element by element, and the sends never read it. One phase:
 * a chunk of every send goes out before the same chunk is folded.
 */
#include "algorithms.h"

int tt_fits_direct(int nranks, const struct tt_topo_view *t)
{
    (void)t;
    return nranks >= 1 && nranks <= TT_DIRECT_MAX_RANKS;
}

void tt_reducescatter_direct(struct tt_plan *p, const struct tt_ring *rings,
                             const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, (size_t)me * a->count + off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int k = 1; k < n; k++) {
            int to = (me + k) % n;
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_SEND,
                                              .send_peer = to,
                                              .src_off = (size_t)to * a->count + off,
                                              .count = cnt});
        }
        for (int k = 1; k < n; k++)
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = k == n - 1 ? TT_STEP_POSTOP : 0,
                                              .src = k == 1 ? TT_BUF_SEND : TT_BUF_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = (me - k + n) % n,
                                              .src_off = k == 1 ? (size_t)me * a->count + off : off,
                                              .dst_off = off,
                                              .count = cnt});
    }
}
