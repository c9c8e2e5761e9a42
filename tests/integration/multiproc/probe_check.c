/*
 * probe_check -- one rank of the hardening probe's collective cases (tests/integration/multiproc/
 * test_probe.c runs them under tutti-run, TUTTI_TIMEOUT=60, and bounds each in time). Each case
 * is a mistake a careless program makes; no rank may get a wrong value or wait for its
 * timeout, and each must name the cause. Every value is checked against its sum computed here.
 *
 *   probe_check reduce-null-root   the root of a reduce passes recvbuf NULL (the others do not):
 *                                  it alone is refused; the next all-reduce is right everywhere
 *   probe_check reduce-overlap-root  the same with overlapping buffers on the root alone
 *        (both: PROBE_COUNT elements, default 4)
 *   probe_check bcast-null-root    the root of a broadcast passes sendbuf NULL: it is refused,
 *                                  every other rank fails at once naming it (never "succeeds"
 *                                  with the root's next input); the next all-reduce is right
 *   probe_check bcast-null-leaf    the last rank passes recvbuf NULL to a broadcast of PROBE_COUNT
 *                                  elements from rank 0: it alone is refused; a rank whose call
 *                                  succeeds holds the root's data; the next all-reduce is right
 *   probe_check overlap-all        every rank passes overlapping buffers to a broadcast and a
 *                                  reduce: every rank refuses alike; the next all-reduce is right
 *   probe_check gather-null-root   the root of a gather passes recvbuf NULL: the communicator
 *                                  fails on every rank, naming the root's refusal, promptly
 *   probe_check group-null         in a group of two all-reduces rank 0 passes recvbuf NULL to the
 *                                  second: it is refused; no rank gets a wrong value (a call
 *                                  that succeeds is right), and the next all-reduce is right
 *                                  everywhere or fails everywhere, promptly
 *   probe_check dtype              rank 0 all-reduces float32, the others int32 (same size)
 *   probe_check op                 rank 0 sums, the others take the max
 *   probe_check kind               rank 0 broadcasts 10 floats, the others all-reduce 10
 *        (these three: every rank that does not finish fails within seconds naming the
 *        difference, or the failed rank; no rank gets a value; the next call fails everywhere)
 *   probe_check p2p-then-all       (TUTTI_CHECK_COLL=1, 3+ ranks) ranks 0 and 1 exchange by
 *                                  send/recv, the rest do nothing, then all all-reduce: right
 *   probe_check gather-count       (TUTTI_CHECK_COLL=1, 3+ ranks) rank 1 gathers one element more:
 *                                  every rank refuses, nothing is left in flight, the next
 *                                  all-reduce is right
 * And for the rendezvous and timeout cases:
 *   probe_check ok                 two right all-reduces (a rank of a job that must work)
 *   probe_check loop               all-reduces until one fails; exit 0 if it failed by timeout
 *                                  or a peer's loss, after saying after how long and why
 *   probe_check serve SECONDS      (not a rank) start a rendezvous (tutti_get_id), print
 *                                  "ID <id>" and serve it for SECONDS
 * Prints "RESULT rank R: ..." lines; exits 0 when this rank saw what it should.
 */
#include "tutti.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tutti_comm_t comm;
static int rank, size, failures;
static double t0;

#include "check.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void result(const char *what, tutti_result_t rc)
{
    printf("RESULT rank %d: %s: %s after %.2f s%s%s\n", rank, what, tutti_strerror(rc), now() - t0,
           rc == TUTTI_SUCCESS ? "" : ": ", rc == TUTTI_SUCCESS ? "" : tutti_last_error());
    fflush(stdout);
}

/* An all-reduce of 1000 * (rank + 1) must give 1000 * n (n + 1) / 2 on every rank. */
static void all_reduce_right(const char *when)
{
    float v[4], out[4];
    tutti_result_t rc;

    for (int i = 0; i < 4; i++)
        v[i] = 1000.0f * (float)(rank + 1) + (float)i, out[i] = -1;
    rc = tutti_all_reduce(v, out, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    result(when, rc);
    CHECK(rc == TUTTI_SUCCESS, "%s: the all-reduce failed: %s", when, tutti_last_error());
    for (int i = 0; rc == TUTTI_SUCCESS && i < 4; i++)
        CHECK(out[i] == 1000.0f * (float)(size * (size + 1) / 2) + (float)(size * i),
              "%s: element %d is %g, not %g", when, i, out[i],
              1000.0f * (float)(size * (size + 1) / 2) + (float)(size * i));
}

/* The next call fails on every rank (the communicator is dead), naming `word` somewhere. */
static void next_call_fails(const char *when, const char *word)
{
    float v[4] = {1, 2, 3, 4}, out[4];
    tutti_result_t rc = tutti_all_reduce(v, out, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    result(when, rc);
    CHECK(rc != TUTTI_SUCCESS, "%s: an all-reduce succeeded (%g) on a failed communicator", when,
          out[0]);
    CHECK(!word || strstr(tutti_last_error(), word), "%s: the error does not say '%s': %s", when,
          word, tutti_last_error());
}

/* PROBE_COUNT elements (default 4): large ones make the refusing root release many whole
 * messages of its peers unread. */
static void reduce_root(int overlap)
{
    size_t n = getenv("PROBE_COUNT") ? strtoul(getenv("PROBE_COUNT"), NULL, 10) : 4;
    float *buf = malloc(2 * n * sizeof(float)), *out = malloc(n * sizeof(float));
    tutti_result_t rc;

    if (!buf || !out || n < 4) {
        printf("RESULT rank %d: PROBE_COUNT must be at least 4 (and fit in memory)\n", rank);
        exit(1);
    }
    for (size_t i = 0; i < 2 * n; i++)
        buf[i] = 1000.0f * (float)(rank + 1);
    if (rank == 0)
        rc =
            tutti_reduce(buf, overlap ? buf + 1 : NULL, n, TUTTI_FLOAT32, TUTTI_SUM, 0, comm, NULL);
    else
        rc = tutti_reduce(buf, out, n, TUTTI_FLOAT32, TUTTI_SUM, 0, comm, NULL);
    free(buf);
    free(out);
    result("reduce", rc);
    if (rank == 0)
        CHECK(rc == TUTTI_ERR_INVALID_ARG &&
                  strstr(tutti_last_error(), overlap ? "overlap" : "recvbuf is NULL"),
              "the root's reduce was not refused naming it: %s", tutti_last_error());
    else /* a leaf only sends: its part is done, the root took (and dropped) it */
        CHECK(rc == TUTTI_SUCCESS ||
                  (rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "rank 0 refused")),
              "a leaf's reduce: %s", tutti_last_error());
    all_reduce_right("the next all-reduce");
    all_reduce_right("another all-reduce");
}

/* PROBE_COUNT elements: over sockets alone, large ones reach the refusing leaf as messages
 * longer than a slot, which it drops unread. */
static void bcast_null_leaf(void)
{
    size_t n = getenv("PROBE_COUNT") ? strtoul(getenv("PROBE_COUNT"), NULL, 10) : 4;
    float *buf = malloc(n * sizeof(float));
    size_t bad = 0;
    tutti_result_t rc;

    if (!buf || n < 4) {
        printf("RESULT rank %d: PROBE_COUNT must be at least 4 (and fit in memory)\n", rank);
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = rank == 0 ? (float)(i % 1000) : -1.0f;
    rc = tutti_broadcast(buf, rank == size - 1 ? NULL : buf, n, TUTTI_FLOAT32, 0, comm, NULL);
    result("broadcast", rc);
    if (rank == size - 1)
        CHECK(rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "recvbuf is NULL"),
              "the leaf's broadcast was not refused naming it: %s", tutti_last_error());
    else
        CHECK(rc == TUTTI_SUCCESS ||
                  (rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "refused its part")),
              "rank %d's broadcast: %s", rank, tutti_last_error());
    for (size_t i = 0; rc == TUTTI_SUCCESS && i < n; i++)
        bad += buf[i] != (float)(i % 1000);
    CHECK(bad == 0, "the broadcast succeeded with %zu wrong elements", bad);
    free(buf);
    all_reduce_right("the next all-reduce");
    all_reduce_right("another all-reduce");
}

static void bcast_null_root(void)
{
    float out[16];
    tutti_result_t rc;

    rc = tutti_broadcast(NULL, out, 16, TUTTI_FLOAT32, 0, comm, NULL);
    result("broadcast", rc);
    CHECK(rc == TUTTI_ERR_INVALID_ARG, "the broadcast returned %s", tutti_strerror(rc));
    if (rank == 0)
        CHECK(strstr(tutti_last_error(), "sendbuf is NULL"), "the root's refusal: %s",
              tutti_last_error());
    else
        CHECK(strstr(tutti_last_error(), "rank 0 refused its part") &&
                  strstr(tutti_last_error(), "sendbuf is NULL"),
              "a leaf's error does not name the root's refusal: %s", tutti_last_error());
    all_reduce_right("the next all-reduce");
}

static void overlap_all(void)
{
    float buf[8] = {0};
    tutti_result_t rc;

    rc = tutti_broadcast(buf, buf + 1, 4, TUTTI_FLOAT32, 0, comm, NULL);
    result("broadcast", rc);
    CHECK(rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "overlap"),
          "an overlapping broadcast was not refused here: %s", tutti_last_error());
    rc = tutti_reduce(buf, buf + 2, 4, TUTTI_FLOAT32, TUTTI_SUM, size - 1, comm, NULL);
    result("reduce", rc);
    CHECK(rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "overlap"),
          "an overlapping reduce was not refused here: %s", tutti_last_error());
    all_reduce_right("the next all-reduce");
}

static void gather_null_root(void)
{
    float one[4] = {1, 2, 3, 4};
    tutti_result_t rc = tutti_gather(one, NULL, 4, TUTTI_FLOAT32, 0, comm, NULL);

    result("gather", rc);
    if (rank == 0)
        CHECK(rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "recvbuf is NULL"),
              "the root's gather: %s", tutti_last_error());
    next_call_fails("the next all-reduce", "recvbuf is NULL");
}

static void group_null(void)
{
    float a[4], b[4], oa[4] = {-1, -1, -1, -1}, ob[4] = {-1, -1, -1, -1}, v[4], out[4];
    float want = (float)(size * (size + 1) / 2);
    tutti_result_t r1, r2, end, next;

    for (int i = 0; i < 4; i++)
        a[i] = b[i] = v[i] = (float)(rank + 1);
    tutti_group_start();
    r1 = tutti_all_reduce(a, oa, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    r2 = tutti_all_reduce(b, rank == 0 ? NULL : ob, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    end = tutti_group_end();
    result("the group", end);
    CHECK(r1 == TUTTI_SUCCESS, "the first call of the group was refused: %s", tutti_strerror(r1));
    if (rank == 0)
        CHECK(r2 == TUTTI_ERR_INVALID_ARG, "the NULL recvbuf was not refused: %s",
              tutti_strerror(r2));
    if (end == TUTTI_SUCCESS) {
        CHECK(oa[0] == want, "the group succeeded with a = %g, not %g", oa[0], want);
        CHECK(rank == 0 || ob[0] == want, "the group succeeded with b = %g, not %g", ob[0], want);
    }
    next = tutti_all_reduce(v, out, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    result("the next all-reduce", next);
    CHECK(next != TUTTI_SUCCESS || out[0] == want, "the next all-reduce gave %g, not %g", out[0],
          want);
}

/* Ranks whose calls differ in dtype, op or kind: nobody waits for its timeout, nobody gets a
 * value; a rank that fails names the difference or the failed rank. */
static void mismatch(const char *how)
{
    float f[10], fo[10];
    int32_t i[10], io[10];
    tutti_result_t rc;
    const char *word = strcmp(how, "dtype") == 0 ? "dtype" : strcmp(how, "op") == 0 ? "op" : "kind";

    for (int k = 0; k < 10; k++)
        f[k] = (float)(rank + 1), i[k] = rank + 1, fo[k] = -1, io[k] = -1;
    if (strcmp(how, "dtype") == 0)
        rc = rank == 0 ? tutti_all_reduce(f, fo, 10, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL)
                       : tutti_all_reduce(i, io, 10, TUTTI_INT32, TUTTI_SUM, comm, NULL);
    else if (strcmp(how, "op") == 0)
        rc = tutti_all_reduce(f, fo, 10, TUTTI_FLOAT32, rank == 0 ? TUTTI_SUM : TUTTI_MAX, comm,
                              NULL);
    else
        rc = rank == 0 ? tutti_broadcast(f, f, 10, TUTTI_FLOAT32, 0, comm, NULL)
                       : tutti_all_reduce(f, fo, 10, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    result(how, rc);
    /* The broadcaster may finish: it only sends. Every other rank must fail. */
    if (!(strcmp(how, "kind") == 0 && rank == 0)) {
        CHECK(rc != TUTTI_SUCCESS, "mismatched calls succeeded: %g / %d", fo[0], io[0]);
        CHECK(strstr(tutti_last_error(), word) || strstr(tutti_last_error(), "had failed"),
              "the error names neither the %s nor the failed rank: %s", word, tutti_last_error());
    }
    next_call_fails("the next all-reduce", NULL);
}

static void p2p_then_all(void)
{
    float a[8] = {0}, b[8] = {0};
    tutti_result_t rc;

    for (int k = 0; k < 8; k++)
        a[k] = (float)(rank + 7);
    for (int round = 0; round < 2; round++) {
        if (rank < 2) {
            tutti_group_start();
            tutti_send(a, 8, TUTTI_FLOAT32, 1 - rank, comm, NULL);
            tutti_recv(b, 8, TUTTI_FLOAT32, 1 - rank, comm, NULL);
            rc = tutti_group_end();
            result("exchange", rc);
            CHECK(rc == TUTTI_SUCCESS && b[0] == (float)(1 - rank + 7), "the exchange: %s, %g",
                  tutti_last_error(), b[0]);
        }
        all_reduce_right("the all-reduce after it");
    }
}

static void gather_count(void)
{
    float one[5] = {1, 2, 3, 4, 5}, *all = calloc((size_t)size * 5, sizeof(float));
    tutti_result_t rc = tutti_gather(one, all, rank == 1 ? 5 : 4, TUTTI_FLOAT32, 0, comm, NULL);

    result("gather", rc);
    CHECK(rc == TUTTI_ERR_INVALID_ARG && strstr(tutti_last_error(), "TUTTI_CHECK_COLL"),
          "a gather with rank 1's count off by one: %s", tutti_last_error());
    free(all);
    all_reduce_right("the next all-reduce");
    all_reduce_right("another all-reduce");
}

/* All-reduces until one fails: by TUTTI_TIMEOUT (a stopped rank) or a lost peer. */
static void loop(void)
{
    enum { N = 1 << 16 };
    static float x[N], y[N];
    double last = now();
    tutti_result_t rc;

    printf("RESULT rank %d: looping\n", rank);
    fflush(stdout);
    while ((rc = tutti_all_reduce(x, y, N, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL)) == TUTTI_SUCCESS)
        last = now();
    printf("RESULT rank %d: failed %.2f s after the last success: %s: %s\n", rank, now() - last,
           tutti_strerror(rc), tutti_last_error());
    CHECK(rc == TUTTI_ERR_TIMEOUT || rc == TUTTI_ERR_REMOTE, "the loop ended with %s",
          tutti_strerror(rc));
}

/* A rendezvous served from here, for ranks started with TUTTI_ID by hand. */
static int serve(double seconds)
{
    tutti_id_t id;
    char s[TUTTI_ID_STRLEN];

    if (tutti_get_id(&id) != TUTTI_SUCCESS || tutti_id_to_string(&id, s, sizeof(s)) != 0) {
        fprintf(stderr, "probe_check serve: %s\n", tutti_last_error());
        return 2;
    }
    printf("ID %s\n", s);
    fflush(stdout);
    nanosleep(&(struct timespec){(time_t)seconds, 0}, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "serve") == 0)
        return serve(argc > 2 ? atof(argv[2]) : 10);
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        /* Where a peer's call fails the communicator, a slow rank may still be in its set-up,
         * which that peer's word then ends (bootstrap: "rank R gave up: <why>"): the cause is
         * named there too. */
        int dies = !strcmp(mode, "gather-null-root") || !strcmp(mode, "group-null") ||
                   !strcmp(mode, "dtype") || !strcmp(mode, "op") || !strcmp(mode, "kind");
        fprintf(stderr, "probe_check: init: %s\n", tutti_last_error());
        if (dies && (strstr(tutti_last_error(), "gave up: ") ||
                     strstr(tutti_last_error(), "had failed: "))) {
            printf("RESULT rank ?: init: a peer failed the communicator first: %s\n",
                   tutti_last_error());
            return 0;
        }
        return 2;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &size);
    t0 = now();
    if (strcmp(mode, "reduce-null-root") == 0)
        reduce_root(0);
    else if (strcmp(mode, "reduce-overlap-root") == 0)
        reduce_root(1);
    else if (strcmp(mode, "bcast-null-leaf") == 0)
        bcast_null_leaf();
    else if (strcmp(mode, "bcast-null-root") == 0)
        bcast_null_root();
    else if (strcmp(mode, "overlap-all") == 0)
        overlap_all();
    else if (strcmp(mode, "gather-null-root") == 0)
        gather_null_root();
    else if (strcmp(mode, "group-null") == 0)
        group_null();
    else if (!strcmp(mode, "dtype") || !strcmp(mode, "op") || !strcmp(mode, "kind"))
        mismatch(mode);
    else if (strcmp(mode, "p2p-then-all") == 0)
        p2p_then_all();
    else if (strcmp(mode, "gather-count") == 0)
        gather_count();
    else if (strcmp(mode, "ok") == 0) {
        all_reduce_right("an all-reduce");
        all_reduce_right("another all-reduce");
    } else if (strcmp(mode, "loop") == 0)
        loop();
    else {
        fprintf(stderr, "probe_check: unknown mode '%s'\n", mode);
        return 2;
    }
    CHECK(strcmp(mode, "loop") == 0 || now() - t0 < 15,
          "the case took %.1f s (TUTTI_TIMEOUT is 60: somebody waited for it)", now() - t0);
    tutti_comm_destroy(comm);
    return failures ? 1 : 0;
}
