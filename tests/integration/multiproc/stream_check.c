/*
 * stream_check -- run under tutti-run: host streams and events (tutti.h, "Streams and events").
 *
 *   stream_check order    many all-reduces and point-to-point groups queued on one stream, host
 *                         functions between them that see exactly the results queued before
 *                         them; results checked after tutti_stream_sync
 *   stream_check async    a queued collective returns before its peers have even called theirs
 *                         (proved without timing: they wait on a second communicator for this
 *                         rank to have observed TUTTI_IN_PROGRESS); events track it
 *   stream_check mixed    a NULL-stream call after queued work on the same communicator runs
 *                         after that work; two streams ordered by tutti_stream_wait_event
 *   stream_check fail     a host function fails on rank 0: its stream reports the message,
 *                         the collective queued after it is not run, and every other rank's
 *                         matching call fails promptly instead of hanging
 *   stream_check abort    tutti_comm_abort while a queued collective waits for a peer that will
 *                         not come: the stream reports TUTTI_ERR_ABORTED
 *
 * Expected values are computed from the ranks' integers; exit status 0 means every check on
 * this rank passed.
 */
#include "tutti.h"
#include "../../support/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static tutti_comm_t comm;

#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        tutti_result_t rc_ = (call);                                                               \
        if (rc_ != TUTTI_SUCCESS) {                                                                \
            fail("%s: %s: %s", #call, tutti_strerror(rc_), tutti_last_error());                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Sum over ranks r of (r + 1) * (i + k), the value of element i of the k-th all-reduce. */
static double expect_sum(size_t i, int k)
{
    return (double)nranks * (nranks + 1) / 2 * (double)(i + (size_t)k);
}

/* ---- order ---- */

#define NOPS 24
#define COUNT 100003

struct order_ctx {
    double *bufs[NOPS];
    int next;       /* host functions seen so far */
    int bad;        /* host functions that saw a wrong value */
    int ring[NOPS]; /* what each p2p exchange received */
};

static struct order_ctx octx;

/* Runs after all-reduce k: its result must be there. */
static tutti_result_t after_reduce(void *arg)
{
    int k = (int)(intptr_t)arg;
    const double *b = octx.bufs[k];

    if (octx.next != k)
        octx.bad++;
    octx.next++;
    for (size_t i = 0; i < COUNT; i += 997)
        if (b[i] != expect_sum(i, k))
            octx.bad++;
    return TUTTI_SUCCESS;
}

static void mode_order(void)
{
    tutti_stream_t s;
    int sendval[NOPS];

    CHECK_OK(tutti_stream_create(&s));
    for (int k = 0; k < NOPS; k++) {
        double *b = malloc(COUNT * sizeof(double));
        if (!b) {
            fail("out of memory");
            return;
        }
        for (size_t i = 0; i < COUNT; i++)
            b[i] = (double)(rank + 1) * (double)(i + (size_t)k);
        octx.bufs[k] = b;
        sendval[k] = 1000 * k + rank;
        /* In place, then a ring exchange, then the check of the all-reduce. */
        CHECK_OK(tutti_all_reduce(b, b, COUNT, TUTTI_FLOAT64, TUTTI_SUM, comm, s));
        CHECK_OK(tutti_group_start());
        CHECK_OK(tutti_send(&sendval[k], 1, TUTTI_INT32, (rank + 1) % nranks, comm, s));
        CHECK_OK(tutti_recv(&octx.ring[k], 1, TUTTI_INT32, (rank + nranks - 1) % nranks, comm, s));
        CHECK_OK(tutti_group_end());
        CHECK_OK(tutti_stream_launch(s, after_reduce, (void *)(intptr_t)k));
    }
    CHECK_OK(tutti_stream_sync(s));
    if (octx.next != NOPS || octx.bad)
        fail("order: %d host functions ran (want %d), %d saw wrong or missing results", octx.next,
             NOPS, octx.bad);
    for (int k = 0; k < NOPS; k++) {
        int want = 1000 * k + (rank + nranks - 1) % nranks;
        if (octx.ring[k] != want)
            fail("order: ring exchange %d received %d, want %d", k, octx.ring[k], want);
        for (size_t i = 0; i < COUNT; i++)
            if (octx.bufs[k][i] != expect_sum(i, k)) {
                fail("order: all-reduce %d element %zu is %g, want %g", k, i, octx.bufs[k][i],
                     expect_sum(i, k));
                break;
            }
        free(octx.bufs[k]);
    }
    if (tutti_stream_query(s) != TUTTI_SUCCESS)
        fail("order: query after sync is not TUTTI_SUCCESS");
    CHECK_OK(tutti_stream_destroy(s));
}

/* ---- async ---- */

/* A second communicator among the same ranks, its id broadcast over the first. */
static tutti_comm_t side_comm(void)
{
    tutti_id_t id;
    tutti_comm_t c = NULL;

    if (rank == 0 && tutti_get_id(&id) != TUTTI_SUCCESS)
        return NULL;
    if (tutti_broadcast(&id, &id, sizeof(id), TUTTI_UINT8, 0, comm, NULL) != TUTTI_SUCCESS)
        return NULL;
    if (tutti_comm_init(&c, nranks, &id, rank, NULL) != TUTTI_SUCCESS)
        return NULL;
    return c;
}

static void mode_async(void)
{
    tutti_comm_t side = side_comm();
    tutti_stream_t s;
    tutti_event_t before, after;
    float x[4096], y[4096];
    tutti_result_t q;

    if (!side) {
        fail("async: second communicator: %s", tutti_last_error());
        return;
    }
    for (int i = 0; i < 4096; i++)
        x[i] = (float)(rank + i);
    CHECK_OK(tutti_stream_create(&s));
    CHECK_OK(tutti_event_create(&before));
    CHECK_OK(tutti_event_create(&after));
    if (tutti_event_query(after) != TUTTI_SUCCESS)
        fail("async: an event never recorded is not complete");
    CHECK_OK(tutti_event_record(before, s));
    if (rank == 0) {
        CHECK_OK(tutti_all_reduce(x, y, 4096, TUTTI_FLOAT32, TUTTI_SUM, comm, s));
        CHECK_OK(tutti_event_record(after, s));
        /* The other ranks have not called their all-reduce yet: they wait on `side`. */
        q = nranks > 1 ? tutti_stream_query(s) : TUTTI_IN_PROGRESS;
        if (q != TUTTI_IN_PROGRESS)
            fail("async: stream query gave %s while peers had not joined", tutti_strerror(q));
        q = nranks > 1 ? tutti_event_query(after) : TUTTI_IN_PROGRESS;
        if (q != TUTTI_IN_PROGRESS)
            fail("async: event query gave %s while peers had not joined", tutti_strerror(q));
        if (tutti_event_query(before) != TUTTI_SUCCESS)
            fail("async: event recorded before the work is not complete");
        CHECK_OK(tutti_barrier(side, NULL));
    } else {
        CHECK_OK(tutti_barrier(side, NULL));
        CHECK_OK(tutti_all_reduce(x, y, 4096, TUTTI_FLOAT32, TUTTI_SUM, comm, s));
        CHECK_OK(tutti_event_record(after, s));
    }
    CHECK_OK(tutti_event_sync(after));
    for (int i = 0; i < 4096; i++) {
        float want = (float)(nranks * (nranks - 1) / 2 + nranks * i);
        if (y[i] != want) {
            fail("async: element %d is %g, want %g", i, y[i], want);
            break;
        }
    }
    if (tutti_event_query(after) != TUTTI_SUCCESS)
        fail("async: event not complete after its sync");
    CHECK_OK(tutti_event_destroy(before));
    CHECK_OK(tutti_event_destroy(after));
    CHECK_OK(tutti_stream_destroy(s));
    CHECK_OK(tutti_comm_destroy(side));
}

/* ---- mixed ---- */

static volatile int flag_a;

static tutti_result_t slow_set(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    __atomic_store_n(&flag_a, 1, __ATOMIC_RELEASE);
    return TUTTI_SUCCESS;
}

static tutti_result_t see_set(void *arg)
{
    if (!__atomic_load_n(&flag_a, __ATOMIC_ACQUIRE))
        (*(int *)arg)++;
    return TUTTI_SUCCESS;
}

static void mode_mixed(void)
{
    tutti_stream_t a, b;
    tutti_event_t ev;
    static int64_t big[1 << 20], after[1 << 20];
    int64_t one = rank + 1, sum = 0;
    int unordered = 0;

    CHECK_OK(tutti_stream_create(&a));
    CHECK_OK(tutti_stream_create(&b));
    for (size_t i = 0; i < (1 << 20); i++)
        big[i] = (int64_t)(rank + 1) * (int64_t)i;
    /* Queued, then a NULL-stream call on the same communicator: it must run second, so the
     * buffer it reads (the first call's result) is already reduced. */
    CHECK_OK(tutti_all_reduce(big, big, 1 << 20, TUTTI_INT64, TUTTI_SUM, comm, a));
    CHECK_OK(tutti_all_reduce(big, after, 1 << 20, TUTTI_INT64, TUTTI_MAX, comm, NULL));
    for (size_t i = 0; i < (1 << 20); i++) {
        int64_t want = (int64_t)nranks * (nranks + 1) / 2 * (int64_t)i;
        if (big[i] != want || after[i] != want) {
            fail("mixed: element %zu: %lld then %lld, want %lld", i, (long long)big[i],
                 (long long)after[i], (long long)want);
            break;
        }
    }
    /* Stream b waits for stream a's slow host function. */
    CHECK_OK(tutti_event_create(&ev));
    CHECK_OK(tutti_stream_launch(a, slow_set, NULL));
    CHECK_OK(tutti_event_record(ev, a));
    CHECK_OK(tutti_stream_wait_event(b, ev));
    CHECK_OK(tutti_stream_launch(b, see_set, &unordered));
    CHECK_OK(tutti_all_reduce(&one, &sum, 1, TUTTI_INT64, TUTTI_SUM, comm, b));
    CHECK_OK(tutti_stream_sync(b));
    if (unordered)
        fail("mixed: stream b ran before the event it waits on");
    if (sum != (int64_t)nranks * (nranks + 1) / 2)
        fail("mixed: sum %lld", (long long)sum);
    CHECK_OK(tutti_event_destroy(ev));
    CHECK_OK(tutti_stream_destroy(a));
    CHECK_OK(tutti_stream_destroy(b));
}

/* ---- fail ---- */

static tutti_result_t broken(void *arg)
{
    (void)arg;
    return TUTTI_ERR_INTERNAL;
}

static void mode_fail(void)
{
    tutti_stream_t s;
    float x[256] = {0}, y[256];
    tutti_result_t rc;

    /* Connect first, so the failure can be told to the peers over the connections. */
    CHECK_OK(tutti_all_reduce(x, y, 256, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL));
    CHECK_OK(tutti_stream_create(&s));
    if (rank == 0)
        CHECK_OK(tutti_stream_launch(s, broken, NULL));
    CHECK_OK(tutti_all_reduce(x, y, 256, TUTTI_FLOAT32, TUTTI_SUM, comm, s));
    rc = tutti_stream_sync(s);
    if (rank == 0) {
        if (rc != TUTTI_ERR_INTERNAL || !strstr(tutti_stream_last_error(s), "host function"))
            fail("fail: rank 0 stream gave %s \"%s\", want internal error from the host function",
                 tutti_strerror(rc), tutti_stream_last_error(s));
    } else if (nranks > 1 && rc == TUTTI_SUCCESS) {
        fail("fail: rank %d completed an all-reduce that rank 0 never ran", rank);
    }
    printf("fail: rank %d: %s: %s\n", rank, tutti_strerror(rc), tutti_stream_last_error(s));
    rc = tutti_all_reduce(x, y, 256, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    if (nranks > 1 && rc == TUTTI_SUCCESS)
        fail("fail: the communicator still works after the failure");
    tutti_stream_destroy(s);
}

/* ---- abort ---- */

static int ran_after_failure;

static tutti_result_t mark_ran(void *arg)
{
    (void)arg;
    ran_after_failure = 1;
    return TUTTI_SUCCESS;
}

static void mode_abort(void)
{
    tutti_stream_t s;
    float x[16] = {0}, y[16];
    tutti_comm_t side = side_comm();
    tutti_result_t rc;

    if (!side) {
        fail("abort: second communicator: %s", tutti_last_error());
        return;
    }
    CHECK_OK(tutti_stream_create(&s));
    if (rank == 0 && nranks > 1) {
        /* The peers never call this one. */
        CHECK_OK(tutti_all_reduce(x, y, 16, TUTTI_FLOAT32, TUTTI_SUM, comm, s));
        CHECK_OK(tutti_stream_launch(s, mark_ran, NULL));
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        CHECK_OK(tutti_comm_abort(comm));
        rc = tutti_stream_sync(s);
        if (rc != TUTTI_ERR_ABORTED)
            fail("abort: stream gave %s (%s), want aborted", tutti_strerror(rc),
                 tutti_stream_last_error(s));
        if (ran_after_failure)
            fail("abort: a host function queued after the failed collective ran");
    }
    CHECK_OK(tutti_barrier(side, NULL));
    tutti_stream_destroy(s);
    CHECK_OK(tutti_comm_destroy(side));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "order";

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (strcmp(mode, "order") == 0)
        mode_order();
    else if (strcmp(mode, "async") == 0)
        mode_async();
    else if (strcmp(mode, "mixed") == 0)
        mode_mixed();
    else if (strcmp(mode, "fail") == 0)
        mode_fail();
    else if (strcmp(mode, "abort") == 0)
        mode_abort();
    else {
        printf("FAIL unknown mode %s\n", mode);
        return 2;
    }
    tutti_comm_destroy(comm);
    printf("%s: rank %d of %d: %s (%d failure(s))\n", mode, rank, nranks,
           failures ? "FAILED" : "all checks passed", failures);
    return failures ? 1 : 0;
}
