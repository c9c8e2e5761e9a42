/*
 * direct.c -- the direct algorithms: every block goes straight to the rank that needs it,
 * all messages at once. Reduce-scatter and all-gather are one hop deep, all-reduce two (the
 * direct reduce-scatter, then the direct all-gather), whatever the rank count; each rank
 * moves the ring's share of the data ((n-1)/n per half).
 *
 * The ring moves partial sums n-1 hops, one after the other: where a hop costs a context
 * switch (more ranks than cores) its calls pay n-1 of them, here about one (measured on 4
 * ranks / 2 cores: small reduce-scatter 10 us where the ring took 17-25 us, 2 MiB all-reduce
 * 1.4-1.8x faster; BENCHMARKS.md). Every rank talks to every other, so the table offers them
 * for up to TT_DIRECT_MAX_RANKS ranks on one node (a connection per peer and channel).
 *
 * Rank me sends to me+1, me+2, ... and receives from me-1, me-2, ... (rank numbers, not ring
 * positions): the first message each rank sends is the first its receiver takes, and no rank
 * is everyone's first destination. Folding: the first fold reads the own block of sendbuf,
 * the others the accumulator in recvbuf; in place that block is the one written, element by
 * element, and no send reads it. Within a phase a chunk of every send goes out before the
 * same chunk is folded or received (chunk-major order).
 */
#include "algorithms/algorithms.h"

int tt_fits_direct(int nranks, const struct tt_topo_view *t)
{
    return nranks >= 1 && nranks <= TT_DIRECT_MAX_RANKS && !(t && t->nnodes > 1);
}

/* Send block b ([src[b], +len[b]) of sendbuf) to rank b; fold the others' block me into
 * recvbuf at dst, the last fold POSTOP. */
static void scatter_fold(struct tt_plan *p, int n, int me, const size_t *src, const size_t *len,
                         size_t dst)
{
    for (int k = 1; k < n; k++) {
        int to = (me + k) % n;
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                          .src = TT_BUF_SEND,
                                          .send_peer = to,
                                          .src_off = src[to],
                                          .count = len[to]});
    }
    for (int k = 1; k < n; k++)
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                          .flags = k == n - 1 ? TT_STEP_POSTOP : 0,
                                          .src = k == 1 ? TT_BUF_SEND : TT_BUF_RECV,
                                          .dst = TT_BUF_RECV,
                                          .recv_peer = (me - k + n) % n,
                                          .src_off = k == 1 ? src[me] : dst,
                                          .dst_off = dst,
                                          .count = len[me]});
}

/* Send [src_off, +len[me]) of buffer `buf` to every other rank; receive rank b's block into
 * recvbuf at dst[b]. */
static void gather(struct tt_plan *p, int n, int me, uint16_t buf, size_t src_off,
                   const size_t *dst, const size_t *len)
{
    for (int k = 1; k < n; k++)
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                          .src = buf,
                                          .send_peer = (me + k) % n,
                                          .src_off = src_off,
                                          .count = len[me]});
    for (int k = 1; k < n; k++) {
        int from = (me - k + n) % n;
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                          .dst = TT_BUF_RECV,
                                          .recv_peer = from,
                                          .dst_off = dst[from],
                                          .count = len[from]});
    }
}

/*
 * One builder for the three (the table names it for each collective): a channel's part of each
 * rank's block, then the schedule. Reduce-scatter: block b is sendbuf[b * count], folded into
 * recvbuf. All-gather: the own block from sendbuf (copied into place unless in place), rank b's
 * into recvbuf[b * count]. All-reduce: the channel's part cut into n blocks; phase 2 starts once
 * phase 1 is done (plan.h), so in place its receives overwrite blocks only after phase 1 sent them.
 */
void tt_direct(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        size_t off, cnt, blk[TT_DIRECT_MAX_RANKS], len[TT_DIRECT_MAX_RANKS];

        tt_plan_channel(p, a, ch, &off, &cnt);
        for (int b = 0; b < n; b++) {
            if (a->coll == TT_COLL_ALL_REDUCE) {
                tt_split(cnt, n, b, &blk[b], &len[b]);
                blk[b] += off;
            } else {
                blk[b] = (size_t)b * a->count + off;
                len[b] = cnt;
            }
        }
        switch (a->coll) {
        case TT_COLL_REDUCE_SCATTER:
            if (n == 1)
                tt_plan_self_copy(p, a, blk[me], off, cnt, TT_STEP_POSTOP);
            else
                scatter_fold(p, n, me, blk, len, off);
            break;
        case TT_COLL_ALL_GATHER:
            tt_plan_self_copy(p, a, off, blk[me], cnt, 0);
            gather(p, n, me, TT_BUF_SEND, off, blk, len);
            break;
        default: /* all-reduce */
            if (n == 1) {
                tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
                break;
            }
            scatter_fold(p, n, me, blk, len, blk[me]);
            tt_plan_phase(p);
            gather(p, n, me, TT_BUF_RECV, blk[me], blk, len);
        }
    }
}
