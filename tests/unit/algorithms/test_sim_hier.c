/*
 * test_sim_hier.c -- the hierarchical plans built cross_only: their steps between nodes alone,
 * where the symmetric path does the stages inside a node (lib/engine/sym.c). A node that
 * builds them and a node that builds the whole plan must exchange the same messages, since
 * each node chooses alone. Here some nodes run cross_only plans, with the stages inside the
 * node done by this test from the plans' split (before: the node's sum of each rank's
 * segment; after: what each rank holds copied to its node's ranks), and the others the whole
 * plan, in the schedule simulator; every result is checked exactly against values computed
 * from (rank, index).
 */
#include "sim.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 64

struct shape {
    int n, nodes;
};

static int32_t v(int r, size_t i)
{
    return (int32_t)((size_t)(r + 1) * 1000 + i % 997);
}

/* [*o, *o + *len): local index l's segment of channel ch's part (allreduce_hier.c's split). */
static void seg(size_t count, int nch, int ch, int L, int l, size_t *o, size_t *len)
{
    size_t off, cnt;

    tt_split(count, nch, ch, &off, &cnt);
    tt_split(cnt, L, l, o, len);
    *o += off;
}

struct hier_case {
    enum tt_coll coll;
    struct shape s;
    size_t count;
    int nch, inplace, root;
    unsigned cross; /* bit g: node g builds its plans cross_only */
};

static void run_case(const struct hier_case *c)
{
    int n = c->s.n, N = c->s.nodes, L = n / N;
    int node_of[MAXR], local_of[MAXR], node_size[MAXR], order[MAXR];
    size_t cnt = c->count, rcount = c->coll == TT_COLL_ALL_GATHER ? cnt * (size_t)n : cnt;
    int32_t *mem[MAXR], *send[MAXR], *recv[MAXR];
    struct tt_plan plans[MAXR];
    struct tt_ring rings[MAXR][4];
    void *bufs[MAXR][TT_COLL_NBUFS];
    void *const *per_rank[MAXR];
    const struct tt_algo *algo;
    char what[160];

    snprintf(what, sizeof(what), "%s n=%d nodes=%d count=%zu ch=%d %s root=%d cross=%#x",
             tt_coll_name(c->coll), n, N, cnt, c->nch, c->inplace ? "in place" : "out of place",
             c->root, c->cross);
    for (int r = 0; r < n; r++) {
        node_of[r] = r / L;
        local_of[r] = r % L;
        order[r] = r;
    }
    for (int g = 0; g < N; g++)
        node_size[g] = L;
    struct tt_topo_view view = {N, node_of, local_of, node_size, 1};
    algo = tt_algo_find(c->coll, "hier", n, &view);
    cr_assert(algo, "%s: no hierarchical plan", what);
    memset(plans, 0, sizeof(plans));
    for (int r = 0; r < n; r++) {
        int cross = (c->cross >> node_of[r]) & 1;
        struct tt_coll_args a = {.coll = c->coll,
                                 .count = cnt,
                                 .root = c->root,
                                 .inplace = c->inplace,
                                 .nchannels = c->nch,
                                 .topo = &view,
                                 .cross_only = cross};
        mem[r] = calloc(2 * rcount + 1, sizeof(int32_t));
        cr_assert(mem[r]);
        recv[r] = mem[r];
        send[r] = !c->inplace                     ? mem[r] + rcount
                  : c->coll == TT_COLL_ALL_GATHER ? recv[r] + (size_t)r * cnt
                                                  : recv[r];
        for (size_t i = 0; i < cnt; i++)
            send[r][i] = v(r, i);
        for (int ch = 0; ch < c->nch; ch++)
            rings[r][ch] = (struct tt_ring){.nranks = n, .pos = r, .order = order};
        algo->build(&plans[r], rings[r], &a);
        cr_assert(!plans[r].oom);
        bufs[r][TT_BUF_SEND] = send[r];
        bufs[r][TT_BUF_RECV] = recv[r];
        bufs[r][TT_BUF_SCRATCH] = NULL;
        per_rank[r] = bufs[r];
    }
    /* Before (all-reduce on cross_only nodes): each rank's segments hold its node's sum. */
    for (int r = 0; r < n && c->coll == TT_COLL_ALL_REDUCE; r++) {
        if (!((c->cross >> node_of[r]) & 1))
            continue;
        for (int ch = 0; ch < c->nch; ch++) {
            size_t o, len;
            seg(cnt, c->nch, ch, L, local_of[r], &o, &len);
            for (size_t i = o; i < o + len; i++) {
                int32_t sum = 0;
                for (int q = node_of[r] * L; q < (node_of[r] + 1) * L; q++)
                    sum += v(q, i);
                recv[r][i] = sum;
            }
        }
    }
    tutti_result_t rc = sim_run_plans(
        &(struct sim_config){.nranks = n, .nchannels = c->nch, .slot_bytes = 64, .nslots = 2},
        plans, per_rank, TUTTI_INT32, TUTTI_SUM);
    cr_assert_eq(rc, TUTTI_SUCCESS, "%s: %s", what, tutti_last_error());
    /* After, on cross_only nodes: what each rank holds to the node's other ranks. */
    for (int r = 0; r < n; r++) {
        int g = node_of[r], l = local_of[r], lr = local_of[c->root];
        if (!((c->cross >> g) & 1))
            continue;
        for (int q = g * L; q < (g + 1) * L; q++) {
            if (q == r)
                continue;
            if (c->coll == TT_COLL_ALL_REDUCE) {
                for (int ch = 0; ch < c->nch; ch++) {
                    size_t o, len;
                    seg(cnt, c->nch, ch, L, l, &o, &len);
                    memcpy(recv[q] + o, recv[r] + o, len * sizeof(int32_t));
                }
            } else if (c->coll == TT_COLL_ALL_GATHER) {
                for (int h = 0; h < N; h++) {
                    size_t b = (size_t)(h * L + l) * cnt;
                    memcpy(recv[q] + b, recv[r] + b, cnt * sizeof(int32_t));
                }
            } else if (l == lr) {
                memcpy(recv[q], recv[r], cnt * sizeof(int32_t));
            }
        }
    }
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < rcount; i++) {
            int32_t want = 0;
            if (c->coll == TT_COLL_ALL_REDUCE)
                for (int q = 0; q < n; q++)
                    want += v(q, i);
            else if (c->coll == TT_COLL_ALL_GATHER)
                want = v((int)(i / cnt), i % cnt);
            else
                want = v(c->root, i);
            cr_assert_eq(recv[r][i], want, "%s: rank %d, element %zu is %d, want %d", what, r, i,
                         recv[r][i], want);
        }
        tt_plan_free(&plans[r]);
        free(mem[r]);
    }
}

Test(sim_hier, cross_only_beside_whole_plans, .timeout = 120)
{
    const struct shape shapes[] = {{4, 2}, {6, 2}, {6, 3}, {8, 2}, {8, 4}, {15, 3}, {64, 8}};
    const enum tt_coll colls[] = {TT_COLL_ALL_REDUCE, TT_COLL_ALL_GATHER, TT_COLL_BROADCAST};
    const size_t counts[] = {1, 7, 1000, 4099};

    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
        for (int ci = 0; ci < 3; ci++)
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                for (int mode = 0; mode < 3; mode++) {
                    struct shape s = shapes[si];
                    /* odd nodes cross_only; every node; the first node alone */
                    unsigned cross = mode == 0 ? 0xaaaaaaaau : mode == 1 ? ~0u : 1u;
                    struct hier_case c = {.coll = colls[ci],
                                          .s = s,
                                          .count = counts[k],
                                          .nch = 1 + (int)(k % 2),
                                          .inplace = mode == 1 || (k & 2) != 0,
                                          .root = (int)(k + si) % s.n,
                                          .cross = cross};
                    run_case(&c);
                }
}
