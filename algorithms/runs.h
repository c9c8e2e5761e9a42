/*
 * runs.h -- a range of blocks as runs of adjacent memory, for schedules whose steps move
 * several ranks' blocks at once (recursive halving and doubling with folded ranks).
 *
 * Blocks are those of the ranks at indices [q0, q1) of an order (ring positions, or rank
 * numbers where order is NULL); block of rank b: elements [b * count + off, + cnt) (a
 * channel's part of it). A run is one step: both ends of a message cut the same range the
 * same way, so their steps match (plan.h).
 */
#ifndef TT_RUNS_H
#define TT_RUNS_H

#include "algorithms/algorithms.h"

struct tt_runs {
    const int *order;       /* NULL: rank numbers */
    size_t count, off, cnt; /* block stride, the channel's part of each block */
    int q, q1, merge;
};

/* merge: adjacent blocks form one run (only where the channel carries whole blocks). */
static inline struct tt_runs tt_runs_of(const int *order, const struct tt_coll_args *a, size_t off,
                                        size_t cnt, int q0, int q1, int merge)
{
    return (struct tt_runs){order, a->count, off, cnt, q0, q1, merge && cnt == a->count};
}

/* Where the block at index q of the order starts. */
static inline size_t tt_runs_at(const struct tt_runs *it, int q)
{
    return (size_t)(it->order ? it->order[q] : q) * it->count + it->off;
}

/* The next run: [*o, *o + *len), starting with the block of rank *rank. 0 when done. */
static inline int tt_run_next(struct tt_runs *it, size_t *o, size_t *len, int *rank)
{
    if (it->q >= it->q1)
        return 0;
    *rank = it->order ? it->order[it->q] : it->q;
    *o = tt_runs_at(it, it->q);
    *len = it->cnt;
    for (it->q++; it->merge && it->q < it->q1 && tt_runs_at(it, it->q) == *o + *len; it->q++)
        *len += it->cnt;
    return 1;
}

/* Every run of `it` as a step like s (its src_off and dst_off set to the run's offset). */
static inline void tt_runs_steps(struct tt_plan *p, struct tt_runs it, struct tt_step s)
{
    int rank;

    while (tt_run_next(&it, &s.src_off, &s.count, &rank)) {
        s.dst_off = s.src_off;
        tt_plan_step(p, &s);
    }
}

/*
 * One exchange with a peer: give's runs sent as `send` steps, take's received as `recv` steps
 * (src_off and dst_off the run's), a phase per pair of runs: a send and a receive per chunk
 * each way, so a FIFO of two slots never holds a message its peer has not reached. The run
 * starting with rank mine's block (mine >= 0; take's runs then one block each, merge off)
 * goes to buffer mine_buf at mine_off instead.
 */
static inline void tt_runs_exchange(struct tt_plan *p, struct tt_runs give, struct tt_step send,
                                    struct tt_runs take, struct tt_step recv, int mine,
                                    uint16_t mine_buf, size_t mine_off)
{
    for (;;) {
        size_t go = 0, gn = 0, ko = 0, kn = 0;
        int grank = -1, krank = -1;
        int hg = tt_run_next(&give, &go, &gn, &grank), hk = tt_run_next(&take, &ko, &kn, &krank);
        struct tt_step r = recv;

        if (!hg && !hk)
            return;
        tt_plan_phase(p);
        if (hg) {
            send.src_off = go, send.count = gn;
            tt_plan_step(p, &send);
        }
        if (hk) {
            r.src_off = r.dst_off = ko, r.count = kn;
            if (krank == mine)
                r.dst = mine_buf, r.dst_off = mine_off;
            tt_plan_step(p, &r);
        }
    }
}

#endif
