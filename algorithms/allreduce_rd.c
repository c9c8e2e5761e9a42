/*
 * allreduce_rd.c -- recursive-doubling all-reduce for a power-of-two number of ranks.
 *
 * Schedule, position p on the ring order, rounds k = 0 .. log2(n)-1, partner q = p ^ 2^k:
 *   send               the whole array (round 0: sendbuf; later: recvbuf) to q
 *   recv-reduce-copy   q's array OP ours -> recvbuf   (last round: final value, POSTOP)
 * Every rank sends and receives the whole array log2(n) times: latency-optimal (one hop per
 * round, log2(n) hops in all, against 2(n-1) for the ring) but not bandwidth-optimal, so it
 * serves small messages. Partners reduce the same two operands, in opposite order; the ops
 * are commutative, so every rank ends with bitwise the same result.
 * Chunk-major execution sends chunk c of round k before overwriting it with round k's result,
 * and finishes all rounds of chunk c before chunk c+1, so in place needs nothing special.
 * Preconditions: n is a power of two (tt_allreduce_rd_fits).
 */
#include "algorithms.h"

int tt_allreduce_rd_fits(int nranks)
{
    return nranks > 0 && (nranks & (nranks - 1)) == 0;
}

void tt_allreduce_rd(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int bit = 1; bit < n; bit <<= 1) {
            int partner = r->order[pos ^ bit];
            uint16_t src = bit == 1 ? TT_BUF_SEND : TT_BUF_RECV;

            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                              .src = src,
                                              .send_peer = partner,
                                              .src_off = off,
                                              .count = cnt});
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV_REDUCE_COPY,
                                              .flags = bit << 1 == n ? TT_STEP_POSTOP : 0,
                                              .src = src,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = partner,
                                              .src_off = off,
                                              .dst_off = off,
                                              .count = cnt});
        }
    }
}
