/*
 * allreduce_direct.c -- direct all-reduce: the direct reduce-scatter, then the direct
 * all-gather, on the channel's part cut into n blocks (block b owned by rank b). Two hops deep
 * whatever the rank count, each rank moving 2(n-1)/n of the data as on the ring, talking to
 * every other rank (up to TT_DIRECT_MAX_RANKS).
 * Phase 1: send block b to rank b (to me+1, me+2, ...), fold the arrivals (from me-1, me-2,
 * ...) into the own block of recvbuf, the first fold reading sendbuf's. Phase 2: send the
 * finished own block to every other rank, receive theirs. In place, phase 1 writes only the
 * own block, which its sends never read; phase 2 overwrites the other blocks only after
 * phase 1's sends of them (plan.h: a phase starts once the previous one is done).
 */
#include "algorithms.h"

void tt_allreduce_direct(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        size_t off, cnt, boff[TT_DIRECT_MAX_RANKS], blen[TT_DIRECT_MAX_RANKS];

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int b = 0; b < n; b++) {
            tt_split(cnt, n, b, &boff[b], &blen[b]);
            boff[b] += off;
        }
        for (int k = 1; k < n; k++) {
            int to = (me + k) % n;
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_SEND,
                                              .send_peer = to,
                                              .src_off = boff[to],
                                              .count = blen[to]});
        }
        for (int k = 1; k < n; k++)
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = k == n - 1 ? TT_STEP_POSTOP : 0,
                                              .src = k == 1 ? TT_BUF_SEND : TT_BUF_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = (me - k + n) % n,
                                              .src_off = boff[me],
                                              .dst_off = boff[me],
                                              .count = blen[me]});
        tt_plan_phase(p);
        for (int k = 1; k < n; k++)
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_RECV,
                                              .send_peer = (me + k) % n,
                                              .src_off = boff[me],
                                              .count = blen[me]});
        for (int k = 1; k < n; k++) {
            int from = (me - k + n) % n;
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = from,
                                              .dst_off = boff[from],
                                              .count = blen[from]});
        }
    }
}
