/*
 * sym_check -- run under tutti-run: symmetric memory's rules (tutti_mem_alloc, windows).
 *
 *   sym_check fallback   all-reduces where the last rank's buffer is in no window, the others'
 *                        are: every rank's result is right (they all took the usual path);
 *                        under TUTTI_CHECK_COLL=1 instead every rank's call fails naming the
 *                        last rank, and the communicator stays usable. Then a rank whose
 *                        window is a different one, at another offset: still right. Then
 *                        the last rank refuses its part (a NULL recvbuf): every rank fails,
 *                        the others naming it.
 *   sym_check misuse     what is refused, by name: registering memory not from
 *                        tutti_mem_alloc (every rank fails, naming the rank), freeing memory a
 *                        window covers, freeing while work is queued on a stream, freeing twice
 *                        or a foreign pointer, deregistering twice, 0 bytes.
 *   sym_check nodes      across nodes, with the hierarchical plans forced (TUTTI_ALGO): the
 *                        stages inside a node on windows; buffers in windows on every rank,
 *                        on the first node's ranks alone, on all but the last rank: every
 *                        result right (each node decides alone), or under TUTTI_CHECK_COLL=1
 *                        every rank's call fails naming the first rank outside a window;
 *                        a refusing rank named by the others.
 *   sym_check mismatch count|coll   the last rank calls with another count (or all-gather
 *                        where the others all-reduce), all on symmetric memory: every rank
 *                        fails naming the calls, and no output byte changes.
 *   sym_check exit       the program's last call, a small all-reduce on a window (inline: it
 *                        ends at the gate): the ranks but 0 come late, check their results
 *                        and exit at once; rank 0, which waited first, must succeed too.
 *                        Under the late_alive shim (LD_PRELOAD) rank 0's question whether a
 *                        peer is alive returns only once the peer has exited, as if rank 0
 *                        lost its core just before it.
 * Values: rank r's element i is r + 1 + i % 5, so the sum is known exactly.
 * Exit status 0: every check on this rank passed.
 */
#include "check.h"
#include "tutti.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks, failures;
static tutti_comm_t comm;

static void fill(float *p, size_t n, int r)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(r + 1 + (int)(i % 5));
}

/* Is out the sum over ranks of fill()? */
static void expect_sum(const char *what, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float want = (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 5));
        if (out[i] != want) {
            CHECK(0, "%s: element %zu is %g, expected %g", what, i, out[i], want);
            return;
        }
    }
}

static void *sym_alloc(size_t bytes, void **win)
{
    void *p = NULL;
    if (tutti_mem_alloc(comm, bytes, &p) != TUTTI_SUCCESS ||
        (win && tutti_comm_window_register(comm, p, bytes, win) != TUTTI_SUCCESS)) {
        printf("FAIL symmetric memory of %zu bytes: %s\n", bytes, tutti_comm_last_error(comm));
        exit(1);
    }
    return p;
}

static void fallback(void)
{
    const size_t counts[] = {3, 1000, 70001}; /* inline (up to 1 KiB), pass */
    int checking = getenv("TUTTI_CHECK_COLL") && strcmp(getenv("TUTTI_CHECK_COLL"), "1") == 0;
    void *win, *win2;
    float *s = sym_alloc(2 * 70001 * 4, &win), *plain = malloc(2 * 70001 * 4);
    float *other = sym_alloc(3 * 70001 * 4 + 4096, &win2);

    for (int k = 0; k < 3; k++) {
        size_t n = counts[k];
        float *buf = rank == nranks - 1 ? plain : s;
        char what[96], last[32];
        tutti_result_t rc;
        snprintf(what, sizeof(what), "all_reduce of %zu, rank %d's buffer in no window", n,
                 nranks - 1);
        fill(buf, n, rank);
        rc = tutti_all_reduce(buf, buf + n, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        snprintf(last, sizeof(last), "rank %d's", nranks - 1);
        if (checking && n > 3 && nranks > 1) { /* (inline calls need no window) */
            CHECK(rc == TUTTI_ERR_INVALID_ARG, "%s: returned %s under TUTTI_CHECK_COLL", what,
                  tutti_strerror(rc));
            CHECK(strstr(tutti_comm_last_error(comm), last) != NULL, "%s: the error is: %s", what,
                  tutti_comm_last_error(comm));
        } else {
            CHECK(rc == TUTTI_SUCCESS, "%s: %s", what, tutti_comm_last_error(comm));
            expect_sum(what, buf + n, n);
        }
        /* Usable after: every rank symmetric, and a rank in another window at an odd offset. */
        float *b2 = rank == nranks - 1 ? other + 1024 + 3 : s;
        fill(b2, n, rank);
        rc = tutti_all_reduce(b2, b2 + n, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        CHECK(rc == TUTTI_SUCCESS, "all_reduce of %zu, one rank in another window: %s", n,
              tutti_comm_last_error(comm));
        expect_sum("all_reduce, one rank in another window", b2 + n, n);
    }
    /* A rank that refuses its part (a NULL recvbuf) while the others' buffers are in windows:
     * no rank may complete the call, each names the refusing rank, small and large. */
    for (int k = 0; k < 3 && nranks > 1; k++) {
        size_t n = counts[k];
        char who[32];
        fill(s, n, rank);
        tutti_result_t rc = tutti_all_reduce(s, rank == nranks - 1 ? NULL : s + n, n, TUTTI_FLOAT32,
                                             TUTTI_SUM, comm, NULL);
        snprintf(who, sizeof(who), "rank %d", nranks - 1);
        CHECK(rc == TUTTI_ERR_INVALID_ARG, "all_reduce of %zu, rank %d refusing: returned %s", n,
              nranks - 1, tutti_strerror(rc));
        CHECK(rank == nranks - 1 || strstr(tutti_comm_last_error(comm), who) != NULL,
              "all_reduce of %zu, rank %d refusing: the error is: %s", n, nranks - 1,
              tutti_comm_last_error(comm));
    }
    if (tutti_comm_window_deregister(comm, win) != TUTTI_SUCCESS ||
        tutti_comm_window_deregister(comm, win2) != TUTTI_SUCCESS ||
        tutti_mem_free(comm, s) != TUTTI_SUCCESS || tutti_mem_free(comm, other) != TUTTI_SUCCESS)
        CHECK(0, "cleaning up: %s", tutti_comm_last_error(comm));
    free(plain);
}

/* One all-reduce (out of place), all-gather and broadcast (root: the last rank) from `buf`,
 * which holds room for 2 x n x nranks floats. Under TUTTI_CHECK_COLL with `lacking` >= 0
 * every call must fail naming that rank; otherwise every result must be right. */
static void nodes_calls(float *buf, size_t n, const char *how, int lacking, int checking)
{
    const char *names[3] = {"all_reduce", "all_gather", "broadcast"};

    for (int k = 0; k < 3; k++) {
        char what[160], who[32];
        size_t each = k == 1 ? n / (size_t)nranks : n;
        float *out = buf + n * (size_t)nranks;
        tutti_result_t rc;
        snprintf(what, sizeof(what), "%s of %zu, %s", names[k], each, how);
        fill(buf, each, rank);
        rc = k == 0   ? tutti_all_reduce(buf, out, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL)
             : k == 1 ? tutti_all_gather(buf, out, each, TUTTI_FLOAT32, comm, NULL)
                      : tutti_broadcast(buf, out, n, TUTTI_FLOAT32, nranks - 1, comm, NULL);
        if (checking && lacking >= 0) {
            snprintf(who, sizeof(who), "rank %d's", lacking);
            CHECK(rc == TUTTI_ERR_INVALID_ARG, "%s: returned %s under TUTTI_CHECK_COLL", what,
                  tutti_strerror(rc));
            CHECK(strstr(tutti_comm_last_error(comm), who) != NULL, "%s: the error is: %s", what,
                  tutti_comm_last_error(comm));
            continue;
        }
        CHECK(rc == TUTTI_SUCCESS, "%s: %s", what, tutti_comm_last_error(comm));
        if (k == 0)
            expect_sum(what, out, n);
        for (size_t i = 0; k > 0 && i < (k == 1 ? each * (size_t)nranks : n); i++) {
            int from = k == 1 ? (int)(i / each) : nranks - 1;
            float want = (float)(from + 1 + (int)((k == 1 ? i % each : i) % 5));
            if (out[i] != want) {
                CHECK(0, "%s: element %zu is %g, expected %g", what, i, out[i], want);
                break;
            }
        }
    }
}

/*
 * Across nodes (run with the hierarchical plans forced: TUTTI_ALGO), where the stages inside
 * each node take the symmetric path and each node decides alone: every rank's buffers in
 * windows; the first node's alone; all but the last rank's. Each node's way of running its
 * stages sends the same messages between nodes, so every result is right. Under
 * TUTTI_CHECK_COLL every rank fails instead, naming the first rank whose buffer is in no
 * window, and the communicator stays usable. Then a refusing rank (NULL recvbuf) fails every
 * rank, the others naming it.
 */
static void nodes(void)
{
    const size_t n = 70002 * 4; /* a multiple of the ranks tested */
    int checking = getenv("TUTTI_CHECK_COLL") && strcmp(getenv("TUTTI_CHECK_COLL"), "1") == 0;
    const char *host = getenv("TUTTI_HOSTID");
    int first_node = host && strcmp(host, "node0") == 0, per_node = 0, node0 = 0;
    void *win;
    float *s = sym_alloc(2 * n * (size_t)nranks * 4, &win);
    float *plain = malloc(2 * n * (size_t)nranks * 4);
    char who[32];

    /* The first node's ranks: how many (every rank learns it from the others) */
    CHECK(tutti_all_reduce(&first_node, &node0, 1, TUTTI_INT32, TUTTI_SUM, comm, NULL) ==
              TUTTI_SUCCESS,
          "counting the first node's ranks: %s", tutti_comm_last_error(comm));
    per_node = node0;
    CHECK(per_node > 0 && per_node < nranks, "the first node has %d of %d ranks (TUTTI_HOSTID)",
          per_node, nranks);
    nodes_calls(s, n, "every rank's buffers in windows", -1, checking);
    nodes_calls(first_node ? s : plain, n, "the first node's buffers in windows", per_node,
                checking);
    nodes_calls(rank == nranks - 1 ? plain : s, n, "all but the last rank's in windows", nranks - 1,
                checking);
    nodes_calls(s, n, "every rank's buffers in windows again", -1, checking);
    fill(s, n, rank);
    tutti_result_t rc = tutti_all_reduce(s, rank == nranks - 1 ? NULL : s + n, n, TUTTI_FLOAT32,
                                         TUTTI_SUM, comm, NULL);
    snprintf(who, sizeof(who), "rank %d", nranks - 1);
    CHECK(rc == TUTTI_ERR_INVALID_ARG, "all_reduce, rank %d refusing: returned %s", nranks - 1,
          tutti_strerror(rc));
    CHECK(rank == nranks - 1 || strstr(tutti_comm_last_error(comm), who) != NULL,
          "all_reduce, rank %d refusing: the error is: %s", nranks - 1,
          tutti_comm_last_error(comm));
    if (tutti_comm_window_deregister(comm, win) != TUTTI_SUCCESS ||
        tutti_mem_free(comm, s) != TUTTI_SUCCESS)
        CHECK(0, "cleaning up: %s", tutti_comm_last_error(comm));
    free(plain);
}

static tutti_result_t sleeper(void *arg)
{
    (void)arg;
    usleep(300000);
    return TUTTI_SUCCESS;
}

static void expect_refused(const char *what, tutti_result_t rc, const char *word)
{
    CHECK(rc == TUTTI_ERR_INVALID_ARG, "%s: returned %s", what, tutti_strerror(rc));
    CHECK(strstr(tutti_comm_last_error(comm), word) != NULL, "%s: the error does not say '%s': %s",
          what, word, tutti_comm_last_error(comm));
}

static void misuse(void)
{
    void *win = NULL, *p = NULL, *q, *mine = malloc(4096);
    tutti_stream_t st;
    char who[32];
    tutti_result_t rc;

    expect_refused("tutti_mem_alloc of 0 bytes", tutti_mem_alloc(comm, 0, &p), "0");
    /* The last rank registers malloc'd memory: every rank fails, naming it. */
    q = sym_alloc(8192, NULL);
    rc = tutti_comm_window_register(comm, rank == nranks - 1 ? mine : q, 4096, &win);
    snprintf(who, sizeof(who), "rank %d", nranks - 1);
    expect_refused("a window over malloc'd memory on one rank", rc, who);
    CHECK(win == NULL, "the refused registration gave a window");
    /* A window covers q: not freed. */
    if (tutti_comm_window_register(comm, q, 8192, &win) != TUTTI_SUCCESS)
        CHECK(0, "registering: %s", tutti_comm_last_error(comm));
    expect_refused("freeing memory a window covers", tutti_mem_free(comm, q), "window");
    CHECK(tutti_comm_window_deregister(comm, win) == TUTTI_SUCCESS, "deregister: %s",
          tutti_comm_last_error(comm));
    expect_refused("deregistering twice", tutti_comm_window_deregister(comm, win), "not a window");
    /* Work queued on a stream: not freed until it has run. */
    if (tutti_stream_create(&st) != TUTTI_SUCCESS) {
        CHECK(0, "tutti_stream_create: %s", tutti_last_error());
        return;
    }
    tutti_stream_launch(st, sleeper, NULL);
    tutti_all_reduce(q, (char *)q + 4096, 16, TUTTI_FLOAT32, TUTTI_SUM, comm, st);
    expect_refused("freeing while work is queued", tutti_mem_free(comm, q), "queued");
    CHECK(tutti_stream_sync(st) == TUTTI_SUCCESS, "stream: %s", tutti_comm_last_error(comm));
    tutti_stream_destroy(st);
    CHECK(tutti_mem_free(comm, q) == TUTTI_SUCCESS, "free: %s", tutti_comm_last_error(comm));
    expect_refused("freeing twice", tutti_mem_free(comm, q), "not memory of tutti_mem_alloc");
    expect_refused("freeing malloc'd memory", tutti_mem_free(comm, mine),
                   "not memory of tutti_mem_alloc");
    free(mine);
}

/* The last rank calls with another count (or another collective): every rank must fail
 * naming the ranks' calls, and no buffer may change. */
static void mismatch(const char *how)
{
    size_t n = 5000, mine = n;
    void *win;
    float *s = sym_alloc(4 * n * 4 * (size_t)nranks, &win), *out = s + 2 * n * (size_t)nranks;
    tutti_result_t rc;
    int last = rank == nranks - 1;

    if (last && strcmp(how, "count") == 0)
        mine = 2 * n;
    fill(s, 2 * n * (size_t)nranks, rank);
    memset(out, 0x5a, 2 * n * (size_t)nranks * 4);
    if (last && strcmp(how, "coll") == 0)
        rc = tutti_all_gather(s, out, mine, TUTTI_FLOAT32, comm, NULL);
    else
        rc = tutti_all_reduce(s, out, mine, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    CHECK(rc == TUTTI_ERR_INVALID_ARG, "mismatched %s: returned %s", how, tutti_strerror(rc));
    CHECK(strstr(tutti_comm_last_error(comm), "not in the same call") != NULL,
          "mismatched %s: the error is: %s", how, tutti_comm_last_error(comm));
    for (size_t i = 0; i < 2 * n * (size_t)nranks * 4; i++)
        if (((unsigned char *)out)[i] != 0x5a) {
            CHECK(0, "mismatched %s: byte %zu of the output was written", how, i);
            break;
        }
    exit(failures ? 1 : 0); /* (the communicator is unusable now) */
}

static void finish(const char *mode)
{
    tutti_comm_destroy(comm);
    printf("sym_check %s: rank %d of %d: %s (%d failure(s))\n", mode, rank, nranks,
           failures ? "FAILED" : "all checks passed", failures);
    exit(failures ? 1 : 0);
}

static void exit_early(void)
{
    void (*arm)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "late_alive_arm");
    size_t n = 3;
    void *win;
    float *s = sym_alloc(2 * n * 4, &win);
    char what[96];

    if (!arm) {
        printf("FAIL rank %d: sym_check exit needs the late_alive shim in LD_PRELOAD\n", rank);
        exit(1);
    }
    snprintf(what, sizeof(what), "the last all_reduce of %zu, the others exiting after it", n);
    fill(s, n, rank);
    if (rank == 0)
        arm();
    else
        usleep(100 * 1000); /* rank 0 waits for the others first */
    CHECK(tutti_all_reduce(s, s + n, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) == TUTTI_SUCCESS,
          "%s: %s", what, tutti_comm_last_error(comm));
    expect_sum(what, s + n, n);
    finish("exit"); /* no final barrier: the others may be gone */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "fallback";

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (strcmp(mode, "fallback") == 0)
        fallback();
    else if (strcmp(mode, "misuse") == 0)
        misuse();
    else if (strcmp(mode, "mismatch") == 0)
        mismatch(argc > 2 ? argv[2] : "count");
    else if (strcmp(mode, "nodes") == 0)
        nodes();
    else if (strcmp(mode, "exit") == 0)
        exit_early();
    else {
        printf("sym_check: unknown mode %s (fallback, misuse, mismatch, nodes, exit)\n", mode);
        return 2;
    }
    CHECK(tutti_barrier(comm, NULL) == TUTTI_SUCCESS, "final barrier: %s",
          tutti_comm_last_error(comm));
    finish(mode);
}
