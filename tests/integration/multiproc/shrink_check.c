/*
 * shrink_check -- a rank for the shrink tests (started directly by test_shrink.c, one process
 * per rank, RANK/WORLD_SIZE/MASTER_ADDR in the environment).
 *
 *   shrink_check DIR SEED
 *   shrink_check DIR args     (one rank) the calls' refusals, and a shrink with nobody gone
 *   shrink_check DIR late     (2 ranks, TUTTI_SHM_SINGLE_COPY=1, the late_pull shim in
 *                             LD_PRELOAD) rank 1 stalls 3 s between finding rank 0's broadcast
 *                             and copying it out of rank 0's memory; rank 0 gives up
 *                             (TUTTI_TIMEOUT), writes its buffer again and shrinks without
 *                             rank 1. Rank 1's broadcast must fail (it may not deliver what
 *                             rank 0 wrote after it gave up), and its shrink finds it fenced.
 *
 * Writes DIR/pid.RANK once its communicator is made, then runs a sequence of collectives drawn
 * from SEED (all-reduce of int32 and float, all-gather, broadcast, reduce-scatter; 1 to 300,000
 * elements; three all-reduces queued on a host stream, then its sync), each checked element by
 * element against the values computed here from the ranks' formula. After each call every rank
 * all-reduces whether DIR/stop exists, so all stop after the same call. A call that fails is
 * followed by tutti_comm_shrink (DIR/shrinking.RANK is written first) and the survivors go on over
 * the new communicator from the furthest call any of them reached (an all-reduce of the call
 * numbers). A failure during that goes round again.
 *
 * Prints, for each shrink, "SHRUNK n -> m failed [ranks] in S s; resumed at T" (T: the
 * monotonic clock when the first call on the new communicator completed), and at the end
 * "MEMBERS a,b,c" (the original ranks of the last communicator, all-gathered) and "CALLS k".
 * Exit 0; 1 on a wrong value or an error that is not a failure; 3 if fenced ("FENCED: why").
 */
#include "tutti.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int orig_rank;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's element i in call k: small integers, exact in float sums. */
static int32_t val(int r, size_t i, uint64_t k)
{
    return (int32_t)((r + 1) * (int)(i % 97 + 1) + (int)(k % 1000));
}

/* Make the empty file DIR/NAME.RANK (a sign for test_shrink.c or the other rank). */
static void mark(const char *name, int rank)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.%d", dir, name, rank);
    if ((f = fopen(path, "w")) != NULL)
        fclose(f);
}

static int fail(const char *what, tutti_result_t rc, const char *msg)
{
    printf("FAIL rank %d: %s: %s: %s\n", orig_rank, what, tutti_strerror(rc), msg);
    fflush(stdout);
    exit(1);
}

static tutti_stream_t stream; /* kind 5's; made again after it failed (a failed one stays so) */

static tutti_result_t queued(tutti_comm_t comm, int rank, int n, uint64_t k, size_t c, size_t *bad)
{
    static int32_t s[3][16384], d[3][16384];
    tutti_result_t rc = TUTTI_SUCCESS;

    if (!stream && tutti_stream_create(&stream) != TUTTI_SUCCESS)
        fail("tutti_stream_create", TUTTI_ERR_SYSTEM, tutti_last_error());
    for (int j = 0; j < 3 && rc == TUTTI_SUCCESS; j++) {
        for (size_t i = 0; i < c; i++)
            s[j][i] = val(rank, i, k + (uint64_t)j);
        rc = tutti_all_reduce(s[j], d[j], c, TUTTI_INT32, TUTTI_SUM, comm, stream);
    }
    if (rc == TUTTI_SUCCESS)
        rc = tutti_stream_sync(stream);
    if (rc != TUTTI_SUCCESS) {
        printf("queued work failed: %s\n", tutti_last_error());
        tutti_stream_destroy(stream);
        stream = NULL;
        return rc;
    }
    for (int j = 0; j < 3; j++)
        for (size_t i = 0; i < c; i++) {
            int64_t want = 0;
            for (int r = 0; r < n; r++)
                want += val(r, i, k + (uint64_t)j);
            *bad += d[j][i] != (int32_t)want;
        }
    return TUTTI_SUCCESS;
}

/* One checked call k on comm (n ranks, this is rank): TUTTI_SUCCESS, or the call's failure. A
 * wrong value exits. */
static tutti_result_t call(tutti_comm_t comm, int rank, int n, uint64_t k, uint64_t seed)
{
    static const size_t counts[] = {1, 7, 1000, 16384, 300000};
    uint64_t h = mix(seed ^ k * 0x100000001b3ull);
    size_t c = counts[h % 5], total = c * (size_t)n, bad = 0;
    int kind = (int)(h >> 8) % 6, root = (int)(k % (uint64_t)n);
    int32_t *s = malloc(total * sizeof(int32_t)), *d = malloc(total * sizeof(int32_t));
    float *fs = (float *)s, *fd = (float *)d;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (!s || !d)
        fail("malloc", TUTTI_ERR_SYSTEM, "out of memory");
    switch (kind) {
    case 0: /* all-reduce, int32 sum */
        for (size_t i = 0; i < c; i++)
            s[i] = val(rank, i, k);
        rc = tutti_all_reduce(s, d, c, TUTTI_INT32, TUTTI_SUM, comm, NULL);
        for (size_t i = 0; rc == TUTTI_SUCCESS && i < c; i++) {
            int64_t want = 0;
            for (int r = 0; r < n; r++)
                want += val(r, i, k);
            bad += d[i] != (int32_t)want;
        }
        break;
    case 1: /* all-reduce, float sum */
        for (size_t i = 0; i < c; i++)
            fs[i] = (float)val(rank, i, k);
        rc = tutti_all_reduce(fs, fd, c, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        for (size_t i = 0; rc == TUTTI_SUCCESS && i < c; i++) {
            double want = 0;
            for (int r = 0; r < n; r++)
                want += val(r, i, k);
            bad += fd[i] != (float)want;
        }
        break;
    case 2: /* all-gather */
        for (size_t i = 0; i < c; i++)
            s[i] = val(rank, i, k);
        rc = tutti_all_gather(s, d, c, TUTTI_INT32, comm, NULL);
        for (size_t i = 0; rc == TUTTI_SUCCESS && i < total; i++)
            bad += d[i] != val((int)(i / c), i % c, k);
        break;
    case 3: /* broadcast */
        for (size_t i = 0; i < c; i++)
            d[i] = rank == root ? val(root, i, k) : -1;
        rc = tutti_broadcast(d, d, c, TUTTI_INT32, root, comm, NULL);
        for (size_t i = 0; rc == TUTTI_SUCCESS && i < c; i++)
            bad += d[i] != val(root, i, k);
        break;
    case 5: /* three all-reduces queued on a host stream, then its sync: a rank lost while
             * they are queued fails them (the sync says so), none is lost silently */
        c = c > 16384 ? 16384 : c;
        rc = queued(comm, rank, n, k, c, &bad);
        break;
    default: /* reduce-scatter, int32 sum */
        for (size_t i = 0; i < total; i++)
            s[i] = val(rank, i, k);
        rc = tutti_reduce_scatter(s, d, c, TUTTI_INT32, TUTTI_SUM, comm, NULL);
        for (size_t i = 0; rc == TUTTI_SUCCESS && i < c; i++) {
            int64_t want = 0;
            for (int r = 0; r < n; r++)
                want += val(r, (size_t)rank * c + i, k);
            bad += d[i] != (int32_t)want;
        }
        break;
    }
    free(s);
    free(d);
    if (bad) {
        printf("FAIL rank %d: call %llu (kind %d, %zu elements, %d ranks): %zu wrong\n", orig_rank,
               (unsigned long long)k, kind, c, n, bad);
        fflush(stdout);
        exit(1);
    }
    return rc;
}

static int is_failure(tutti_result_t rc)
{
    return rc == TUTTI_ERR_REMOTE || rc == TUTTI_ERR_TIMEOUT || rc == TUTTI_ERR_SYSTEM ||
           rc == TUTTI_ERR_ABORTED;
}

#define EXPECT(call, want, word)                                                                   \
    do {                                                                                           \
        tutti_result_t got_ = (call);                                                              \
        if (got_ != (want) || !strstr(tutti_last_error(), word)) {                                 \
            printf("FAIL: %s gave %s (%s), not %s naming '%s'\n", #call, tutti_strerror(got_),     \
                   tutti_last_error(), tutti_strerror(want), word);                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* shrink_check DIR args, one rank: the calls' refusals, and a shrink with nobody gone. */
static int args(void)
{
    tutti_comm_t comm, next = NULL;
    int ranks[4] = {-1, -1, -1, -1}, count = -1, n = 0;
    float x = 1;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS)
        fail("init", TUTTI_ERR_INTERNAL, tutti_last_error());
    EXPECT(tutti_comm_shrink(NULL, &next, NULL), TUTTI_ERR_INVALID_ARG, "comm is NULL");
    EXPECT(tutti_comm_shrink(comm, NULL, NULL), TUTTI_ERR_INVALID_ARG, "newcomm is NULL");
    EXPECT(tutti_comm_failed_ranks(comm, ranks, 4, NULL), TUTTI_ERR_INVALID_ARG, "count is NULL");
    EXPECT(tutti_comm_failed_ranks(comm, NULL, 4, &count), TUTTI_ERR_INVALID_ARG, "ranks is NULL");
    EXPECT(tutti_comm_failed_ranks(comm, ranks, -1, &count), TUTTI_ERR_INVALID_ARG, "negative");
    EXPECT(tutti_comm_failed_ranks(comm, ranks, 4, &count), TUTTI_SUCCESS, "");
    if (count != 0) {
        printf("FAIL: %d failed ranks before anything failed\n", count);
        return 1;
    }
    EXPECT(tutti_comm_shrink(comm, &next, NULL), TUTTI_SUCCESS, "");
    tutti_comm_size(next, &n);
    if (n != 1 || tutti_all_reduce(&x, &x, 1, TUTTI_FLOAT32, TUTTI_SUM, next, NULL) != 0 ||
        x != 1) {
        printf("FAIL: the shrunk communicator has %d ranks, or its all-reduce failed\n", n);
        return 1;
    }
    EXPECT(tutti_comm_shrink(comm, &next, NULL), TUTTI_ERR_INVALID_ARG, "shrunk already");
    EXPECT(tutti_comm_failed_ranks(comm, ranks, 0, &count), TUTTI_SUCCESS, "");
    if (count != 0 || strstr(tutti_strerror(TUTTI_ERR_FENCED), "fenced") == NULL) {
        printf("FAIL: %d failed ranks after a shrink with nobody gone\n", count);
        return 1;
    }
    tutti_comm_destroy(next);
    tutti_comm_destroy(comm);
    printf("ARGS OK\n");
    return 0;
}

/* shrink_check DIR late: see the header. Exit 0 (rank 0, shrunk alone), 3 (rank 1, fenced). */
static int late(void)
{
    enum { N = 1 << 18 }; /* 1 MiB: copied by address */
    void (*arm)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "late_pull_arm");
    static int32_t buf[N];
    tutti_comm_t comm, next;
    tutti_result_t rc;
    int rank, n;
    char path[512];

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS)
        fail("init", TUTTI_ERR_INTERNAL, tutti_last_error());
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &n);
    orig_rank = rank;
    if (n != 2 || !arm)
        fail("late", TUTTI_ERR_INVALID_ARG, "needs 2 ranks and the late_pull shim (LD_PRELOAD)");
    for (int round = 0; round < 2; round++) { /* the first connects; in the second rank 1 stalls */
        for (int i = 0; i < N; i++)
            buf[i] = rank == 0 ? val(0, (size_t)i, (uint64_t)round) : -1;
        if (round == 1 && rank == 1)
            arm(3000);
        rc = tutti_broadcast(buf, buf, N, TUTTI_INT32, 0, comm, NULL);
        if (rc != TUTTI_SUCCESS && round == 0)
            fail("the first broadcast", rc, tutti_comm_last_error(comm));
        if (rc != TUTTI_SUCCESS)
            break;
        for (int i = 0; rank == 1 && i < N; i++)
            if (buf[i] != val(0, (size_t)i, (uint64_t)round)) {
                printf("FAIL rank 1: broadcast %d: element %d is %d, not %d\n", round, i,
                       (int)buf[i], (int)val(0, (size_t)i, (uint64_t)round));
                return 1;
            }
    }
    if (rc == TUTTI_SUCCESS) {
        printf("FAIL rank %d: the broadcast succeeded, though rank %s\n", rank,
               rank == 0 ? "1 stalled 3 s past TUTTI_TIMEOUT" : "0 gave up on it");
        return 1;
    }
    printf("FAILED: %s\n", tutti_comm_last_error(comm));
    if (rank == 0) /* the buffer is the application's again: it writes the next values */
        memset(buf, 0x5a, sizeof(buf));
    rc = tutti_comm_shrink(comm, &next, NULL);
    if (rc == TUTTI_ERR_FENCED) {
        printf("FENCED: %s\n", tutti_comm_last_error(comm));
        mark("done", rank);
        return 3;
    }
    if (rc != TUTTI_SUCCESS)
        fail("tutti_comm_shrink", rc, tutti_comm_last_error(comm));
    tutti_comm_size(next, &n);
    printf("SHRUNK to %d\n", n);
    /* Keep the buffer (written again) until rank 1 is done with it, at most 20 s. */
    snprintf(path, sizeof(path), "%s/done.1", dir);
    for (int i = 0; i < 2000 && access(path, F_OK) != 0; i++)
        usleep(10000);
    tutti_comm_destroy(next);
    tutti_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    tutti_comm_t comm, next;
    uint64_t seed, k = 0;
    int rank, n, shrinks = 0, stop = 0;
    double resumed_from = -1;
    tutti_result_t rc;
    char path[512];
    FILE *f;

    if (argc != 3) {
        fprintf(stderr, "usage: shrink_check DIR SEED\n");
        return 2;
    }
    dir = argv[1];
    if (strcmp(argv[2], "args") == 0)
        return args();
    if (strcmp(argv[2], "late") == 0)
        return late();
    seed = strtoull(argv[2], NULL, 10);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((rc = tutti_comm_init_env(&comm)) != TUTTI_SUCCESS)
        fail("init", rc, tutti_last_error());
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &n);
    orig_rank = rank;
    snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
    if ((f = fopen(path, "w")) != NULL) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    while (!stop) {
        int32_t flag[2] = {0, 0};
        rc = call(comm, rank, n, k, seed);
        if (rc == TUTTI_SUCCESS) {
            snprintf(path, sizeof(path), "%s/stop", dir);
            flag[0] = access(path, F_OK) == 0;
            rc = tutti_all_reduce(flag, flag, 2, TUTTI_INT32, TUTTI_MAX, comm, NULL);
        }
        if (rc == TUTTI_SUCCESS) {
            stop = flag[0];
            k++;
            if (resumed_from >= 0) {
                printf("RESUMED at %.6f\n", now());
                resumed_from = -1;
            }
            continue;
        }
        if (!is_failure(rc))
            fail("a call", rc, tutti_comm_last_error(comm));
        /* A rank failed: shrink, and go on from the furthest call any survivor reached. */
        double t0 = now();
        int failed[64], nfailed = 0, m;
        uint64_t furthest;
        printf("FAILED call %llu: %s\n", (unsigned long long)k, tutti_comm_last_error(comm));
        mark("shrinking", orig_rank);
        rc = tutti_comm_shrink(comm, &next, NULL);
        if (rc == TUTTI_ERR_FENCED) {
            printf("FENCED: %s\n", tutti_comm_last_error(comm));
            return 3;
        }
        if (rc != TUTTI_SUCCESS)
            fail("tutti_comm_shrink", rc, tutti_comm_last_error(comm));
        if ((rc = tutti_comm_failed_ranks(comm, failed, 64, &nfailed)) != TUTTI_SUCCESS)
            fail("tutti_comm_failed_ranks", rc, tutti_comm_last_error(comm));
        tutti_comm_size(next, &m);
        printf("SHRUNK %d -> %d failed [", n, m);
        for (int i = 0; i < nfailed; i++)
            printf("%s%d", i ? "," : "", failed[i]);
        printf("] in %.3f s\n", now() - t0);
        if (m != n - nfailed) {
            printf("FAIL rank %d: %d ranks left of %d, %d failed\n", orig_rank, m, n, nfailed);
            return 1;
        }
        tutti_comm_destroy(comm);
        comm = next;
        tutti_comm_rank(comm, &rank);
        n = m;
        shrinks++;
        furthest = k;
        rc = tutti_all_reduce(&furthest, &furthest, 1, TUTTI_UINT64, TUTTI_MAX, comm, NULL);
        if (rc == TUTTI_SUCCESS)
            k = furthest;
        else if (!is_failure(rc))
            fail("the all-reduce after a shrink", rc, tutti_comm_last_error(comm));
        resumed_from = t0;
        /* (a failure here is shrunk at the next call, which fails at once) */
    }
    int32_t *members = malloc((size_t)n * sizeof(int32_t)), me = orig_rank;
    rc = tutti_all_gather(&me, members, 1, TUTTI_INT32, comm, NULL);
    if (rc != TUTTI_SUCCESS)
        fail("the members' all-gather", rc, tutti_comm_last_error(comm));
    printf("MEMBERS ");
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", members[i]);
    printf("\nCALLS %llu SHRINKS %d\n", (unsigned long long)k, shrinks);
    free(members);
    tutti_comm_destroy(comm);
    return 0;
}
