/*
 * allgather_rd.c -- recursive-doubling all-gather, any number of ranks; small messages.
 *
 * Works on rank numbers (not the ring order), so that what a rank holds is always a
 * contiguous run of blocks: after round k, rank p holds the blocks of ranks
 * [p & ~(2^(k+1)-1), + 2^(k+1)). In round k it sends the 2^k blocks it holds to q = p ^ 2^k
 * in one message and receives q's 2^k blocks in one message. log2(n) hops, against the
 * ring's n-1; each rank sends n-1 blocks in all, like the ring.
 * Round 0 sends from sendbuf (copied into place first unless in place); later rounds send
 * from recvbuf. Every round sends before it receives; chunk-major execution needs one free
 * slot per connection.
 *
 * Other rank counts fold (fold.h, on rank numbers): a rank that folds sends its block to its
 * buddy first and receives every block from it last; the p = 2^k virtual ranks run the rounds
 * above on the blocks they hold (a buddy's two ranks' blocks, adjacent), one step per run of
 * adjacent blocks (runs.h), each round a phase (what a virtual rank holds is no longer
 * aligned to the chunk walk) with a phase per pair of runs on several channels.
 */
#include "algorithms/algorithms.h"
#include "algorithms/fold.h"
#include "algorithms/runs.h"

/* n not a power of two: the folded schedule above. */
static void folded(struct tt_plan *p, const struct tt_coll_args *a, int n, int me, size_t off,
                   size_t cnt)
{
    struct tt_fold f;

    tt_fold_init(&f, n, me);
    if (f.vrank < 0) { /* the own block to the buddy, then every block back */
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                          .src = TT_BUF_SEND,
                                          .send_peer = f.buddy,
                                          .src_off = off,
                                          .count = cnt});
        tt_plan_phase(p);
        tt_runs_steps(
            p, tt_runs_of(NULL, a, off, cnt, 0, n, 1),
            (struct tt_step){.prim = TT_PRIM_RECV, .dst = TT_BUF_RECV, .recv_peer = f.buddy});
        return;
    }
    tt_plan_self_copy(p, a, off, (size_t)me * a->count + off, cnt, 0);
    if (f.buddy >= 0)
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                          .dst = TT_BUF_RECV,
                                          .recv_peer = f.buddy,
                                          .dst_off = (size_t)f.buddy * a->count + off,
                                          .count = cnt});
    for (int bit = 1; bit < f.p; bit <<= 1) {
        int mine = f.vrank & ~(bit - 1), theirs = (f.vrank ^ bit) & ~(bit - 1);
        int w = tt_fold_pos(&f, f.vrank ^ bit);
        tt_runs_exchange(
            p, tt_runs_of(NULL, a, off, cnt, tt_fold_pos(&f, mine), tt_fold_pos(&f, mine + bit), 1),
            (struct tt_step){.prim = TT_PRIM_SEND, .src = TT_BUF_RECV, .send_peer = w},
            tt_runs_of(NULL, a, off, cnt, tt_fold_pos(&f, theirs), tt_fold_pos(&f, theirs + bit),
                       1),
            (struct tt_step){.prim = TT_PRIM_RECV, .dst = TT_BUF_RECV, .recv_peer = w}, -1, 0, 0);
    }
    if (f.buddy >= 0) {
        tt_plan_phase(p);
        tt_runs_steps(
            p, tt_runs_of(NULL, a, off, cnt, 0, n, 1),
            (struct tt_step){.prim = TT_PRIM_SEND, .src = TT_BUF_RECV, .send_peer = f.buddy});
    }
}

void tt_allgather_rd(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n & (n - 1)) {
            folded(p, a, n, me, off, cnt);
            continue;
        }
        tt_plan_self_copy(p, a, off, (size_t)me * a->count + off, cnt, 0); /* own block */
        for (int bit = 1; bit < n; bit <<= 1) {
            int q = me ^ bit, mine = me & ~(bit - 1), theirs = q & ~(bit - 1);

            /* Channel ch carries elements [off, off + cnt) of each block; a run of blocks is
             * one step only when the channel carries whole blocks. */
            for (int b = 0; b < (a->nchannels == 1 ? 1 : bit); b++) {
                size_t run = a->nchannels == 1 ? (size_t)bit * a->count : cnt;
                int sblk = mine + (a->nchannels == 1 ? 0 : b);
                int rblk = theirs + (a->nchannels == 1 ? 0 : b);
                tt_plan_step(
                    p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                         .src = bit == 1 ? TT_BUF_SEND : TT_BUF_RECV,
                                         .send_peer = q,
                                         .src_off = bit == 1 ? off : (size_t)sblk * a->count + off,
                                         .count = bit == 1 ? cnt : run});
                tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                                  .dst = TT_BUF_RECV,
                                                  .recv_peer = q,
                                                  .dst_off = (size_t)rblk * a->count + off,
                                                  .count = run});
            }
        }
    }
}
