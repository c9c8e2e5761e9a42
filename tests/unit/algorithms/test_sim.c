/*
 * test_sim.c -- every algorithm, run by the schedule simulator for 1..64 ranks, several
 * channel counts, counts that do not divide evenly, tiny FIFOs (many chunks), in and out of
 * place and shuffled ring orders, checked exactly against values computed from (rank, index).
 */
#include "sim.h"
#include "../../../lib/topo/tune.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Machine shapes: ranks and nodes (nodes of n / nodes ranks each, consecutive ranks). */
static const struct {
    int n, nodes;
} shapes[] = {{1, 1},  {2, 1},  {3, 1}, {4, 1}, {5, 1}, {7, 1}, {8, 1},  {13, 1}, {16, 1},
              {31, 1}, {64, 1}, {4, 2}, {8, 2}, {8, 4}, {6, 3}, {15, 3}, {64, 8}, {2, 2}};
#define NSHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

struct view_store {
    int node_of[64], local_of[64], node_size[64];
    struct tt_topo_view v;
};

static const struct tt_topo_view *make_view(struct view_store *vs, int n, int nodes)
{
    int per = n / nodes;

    for (int r = 0; r < n; r++) {
        vs->node_of[r] = r / per;
        vs->local_of[r] = r % per;
    }
    for (int g = 0; g < nodes; g++)
        vs->node_size[g] = per;
    vs->v = (struct tt_topo_view){nodes, vs->node_of, vs->local_of, vs->node_size, 1};
    return &vs->v;
}

static int32_t val(int r, size_t i)
{
    return (int32_t)((r * 31 + (int)(i % 1009) * 17) % 13) - 6;
}

/* Reference result of op over ranks 0..n-1 for element i of block `blk` (offset blk*count). */
static int32_t reduce_ref(tutti_op_t op, int n, size_t i)
{
    int64_t acc = val(0, i);
    for (int r = 1; r < n; r++) {
        int64_t v = val(r, i);
        switch (op) {
        case TUTTI_SUM:
        case TUTTI_AVG: acc += v; break;
        case TUTTI_MIN: acc = v < acc ? v : acc; break;
        case TUTTI_MAX: acc = v > acc ? v : acc; break;
        default: cr_assert_fail("op not covered");
        }
    }
    return op == TUTTI_AVG ? (int32_t)(acc / n) : (int32_t)acc;
}

struct shape {
    const struct tt_topo_view *topo;
    int n, nch, inplace, shuffle;
    size_t count, slot;
    int nslots;
    tutti_op_t op;
    int root;
    int deferred; /* sim.h: the device path's deferred moves and publishing */
    unsigned seed;
    int single_copy; /* sim.h */
};

static void shuffled(int n, unsigned seed, int *order)
{
    for (int k = 0; k < n; k++)
        order[k] = k;
    for (int k = n - 1; k > 0; k--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(k + 1)), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
}

/* Run one shape of one collective and check every rank's result. */
static void run_shape(const struct tt_algo *algo, const struct shape *s)
{
    enum tt_coll coll = algo->coll;
    int n = s->n, order[64];
    size_t cnt = s->count, sendn, recvn;
    void *send[64], *recv[64];
    struct sim_config cfg = {.topo = s->topo,
                             .nranks = n,
                             .nchannels = s->nch,
                             .slot_bytes = s->slot,
                             .nslots = s->nslots,
                             .ring_order = s->shuffle ? order : NULL,
                             .deferred = s->deferred,
                             .seed = s->seed,
                             .single_copy = s->single_copy};
    struct tt_coll_args a = {.coll = coll, .count = cnt, .root = s->root, .inplace = s->inplace};

    shuffled(n, (unsigned)(n * 7 + (int)cnt), order);
    sendn = coll == TT_COLL_REDUCE_SCATTER ? cnt * (size_t)n : cnt;
    recvn = coll == TT_COLL_ALL_GATHER ? cnt * (size_t)n : cnt;
    for (int r = 0; r < n; r++) {
        int32_t *sb = malloc((sendn + 1) * sizeof(int32_t)), *rb;
        for (size_t i = 0; i < sendn; i++)
            sb[i] = coll == TT_COLL_REDUCE_SCATTER ? val(r, i) : val(r, i);
        if (s->inplace && coll == TT_COLL_ALL_GATHER) {
            rb = calloc(recvn + 1, sizeof(int32_t));
            memcpy(rb + (size_t)r * cnt, sb, cnt * sizeof(int32_t));
            free(sb);
            sb = rb + (size_t)r * cnt;
        } else if (s->inplace && coll == TT_COLL_REDUCE_SCATTER) {
            rb = sb + (size_t)r * cnt;
        } else if (s->inplace) {
            rb = sb;
        } else {
            rb = malloc((recvn + 1) * sizeof(int32_t));
            for (size_t i = 0; i < recvn; i++)
                rb[i] = 0x5a5a5a5a;
        }
        send[r] = sb;
        recv[r] = rb;
    }
    tutti_result_t rc = sim_run(&cfg, algo, a, send, recv, TUTTI_INT32, s->op);
    cr_assert_eq(rc, TUTTI_SUCCESS,
                 "%s/%s n=%d nodes=%d ch=%d count=%zu inplace=%d slot=%zux%d deferred=%d seed=%u: "
                 "%s",
                 tt_coll_name(coll), algo->name, n, s->topo ? s->topo->nnodes : 1, s->nch, cnt,
                 s->inplace, s->slot, s->nslots, s->deferred, s->seed, tutti_last_error());
    for (int r = 0; r < n; r++) {
        const int32_t *rb = recv[r];
        for (size_t i = 0; i < recvn; i++) {
            int32_t want;
            switch (coll) {
            case TT_COLL_ALL_REDUCE: want = reduce_ref(s->op, n, i); break;
            case TT_COLL_ALL_GATHER: want = val((int)(i / cnt), i % cnt); break;
            case TT_COLL_REDUCE_SCATTER: want = reduce_ref(s->op, n, (size_t)r * cnt + i); break;
            case TT_COLL_BROADCAST: want = val(s->root, i); break;
            default:
                want =
                    r == s->root ? reduce_ref(s->op, n, i) : (s->inplace ? val(r, i) : 0x5a5a5a5a);
            }
            if (rb[i] != want)
                cr_assert_fail("%s/%s n=%d ch=%d count=%zu inplace=%d shuffle=%d op=%s root=%d "
                               "slot=%zux%d deferred=%d seed=%u: rank %d element %zu is %d, want "
                               "%d",
                               tt_coll_name(coll), algo->name, n, s->nch, cnt, s->inplace,
                               s->shuffle, tutti_op_name(s->op), s->root, s->slot, s->nslots,
                               s->deferred, s->seed, r, i, rb[i], want);
        }
    }
    for (int r = 0; r < n; r++) {
        if (s->inplace && coll == TT_COLL_ALL_GATHER)
            free(recv[r]);
        else if (s->inplace)
            free(send[r]);
        else {
            free(send[r]);
            free(recv[r]);
        }
    }
}

static void sweep_algo(const struct tt_algo *algo, int n, const struct tt_topo_view *topo)
{
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 2 * (size_t)n + 3, 1001};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        for (int nch = 1; nch <= 3; nch++)
            for (int inplace = 0; inplace < 2; inplace++) {
                struct shape s = {.topo = topo,
                                  .n = n,
                                  .nch = nch,
                                  .inplace = inplace,
                                  .shuffle = (int)(c + (size_t)nch) % 2,
                                  .count = counts[c],
                                  .slot = (c + (size_t)nch) % 2 ? 64 : 256,
                                  .nslots = (c + (size_t)nch) % 2 ? 2 : 4,
                                  .op = (tutti_op_t)((c + (size_t)inplace) % 5),
                                  .root = (int)(c * 7 + (size_t)nch) % n};
                if (s.op == TUTTI_PROD)
                    s.op = TUTTI_MAX; /* products of 64 values overflow int32 */
                run_shape(algo, &s);
            }
}

/* Every algorithm of coll that fits, on every shape. Returns how many (algorithm, shape) ran. */
static int sweep(enum tt_coll coll)
{
    int ran = 0;

    for (int k = 0; k < NSHAPES; k++) {
        struct view_store vs;
        const struct tt_topo_view *v = make_view(&vs, shapes[k].n, shapes[k].nodes);
        for (int a = 0; a < tt_num_algos; a++)
            if (tt_algos[a].coll == coll &&
                (!tt_algos[a].fits || tt_algos[a].fits(shapes[k].n, v)) &&
                /* det sends n messages per rank per chunk: its all-to-all shape is the same at
                 * every size, and 64 ranks of it would triple the suite's time */
                !(strcmp(tt_algos[a].name, "det") == 0 && shapes[k].n > 16)) {
                sweep_algo(&tt_algos[a], shapes[k].n, v);
                ran++;
            }
    }
    return ran;
}

/* Every algorithm of the collective must have run on some shape. */
static void all_algos_covered(enum tt_coll coll)
{
    for (int a = 0; a < tt_num_algos; a++) {
        int ran = 0;
        if (tt_algos[a].coll != coll)
            continue;
        for (int k = 0; k < NSHAPES && !ran; k++) {
            struct view_store vs;
            const struct tt_topo_view *v = make_view(&vs, shapes[k].n, shapes[k].nodes);
            ran = !tt_algos[a].fits || tt_algos[a].fits(shapes[k].n, v);
        }
        cr_assert(ran, "%s/%s fits none of the shapes", tt_coll_name(coll), tt_algos[a].name);
    }
}

Test(sim, all_reduce, .timeout = 120)
{
    all_algos_covered(TT_COLL_ALL_REDUCE);
    cr_assert_geq(sweep(TT_COLL_ALL_REDUCE), 4 * NSHAPES);
}
Test(sim, all_gather, .timeout = 120)
{
    all_algos_covered(TT_COLL_ALL_GATHER);
    cr_assert_geq(sweep(TT_COLL_ALL_GATHER), NSHAPES);
}
Test(sim, reduce_scatter, .timeout = 120)
{
    all_algos_covered(TT_COLL_REDUCE_SCATTER);
    cr_assert_geq(sweep(TT_COLL_REDUCE_SCATTER), NSHAPES);
}
Test(sim, broadcast, .timeout = 120)
{
    all_algos_covered(TT_COLL_BROADCAST);
    cr_assert_geq(sweep(TT_COLL_BROADCAST), 2 * NSHAPES);
}
Test(sim, reduce, .timeout = 120)
{
    all_algos_covered(TT_COLL_REDUCE);
    cr_assert_geq(sweep(TT_COLL_REDUCE), NSHAPES);
}

/*
 * The FIFO's three kinds of message on one connection (transport/fifo.h): with 8 KiB slots,
 * up to 48 bytes in the queue cell, up to 1 KiB in the cell's side area, more in a data slot.
 * Uneven blocks put two kinds, alternating, on one connection; a message read from or
 * released to the wrong place gives wrong elements or a deadlock.
 */
Test(sim, fifo_side_areas, .timeout = 120)
{
    int ran = 0;

    for (int n = 2; n <= 5; n++)
        for (int a = 0; a < tt_num_algos; a++) {
            /* n blocks of 12 or 13 int32 (48 or 52 bytes: cell or side area), of 256 or 257
             * (1024 or 1028 bytes: side area or slot), and larger messages */
            size_t counts[] = {12 * (size_t)n + 1, 256 * (size_t)n + 1, 300, 2200};
            if (tt_algos[a].fits && !tt_algos[a].fits(n, NULL))
                continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                struct shape s = {.n = n,
                                  .nch = 1 + (int)c % 2,
                                  .inplace = (int)c / 2,
                                  .count = counts[c],
                                  .slot = 8192,
                                  .nslots = 3,
                                  .op = TUTTI_SUM,
                                  .root = (int)c % n};
                run_shape(&tt_algos[a], &s);
            }
            ran++;
        }
    cr_assert_geq(ran, 4 * 12);
}

/*
 * The device path's protocol on the CPU (sim.h, deferred): every algorithm of every
 * collective with its byte moves queued and run later in bites of 0 to 3, over connections
 * that publish a slot only once the queue has passed its fill or its use (dfifo.h, the p2p
 * transport's core). A slot reused, read or published too early gives wrong elements; a
 * release never published is a deadlock.
 */
Test(sim, deferred, .timeout = 120)
{
    static const struct {
        int n, nodes;
    } ds[] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {8, 1}, {4, 2}, {6, 3}, {8, 2}};
    int ran = 0;

    for (size_t k = 0; k < sizeof(ds) / sizeof(ds[0]); k++) {
        int n = ds[k].n;
        struct view_store vs;
        const struct tt_topo_view *v = make_view(&vs, n, ds[k].nodes);
        size_t counts[] = {0, 1, (size_t)n + 1, 1001};
        for (int a = 0; a < tt_num_algos; a++) {
            if (tt_algos[a].fits && !tt_algos[a].fits(n, v))
                continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int nch = 1; nch <= 2; nch++)
                    for (int inplace = 0; inplace < 2; inplace++)
                        for (unsigned seed = 1; seed <= 2; seed++) {
                            struct shape s = {.topo = v,
                                              .n = n,
                                              .nch = nch,
                                              .inplace = inplace,
                                              .shuffle = (int)seed % 2,
                                              .count = counts[c],
                                              .slot = seed == 1 ? 64 : 256,
                                              .nslots = seed == 1 ? 2 : 4,
                                              .op = (tutti_op_t)((c + (size_t)inplace + seed) % 5),
                                              .root = (int)(c * 7 + (size_t)nch) % n,
                                              .deferred = 1,
                                              .seed = seed * 977u + (unsigned)(n * 31 + a)};
                            if (s.op == TUTTI_PROD)
                                s.op = TUTTI_MAX;
                            run_shape(&tt_algos[a], &s);
                        }
            ran++;
        }
    }
    cr_assert_geq(ran, tt_num_algos, "only %d (algorithm, shape) pairs ran", ran);
}

/*
 * Single copy (exec.h tt_exec_single_copy), as all-gather and broadcast run it over shm: each
 * final send goes whole at its first chunk, by address, and is read in place; a forwarding
 * step (broadcast chain, ring all-gather) sends on what it took whole; the rest of the chunk
 * walk skips what moved ahead. Every such algorithm, every shape, in place or not; with every
 * rank sending that way, and with only the odd ranks doing so (each rank picks for itself).
 */
Test(sim, single_copy, .timeout = 120)
{
    int ran = 0;

    for (int k = 0; k < NSHAPES; k++) {
        struct view_store vs;
        const struct tt_topo_view *v = make_view(&vs, shapes[k].n, shapes[k].nodes);
        int n = shapes[k].n;
        for (int a = 0; a < tt_num_algos; a++) {
            if ((tt_algos[a].coll != TT_COLL_ALL_GATHER && tt_algos[a].coll != TT_COLL_BROADCAST) ||
                (tt_algos[a].fits && !tt_algos[a].fits(n, v)))
                continue;
            size_t counts[] = {1, (size_t)n + 1, 1001};
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int nch = 1; nch <= 2; nch++)
                    for (int inplace = 0; inplace < 2; inplace++)
                        for (int mode = 1; mode <= 2; mode++) {
                            struct shape s = {.topo = v,
                                              .n = n,
                                              .nch = nch,
                                              .inplace = inplace,
                                              .shuffle = (int)(c + (size_t)nch) % 2,
                                              .count = counts[c],
                                              .slot = c % 2 ? 64 : 256,
                                              .nslots = c % 2 ? 2 : 4,
                                              .op = TUTTI_SUM,
                                              .root = (int)(c * 7 + (size_t)nch) % n,
                                              .single_copy = mode};
                            run_shape(&tt_algos[a], &s);
                        }
            ran++;
        }
    }
    cr_assert_geq(ran, NSHAPES, "only %d (algorithm, shape) pairs ran", ran);
}

/* A plan whose sends are never received must be reported as a deadlock, not spin. */
static void bad_build(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    (void)a;
    tt_plan_lane(p, 0);
    /* Everyone receives first: nobody ever sends. */
    tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                      .dst = TT_BUF_RECV,
                                      .recv_peer = tt_ring_at(&rings[0], rings[0].pos - 1),
                                      .count = 4});
    tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                      .src = TT_BUF_SEND,
                                      .send_peer = tt_ring_at(&rings[0], rings[0].pos + 1),
                                      .count = 4});
}

Test(sim, detects_deadlock)
{
    struct tt_algo bad = {
        99, "bad", "receives before anyone sends", TT_COLL_ALL_REDUCE, bad_build, NULL, 0, 0};
    struct sim_config cfg = {.nranks = 3, .nchannels = 1, .slot_bytes = 64, .nslots = 2};
    int32_t bufs[3][2][4] = {{{0}}};
    void *send[3] = {bufs[0][0], bufs[1][0], bufs[2][0]};
    void *recv[3] = {bufs[0][1], bufs[1][1], bufs[2][1]};
    struct tt_coll_args a = {.coll = TT_COLL_ALL_REDUCE, .count = 4};

    cr_assert_eq(sim_run(&cfg, &bad, a, send, recv, TUTTI_INT32, TUTTI_SUM), TUTTI_ERR_INTERNAL);
    cr_assert(strstr(tutti_last_error(), "deadlock") != NULL, "%s", tutti_last_error());
}

/* One plan of each_plan's: algorithm, rank count, rank, count, and whether it is in place. */
struct plan_at {
    const struct tt_algo *algo;
    const struct tt_plan *p;
    int n, r, inplace;
    size_t count;
};

/*
 * Build algo's plan on every rank of every shape with at least min_ranks ranks, for counts 1,
 * n + 1 and 1001, two channels, roots varying, and hand each to visit. in_place: in place (a
 * reduce's only on its root, the other ranks skipped), else out of place.
 */
static void each_plan(const struct tt_algo *algo, int min_ranks, int in_place,
                      void (*visit)(const struct plan_at *, void *), void *arg)
{
    for (int k = 0; k < NSHAPES; k++) {
        int n = shapes[k].n, order[64];
        struct view_store vs;
        const struct tt_topo_view *v = make_view(&vs, n, shapes[k].nodes);
        size_t counts[] = {1, (size_t)n + 1, 1001};
        if (n < min_ranks || (algo->fits && !algo->fits(n, v)))
            continue;
        for (int i = 0; i < n; i++)
            order[i] = i;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int r = 0; r < n; r++) {
                struct tt_ring rings[2] = {{n, r, order}, {n, r, order}};
                struct tt_coll_args args = {.coll = algo->coll,
                                            .count = counts[c],
                                            .root = (int)c % n,
                                            .inplace = in_place,
                                            .nchannels = 2,
                                            .topo = shapes[k].nodes > 1 ? v : NULL};
                struct tt_plan p = {0};
                if (in_place && algo->coll == TT_COLL_REDUCE && r != args.root)
                    continue;
                algo->build(&p, rings, &args);
                cr_assert(!p.oom);
                visit(&(struct plan_at){algo, &p, n, r, in_place, counts[c]}, arg);
                tt_plan_free(&p);
            }
    }
}

/* A step of the plan sends to or receives from its own rank: sets *(int *)seen. */
static void to_self_visit(const struct plan_at *at, void *seen)
{
    for (size_t i = 0; i < at->p->nsteps; i++) {
        const struct tt_step *st = &at->p->steps[i];
        int self = (tt_prim_sends(st->prim) && st->send_peer == at->r) ||
                   (tt_prim_recvs(st->prim) && st->recv_peer == at->r);
        cr_assert(!self || at->algo->to_self, "%s %s (to_self 0) sends to its own rank %d of %d",
                  at->algo->name, tt_coll_name(at->algo->coll), at->r, at->n);
        *(int *)seen |= self && at->n > 1;
    }
}

/*
 * tt_algo.to_self says which algorithms send to their own rank: the device path connects a
 * rank to itself at init only where the tuner may pick one (tt_tune_may_send_to_self), so an
 * algorithm that does it unflagged would connect lazily in the middle of a device call. Every
 * rank's plan of every shape: a flagged algorithm must do it somewhere, an unflagged never.
 */
Test(sim, to_self_flag_matches_plans, .timeout = 60)
{
    for (int a = 0; a < tt_num_algos; a++) {
        int seen = 0;
        each_plan(&tt_algos[a], 1, 0, to_self_visit, &seen);
        cr_assert(!tt_algos[a].to_self || seen, "%s %s has to_self but never sends to itself",
                  tt_algos[a].name, tt_coll_name(tt_algos[a].coll));
    }
}

/* Does the primitive read its src? */
static int reads_src(int prim)
{
    return prim == TT_PRIM_SEND || prim == TT_PRIM_RECV_REDUCE_SEND ||
           prim == TT_PRIM_RECV_REDUCE_COPY || prim == TT_PRIM_RECV_REDUCE_COPY_SEND ||
           prim == TT_PRIM_COPY;
}

/*
 * In place on 2+ ranks, a premul-sum call scales what the steps that read TT_BUF_SEND read
 * (lib/core/redop.c). That is right only where a plan reads every input element through sendbuf,
 * none through sendbuf after an earlier step of its lane wrote it, and none through recvbuf
 * before a step wrote it (that would be raw input, unscaled). In place, sendbuf and recvbuf
 * are one buffer: recvbuf is `shift` elements into it (reduce-scatter's rank * count, else 0)
 * and the input `in` elements. The first breach, or "" if none, into why.
 */
static void read_input_first(const struct tt_plan *p, size_t in, size_t shift, char *why,
                             size_t size)
{
    unsigned char *read = calloc(in + 1, 1), *written = calloc(in + 1, 1);

    cr_assert(read && written);
    why[0] = '\0';
    for (int l = 0; l < p->nlanes && !why[0]; l++)
        for (size_t i = 0; i < p->lanes[l].nsteps && !why[0]; i++) {
            const struct tt_step *st = &p->steps[p->lanes[l].first + i];
            size_t at = st->dst == TT_BUF_RECV ? shift : 0;
            for (size_t e = st->src_off; reads_src(st->prim) && e < st->src_off + st->count; e++)
                if (st->src == TT_BUF_SEND && (e >= in || written[e]))
                    snprintf(why, size, "step %zu reads input element %zu after a write", i, e);
                else if (st->src == TT_BUF_SEND)
                    read[e] = 1;
                else if (st->src == TT_BUF_RECV && e + shift < in && !written[e + shift])
                    snprintf(why, size, "step %zu reads input element %zu through recvbuf", i,
                             e + shift);
            for (size_t e = st->dst_off; tt_prim_writes(st->prim) && st->dst != TT_BUF_SCRATCH &&
                                         e < st->dst_off + st->count;
                 e++)
                if (e + at < in)
                    written[e + at] = 1;
        }
    for (size_t e = 0; e < in && !why[0]; e++)
        if (!read[e])
            snprintf(why, size, "input element %zu is never read", e);
    free(read);
    free(written);
}

static void read_input_first_visit(const struct plan_at *at, void *unused)
{
    int rs = at->algo->coll == TT_COLL_REDUCE_SCATTER;
    char why[128];

    (void)unused;
    read_input_first(at->p, rs ? at->count * (size_t)at->n : at->count,
                     rs ? (size_t)at->r * at->count : 0, why, sizeof(why));
    cr_assert(!why[0], "%s %s, %d ranks, rank %d, count %zu: %s", at->algo->name,
              tt_coll_name(at->algo->coll), at->n, at->r, at->count, why);
}

/* Every algorithm that reduces, in place on 2+ ranks (each_plan's plans); and the check
 * itself on three plans that breach it. */
Test(sim, in_place_plans_read_input_first, .timeout = 60)
{
    char why[128];
    int checked = 0;

    for (int a = 0; a < tt_num_algos; a++)
        if (tt_algos[a].coll == TT_COLL_ALL_REDUCE || tt_algos[a].coll == TT_COLL_REDUCE_SCATTER ||
            tt_algos[a].coll == TT_COLL_REDUCE) {
            each_plan(&tt_algos[a], 2, 1, read_input_first_visit, NULL);
            checked++;
        }
    cr_assert_gt(checked, 10);

    /* Plans that breach it: a read after a write, a raw read through recvbuf, a gap. */
    struct tt_step bad[3][2] = {
        {{.prim = TT_PRIM_COPY, .src = TT_BUF_SCRATCH, .dst = TT_BUF_RECV, .count = 4},
         {.prim = TT_PRIM_SEND, .src = TT_BUF_SEND, .count = 4}},
        {{.prim = TT_PRIM_SEND, .src = TT_BUF_SEND, .count = 4},
         {.prim = TT_PRIM_SEND, .src = TT_BUF_RECV, .src_off = 1, .count = 2}},
        {{.prim = TT_PRIM_SEND, .src = TT_BUF_SEND, .count = 3},
         {.prim = TT_PRIM_RECV, .dst = TT_BUF_RECV, .count = 4}}};
    const char *want[3] = {"after a write", "through recvbuf", "never read"};
    for (int b = 0; b < 3; b++) {
        struct tt_lane lane = {.first = 0, .nsteps = 2};
        struct tt_plan p = {.steps = bad[b], .nsteps = 2, .lanes = &lane, .nlanes = 1};
        read_input_first(&p, 4, 0, why, sizeof(why));
        cr_assert(strstr(why, want[b]), "bad plan %d: '%s'", b, why);
    }
}

/* The tuner's side of it: each test runs in its own process, so its knobs are read fresh. */
static int may_self(int n, int oversub)
{
    struct tt_tuner t;
    cr_assert_eq(tt_tune_init(&t, n, 2, NULL, 131072, oversub), TUTTI_SUCCESS, "%s",
                 tutti_last_error());
    return tt_tune_may_send_to_self(&t);
}

Test(sim, tuner_self_default)
{
    cr_assert(!may_self(4, 0), "a core per rank: ring/rd/tree only, nobody sends to itself");
    cr_assert(may_self(4, 1), "ranks outnumber cores: the model may take flat");
    cr_assert(!may_self(TT_DIRECT_MAX_RANKS + 1, 1), "flat fits up to 16 ranks only");
}

Test(sim, tuner_self_deterministic)
{
    setenv("TUTTI_DETERMINISTIC", "1", 1);
    cr_assert(may_self(4, 0));
}

Test(sim, tuner_self_forced)
{
    setenv("TUTTI_ALGO", "all_reduce:flat", 1);
    cr_assert(may_self(4, 0));
}

/*
 * Point-to-point batches (algorithms/p2p_plan.c), as a group of tutti_send/tutti_recv runs them:
 * every rank sends two messages to every peer (self included on the host path; the device
 * path leaves self out) and receives theirs, sizes from 0 to a few slots that differ by
 * (sender, receiver, k), each rank listing its calls in its own order (peers rotated,
 * receives first on odd ranks). On the host protocol and on the device path's (deferred).
 * Every byte must arrive where the matching receive put it: a lane out of call order swaps
 * a peer's two messages, which differ in size. The host protocol also with single copy, as
 * over shm (sim.h: every rank sending by address, or only the odd ranks).
 */
static size_t msg_bytes(int from, int to, int k, size_t slot)
{
    return (size_t)((from * 7 + to * 13 + k * 5) % 6) * slot / 2 + (size_t)((from + to + k) % 3);
}

static unsigned char msg_byte(int from, int to, int k, size_t i)
{
    return (unsigned char)(from * 41 + to * 17 + k * 101 + (int)(i % 251));
}

static void run_p2p(int n, int deferred, size_t slot, int nslots, unsigned seed, int single)
{
    struct sim_config cfg = {.nranks = n,
                             .nchannels = 1,
                             .slot_bytes = slot,
                             .nslots = nslots,
                             .deferred = deferred,
                             .seed = seed,
                             .single_copy = single};
    struct tt_plan *plans = calloc((size_t)n, sizeof(*plans));
    struct tt_msg(*msgs)[128] = calloc((size_t)n, sizeof(*msgs));
    int(*perm)[128] = calloc((size_t)n, sizeof(*perm));
    void *(*bufs)[128] = calloc((size_t)n, sizeof(*bufs));
    void *const *per_rank[64];
    int nmsg[64] = {0};
    tutti_result_t rc;

    cr_assert(n <= 32 && plans && msgs && perm && bufs);
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < n; j++) {
            int p = (r + j) % n; /* peers rotated: every rank lists them in its own order */
            if (deferred && p == r)
                continue;
            for (int k = 0; k < 2; k++)
                for (int d = 0; d < 2; d++) {
                    int is_send = (d + r) % 2 == 0;
                    struct tt_msg m = {
                        is_send, p, is_send ? msg_bytes(r, p, k, slot) : msg_bytes(p, r, k, slot)};
                    msgs[r][nmsg[r]++] = m;
                }
        }
        tt_plan_p2p(&plans[r], msgs[r], nmsg[r], perm[r]);
        cr_assert(!plans[r].oom);
        /* Buffer i of the plan is message perm[i]: sends filled, receives zeroed. */
        int sent[64] = {0}, got[64] = {0};
        for (int i = 0; i < nmsg[r]; i++) {
            const struct tt_msg *m = &msgs[r][perm[r][i]];
            unsigned char *b = calloc(m->bytes + 1, 1);
            int k = m->is_send ? sent[m->peer]++ : got[m->peer]++;
            cr_assert(b);
            for (size_t e = 0; m->is_send && e < m->bytes; e++)
                b[e] = msg_byte(r, m->peer, k, e);
            bufs[r][i] = b;
        }
        per_rank[r] = bufs[r];
    }
    rc = sim_run_plans(&cfg, plans, per_rank, TUTTI_UINT8, TUTTI_SUM);
    cr_assert_eq(rc, TUTTI_SUCCESS, "p2p n=%d deferred=%d single=%d slot=%zux%d seed=%u: %s", n,
                 deferred, single, slot, nslots, seed, tutti_last_error());
    for (int r = 0; r < n; r++) {
        int got[64] = {0};
        for (int i = 0; i < nmsg[r]; i++) {
            const struct tt_msg *m = &msgs[r][perm[r][i]];
            const unsigned char *b = bufs[r][i];
            if (!m->is_send) {
                int k = got[m->peer]++;
                for (size_t e = 0; e < m->bytes; e++)
                    cr_assert_eq(b[e], msg_byte(m->peer, r, k, e),
                                 "p2p n=%d deferred=%d single=%d seed=%u: rank %d, message %d "
                                 "from rank %d, byte %zu is %u, want %u",
                                 n, deferred, single, seed, r, k, m->peer, e, b[e],
                                 msg_byte(m->peer, r, k, e));
            }
            free(bufs[r][i]);
        }
        tt_plan_free(&plans[r]);
    }
    free(plans);
    free(msgs);
    free(perm);
    free(bufs);
}

Test(sim, p2p, .timeout = 60)
{
    int ns[] = {1, 2, 3, 5, 8};

    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
        for (int mode = 0; mode < 4; mode++) /* deferred, or host with single copy 0, 1, 2 */
            for (unsigned seed = 1; seed <= 3; seed++)
                run_p2p(ns[k], mode == 3, seed == 1 ? 64 : 256, seed == 2 ? 4 : 2, seed,
                        mode < 3 ? mode : 0);
}
