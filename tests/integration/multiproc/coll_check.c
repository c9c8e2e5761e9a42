/*
 * coll_check -- run under tutti-run: every collective over the real transports, checked
 * against values computed independently from (rank, index).
 *
 *   coll_check matrix [N]  every collective x dtype x op (and a premul-sum operator, made
 *                       and destroyed around each call), counts 0, 1, n-1 and N
 *                       (default 1000003; all-gather / reduce-scatter take N/n per rank,
 *                       kept odd), in and out of place, roots varying; N for a third of the
 *                       dtype x op pairs (matrix-full: for all)
 *   coll_check large    every collective with >= 8M elements (all-gather / reduce-scatter:
 *                       8M across the whole array), in and out of place
 *   coll_check p2p      ring exchange, all-to-all in a group, chained send/recv
 *   coll_check all_to_all   tutti_all_to_all: sizes, a host stream, inside a group, refused
 *                       overlap
 *   coll_check soak SECONDS [SEED [ABORT_RANK ABORT_MS]]
 *                       a random sequence of checked calls for about SECONDS: every
 *                       collective, dtype and op, counts from 0 to 2^21 (log-uniform), in and
 *                       out of place, random roots, values shifted per call (a stale message
 *                       from an earlier call reads wrong), a quarter queued on a host stream,
 *                       ring exchanges and all-to-alls in between; every rank draws the
 *                       same sequence from SEED (default: the time, printed, so a failure
 *                       can be replayed); ABORT_RANK calls tutti_comm_abort from another
 *                       thread ABORT_MS milliseconds after init (the faults suite: every
 *                       rank must fail)
 *   coll_check MODE --register
 *                       the same with every buffer registered with the communicator
 *                       (tutti_comm_register) while it is in use, so transports that can
 *                       send zero-copy from it (net_ib) do
 *   coll_check MODE --symmetric [--symmetric-mix]
 *                       the same with every buffer in one window of symmetric memory
 *                       (tutti_mem_alloc, tutti_comm_window_register: the symmetric path);
 *                       -mix: a third of them, drawn per rank, from malloc instead (the
 *                       ranks fall back together)
 *
 * Inputs are small integers (exact in every dtype, sums and products included), periodic in
 * the index, so the expected value of each element is computed once per residue from the
 * integers and encoded into the dtype by conversions that do not use tutti's code (C casts,
 * GCC's _Float16, frexp/nearbyint for bfloat16). Guard bytes around every buffer catch
 * writes out of bounds; send buffers of out-of-place calls must come back unchanged.
 * Exit status 0 means every check on this rank passed.
 */
#include "coll_check.h"
#include "sym_arena.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int rank, nranks, failures;
tutti_comm_t comm;
int reg_on;
static int sym_on; /* --symmetric (2: --symmetric-mix) */
static struct sym_arena arena;

/* ---- buffers with guards ---- */

void *reg_or_die(void *p, size_t bytes)
{
    void *h = NULL;
    if (reg_on && bytes && tutti_comm_register(comm, p, bytes, &h) != TUTTI_SUCCESS) {
        fprintf(stderr, "coll_check: tutti_comm_register: %s\n", tutti_comm_last_error(comm));
        exit(2);
    }
    return h;
}

void unreg(void *h)
{
    if (h && tutti_comm_deregister(comm, h) != TUTTI_SUCCESS) {
        fprintf(stderr, "coll_check: tutti_comm_deregister: %s\n", tutti_comm_last_error(comm));
        exit(2);
    }
}

void buf_free(struct buf *b)
{
    unreg(b->reg);
    if (!sym_arena_free(&arena, b->base))
        free(b->base);
}

void *buf_alloc(struct buf *b, size_t bytes)
{
    b->bytes = bytes;
    b->base = sym_arena_alloc(&arena, bytes + 2 * GUARD);
    if (!b->base)
        b->base = malloc(bytes + 2 * GUARD);
    if (!b->base) {
        fprintf(stderr, "coll_check: out of memory for %zu bytes\n", bytes);
        exit(2);
    }
    memset(b->base, GUARD_BYTE, bytes + 2 * GUARD);
    b->reg = reg_or_die(b->base + GUARD, bytes);
    return b->base + GUARD;
}

int guards_ok(const struct buf *b)
{
    for (size_t i = 0; i < GUARD; i++)
        if (b->base[i] != GUARD_BYTE || b->base[GUARD + b->bytes + i] != GUARD_BYTE)
            return 0;
    return 1;
}

void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    if (++failures > 10)
        return;
    printf("FAIL %s: ", what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* Report the first element of out that differs from the expected table. */
void check_elems(const char *what, tutti_dtype_t t, int op, const void *out, size_t n, size_t first,
                 const unsigned char *table)
{
    size_t bad = 0, es = tutti_dtype_size(t);
    size_t wrong = val_count_wrong(t, op, out, n, first, table, &bad);

    if (wrong) {
        uint64_t g = 0, w = 0;
        memcpy(&g, (const char *)out + bad * es, es);
        memcpy(&w, table + ((first + bad) % (size_t)val_period(op)) * es, es);
        fail(what, "%zu element(s) wrong; first: [%zu] is 0x%llx, expected 0x%llx", wrong, bad,
             (unsigned long long)g, (unsigned long long)w);
    }
}

/* ---- one collective call, checked ---- */

static const char *coll_names[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                        "reduce"};

/* One call, checked. first: the value index of element 0 (values are periodic in the index, so
 * a shift changes every element); stream: NULL, or a host stream to queue it on and sync. */
static void run_one_at(enum coll c, tutti_dtype_t t, int op, size_t count, int inplace, int root,
                       size_t first, tutti_stream_t stream, const char *tag)
{
    size_t es = tutti_dtype_size(t), n = (size_t)nranks;
    size_t send_n = c == REDUCE_SCATTER ? count * n : count;
    size_t recv_n = c == ALL_GATHER ? count * n : count;
    int gop = c == ALL_GATHER || c == BROADCAST ? VAL_NO_OP : op;
    char what[160];
    struct buf sb, rb;
    unsigned char table[VAL_MAX_PERIOD * 8];
    void *send, *recv;
    tutti_result_t rc;
    tutti_op_t top = (tutti_op_t)op;

    snprintf(what, sizeof(what), "%s%s %s %s count=%zu %s root=%d ranks=%d%s", tag, coll_names[c],
             tutti_dtype_name(t),
             gop < 0            ? "-"
             : op == VAL_PREMUL ? "premul_sum"
                                : tutti_op_name((tutti_op_t)op),
             count, inplace ? "in-place" : "out-of-place", root, nranks,
             stream ? " on a stream" : "");
    /* Buffers: in place, the send data lives inside the receive buffer. */
    recv = buf_alloc(&rb, (c == REDUCE_SCATTER && inplace ? send_n : recv_n) * es);
    if (inplace) {
        sb = rb;
        if (c == ALL_GATHER) {
            send = (char *)recv + (size_t)rank * count * es;
        } else if (c == REDUCE_SCATTER) {
            send = recv;
            recv = (char *)send + (size_t)rank * count * es;
        } else {
            send = recv;
        }
    } else {
        send = buf_alloc(&sb, send_n * es);
    }
    val_fill(t, gop, rank, send, send_n, first);
    if (c == BROADCAST && rank != root && inplace)
        memset(send, 0, send_n * es); /* non-roots' data must be overwritten */

    if (op == VAL_PREMUL && gop >= 0) { /* made for this call, destroyed as soon as it returns */
        unsigned char k[8];
        val_premul_scalar(t, rank, k);
        rc = tutti_op_create_premul_sum(&top, k, t, TUTTI_SCALAR_HOST_IMMEDIATE, comm);
        if (rc != TUTTI_SUCCESS) {
            fail(what, "tutti_op_create_premul_sum: %s", tutti_comm_last_error(comm));
            goto out;
        }
    }
    switch (c) {
    case ALL_REDUCE: rc = tutti_all_reduce(send, recv, count, t, top, comm, stream); break;
    case ALL_GATHER: rc = tutti_all_gather(send, recv, count, t, comm, stream); break;
    case REDUCE_SCATTER: rc = tutti_reduce_scatter(send, recv, count, t, top, comm, stream); break;
    case BROADCAST: rc = tutti_broadcast(send, recv, count, t, root, comm, stream); break;
    default: rc = tutti_reduce(send, recv, count, t, top, root, comm, stream); break;
    }
    if (op == VAL_PREMUL && gop >= 0 && tutti_op_destroy(top, comm) != TUTTI_SUCCESS)
        fail(what, "tutti_op_destroy: %s", tutti_comm_last_error(comm));
    if (rc == TUTTI_SUCCESS && stream)
        rc = tutti_stream_sync(stream);
    if (rc != TUTTI_SUCCESS) {
        fail(what, "returned %s: %s", tutti_strerror(rc), tutti_comm_last_error(comm));
        goto out;
    }

    /* Expected values. */
    switch (c) {
    case ALL_REDUCE:
    case REDUCE:
        val_expect_reduce(t, op, nranks, table);
        if (c == ALL_REDUCE || rank == root)
            check_elems(what, t, op, recv, count, first, table);
        else if (!inplace) {
            for (size_t k = 0; k < recv_n * es; k++)
                if (((unsigned char *)recv)[k] != GUARD_BYTE) {
                    fail(what, "a non-root's recvbuf was written");
                    break;
                }
        }
        break;
    case REDUCE_SCATTER:
        val_expect_reduce(t, op, nranks, table);
        check_elems(what, t, op, recv, count, first + (size_t)rank * count, table);
        break;
    case ALL_GATHER:
        for (int r = 0; r < nranks; r++) {
            val_expect_input(t, gop, r, table);
            check_elems(what, t, gop, (char *)recv + (size_t)r * count * es, count, first, table);
        }
        break;
    default:
        val_expect_input(t, gop, root, table);
        check_elems(what, t, gop, recv, count, first, table);
        break;
    }
    /* Out of place, the send buffer is read-only. */
    if (!inplace && (c != BROADCAST || rank == root)) {
        unsigned char *again = malloc(send_n * es + 1);
        val_fill(t, gop, rank, again, send_n, first);
        if (memcmp(again, send, send_n * es) != 0)
            fail(what, "sendbuf was modified");
        free(again);
    }
    if (!guards_ok(&rb) || (!inplace && !guards_ok(&sb)))
        fail(what, "wrote outside its buffers");
out:
    buf_free(&rb);
    if (!inplace)
        buf_free(&sb);
}

void run_one(enum coll c, tutti_dtype_t t, int op, size_t count, int inplace, int root)
{
    run_one_at(c, t, op, count, inplace, root, 0, NULL, "");
}

static int big_counts_all;
static size_t matrix_big = 1000003;

static void matrix(void)
{
    size_t counts[] = {0, 1, (size_t)nranks - 1, matrix_big};

    for (int c = 0; c < NCOLL; c++)
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
            for (int op = 0; op <= VAL_PREMUL; op++) {
                if ((c == ALL_GATHER || c == BROADCAST) && op > 0)
                    continue;
                for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        /* Big counts for a subset: every op once per dtype class (the
                         * premul-sum operator so in matrix-full too: a SUM underneath). */
                        if (counts[k] > 1000 && (!big_counts_all || op == VAL_PREMUL) &&
                            (t + op + inplace) % 3 != 0)
                            continue;
                        int root = (int)(k + (size_t)t + (size_t)op) % nranks;
                        size_t count = counts[k];
                        /* All-gather / reduce-scatter: about that many in the whole array. */
                        if ((c == ALL_GATHER || c == REDUCE_SCATTER) && count > 1000)
                            count = (count / (size_t)nranks) | 1;
                        run_one((enum coll)c, (tutti_dtype_t)t, op, count, inplace, root);
                    }
            }
}

static void large(void)
{
    const size_t big = 8388617; /* >= 8M and odd */
    size_t per = (big + (size_t)nranks - 1) / (size_t)nranks;

    for (int inplace = 0; inplace < 2; inplace++) {
        run_one(ALL_REDUCE, TUTTI_FLOAT32, TUTTI_SUM, big, inplace, 0);
        run_one(ALL_REDUCE, TUTTI_BFLOAT16, TUTTI_AVG, big, inplace, 0);
        run_one(ALL_GATHER, TUTTI_FLOAT32, -1, per, inplace, 0);
        run_one(REDUCE_SCATTER, TUTTI_INT32, TUTTI_MAX, per, inplace, 0);
        run_one(BROADCAST, TUTTI_FLOAT64, -1, big, inplace, nranks - 1);
        run_one(REDUCE, TUTTI_FLOAT32, TUTTI_MIN, big, inplace, nranks / 2);
    }
}

/* Enough same-sized broadcasts and all-gathers (64 KiB and a little more) for both pickers'
 * first trials (lib/topo/copy_pick.h: streaming stores from call 2, single copy from call 10),
 * each call checked: the ranks vote at each trial's end (coll_pick.c). */
static void trials(void)
{
    const size_t count = 16384, per = count / (size_t)nranks + 1;

    for (int i = 0; i < 24; i++) {
        run_one(BROADCAST, TUTTI_FLOAT32, -1, count, i & 1, i % nranks);
        run_one(ALL_GATHER, TUTTI_FLOAT32, -1, per, i & 1, 0);
    }
}

/* ---- soak: a random sequence of checked calls ---- */

static uint64_t rng_state;

static uint64_t rng(void) /* splitmix64: every rank draws the same sequence from the seed */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

static long abort_ms;

static void *abort_later(void *arg)
{
    (void)arg;
    usleep((useconds_t)(abort_ms * 1000));
    printf("soak: rank %d calls tutti_comm_abort\n", rank);
    fflush(stdout);
    tutti_comm_abort(comm);
    return NULL;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Every 8 calls the ranks agree (a MAX all-reduce, itself checked by its result's use) on
 * whether to go on: past SECONDS on any rank, or a failure anywhere, all stop together.
 */
static void soak(double seconds, uint64_t seed, int abort_rank)
{
    double t0 = mono_s();
    tutti_stream_t stream = NULL;
    long calls = 0;
    char tag[64];
    pthread_t aborter;

    rng_state = seed;
    if (rank == abort_rank)
        pthread_create(&aborter, NULL, abort_later, NULL);
    if (tutti_stream_create(&stream) != TUTTI_SUCCESS) {
        fail("soak", "tutti_stream_create: %s", tutti_last_error());
        return;
    }
    for (;;) {
        if (calls % 8 == 0) {
            int32_t flags[2] = {mono_s() - t0 > seconds, failures > 0};
            if (tutti_all_reduce(flags, flags, 2, TUTTI_INT32, TUTTI_MAX, comm, NULL) !=
                TUTTI_SUCCESS) {
                fail("soak", "the agreement all-reduce failed: %s", tutti_comm_last_error(comm));
                break;
            }
            if (flags[0] || flags[1])
                break;
        }
        /* Draw everything first, in a fixed order, so every rank draws the same values. */
        /* NCOLL: ring exchange; + 1: all-to-all; + 2: gather; + 3: scatter */
        int kind = (int)rng_below(NCOLL + 4);
        tutti_dtype_t t = (tutti_dtype_t)rng_below(TUTTI_NUM_DTYPES);
        int op = (int)rng_below(VAL_PREMUL + 1);
        size_t count = rng_below((size_t)1 << rng_below(22));
        int inplace = (int)rng_below(2), root = (int)rng_below((size_t)nranks);
        size_t first = rng_below(VAL_MAX_PERIOD);
        int on_stream = rng_below(4) == 0;

        snprintf(tag, sizeof(tag), "seed %llu call %ld: ", (unsigned long long)seed, calls);
        if (kind == NCOLL) {
            soak_ring(t, count, first, tag);
        } else if (kind == NCOLL + 1) {
            check_all_to_all(t, count / (size_t)nranks, first, on_stream ? stream : NULL, tag);
        } else if (kind >= NCOLL + 2) {
            check_rooted(kind == NCOLL + 2, t, count / (size_t)nranks, first, root,
                         on_stream ? stream : NULL, tag);
        } else {
            if (kind == ALL_GATHER || kind == REDUCE_SCATTER) /* about count in the whole array */
                count /= (size_t)nranks;
            run_one_at((enum coll)kind, t, op, count, inplace, root, first,
                       on_stream ? stream : NULL, tag);
        }
        calls++;
    }
    if (tutti_stream_destroy(stream) != TUTTI_SUCCESS)
        fail("soak", "tutti_stream_destroy: %s", tutti_last_error());
    printf("soak: rank %d of %d: %ld calls in %.1f s (seed %llu)\n", rank, nranks, calls,
           mono_s() - t0, (unsigned long long)seed);
    if (rank == abort_rank)
        pthread_join(aborter, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "matrix";

    double soak_s = 10;
    uint64_t seed = (uint64_t)time(NULL);
    int abort_rank = -1;

    int k = 2; /* the flags out of argv, the positional arguments kept in order */
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--register") == 0)
            reg_on = 1;
        else if (strcmp(argv[i], "--symmetric") == 0)
            sym_on = sym_on ? sym_on : 1;
        else if (strcmp(argv[i], "--symmetric-mix") == 0)
            sym_on = 2;
        else
            argv[k++] = argv[i];
    }
    argc = k;
    if (strcmp(mode, "soak") == 0) {
        if (argc > 2)
            soak_s = atof(argv[2]);
        if (argc > 3)
            seed = strtoull(argv[3], NULL, 10);
        if (argc > 5) {
            abort_rank = atoi(argv[4]);
            abort_ms = atol(argv[5]);
        }
    } else if (argc > 2)
        matrix_big = strtoull(argv[2], NULL, 10);
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (sym_on) /* room for the largest call's two buffers, all-gather's whole output */
        sym_arena_init(
            &arena, comm,
            ((strcmp(mode, "large") == 0 ? (size_t)8 << 20 : (size_t)1 << 21) + matrix_big + 64) *
                8 * 2 * (size_t)(nranks + 1),
            sym_on == 2, rank);
    if (strcmp(mode, "matrix") == 0)
        matrix();
    else if (strcmp(mode, "matrix-full") == 0) {
        big_counts_all = 1;
        matrix();
    } else if (strcmp(mode, "large") == 0)
        large();
    else if (strcmp(mode, "p2p") == 0)
        p2p();
    else if (strcmp(mode, "trials") == 0)
        trials();
    else if (strcmp(mode, "all_to_all") == 0)
        all_to_all();
    else if (strcmp(mode, "soak") == 0)
        soak(soak_s, seed, abort_rank);
    else {
        printf("coll_check: unknown mode %s (matrix, large, p2p, trials, all_to_all, soak)\n",
               mode);
        return 2;
    }
    if (tutti_barrier(comm, NULL) != TUTTI_SUCCESS)
        fail("final barrier", "%s", tutti_comm_last_error(comm));
    if (sym_on)
        sym_arena_fini(&arena, comm);
    tutti_comm_destroy(comm);
    printf("%s: rank %d of %d: %s (%d failure(s))\n", mode, rank, nranks,
           failures ? "FAILED" : "all checks passed", failures);
    return failures ? 1 : 0;
}
