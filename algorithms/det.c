/*
 * det.c -- deterministic all-reduce, reduce-scatter and reduce (TUTTI_DETERMINISTIC=1): one
 * fixed reduction order, whatever the rank count, channels or chunk size.
 *
 * Each block of the result has an owner (all-reduce: the channel's part cut into n blocks,
 * block b owned by rank b; reduce-scatter: rank b's block; reduce: the root owns all). Every
 * rank sends its contribution to each block's owner (itself included, over its self
 * connection); the owner receives rank 0's contribution, then folds in ranks 1, 2, ... n-1 in
 * that order with recv-reduce-copy (x_q OP acc: the same association every time), dividing
 * for AVG at the last. All-reduce then passes the finished blocks around the ring. Chunking
 * cuts every block at the same element offsets and the fold is element-wise, so chunk size
 * and channel count cannot change a bit of the result.
 * Chunk-major order is safe: a chunk of every send goes out before the same chunk is folded,
 * and in place the own contribution has left (to self) before the accumulator overwrites it.
 * Costs n messages per rank per chunk: for reproducibility, not speed.
 *
 * The flat all-reduce is the same fold with every rank owning the whole array: each rank
 * sends its vector to every rank and folds all n in rank order. One hop deep, n copies of the
 * data per rank: for small calls where ranks outnumber cores (a hop costs a context switch),
 * and its results are bit for bit those of det on every rank.
 */
#include "algorithms/algorithms.h"

/* Send this rank's part [src_off(b), +len(b)) to every owner b, then, as owner, fold. */
static void gather_fold(struct tt_plan *p, int n, int me, const int *owners, int nowners,
                        const size_t *src_off, const size_t *len, size_t dst_off, size_t my_len,
                        int final)
{
    for (int k = 0; k < nowners; k++)
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                          .src = TT_BUF_SEND,
                                          .send_peer = owners[k],
                                          .src_off = src_off[k],
                                          .count = len[k]});
    for (int k = 0; k < nowners; k++) {
        if (owners[k] != me)
            continue;
        for (int q = 0; q < n; q++)
            tt_plan_step(p,
                         &(struct tt_step){.prim = q == 0 ? TT_PRIM_RECV : TT_PRIM_RECV_REDUCE_COPY,
                                           .flags = final && q == n - 1 ? TT_STEP_POSTOP : 0,
                                           .src = TT_BUF_RECV,
                                           .dst = TT_BUF_RECV,
                                           .recv_peer = q,
                                           .src_off = dst_off,
                                           .dst_off = dst_off,
                                           .count = my_len});
    }
}

/*
 * det (flat = 0): block b of the channel's part owned by rank b, folded there, then the
 * finished blocks around the ring. flat: every rank owns the whole part (sent to me+1, me+2,
 * ... first, so no rank is everyone's first destination) and folds it itself.
 */
static void allreduce_fold(struct tt_plan *p, const struct tt_ring *rings,
                           const struct tt_coll_args *a, int flat)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        int owners[n];
        size_t off, cnt, boff[n], blen[n];

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int b = 0; b < n; b++) {
            owners[b] = flat ? (me + 1 + b) % n : b;
            tt_split(cnt, flat ? 1 : n, flat ? 0 : b, &boff[b], &blen[b]);
            boff[b] += off;
        }
        if (flat) {
            gather_fold(p, n, me, owners, n, boff, blen, off, cnt, 1);
            continue;
        }
        gather_fold(p, n, me, owners, n, boff, blen, boff[me], blen[me], 1);
        /* The finished blocks around the ring (blocks of uneven size: each step moves the
         * block of the rank it is named for). */
        tt_plan_phase(p);
        for (int k = 0; k < n; k++) {
            int owner = tt_ring_at(r, r->pos - k);
            struct tt_step s = {.src = TT_BUF_RECV,
                                .dst = TT_BUF_RECV,
                                .send_peer = tt_ring_at(r, r->pos + 1),
                                .recv_peer = tt_ring_at(r, r->pos - 1),
                                .src_off = boff[owner],
                                .dst_off = boff[owner],
                                .count = blen[owner]};
            s.prim = k == 0 ? TT_PRIM_SEND : k < n - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
            tt_plan_step(p, &s);
        }
    }
}

void tt_allreduce_det(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    allreduce_fold(p, rings, a, 0);
}

void tt_allreduce_flat(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    allreduce_fold(p, rings, a, 1);
}

void tt_reducescatter_det(struct tt_plan *p, const struct tt_ring *rings,
                          const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        int owners[n];
        size_t off, cnt, boff[n], blen[n];

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, (size_t)me * a->count + off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int b = 0; b < n; b++) {
            owners[b] = b;
            boff[b] = (size_t)b * a->count + off;
            blen[b] = cnt;
        }
        gather_fold(p, n, me, owners, n, boff, blen, off, cnt, 1);
    }
}

void tt_reduce_det(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos], root = a->root;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        gather_fold(p, n, me, &root, 1, &off, &cnt, off, cnt, 1);
    }
}
