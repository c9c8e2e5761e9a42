/*
 * reducescatter_rh.c -- recursive-halving reduce-scatter, any number of ranks (fold.h).
 *
 * The ring moves partial sums n-1 hops; here the p = 2^k virtual ranks take log2(p) rounds,
 * bit = p/2 .. 1, partner w = v ^ bit: the ranks held (2*bit virtual ranks' blocks, aligned)
 * halve; send the half w keeps (from the input in the first round, from the scratch buffer
 * later) and recv-reduce-copy w's contribution to the half v keeps into the scratch buffer.
 * Each rank moves the ring's (n-1)/n of the data. Virtual rank v holds the blocks of its
 * ring positions: 2v and 2v+1 where a rank folds into it, else v + r (fold.h). In the last
 * round (one virtual rank's blocks) each block is its own step, so the own block lands in
 * recvbuf (POSTOP) and a folded rank's in scratch, sent to it after.
 *
 * A fold's partial sums have nowhere to live but a buffer the size of the input: the
 * scratch buffer (TT_BUF_SCRATCH, laid out as sendbuf; the algorithm table's `scratch`).
 * A block range is cut into one step per run of blocks adjacent in memory (runs.h: one run on
 * one channel with the ring in rank order; a block each on several channels). Each round is
 * a phase (it sends elements the previous round wrote at other offsets), one per pair of
 * runs where there are several (tt_runs_exchange). In place, only the last round writes
 * recvbuf (the own block, element by element from the same elements).
 */
#include "algorithms/algorithms.h"
#include "algorithms/fold.h"
#include "algorithms/runs.h"

void tt_reducescatter_rh(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, me = r->order[r->pos];
        uint16_t src = TT_BUF_SEND;
        struct tt_fold f;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, (size_t)me * a->count + off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        tt_fold_init(&f, n, r->pos);
        if (f.vrank < 0) { /* folded: the whole input to the buddy, the own block back */
            int buddy = r->order[f.buddy];
            tt_runs_steps(
                p, tt_runs_of(r->order, a, off, cnt, 0, n, 1),
                (struct tt_step){.prim = TT_PRIM_SEND, .src = TT_BUF_SEND, .send_peer = buddy});
            tt_plan_fold_result(p, buddy, off, cnt);
            continue;
        }
        if (f.buddy >= 0) {
            tt_runs_steps(p, tt_runs_of(r->order, a, off, cnt, 0, n, 1),
                          (struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                           .src = TT_BUF_SEND,
                                           .dst = TT_BUF_SCRATCH,
                                           .recv_peer = r->order[f.buddy]});
            src = TT_BUF_SCRATCH;
        }
        int lo = 0;
        for (int bit = f.p / 2; bit >= 1; bit /= 2) {
            int w = r->order[tt_fold_pos(&f, f.vrank ^ bit)], mid = lo + bit;
            int keep = (f.vrank & bit) ? mid : lo, give = (f.vrank & bit) ? lo : mid;
            struct tt_runs g = tt_runs_of(r->order, a, off, cnt, tt_fold_pos(&f, give),
                                          tt_fold_pos(&f, give + bit), bit > 1);
            struct tt_runs k = tt_runs_of(r->order, a, off, cnt, tt_fold_pos(&f, keep),
                                          tt_fold_pos(&f, keep + bit), bit > 1);
            /* the last round: the final value (POSTOP), the own block into recvbuf */
            tt_runs_exchange(p, g,
                             (struct tt_step){.prim = TT_PRIM_SEND, .src = src, .send_peer = w}, k,
                             (struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = bit == 1 ? TT_STEP_POSTOP : 0,
                                              .src = src,
                                              .dst = TT_BUF_SCRATCH,
                                              .recv_peer = w},
                             bit == 1 ? me : -1, TT_BUF_RECV, off);
            src = TT_BUF_SCRATCH;
            lo = keep;
        }
        if (f.buddy >= 0) { /* the folded rank's block, reduced in the last round */
            int buddy = r->order[f.buddy];
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_SCRATCH,
                                              .send_peer = buddy,
                                              .src_off = (size_t)buddy * a->count + off,
                                              .count = cnt});
        }
    }
}
