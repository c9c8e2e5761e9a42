/*
 * allreduce_rd.c -- recursive-doubling all-reduce, any number of ranks (fold.h).
 *
 * Schedule for a virtual rank v of the p = 2^k that take part (fold.h), rounds bit = 1..p/2,
 * partner w = v ^ bit:
 *   send               the whole array (first round: the input; later: recvbuf) to w
 *   recv-reduce-copy   w's array OP ours -> recvbuf   (last round: final value, POSTOP)
 * A rank that folds sends its input to its buddy first and receives the result from it last;
 * the buddy reduces it in before round one and sends the result back after the last round.
 * Every rank sends and receives the whole array log2(p) times (+2 where folded): one hop per
 * round, so it serves small messages. Partners reduce the same two operands in opposite
 * order; the ops are commutative, so every rank ends with bitwise the same result.
 * Every round covers the whole array, so chunk c only ever reads chunk c: chunk-major order
 * pipelines it, and in place needs nothing special.
 */
#include "algorithms/algorithms.h"
#include "algorithms/fold.h"

void tt_allreduce_rd(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        struct tt_fold f;
        uint16_t src = TT_BUF_SEND;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (r->nranks == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        tt_fold_init(&f, r->nranks, r->pos);
        struct tt_step s = {.src_off = off, .dst_off = off, .count = cnt, .dst = TT_BUF_RECV};
        if (f.vrank < 0) { /* folded: contribute, then receive the result */
            int buddy = r->order[f.buddy];
            s.prim = TT_PRIM_SEND, s.src = TT_BUF_SEND, s.send_peer = buddy;
            tt_plan_step(p, &s);
            s.prim = TT_PRIM_RECV, s.recv_peer = buddy;
            tt_plan_step(p, &s);
            continue;
        }
        if (f.buddy >= 0) { /* take the folded rank's input in */
            s.prim = TT_PRIM_RECV_REDUCE_COPY, s.src = src, s.recv_peer = r->order[f.buddy];
            s.flags = f.p == 1 ? TT_STEP_POSTOP : 0;
            tt_plan_step(p, &s);
            src = TT_BUF_RECV;
        }
        for (int bit = 1; bit < f.p; bit <<= 1) {
            int partner = r->order[tt_fold_pos(&f, f.vrank ^ bit)];
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = src,
                                              .send_peer = partner,
                                              .src_off = off,
                                              .count = cnt});
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = bit << 1 == f.p ? TT_STEP_POSTOP : 0,
                                              .src = src,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = partner,
                                              .src_off = off,
                                              .dst_off = off,
                                              .count = cnt});
            src = TT_BUF_RECV;
        }
        if (f.buddy >= 0) /* give the folded rank the result */
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_RECV,
                                              .send_peer = r->order[f.buddy],
                                              .src_off = off,
                                              .count = cnt});
    }
}
