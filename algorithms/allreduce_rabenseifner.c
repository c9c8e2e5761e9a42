/*
 * allreduce_rabenseifner.c -- Rabenseifner's all-reduce: recursive-halving reduce-scatter,
 * then recursive-doubling all-gather; any number of ranks (fold.h).
 *
 * The channel's part is split into p blocks (p = 2^k virtual ranks). Reduce-scatter, rounds
 * bit = p/2 .. 1, partner w = v ^ bit: the range held (2*bit blocks, aligned) halves; send
 * the half w keeps (from the input in the first round, from recvbuf later), and
 * recv-reduce-copy w's contribution to the half v keeps into recvbuf. After the last round v
 * holds block v reduced (POSTOP). All-gather, rounds bit = 1 .. p/2: send the range held to
 * w, receive w's range. Each rank moves 2(p-1)/p of the data in 2 log2(p) hops: the ring's
 * bandwidth with the latency of recursive doubling, for medium messages.
 * Folded ranks send their input to their buddy first and get the whole result back last.
 * Each round is its own phase: a round reads elements the previous one wrote at another
 * offset, so chunk-major order would read them before they exist (plan.h).
 */
#include "algorithms/algorithms.h"
#include "algorithms/fold.h"

/* Elements [*o, *o + *n) of blocks [b0, b1) of a part [off, off + cnt) cut into p blocks. */
static void blocks(size_t off, size_t cnt, int p, int b0, int b1, size_t *o, size_t *n)
{
    size_t o0, n0, o1, n1;

    tt_split(cnt, p, b0, &o0, &n0);
    tt_split(cnt, p, b1 - 1, &o1, &n1);
    *o = off + o0;
    *n = o1 + n1 - o0;
}

void tt_allreduce_rabenseifner(struct tt_plan *p, const struct tt_ring *rings,
                               const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        struct tt_fold f;
        uint16_t src = TT_BUF_SEND;
        size_t off, cnt, o, n;
        int lo, hi;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (r->nranks == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        tt_fold_init(&f, r->nranks, r->pos);
        if (f.vrank < 0) {
            int buddy = r->order[f.buddy];
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_SEND,
                                              .send_peer = buddy,
                                              .src_off = off,
                                              .count = cnt});
            tt_plan_fold_result(p, buddy, off, cnt);
            continue;
        }
        if (f.buddy >= 0) {
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = f.p == 1 ? TT_STEP_POSTOP : 0,
                                              .src = TT_BUF_SEND,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = r->order[f.buddy],
                                              .src_off = off,
                                              .dst_off = off,
                                              .count = cnt});
            src = TT_BUF_RECV;
        }
        lo = 0;
        hi = f.p;
        for (int bit = f.p / 2; bit >= 1; bit /= 2) {
            int w = r->order[tt_fold_pos(&f, f.vrank ^ bit)], mid = lo + bit;
            int keep_lo = (f.vrank & bit) ? mid : lo, give_lo = (f.vrank & bit) ? lo : mid;

            tt_plan_phase(p);
            blocks(off, cnt, f.p, give_lo, give_lo + bit, &o, &n);
            tt_plan_step(
                p, &(struct tt_step){
                       .prim = TT_PRIM_SEND, .src = src, .send_peer = w, .src_off = o, .count = n});
            blocks(off, cnt, f.p, keep_lo, keep_lo + bit, &o, &n);
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = bit == 1 ? TT_STEP_POSTOP : 0,
                                              .src = src,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = w,
                                              .src_off = o,
                                              .dst_off = o,
                                              .count = n});
            src = TT_BUF_RECV;
            lo = keep_lo;
            hi = keep_lo + bit;
        }
        for (int bit = 1; bit < f.p; bit *= 2) {
            int w = r->order[tt_fold_pos(&f, f.vrank ^ bit)];
            int their_lo = lo ^ bit; /* w holds the same-sized range beside ours */

            tt_plan_phase(p);
            blocks(off, cnt, f.p, lo, hi, &o, &n);
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_RECV,
                                              .send_peer = w,
                                              .src_off = o,
                                              .count = n});
            blocks(off, cnt, f.p, their_lo, their_lo + (hi - lo), &o, &n);
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = w,
                                              .dst_off = o,
                                              .count = n});
            lo = lo < their_lo ? lo : their_lo;
            hi = lo + 2 * bit;
        }
        if (f.buddy >= 0) {
            tt_plan_phase(p);
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = TT_BUF_RECV,
                                              .send_peer = r->order[f.buddy],
                                              .src_off = off,
                                              .count = cnt});
        }
    }
}
