/*
 * fault_rank -- a rank for the failure tests (started directly, not under tutti-run, which
 * would stop the survivors itself).
 *
 *   fault_rank DIR loop     all-reduce 1M floats until a call fails (another rank is killed,
 *                           or a link cut, by the test); report the error and how long after
 *                           the last success it came, then destroy the communicator
 *   fault_rank DIR abort    rank 0 blocks in an all-reduce that cannot complete (rank 1 holds
 *                           back) and another thread aborts it after 1 s; rank 1 then joins
 *                           the all-reduce and must fail at once because rank 0 gave up. The
 *                           aborting thread checks tutti_comm_get_error before (healthy) and
 *                           after (aborted) the abort, rank 1 before its call (healthy)
 * After the failing call (loop, abort) tutti_comm_get_error must give its code and message.
 *   fault_rank DIR mismatch with TUTTI_CHECK_COLL=1: rank 2 passes another count, rank 1
 *                           (of 4+) another collective; every rank must get
 *                           TUTTI_ERR_INVALID_ARG naming them, then matching calls work
 *   fault_rank DIR p2pmismatch  with TUTTI_CHECK_COLL=1: ranks 0 and 1 disagree on a
 *                           message's size, then on its direction: both fail naming it, then
 *                           a ring exchange works
 * Each rank writes DIR/pid.RANK when ready and prints one line "RESULT rank R code C after
 * T s: message". Exit 0 if the rank saw the error it should, 1 if not.
 */
#include "tutti.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tutti_comm_t comm;
static double abort_at;

/* comm's error state as tutti_comm_get_error reports it must be `want` (with a message
 * containing `word`, "" for none); prints what it saw, returns 1 if right. */
static int error_is(const char *when, tutti_result_t want, const char *word)
{
    tutti_result_t e = TUTTI_ERR_INTERNAL;
    char msg[4096], cut[16];

    /* Larger than any message tutti keeps (a peer's failure quoted inside this rank's own
     * runs past 512 bytes); a small buffer gets the message's start, cut with its NUL. */
    if (tutti_comm_get_error(comm, &e, msg, sizeof(msg)) != TUTTI_SUCCESS ||
        tutti_comm_get_error(comm, &e, cut, sizeof(cut)) != TUTTI_SUCCESS) {
        printf("get_error %s: failed: %s\n", when, tutti_last_error());
        return 0;
    }
    printf("get_error %s: %s: '%s'\n", when, tutti_strerror(e), msg);
    if (strlen(cut) != (strlen(msg) < sizeof(cut) ? strlen(msg) : sizeof(cut) - 1) ||
        strncmp(cut, msg, strlen(cut)) != 0) {
        printf("get_error %s: into 16 bytes gave '%s', not the message's start\n", when, cut);
        return 0;
    }
    return e == want && (word[0] ? strstr(msg, word) != NULL : msg[0] == '\0');
}

/* The aborting thread is also a watchdog: it sees comm healthy while the main thread is
 * blocked in its call, and aborted at once after tutti_comm_abort. */
static int watchdog_ok;

static void *aborter(void *arg)
{
    (void)arg;
    sleep(1);
    watchdog_ok = error_is("while blocked", TUTTI_SUCCESS, "");
    abort_at = now();
    tutti_comm_abort(comm);
    watchdog_ok &= error_is("after the abort", TUTTI_ERR_ABORTED, "tutti_comm_abort");
    return NULL;
}

/* The first rank's RESULT line and whether it is the wanted error naming `want`. */
static int expect_check(int rank, const char *what, tutti_result_t rc, const char *want)
{
    const char *msg = tutti_comm_last_error(comm);
    printf("RESULT rank %d code %s after 0 s: %s: %s\n", rank, tutti_strerror(rc), what, msg);
    return rc == TUTTI_ERR_INVALID_ARG && strstr(msg, "TUTTI_CHECK_COLL") && strstr(msg, want);
}

/* p2pmismatch (TUTTI_CHECK_COLL=1): ranks 0 and 1 disagree on a message's size, then on a
 * message's direction; both must fail naming it, and a matching exchange must then work. */
static int p2p_mismatch(int rank, int size)
{
    float v[101], w[101];
    int ok = 1, next = (rank + 1) % size, prev = (rank + size - 1) % size;
    tutti_result_t rc;

    for (int i = 0; i < 101; i++)
        v[i] = (float)rank;
    if (rank == 0) {
        rc = tutti_send(v, 100, TUTTI_FLOAT32, 1, comm, NULL);
        ok &= expect_check(rank, "size", rc,
                           "send of 400 bytes (not the device path) with rank "
                           "1 meets that rank's receive of 404 bytes");
        tutti_group_start();
        tutti_send(v, 10, TUTTI_FLOAT32, 1, comm, NULL);
        tutti_send(w, 10, TUTTI_FLOAT32, 1, comm, NULL);
        rc = tutti_group_end();
        ok &= expect_check(rank, "direction", rc, "meets that rank's send");
    } else if (rank == 1) {
        rc = tutti_recv(w, 101, TUTTI_FLOAT32, 0, comm, NULL);
        ok &= expect_check(rank, "size", rc,
                           "receive of 404 bytes (not the device path) with "
                           "rank 0 meets that rank's send of 400 bytes");
        tutti_group_start();
        tutti_recv(w, 10, TUTTI_FLOAT32, 0, comm, NULL);
        tutti_send(v, 10, TUTTI_FLOAT32, 0, comm, NULL);
        rc = tutti_group_end();
        ok &= expect_check(rank, "direction", rc, "meets that rank's send");
    }
    /* Nothing was sent: a ring exchange is in step and right. */
    tutti_group_start();
    tutti_send(v, 101, TUTTI_FLOAT32, next, comm, NULL);
    tutti_recv(w, 101, TUTTI_FLOAT32, prev, comm, NULL);
    rc = tutti_group_end();
    printf("then: %s, w[0] = %g\n", tutti_strerror(rc), w[0]);
    ok &= rc == TUTTI_SUCCESS && w[0] == (float)prev && w[100] == (float)prev;
    tutti_comm_destroy(comm);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    size_t n = 1 << 20;
    float *x = calloc(n, sizeof(float)), *y = calloc(n, sizeof(float));
    int rank, size;
    char path[512];
    FILE *f;
    double last = 0;
    tutti_result_t rc;

    if (argc < 3 || tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "fault_rank: init: %s\n", tutti_last_error());
        return 2;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &size);
    tutti_barrier(comm, NULL);
    snprintf(path, sizeof(path), "%s/pid.%d", argv[1], rank);
    f = fopen(path, "w");
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);

    if (strcmp(argv[2], "mismatch") == 0) {
        float v[101];
        for (int i = 0; i < 101; i++)
            v[i] = (float)rank;
        if (rank == 1 && size > 3)
            rc = tutti_broadcast(v, v, 100, TUTTI_FLOAT32, 0, comm, NULL);
        else
            rc =
                tutti_all_reduce(v, v, rank == 2 ? 101 : 100, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        printf("RESULT rank %d code %s after 0 s: %s\n", rank, tutti_strerror(rc),
               tutti_comm_last_error(comm));
        if (rc != TUTTI_ERR_INVALID_ARG ||
            !strstr(tutti_comm_last_error(comm), "rank 2: all_reduce") ||
            (size > 3 && !strstr(tutti_comm_last_error(comm), "rank 1: broadcast")))
            return 1;
        /* The communicator is still usable and in step. */
        rc = tutti_all_reduce(v, v, 100, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        printf("then: %s, v[0] = %g\n", tutti_strerror(rc), v[0]);
        tutti_comm_destroy(comm);
        free(x);
        free(y);
        return rc == TUTTI_SUCCESS && v[0] == (float)(size * (size - 1) / 2) ? 0 : 1;
    }
    if (strcmp(argv[2], "p2pmismatch") == 0) {
        free(x);
        free(y);
        return p2p_mismatch(rank, size);
    }
    if (strcmp(argv[2], "abort") == 0) {
        pthread_t t;
        if (rank == 0) {
            pthread_create(&t, NULL, aborter, NULL);
            rc = tutti_all_reduce(x, y, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
            last = abort_at;
            pthread_join(t, NULL);
        } else {
            sleep(3); /* rank 0 is aborted meanwhile */
            /* Nothing of ours has run into it yet. */
            watchdog_ok = error_is("before the call", TUTTI_SUCCESS, "");
            last = now();
            rc = tutti_all_reduce(x, y, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
        }
    } else {
        for (;;) {
            rc = tutti_all_reduce(x, y, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
            if (rc != TUTTI_SUCCESS)
                break;
            last = now();
        }
    }
    printf("RESULT rank %d code %s after %.2f s: %s\n", rank, tutti_strerror(rc), now() - last,
           tutti_comm_last_error(comm));
    /* The error state holds the failed call's error and message. */
    int state_ok = error_is("after the failure", rc, tutti_comm_last_error(comm));
    fflush(stdout);
    /* A later call fails at once; destroy releases everything. */
    if (tutti_barrier(comm, NULL) == TUTTI_SUCCESS) {
        printf("a call after the error succeeded\n");
        return 1;
    }
    tutti_comm_destroy(comm);
    free(x);
    free(y);
    if (!state_ok)
        return 1;
    if (strcmp(argv[2], "abort") == 0)
        return rc == (rank == 0 ? TUTTI_ERR_ABORTED : TUTTI_ERR_REMOTE) && watchdog_ok ? 0 : 1;
    return rc == TUTTI_ERR_REMOTE || rc == TUTTI_ERR_TIMEOUT ? 0 : 1;
}
