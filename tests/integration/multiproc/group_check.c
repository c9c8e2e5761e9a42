/*
 * group_check -- run under tutti-run: collectives inside tutti_group_start/end, checked against
 * values computed here. One group holds, in this order:
 *   - a ring exchange (send to rank + 1, receive from rank - 1), int32;
 *   - SMALL all-reduces (sum, float32, counts 0 to SMALL - 1), a few max int64 ones, one of
 *     100,000 float32 values (too large to travel packed), more sum float32 ones, one average
 *     of float64 values and one in place: runs that tutti_group_end may pack into one;
 *   - a chain, all_reduce(a -> b) then all_reduce(b -> c), sum, int32: c must be n times the
 *     sum of the a's, as the two calls one after the other give (packed together they would
 *     read b before it is written); then two calls into one output, d (the second's result
 *     stays), and a call writing e, which the call before it read (its input as it was);
 *   - an all-gather, a broadcast from the last rank, a reduce to rank 0, a reduce-scatter and a
 *     barrier;
 *   - AG small all-gathers (int32, 0 to AG - 1 values a rank, the last in place), which
 *     tutti_group_end may pack into one, then one whose input is an earlier one's output;
 *   - AG small reduce-scatters (sum, int64, 0 to AG - 1 values a rank, the last in place).
 * Every result is checked after tutti_group_end. The group runs with no stream, then on a
 * host stream (synchronised before the checks). Last, calls naming two streams in one group:
 * the second is refused naming the rule, and tutti_group_end reports it.
 * `group_check alias`: see alias() below. `group_check soak SECONDS SEED`: groups of 1 to 24
 * random all-reduces, all-gathers and reduce-scatters (dtypes, ops, 0 to 20,004 values a rank,
 * some all-reduces chained on the previous one's output) until SECONDS have passed, each
 * result checked.
 * Exit status 0: every check on this rank passed.
 */
#include "check.h"
#include "tutti.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SMALL 40
#define BIG 100000
#define NCALLS (SMALL + 12)
#define AG 7

static int rank, nranks, failures;
static tutti_comm_t comm;

/* Rank r's element j of call k: a small integer, exact in every dtype used. */
static long val(int k, int r, size_t j)
{
    return (long)((k * 31 + r * 7 + (long)(j % 1000) * 3) % 19) - 9;
}

static long sum_val(int k, size_t j)
{
    long s = 0;
    for (int r = 0; r < nranks; r++)
        s += val(k, r, j);
    return s;
}

static long max_val(int k, size_t j)
{
    long m = val(k, 0, j);
    for (int r = 1; r < nranks; r++)
        m = val(k, r, j) > m ? val(k, r, j) : m;
    return m;
}

/* One all-reduce of the group: its buffers and what it should leave. */
struct ar {
    tutti_dtype_t t;
    tutti_op_t op;
    size_t count;
    int inplace;
    void *send, *recv;
};

static double get(tutti_dtype_t t, const void *p, size_t j)
{
    switch (t) {
    case TUTTI_FLOAT32: return ((const float *)p)[j];
    case TUTTI_FLOAT64: return ((const double *)p)[j];
    case TUTTI_INT32: return ((const int32_t *)p)[j];
    default: return (double)((const int64_t *)p)[j];
    }
}

static void put(tutti_dtype_t t, void *p, size_t j, double v)
{
    switch (t) {
    case TUTTI_FLOAT32: ((float *)p)[j] = (float)v; break;
    case TUTTI_FLOAT64: ((double *)p)[j] = v; break;
    case TUTTI_INT32: ((int32_t *)p)[j] = (int32_t)v; break;
    default: ((int64_t *)p)[j] = (int64_t)v; break;
    }
}

static void ar_init(struct ar *a, int k, tutti_dtype_t t, tutti_op_t op, size_t count, int inplace)
{
    size_t bytes = (count ? count : 1) * tutti_dtype_size(t);
    a->t = t;
    a->op = op;
    a->count = count;
    a->inplace = inplace;
    a->send = malloc(bytes);
    a->recv = inplace ? a->send : malloc(bytes);
    for (size_t j = 0; j < count; j++) {
        put(t, a->send, j, (double)val(k, rank, j));
        if (!inplace)
            put(t, a->recv, j, -1000.0);
    }
}

static void ar_check(const struct ar *a, int k, const char *how)
{
    for (size_t j = 0; j < a->count; j++) {
        double want = a->op == TUTTI_MAX   ? (double)max_val(k, j)
                      : a->op == TUTTI_AVG ? (double)sum_val(k, j) / nranks
                                           : (double)sum_val(k, j);
        double got = get(a->t, a->recv, j);
        if (got != want) {
            CHECK(0, "%s: grouped all-reduce %d (%s, %zu values)[%zu] = %g, want %g", how, k,
                  tutti_dtype_name(a->t), a->count, j, got, want);
            return;
        }
    }
}

static void ar_free(struct ar *a)
{
    if (!a->inplace)
        free(a->recv);
    free(a->send);
}

static void run(tutti_stream_t stream, const char *how)
{
    struct ar ars[NCALLS];
    int n = 0, next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int32_t ring_out[5], ring_in[5], a[3], b[3], c[3], d[3], e[3], f[3];
    float *gathered = malloc((size_t)nranks * 3 * sizeof(float)), mine[3], bc[4], red[2];
    float *rs_in = malloc((size_t)nranks * 2 * sizeof(float)), rs_out[2];
    int32_t *ag[AG], ag_send[AG][AG], ag_out2[2 * 64];
    int64_t *rsi[AG], rso[AG][AG];
    tutti_result_t rc = TUTTI_SUCCESS;

    for (int k = 0; k < SMALL; k++)
        ar_init(&ars[n++], k, TUTTI_FLOAT32, TUTTI_SUM, (size_t)k, 0);
    for (int k = 0; k < 4; k++)
        ar_init(&ars[n], n, TUTTI_INT64, TUTTI_MAX, (size_t)(k * 5 + 1), 0), n++;
    ar_init(&ars[n], n, TUTTI_FLOAT32, TUTTI_SUM, BIG, 0), n++;
    for (int k = 0; k < 4; k++)
        ar_init(&ars[n], n, TUTTI_FLOAT32, TUTTI_SUM, (size_t)(k + 3), 0), n++;
    ar_init(&ars[n], n, TUTTI_FLOAT64, TUTTI_AVG, 9, 0), n++;
    ar_init(&ars[n], n, TUTTI_FLOAT32, TUTTI_SUM, 11, 1), n++;
    for (int j = 0; j < 5; j++) {
        ring_out[j] = rank * 100 + j;
        ring_in[j] = -1;
    }
    for (int j = 0; j < 3; j++) {
        a[j] = (int32_t)val(90, rank, (size_t)j);
        e[j] = (int32_t)val(91, rank, (size_t)j);
        b[j] = c[j] = d[j] = f[j] = -1;
        mine[j] = (float)(rank * 10 + j);
    }
    for (int j = 0; j < 4; j++)
        bc[j] = rank == nranks - 1 ? (float)(j + 0.5) : -1.0f;
    red[0] = (float)rank;
    red[1] = 1.0f;
    for (int j = 0; j < nranks * 2; j++)
        rs_in[j] = (float)(rank + j);
    for (int k = 0; k < AG; k++) {
        ag[k] = malloc(((size_t)nranks * (size_t)k + 1) * sizeof(int32_t));
        if (!ag[k]) {
            CHECK(0, "out of memory");
            return;
        }
        for (int j = 0; j < nranks * k; j++)
            ag[k][j] = -1;
        for (int j = 0; j < k; j++) /* rank r's block of call k: r * 100 + k * 10 + j */
            ag_send[k][j] = (int32_t)(rank * 100 + k * 10 + j);
        if (k == AG - 1) /* in place: this rank's block is already in the output */
            memcpy(ag[k] + rank * k, ag_send[k], (size_t)k * sizeof(int32_t));
    }
    for (int k = 0; k < AG; k++) { /* rank r's block b of call k: val(50 + k, r, b * k + j) */
        rsi[k] = malloc(((size_t)nranks * (size_t)k + 1) * sizeof(int64_t));
        if (!rsi[k]) {
            CHECK(0, "out of memory");
            return;
        }
        for (int j = 0; j < nranks * k; j++)
            rsi[k][j] = val(50 + k, rank, (size_t)j);
        for (int j = 0; j < k; j++)
            rso[k][j] = -1;
    }
    if (!gathered || !rs_in || nranks > 64) {
        CHECK(0, "out of memory, or more than 64 ranks");
        return;
    }

    tutti_group_start();
    if (nranks > 1) {
        rc |= tutti_send(ring_out, 5, TUTTI_INT32, next, comm, stream);
        rc |= tutti_recv(ring_in, 5, TUTTI_INT32, prev, comm, stream);
    }
    for (int k = 0; k < n; k++)
        rc |= tutti_all_reduce(ars[k].send, ars[k].recv, ars[k].count, ars[k].t, ars[k].op, comm,
                               stream);
    rc |= tutti_all_reduce(a, b, 3, TUTTI_INT32, TUTTI_SUM, comm, stream);
    rc |= tutti_all_reduce(b, c, 3, TUTTI_INT32, TUTTI_SUM, comm, stream);
    rc |= tutti_all_reduce(a, d, 3, TUTTI_INT32, TUTTI_SUM, comm, stream);
    rc |= tutti_all_reduce(e, d, 3, TUTTI_INT32, TUTTI_MAX, comm, stream);
    rc |= tutti_all_reduce(e, f, 3, TUTTI_INT32, TUTTI_MAX, comm, stream);
    rc |= tutti_all_reduce(a, e, 3, TUTTI_INT32, TUTTI_MAX, comm, stream);
    rc |= tutti_all_gather(mine, gathered, 3, TUTTI_FLOAT32, comm, stream);
    rc |= tutti_broadcast(bc, bc, 4, TUTTI_FLOAT32, nranks - 1, comm, stream);
    rc |= tutti_reduce(red, red, 2, TUTTI_FLOAT32, TUTTI_SUM, 0, comm, stream);
    rc |= tutti_reduce_scatter(rs_in, rs_out, 2, TUTTI_FLOAT32, TUTTI_SUM, comm, stream);
    rc |= tutti_barrier(comm, stream);
    for (int k = 0; k < AG - 1; k++)
        rc |= tutti_all_gather(ag_send[k], ag[k], (size_t)k, TUTTI_INT32, comm, stream);
    rc |= tutti_all_gather(ag[AG - 1] + rank * (AG - 1), ag[AG - 1], AG - 1, TUTTI_INT32, comm,
                           stream);
    /* Its input is rank 0's block of the all-gather of 2 a rank: not packed with it. */
    rc |= tutti_all_gather(ag[2], ag_out2, 2, TUTTI_INT32, comm, stream);
    for (int k = 0; k < AG; k++)
        rc |= tutti_reduce_scatter(rsi[k], k == AG - 1 ? rsi[k] + rank * k : rso[k], (size_t)k,
                                   TUTTI_INT64, TUTTI_SUM, comm, stream);
    CHECK(rc == TUTTI_SUCCESS, "%s: a call inside the group failed: %s", how, tutti_last_error());
    rc = tutti_group_end();
    if (rc == TUTTI_SUCCESS && stream)
        rc = tutti_stream_sync(stream);
    CHECK(rc == TUTTI_SUCCESS, "%s: tutti_group_end: %s", how, tutti_comm_last_error(comm));

    for (int j = 0; j < 5 && nranks > 1; j++)
        CHECK(ring_in[j] == prev * 100 + j, "%s: ring exchange [%d] = %d, want %d", how, j,
              ring_in[j], prev * 100 + j);
    for (int k = 0; k < n; k++) {
        ar_check(&ars[k], k, how);
        ar_free(&ars[k]);
    }
    for (int j = 0; j < 3; j++) {
        CHECK(b[j] == sum_val(90, (size_t)j), "%s: chain's first call [%d] = %d, want %ld", how, j,
              b[j], sum_val(90, (size_t)j));
        CHECK(c[j] == nranks * sum_val(90, (size_t)j),
              "%s: chain's second call [%d] = %d, want %ld (it must read the first's result)", how,
              j, c[j], nranks * sum_val(90, (size_t)j));
    }
    for (int j = 0; j < 3; j++) {
        CHECK(d[j] == max_val(91, (size_t)j), "%s: two calls into one output [%d] = %d, want %ld",
              how, j, d[j], max_val(91, (size_t)j));
        CHECK(f[j] == max_val(91, (size_t)j), "%s: max of e [%d] = %d, want %ld", how, j, f[j],
              max_val(91, (size_t)j));
        CHECK(e[j] == max_val(90, (size_t)j), "%s: e after a call wrote it [%d] = %d, want %ld",
              how, j, e[j], max_val(90, (size_t)j));
    }
    for (int r = 0; r < nranks; r++)
        for (int j = 0; j < 3; j++)
            CHECK(gathered[r * 3 + j] == (float)(r * 10 + j), "%s: all-gather [%d][%d] = %g", how,
                  r, j, gathered[r * 3 + j]);
    for (int j = 0; j < 4; j++)
        CHECK(bc[j] == (float)(j + 0.5), "%s: broadcast [%d] = %g, want %g", how, j, bc[j],
              j + 0.5);
    if (rank == 0) {
        CHECK(red[0] == (float)(nranks * (nranks - 1) / 2), "%s: reduce [0] = %g", how, red[0]);
        CHECK(red[1] == (float)nranks, "%s: reduce [1] = %g", how, red[1]);
    }
    for (int j = 0; j < 2; j++) {
        float want = 0;
        for (int r = 0; r < nranks; r++)
            want += (float)(r + rank * 2 + j);
        CHECK(rs_out[j] == want, "%s: reduce-scatter [%d] = %g, want %g", how, j, rs_out[j], want);
    }
    for (int k = 0; k < AG; k++) {
        for (int r = 0; r < nranks; r++)
            for (int j = 0; j < k; j++)
                CHECK(ag[k][r * k + j] == r * 100 + k * 10 + j,
                      "%s: grouped all-gather %d [%d][%d] = %d, want %d", how, k, r, j,
                      ag[k][r * k + j], r * 100 + k * 10 + j);
        free(ag[k]);
    }
    for (int k = 0; k < AG; k++) {
        const int64_t *got = k == AG - 1 ? rsi[k] + rank * k : rso[k];
        for (int j = 0; j < k; j++)
            CHECK(got[j] == sum_val(50 + k, (size_t)(rank * k + j)),
                  "%s: grouped reduce-scatter %d [%d] = %lld, want %ld", how, k, j,
                  (long long)got[j], sum_val(50 + k, (size_t)(rank * k + j)));
        free(rsi[k]);
    }
    for (int r = 0; r < nranks; r++)
        for (int j = 0; j < 2; j++)
            CHECK(ag_out2[r * 2 + j] == 20 + j,
                  "%s: the all-gather of an all-gather's output [%d][%d] = %d, want %d", how, r, j,
                  ag_out2[r * 2 + j], 20 + j);
    free(gathered);
    free(rs_in);
}

/* Two streams in one group: the call that names the second is refused, and so is the group. */
static void two_streams(void)
{
    tutti_stream_t s1, s2;
    float x = 1, y = 0;
    tutti_result_t rc1, rc2, end;

    if (tutti_stream_create(&s1) != TUTTI_SUCCESS || tutti_stream_create(&s2) != TUTTI_SUCCESS) {
        CHECK(0, "tutti_stream_create: %s", tutti_last_error());
        return;
    }
    tutti_group_start();
    rc1 = tutti_all_reduce(&x, &y, 1, TUTTI_FLOAT32, TUTTI_SUM, comm, s1);
    rc2 = tutti_all_reduce(&x, &y, 1, TUTTI_FLOAT32, TUTTI_SUM, comm, s2);
    end = tutti_group_end();
    CHECK(rc1 == TUTTI_SUCCESS, "the first call of the group failed: %s", tutti_last_error());
    CHECK(rc2 == TUTTI_ERR_INVALID_ARG, "a call naming another stream in the group returned %d",
          (int)rc2);
    CHECK(end == TUTTI_ERR_INVALID_ARG, "the group with two streams ended with %d", (int)end);
    CHECK(strstr(tutti_comm_last_error(comm), "same stream") != NULL,
          "the refusal does not name the rule: %s", tutti_comm_last_error(comm));
    tutti_stream_destroy(s1);
    tutti_stream_destroy(s2);
}

/*
 * `group_check alias`: rank 0's second all-reduce reads what its first writes, the other
 * ranks' does not, so rank 0 runs two calls where the others run one packed call. That is
 * the dependence NCCL forbids; every rank must fail (and none hang), not mix values.
 */
static void alias(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {0}, c[4] = {0}, x[4] = {5, 6, 7, 8};
    tutti_result_t rc = TUTTI_SUCCESS;

    tutti_group_start();
    rc |= tutti_all_reduce(a, b, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    rc |= tutti_all_reduce(rank == 0 ? b : x, c, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    CHECK(rc == TUTTI_SUCCESS, "alias: recording the calls: %s", tutti_last_error());
    rc = tutti_group_end();
    printf("rank %d: a group packed unlike the other ranks' ended with: %s\n", rank,
           rc == TUTTI_SUCCESS ? "success" : tutti_comm_last_error(comm));
    CHECK(rc != TUTTI_SUCCESS, "alias: the group succeeded (b = %g, c = %g)", b[0], c[0]);
}

/* `group_check soak SECONDS SEED`: random groups, every rank drawing the same from the seed. */
static uint64_t soak_state;
static long soak_calls;

static uint64_t draw(uint64_t n) /* splitmix64, below n */
{
    uint64_t z = (soak_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) % n;
}

/* One call of a soak group: what it does, its buffers and what it must leave (every element
 * a small integer, exact in every dtype drawn). */
struct scall {
    int gather, scatter, chained;
    tutti_dtype_t t;
    tutti_op_t op;
    size_t count; /* a rank's block */
    void *in, *out;
    double *want; /* out's count (all-reduce) or n * count (all-gather) values */
};

static void soak_group(int round)
{
    static const tutti_dtype_t types[] = {TUTTI_INT32, TUTTI_INT64, TUTTI_FLOAT32, TUTTI_FLOAT64};
    static const tutti_op_t ops[] = {TUTTI_SUM, TUTTI_MAX, TUTTI_MIN};
    struct scall calls[24];
    int n = 1 + (int)draw(24), depth = 0;
    tutti_result_t rc = TUTTI_SUCCESS;

    soak_calls += n;
    for (int k = 0; k < n; k++) {
        struct scall *c = &calls[k], *p = k ? &calls[k - 1] : NULL;
        size_t outn;
        /* A chain: the previous all-reduce's output is this one's input (three at most). */
        c->chained = p && !p->gather && !p->scatter && depth < 3 && draw(5) == 0;
        c->gather = !c->chained && draw(3) == 0;
        c->scatter = !c->chained && !c->gather && draw(3) == 0;
        c->t = c->chained ? p->t : types[draw(4)];
        c->op = ops[draw(3)];
        c->count = c->chained ? p->count : draw(8) == 0 ? 20000 + draw(5) : draw(300);
        depth = c->chained ? depth + 1 : 0;
        outn = c->count * (c->gather ? (size_t)nranks : 1);
        c->in =
            c->chained ? p->out : malloc((c->count * (c->scatter ? (size_t)nranks : 1) + 1) * 8);
        c->out = malloc((outn + 1) * 8);
        c->want = malloc((outn + 1) * sizeof(double));
        if (!c->in || !c->out || !c->want) {
            CHECK(0, "soak: out of memory");
            exit(1);
        }
        for (size_t j = 0; j < outn; j++) {
            double w = 0;
            for (int r = 0; r < nranks; r++) {
                /* A reduce-scatter's output j is element rank * count + j of its inputs. */
                size_t e = c->gather ? j % c->count : c->scatter ? rank * c->count + j : j;
                int who = c->gather ? (int)(j / c->count) : r;
                double v = c->chained ? p->want[e] : (double)val(round * 31 + k, who, e);
                if (c->gather)
                    w = v;
                else if (r == 0 || c->op == TUTTI_SUM)
                    w = r == 0 ? v : w + v;
                else
                    w = c->op == TUTTI_MAX ? (v > w ? v : w) : (v < w ? v : w);
                if (c->gather)
                    break;
            }
            c->want[j] = w;
            put(c->t, c->out, j, -7.0);
        }
        for (size_t j = 0; j < c->count * (c->scatter ? (size_t)nranks : 1) && !c->chained; j++)
            put(c->t, c->in, j, (double)val(round * 31 + k, rank, j));
    }
    tutti_group_start();
    for (int k = 0; k < n; k++) {
        struct scall *c = &calls[k];
        rc |= c->gather    ? tutti_all_gather(c->in, c->out, c->count, c->t, comm, NULL)
              : c->scatter ? tutti_reduce_scatter(c->in, c->out, c->count, c->t, c->op, comm, NULL)
                           : tutti_all_reduce(c->in, c->out, c->count, c->t, c->op, comm, NULL);
    }
    rc |= tutti_group_end();
    CHECK(rc == TUTTI_SUCCESS, "soak round %d: %s", round, tutti_comm_last_error(comm));
    for (int k = 0; k < n; k++) {
        struct scall *c = &calls[k];
        size_t outn = c->count * (c->gather ? (size_t)nranks : 1);
        for (size_t j = 0; j < outn && rc == TUTTI_SUCCESS; j++)
            if (get(c->t, c->out, j) != c->want[j]) {
                CHECK(0, "soak round %d call %d of %d (%s %s, %zu a rank%s) [%zu] = %g, want %g",
                      round, k, n,
                      c->gather    ? "all-gather"
                      : c->scatter ? "reduce-scatter"
                                   : "all-reduce",
                      tutti_dtype_name(c->t), c->count, c->chained ? ", chained" : "", j,
                      get(c->t, c->out, j), c->want[j]);
                break;
            }
    }
    for (int k = 0; k < n; k++) {
        if (!calls[k].chained)
            free(calls[k].in);
    }
    for (int k = 0; k < n; k++) {
        free(calls[k].out);
        free(calls[k].want);
    }
}

static void soak(double seconds, uint64_t seed)
{
    struct timespec t0, t;
    int rounds = 0;

    soak_state = seed;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int32_t stop;
        clock_gettime(CLOCK_MONOTONIC, &t);
        stop = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > seconds ||
               failures > 0;
        if (tutti_all_reduce(&stop, &stop, 1, TUTTI_INT32, TUTTI_MAX, comm, NULL) !=
            TUTTI_SUCCESS) {
            CHECK(0, "soak: the agreement all-reduce failed: %s", tutti_comm_last_error(comm));
            break;
        }
        if (stop)
            break;
        soak_group(rounds++);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("soak: rank %d of %d: %ld calls in %.1f s, in %d groups (seed %llu)\n", rank, nranks,
           soak_calls, (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec),
           rounds, (unsigned long long)seed);
}

int main(int argc, char **argv)
{
    tutti_stream_t stream;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (argc > 1 && (!strcmp(argv[1], "alias") || !strcmp(argv[1], "soak"))) {
        if (argv[1][0] == 'a')
            alias();
        else
            soak(argc > 2 ? atof(argv[2]) : 5, argc > 3 ? strtoull(argv[3], NULL, 10) : 1);
        tutti_comm_destroy(comm);
        return failures ? 1 : 0;
    }
    run(NULL, "no stream");
    if (tutti_stream_create(&stream) != TUTTI_SUCCESS) {
        CHECK(0, "tutti_stream_create: %s", tutti_last_error());
    } else {
        run(stream, "host stream");
        tutti_stream_destroy(stream);
    }
    two_streams();
    tutti_comm_destroy(comm);
    if (!failures)
        printf("group_check: rank %d ok\n", rank);
    return failures ? 1 : 0;
}
