/*
 * test_api.c -- the public API's argument checks, one- and two-rank communicators in one
 * process (threads as ranks), point-to-point groups, and results of the one-rank paths.
 */
#include "tutti.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tutti_comm_t solo(void)
{
    tutti_id_t id;
    tutti_comm_t c = NULL;

    cr_assert_eq(tutti_get_id(&id), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(tutti_comm_init(&c, 1, &id, 0, NULL), TUTTI_SUCCESS, "%s", tutti_last_error());
    return c;
}

#define EXPECT_ERR(call, code, word)                                                               \
    do {                                                                                           \
        tutti_result_t r_ = (call);                                                                \
        cr_assert_eq(r_, code, "%s returned %s", #call, tutti_strerror(r_));                       \
        cr_assert(strstr(tutti_last_error(), word) != NULL, "%s: message '%s' lacks '%s'", #call,  \
                  tutti_last_error(), word);                                                       \
    } while (0)

Test(api, init_checks_its_arguments)
{
    tutti_id_t id;
    tutti_comm_t c = (tutti_comm_t)0x1;
    tutti_config_t cfg = TUTTI_CONFIG_INIT;

    cr_assert_eq(tutti_get_id(&id), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_comm_init(NULL, 1, &id, 0, NULL), TUTTI_ERR_INVALID_ARG, "comm");
    EXPECT_ERR(tutti_comm_init(&c, 1, NULL, 0, NULL), TUTTI_ERR_INVALID_ARG, "id");
    EXPECT_ERR(tutti_comm_init(&c, 0, &id, 0, NULL), TUTTI_ERR_INVALID_ARG, "nranks");
    EXPECT_ERR(tutti_comm_init(&c, 2, &id, 2, NULL), TUTTI_ERR_INVALID_ARG, "rank 2");
    EXPECT_ERR(tutti_comm_init(&c, 2, &id, -1, NULL), TUTTI_ERR_INVALID_ARG, "rank -1");
    cfg.size = 3;
    EXPECT_ERR(tutti_comm_init(&c, 1, &id, 0, &cfg), TUTTI_ERR_INVALID_ARG, "config->size");
    memset(&id, 0, sizeof(id));
    EXPECT_ERR(tutti_comm_init(&c, 1, &id, 0, NULL), TUTTI_ERR_INVALID_ARG, "magic");
    cr_assert_eq(c, (tutti_comm_t)0x1, "output untouched on failure");
}

Test(api, queries)
{
    tutti_comm_t c = solo();
    int v = -1;

    cr_assert_eq(tutti_comm_rank(c, &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 0);
    cr_assert_eq(tutti_comm_size(c, &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 1);
    cr_assert_eq(tutti_comm_local_rank(c, &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 0);
    cr_assert_eq(tutti_comm_local_size(c, &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 1);
    EXPECT_ERR(tutti_comm_rank(c, NULL), TUTTI_ERR_INVALID_ARG, "NULL");
    EXPECT_ERR(tutti_comm_rank(NULL, &v), TUTTI_ERR_INVALID_ARG, "comm is NULL");
    cr_assert_eq(tutti_comm_destroy(c), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_comm_rank(c, &v), TUTTI_ERR_INVALID_ARG, "not a live communicator");
    EXPECT_ERR(tutti_comm_destroy(c), TUTTI_ERR_INVALID_ARG, "not a live communicator");
    cr_assert_eq(tutti_comm_destroy(NULL), TUTTI_SUCCESS);
}

/* tutti_comm_get_error: healthy (an argument error does not count), aborted at once, then the
 * error state the next call enters, whose first message stays; its own argument errors go to
 * the calling thread only. */
Test(api, error_state)
{
    tutti_comm_t c = solo();
    tutti_result_t e = TUTTI_ERR_INTERNAL;
    char msg[512] = "x", first[512], cut[8];
    float v = 1;

    EXPECT_ERR(tutti_comm_get_error(NULL, &e, msg, sizeof(msg)), TUTTI_ERR_INVALID_ARG,
               "comm is NULL");
    EXPECT_ERR(tutti_comm_get_error(c, NULL, msg, sizeof(msg)), TUTTI_ERR_INVALID_ARG,
               "error is NULL");
    cr_assert_str_empty(tutti_comm_last_error(c), "comm's message: %s", tutti_comm_last_error(c));
    cr_assert_eq(tutti_comm_get_error(c, &e, msg, sizeof(msg)), TUTTI_SUCCESS);
    cr_assert_eq(e, TUTTI_SUCCESS, "%s", tutti_strerror(e));
    cr_assert_str_empty(msg);
    EXPECT_ERR(tutti_all_reduce(&v, &v, 1, (tutti_dtype_t)99, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "dtype");
    e = TUTTI_ERR_INTERNAL;
    cr_assert_eq(tutti_comm_get_error(c, &e, NULL, 0), TUTTI_SUCCESS);
    cr_assert_eq(e, TUTTI_SUCCESS, "an argument error is not comm's error state");

    cr_assert_eq(tutti_comm_abort(c), TUTTI_SUCCESS);
    cr_assert_eq(tutti_comm_get_error(c, &e, msg, sizeof(msg)), TUTTI_SUCCESS);
    cr_assert_eq(e, TUTTI_ERR_ABORTED, "%s", tutti_strerror(e));
    cr_assert(strstr(msg, "tutti_comm_abort"), "%s", msg);
    EXPECT_ERR(tutti_all_reduce(&v, &v, 1, TUTTI_FLOAT32, TUTTI_SUM, c, NULL), TUTTI_ERR_ABORTED,
               "aborted");
    cr_assert_eq(tutti_comm_get_error(c, &e, first, sizeof(first)), TUTTI_SUCCESS);
    cr_assert_eq(e, TUTTI_ERR_ABORTED, "%s", tutti_strerror(e));
    cr_assert_str_eq(first, tutti_comm_last_error(c));
    cr_assert(strstr(first, "tutti_all_reduce"), "%s", first);
    /* Later calls fail with their own message; the state keeps the first. */
    EXPECT_ERR(tutti_barrier(c, NULL), TUTTI_ERR_ABORTED, "unusable");
    cr_assert_eq(tutti_comm_get_error(c, &e, msg, sizeof(msg)), TUTTI_SUCCESS);
    cr_assert_str_eq(msg, first);
    /* Cut to the buffer, NUL-terminated. */
    memset(cut, 'x', sizeof(cut));
    cr_assert_eq(tutti_comm_get_error(c, &e, cut, sizeof(cut)), TUTTI_SUCCESS);
    cr_assert_eq(strlen(cut), sizeof(cut) - 1);
    cr_assert(strncmp(cut, first, sizeof(cut) - 1) == 0, "'%s' is not the start of '%s'", cut,
              first);
    cr_assert_eq(tutti_comm_destroy(c), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_comm_get_error(c, &e, msg, sizeof(msg)), TUTTI_ERR_INVALID_ARG,
               "not a live communicator");
}

/* More live communicators than one block of the registry holds (32): every one is found, a
 * destroyed one is refused, and its slot serves the next. */
Test(api, many_communicators)
{
    enum { N = 70 };
    tutti_comm_t c[N], again;
    int v = -1;

    for (int i = 0; i < N; i++)
        c[i] = solo();
    for (int i = 0; i < N; i += 2)
        cr_assert_eq(tutti_comm_destroy(c[i]), TUTTI_SUCCESS);
    again = solo();
    for (int i = 0; i < N; i++)
        if (i % 2)
            cr_assert_eq(tutti_comm_rank(c[i], &v), TUTTI_SUCCESS, "comm %d: %s", i,
                         tutti_last_error());
        else if (c[i] != again) /* the allocator may hand the new one a freed address */
            EXPECT_ERR(tutti_comm_rank(c[i], &v), TUTTI_ERR_INVALID_ARG, "not a live communicator");
    cr_assert_eq(tutti_comm_rank(again, &v), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(tutti_comm_destroy(again), TUTTI_SUCCESS);
    for (int i = 1; i < N; i += 2)
        cr_assert_eq(tutti_comm_destroy(c[i]), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_comm_rank(c[N - 1], &v), TUTTI_ERR_INVALID_ARG, "not a live communicator");
}

Test(api, collectives_check_their_arguments)
{
    tutti_comm_t c = solo();
    float buf[64] = {0}, out[64];

    EXPECT_ERR(tutti_all_reduce(buf, out, 4, TUTTI_FLOAT32, TUTTI_SUM, NULL, NULL),
               TUTTI_ERR_INVALID_ARG, "comm is NULL");
    EXPECT_ERR(tutti_all_reduce(NULL, out, 4, TUTTI_FLOAT32, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "sendbuf");
    EXPECT_ERR(tutti_all_reduce(buf, NULL, 4, TUTTI_FLOAT32, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "recvbuf");
    EXPECT_ERR(tutti_all_reduce(buf, out, 4, (tutti_dtype_t)42, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "dtype 42");
    EXPECT_ERR(tutti_all_reduce(buf, out, 4, TUTTI_FLOAT32, (tutti_op_t)-3, c, NULL),
               TUTTI_ERR_INVALID_ARG, "op -3");
    EXPECT_ERR(tutti_all_reduce(buf, out, SIZE_MAX / 2, TUTTI_FLOAT32, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "overflows");
    EXPECT_ERR(tutti_all_reduce(buf, buf + 1, 8, TUTTI_FLOAT32, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "overlap");
    EXPECT_ERR(tutti_all_gather(buf + 1, buf, 8, TUTTI_FLOAT32, c, NULL), TUTTI_ERR_INVALID_ARG,
               "overlap");
    EXPECT_ERR(tutti_reduce_scatter(buf, buf + 2, 8, TUTTI_FLOAT32, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "overlap");
    EXPECT_ERR(tutti_broadcast(buf, out, 4, TUTTI_FLOAT32, 1, c, NULL), TUTTI_ERR_INVALID_ARG,
               "root 1");
    EXPECT_ERR(tutti_reduce(buf, out, 4, TUTTI_FLOAT32, TUTTI_SUM, -1, c, NULL),
               TUTTI_ERR_INVALID_ARG, "root -1");
    EXPECT_ERR(tutti_all_reduce(buf, out, 4, TUTTI_FLOAT32, TUTTI_SUM, c, (tutti_stream_t)buf),
               TUTTI_ERR_INVALID_ARG, "stream");
    EXPECT_ERR(tutti_send(buf, 4, TUTTI_FLOAT32, 1, c, NULL), TUTTI_ERR_INVALID_ARG, "peer 1");
    EXPECT_ERR(tutti_recv(NULL, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG, "recvbuf");
    EXPECT_ERR(tutti_send(buf, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG, "group");
    EXPECT_ERR(tutti_all_to_all(buf, out, 4, TUTTI_FLOAT32, NULL, NULL), TUTTI_ERR_INVALID_ARG,
               "comm is NULL");
    EXPECT_ERR(tutti_all_to_all(NULL, out, 4, TUTTI_FLOAT32, c, NULL), TUTTI_ERR_INVALID_ARG,
               "sendbuf");
    EXPECT_ERR(tutti_all_to_all(buf, buf + 2, 4, TUTTI_FLOAT32, c, NULL), TUTTI_ERR_INVALID_ARG,
               "overlap");
    EXPECT_ERR(tutti_all_to_all(buf, out, 4, (tutti_dtype_t)42, c, NULL), TUTTI_ERR_INVALID_ARG,
               "dtype 42");
    EXPECT_ERR(tutti_all_to_all(buf, out, SIZE_MAX / 4, TUTTI_FLOAT32, c, NULL),
               TUTTI_ERR_INVALID_ARG, "overflows");
    cr_assert_eq(tutti_all_to_all(NULL, NULL, 0, TUTTI_FLOAT32, c, NULL), TUTTI_SUCCESS);
    {
        size_t four = 4, zero = 0, big = SIZE_MAX / 8, five = 5, two = 2;
        EXPECT_ERR(
            tutti_all_to_allv(buf, &four, &zero, out, &four, &zero, TUTTI_FLOAT32, NULL, NULL),
            TUTTI_ERR_INVALID_ARG, "comm is NULL");
        EXPECT_ERR(tutti_all_to_allv(buf, NULL, &zero, out, &four, &zero, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "sendcounts is NULL");
        EXPECT_ERR(tutti_all_to_allv(buf, &four, &zero, out, &four, NULL, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "rdispls is NULL");
        EXPECT_ERR(tutti_all_to_allv(NULL, &four, &zero, out, &four, &zero, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "sendbuf is NULL");
        EXPECT_ERR(tutti_all_to_allv(buf, &four, &zero, out, &five, &zero, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "recvcounts[0] is 5");
        EXPECT_ERR(tutti_all_to_allv(buf, &four, &big, out, &four, &zero, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "sdispls[0] + sendcounts[0]");
        /* blocks [2, 6) and, in the same buffer, [0, 4): overlap */
        EXPECT_ERR(tutti_all_to_allv(buf, &four, &two, buf, &four, &zero, TUTTI_FLOAT32, c, NULL),
                   TUTTI_ERR_INVALID_ARG, "overlap");
        EXPECT_ERR(
            tutti_all_to_allv(buf, &four, &zero, out, &four, &zero, (tutti_dtype_t)42, c, NULL),
            TUTTI_ERR_INVALID_ARG, "dtype 42");
        /* one rank: its block to itself, at displacements, the gap left alone */
        float in[6] = {1, 2, 3, 4, 5, 6}, got[7] = {0, 0, 0, 0, 0, 0, -1};
        cr_assert_eq(tutti_all_to_allv(in, &four, &two, got, &four, &two, TUTTI_FLOAT32, c, NULL),
                     TUTTI_SUCCESS, "%s", tutti_comm_last_error(c));
        cr_assert(got[0] == 0 && got[1] == 0 && got[2] == 3 && got[5] == 6 && got[6] == -1);
        cr_assert_eq(
            tutti_all_to_allv(NULL, &zero, &big, NULL, &zero, &zero, TUTTI_FLOAT32, c, NULL),
            TUTTI_SUCCESS, "%s", tutti_comm_last_error(c));
    }
    /* count 0 is valid, with NULL buffers too */
    cr_assert_eq(tutti_all_reduce(NULL, NULL, 0, TUTTI_FLOAT32, TUTTI_SUM, c, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_all_gather(NULL, NULL, 0, TUTTI_INT8, c, NULL), TUTTI_SUCCESS);
    /* a bad call leaves the communicator usable */
    cr_assert_eq(tutti_barrier(c, NULL), TUTTI_SUCCESS, "%s", tutti_comm_last_error(c));
    tutti_comm_destroy(c);
}

Test(api, gather_and_scatter)
{
    tutti_comm_t c = solo();
    tutti_stream_t st = NULL;
    float buf[16] = {0}, in[4] = {1, 2, 3, 4}, got[5];

    EXPECT_ERR(tutti_gather(buf, got, 4, TUTTI_FLOAT32, 0, NULL, NULL), TUTTI_ERR_INVALID_ARG,
               "comm is NULL");
    EXPECT_ERR(tutti_gather(buf, got, 4, (tutti_dtype_t)42, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "dtype 42");
    EXPECT_ERR(tutti_gather(buf, got, 4, TUTTI_FLOAT32, 1, c, NULL), TUTTI_ERR_INVALID_ARG,
               "root 1");
    EXPECT_ERR(tutti_scatter(buf, got, 4, TUTTI_FLOAT32, -1, c, NULL), TUTTI_ERR_INVALID_ARG,
               "root -1");
    EXPECT_ERR(tutti_gather(buf, got, SIZE_MAX / 4, TUTTI_FLOAT32, 0, c, NULL),
               TUTTI_ERR_INVALID_ARG, "overflows");
    EXPECT_ERR(tutti_gather(NULL, got, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "sendbuf is NULL");
    EXPECT_ERR(tutti_gather(buf, NULL, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "recvbuf is NULL on the root");
    EXPECT_ERR(tutti_scatter(buf, NULL, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "recvbuf is NULL");
    EXPECT_ERR(tutti_scatter(NULL, got, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "sendbuf is NULL on the root");
    /* in place is sendbuf == recvbuf + root * count; one element off overlaps */
    EXPECT_ERR(tutti_gather(buf + 1, buf, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "overlap");
    EXPECT_ERR(tutti_scatter(buf, buf + 1, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_ERR_INVALID_ARG,
               "overlap");
    cr_assert_eq(tutti_gather(NULL, NULL, 0, TUTTI_FLOAT32, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_scatter(NULL, NULL, 0, TUTTI_FLOAT32, 0, c, NULL), TUTTI_SUCCESS);
    /* one rank, out of place (a memcpy), then in place (nothing moves), then on a host stream
     * and in a group (the own block through the rank's own connection); got[4] is a guard */
    for (int way = 0; way < 4; way++) {
        for (int i = 0; i < 5; i++)
            got[i] = way == 1 && i < 4 ? in[i] : -1;
        tutti_result_t r;
        if (way == 2) {
            cr_assert_eq(tutti_stream_create(&st), TUTTI_SUCCESS);
            r = tutti_gather(in, got, 4, TUTTI_FLOAT32, 0, c, st);
            if (r == TUTTI_SUCCESS)
                r = tutti_stream_sync(st);
            tutti_stream_destroy(st);
        } else if (way == 3) {
            tutti_group_start();
            r = tutti_scatter(in, got, 4, TUTTI_FLOAT32, 0, c, NULL);
            tutti_result_t e = tutti_group_end();
            r = r != TUTTI_SUCCESS ? r : e;
        } else {
            r = tutti_gather(way == 1 ? got : in, got, 4, TUTTI_FLOAT32, 0, c, NULL);
        }
        cr_assert_eq(r, TUTTI_SUCCESS, "way %d: %s", way, tutti_comm_last_error(c));
        for (int i = 0; i < 4; i++)
            cr_assert_eq(got[i], in[i], "way %d: element %d is %g", way, i, got[i]);
        cr_assert_eq(got[4], -1, "way %d wrote past the block", way);
    }
    cr_assert_eq(tutti_scatter(in, got, 4, TUTTI_FLOAT32, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert(memcmp(in, got, sizeof(in)) == 0);
    tutti_comm_destroy(c);
}

Test(api, groups)
{
    tutti_comm_t c = solo();
    double a[1000], b[1000];

    for (int i = 0; i < 1000; i++)
        a[i] = i * 0.5;
    EXPECT_ERR(tutti_group_end(), TUTTI_ERR_INVALID_ARG, "no group");
    cr_assert_eq(tutti_group_start(), TUTTI_SUCCESS);
    /* A collective in a group is checked at once and run by the outermost end. */
    cr_assert_eq(tutti_all_reduce(a, b, 4, TUTTI_FLOAT64, TUTTI_SUM, c, NULL), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_all_reduce(NULL, b, 4, TUTTI_FLOAT64, TUTTI_SUM, c, NULL),
               TUTTI_ERR_INVALID_ARG, "sendbuf");
    cr_assert_eq(tutti_group_start(), TUTTI_SUCCESS); /* nested: counted */
    cr_assert_eq(tutti_send(a, 1000, TUTTI_FLOAT64, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_recv(b, 1000, TUTTI_FLOAT64, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_group_end(), TUTTI_SUCCESS);
    cr_assert_eq(tutti_group_end(), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert(memcmp(a, b, sizeof(a)) == 0, "send to self through a group");
    tutti_comm_destroy(c);
}

Test(api, one_rank_results)
{
    tutti_comm_t c = solo();
    int32_t x[5] = {1, -2, 3, -4, 5}, y[5] = {0};
    uint16_t h[2] = {0x3c00, 0xc000}, hy[2];

    cr_assert_eq(tutti_all_reduce(x, y, 5, TUTTI_INT32, TUTTI_AVG, c, NULL), TUTTI_SUCCESS);
    cr_assert(memcmp(x, y, sizeof(x)) == 0);
    cr_assert_eq(tutti_all_reduce(h, hy, 2, TUTTI_FLOAT16, TUTTI_PROD, c, NULL), TUTTI_SUCCESS);
    cr_assert(hy[0] == 0x3c00 && hy[1] == 0xc000);
    memset(y, 0, sizeof(y));
    cr_assert_eq(tutti_all_gather(x, y, 5, TUTTI_INT32, c, NULL), TUTTI_SUCCESS);
    cr_assert(memcmp(x, y, sizeof(x)) == 0);
    memset(y, 0, sizeof(y));
    cr_assert_eq(tutti_reduce(x, y, 5, TUTTI_INT32, TUTTI_MAX, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert(memcmp(x, y, sizeof(x)) == 0);
    cr_assert_eq(tutti_all_reduce(x, x, 5, TUTTI_INT32, TUTTI_SUM, c, NULL), TUTTI_SUCCESS);
    cr_assert(x[4] == 5, "in place on one rank leaves the data");
    tutti_comm_destroy(c);
}

/* ---- two ranks as two threads ---- */

struct duo {
    tutti_id_t id;
    int rank;
    int ok;
    char msg[512];
};

static void *duo_main(void *arg)
{
    struct duo *d = arg;
    tutti_comm_t c;
    const size_t n = 3 << 20; /* 12 MiB of floats: many FIFO rounds each way */
    float *s = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float));
    int other = 1 - d->rank, bad = 0;
    float in[4] = {1, 2, 3, 4}, out[4];

    if (tutti_comm_init(&c, 2, &d->id, d->rank, NULL) != TUTTI_SUCCESS) {
        snprintf(d->msg, sizeof(d->msg), "init: %s", tutti_last_error());
        return NULL;
    }
    /* A call refused on one rank sends nothing: the next matched call still works. */
    if (d->rank == 0 && tutti_all_reduce(in, out, 4, (tutti_dtype_t)77, TUTTI_SUM, c, NULL) !=
                            TUTTI_ERR_INVALID_ARG)
        bad |= 1;
    if (tutti_all_reduce(in, out, 4, TUTTI_FLOAT32, TUTTI_SUM, c, NULL) != TUTTI_SUCCESS ||
        out[0] != 2 || out[3] != 8)
        bad |= 2;
    /* Both ranks send and receive large messages at once: must not deadlock in a group. */
    for (size_t i = 0; i < n; i++)
        s[i] = (float)(d->rank * 1000000 + (int)(i % 1000003));
    tutti_group_start();
    tutti_send(s, n, TUTTI_FLOAT32, other, c, NULL);
    tutti_recv(r, n, TUTTI_FLOAT32, other, c, NULL);
    if (tutti_group_end() != TUTTI_SUCCESS)
        bad |= 4;
    for (size_t i = 0; i < n && !(bad & 8); i++)
        if (r[i] != (float)(other * 1000000 + (int)(i % 1000003)))
            bad |= 8;
    /* Plain send/recv in a matched order. */
    if (d->rank == 0) {
        if (tutti_send(s, 1000, TUTTI_FLOAT32, 1, c, NULL) != TUTTI_SUCCESS)
            bad |= 16;
    } else {
        if (tutti_recv(r, 1000, TUTTI_FLOAT32, 0, c, NULL) != TUTTI_SUCCESS || r[999] != 999.0f)
            bad |= 32;
    }
    if (tutti_barrier(c, NULL) != TUTTI_SUCCESS)
        bad |= 64;
    snprintf(d->msg, sizeof(d->msg), "rank %d: failures 0x%x: %s", d->rank, bad,
             tutti_comm_last_error(c));
    d->ok = bad == 0;
    tutti_comm_destroy(c);
    free(s);
    free(r);
    return NULL;
}

Test(api, two_ranks_in_one_process)
{
    struct duo d[2];
    pthread_t t[2];

    cr_assert_eq(tutti_get_id(&d[0].id), TUTTI_SUCCESS);
    for (int r = 0; r < 2; r++) {
        d[r].id = d[0].id;
        d[r].rank = r;
        d[r].ok = 0;
        d[r].msg[0] = '\0';
        pthread_create(&t[r], NULL, duo_main, &d[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    for (int r = 0; r < 2; r++)
        cr_assert(d[r].ok, "%s", d[r].msg);
}

/* ---- a peer that never comes: bounded wait, then the error state ---- */

struct stall {
    tutti_id_t id;
    int rank;
    tutti_result_t first, second;
    double took;
    char msg[512], msg2[512];
    pthread_barrier_t *done;
};

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *stall_main(void *arg)
{
    struct stall *s = arg;
    tutti_config_t cfg = TUTTI_CONFIG_INIT;
    tutti_comm_t c;
    float x[8] = {0}, y[8];

    cfg.timeout_s = 1.0;
    if (tutti_comm_init(&c, 2, &s->id, s->rank, &cfg) != TUTTI_SUCCESS) {
        snprintf(s->msg, sizeof(s->msg), "init: %s", tutti_last_error());
        s->first = TUTTI_ERR_INTERNAL;
        pthread_barrier_wait(s->done);
        return NULL;
    }
    if (s->rank == 0) {
        double t0 = secs();
        s->first = tutti_all_reduce(x, y, 8, TUTTI_FLOAT32, TUTTI_SUM, c, NULL);
        s->took = secs() - t0;
        snprintf(s->msg, sizeof(s->msg), "%s", tutti_comm_last_error(c));
        s->second = tutti_all_reduce(x, y, 8, TUTTI_FLOAT32, TUTTI_SUM, c, NULL);
        snprintf(s->msg2, sizeof(s->msg2), "%s", tutti_comm_last_error(c));
    }
    /* Rank 1 never joins the all-reduce; it leaves once rank 0 has seen the timeout. */
    pthread_barrier_wait(s->done);
    tutti_comm_destroy(c);
    return NULL;
}

Test(api, missing_peer_times_out_then_fails_fast, .timeout = 30)
{
    struct stall s[2];
    pthread_t t[2];
    pthread_barrier_t done;

    pthread_barrier_init(&done, NULL, 2);
    cr_assert_eq(tutti_get_id(&s[0].id), TUTTI_SUCCESS);
    for (int r = 0; r < 2; r++) {
        s[r].id = s[0].id;
        s[r].rank = r;
        s[r].done = &done;
        pthread_create(&t[r], NULL, stall_main, &s[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    cr_assert_eq(s[0].first, TUTTI_ERR_TIMEOUT, "%s", s[0].msg);
    cr_assert(s[0].took >= 0.9 && s[0].took < 5, "took %.2f s", s[0].took);
    cr_assert(strstr(s[0].msg, "all_reduce #1") && strstr(s[0].msg, "rank 1"), "%s", s[0].msg);
    cr_assert_eq(s[0].second, TUTTI_ERR_TIMEOUT, "later calls fail fast with the first cause");
    cr_assert(strstr(s[0].msg2, "unusable") && strstr(s[0].msg2, "no progress"), "%s", s[0].msg2);
}

static tutti_result_t fail_with_message(void *arg)
{
    (void)arg;
    return TUTTI_ERR_SYSTEM;
}

Test(api, streams_check_their_arguments)
{
    tutti_comm_t c = solo();
    tutti_stream_t s;
    tutti_event_t e;
    float x[4] = {1, 2, 3, 4}, y[4];

    EXPECT_ERR(tutti_stream_create(NULL), TUTTI_ERR_INVALID_ARG, "stream");
    EXPECT_ERR(tutti_stream_sync(NULL), TUTTI_ERR_INVALID_ARG, "stream");
    EXPECT_ERR(tutti_stream_query(NULL), TUTTI_ERR_INVALID_ARG, "stream");
    EXPECT_ERR(tutti_event_create(NULL), TUTTI_ERR_INVALID_ARG, "event");
    EXPECT_ERR(tutti_event_sync(NULL), TUTTI_ERR_INVALID_ARG, "event");
    cr_assert_eq(tutti_stream_destroy(NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_event_destroy(NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_stream_create(&s), TUTTI_SUCCESS);
    cr_assert_eq(tutti_event_create(&e), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_stream_launch(s, NULL, NULL), TUTTI_ERR_INVALID_ARG, "fn");
    EXPECT_ERR(tutti_event_record(e, NULL), TUTTI_ERR_INVALID_ARG, "stream");
    /* An invalid collective is refused by the call itself and queues nothing. */
    EXPECT_ERR(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, (tutti_op_t)77, c, s),
               TUTTI_ERR_INVALID_ARG, "op");
    cr_assert_eq(tutti_stream_query(s), TUTTI_SUCCESS);
    /* One rank: queued work completes; the result is there after the sync. */
    cr_assert_eq(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, TUTTI_SUM, c, s), TUTTI_SUCCESS);
    cr_assert_eq(tutti_event_record(e, s), TUTTI_SUCCESS);
    cr_assert_eq(tutti_event_sync(e), TUTTI_SUCCESS);
    cr_assert(y[0] == 1 && y[3] == 4);
    /* A failing host function: sticky error, message, later work skipped. */
    cr_assert_eq(tutti_stream_launch(s, fail_with_message, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, TUTTI_SUM, c, s), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_stream_sync(s), TUTTI_ERR_SYSTEM, "host function");
    cr_assert_eq(tutti_stream_query(s), TUTTI_ERR_SYSTEM);
    cr_assert(strstr(tutti_stream_last_error(s), "tutti_stream_launch"));
    cr_assert_eq(tutti_event_query(e), TUTTI_SUCCESS, "the event was recorded before the failure");
    EXPECT_ERR(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, TUTTI_SUM, c, NULL), TUTTI_ERR_ABORTED,
               "earlier operation on its stream failed");
    cr_assert_eq(tutti_stream_destroy(s), TUTTI_ERR_SYSTEM);
    cr_assert_eq(tutti_event_destroy(e), TUTTI_SUCCESS);
    cr_assert_eq(tutti_comm_destroy(c), TUTTI_SUCCESS);
}

/* Without a usable CUDA device (or without CUDA in the build) the CUDA calls say so; with one
 * they work. Either way host collectives are unaffected. */
Test(api, cuda_reports_its_availability)
{
    tutti_comm_t c = solo();
    tutti_stream_t s = NULL;
    int n = -1;
    float x[4] = {1, 2, 3, 4}, y[4];
    tutti_result_t rc;

    EXPECT_ERR(tutti_cuda_devices(NULL), TUTTI_ERR_INVALID_ARG, "count");
    rc = tutti_cuda_devices(&n);
    if (rc == TUTTI_SUCCESS) {
        cr_assert_gt(n, 0);
        cr_assert_eq(tutti_stream_wrap_cuda(&s, NULL), TUTTI_SUCCESS);
        cr_assert_eq(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, TUTTI_SUM, c, s), TUTTI_SUCCESS);
        cr_assert_eq(tutti_stream_sync(s), TUTTI_SUCCESS);
        cr_assert_eq(y[3], 4.0f);
        EXPECT_ERR(tutti_stream_launch(s, NULL, NULL), TUTTI_ERR_INVALID_ARG, "fn");
        cr_assert_eq(tutti_stream_destroy(s), TUTTI_SUCCESS);
    } else {
        cr_assert_eq(rc, TUTTI_ERR_UNSUPPORTED);
        cr_assert_eq(n, 0);
        cr_assert(strstr(tutti_last_error(), "CUDA unavailable"), "%s", tutti_last_error());
        EXPECT_ERR(tutti_stream_wrap_cuda(&s, NULL), TUTTI_ERR_UNSUPPORTED, "CUDA unavailable");
        printf("no usable CUDA device here: %s\n", tutti_last_error());
    }
    cr_assert_eq(tutti_all_reduce(x, y, 4, TUTTI_FLOAT32, TUTTI_SUM, c, NULL), TUTTI_SUCCESS);
    cr_assert_eq(y[2], 3.0f);
    tutti_comm_destroy(c);
}

/* tutti_comm_register: arguments named, handles checked; registered buffers give the same
 * results (on one rank nothing is sent; net_ib's zero-copy path is tested by the ib suite). */
Test(api, registration)
{
    tutti_comm_t c = solo();
    float x[64], y[64];
    void *h = NULL, *h2 = NULL;

    for (int i = 0; i < 64; i++)
        x[i] = (float)i;
    EXPECT_ERR(tutti_comm_register(c, NULL, 4, &h), TUTTI_ERR_INVALID_ARG, "buf is NULL");
    EXPECT_ERR(tutti_comm_register(c, x, 0, &h), TUTTI_ERR_INVALID_ARG, "bytes is 0");
    EXPECT_ERR(tutti_comm_register(c, x, 4, NULL), TUTTI_ERR_INVALID_ARG, "handle is NULL");
    EXPECT_ERR(tutti_comm_register(NULL, x, 4, &h), TUTTI_ERR_INVALID_ARG, "comm is NULL");
    EXPECT_ERR(tutti_comm_deregister(c, NULL), TUTTI_ERR_INVALID_ARG, "handle is NULL");
    EXPECT_ERR(tutti_comm_deregister(c, x), TUTTI_ERR_INVALID_ARG, "not a registration");
    cr_assert_eq(tutti_comm_register(c, x, sizeof(x), &h), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(tutti_comm_register(c, y, sizeof(y), &h2), TUTTI_SUCCESS, "%s",
                 tutti_last_error());
    cr_assert_eq(tutti_all_reduce(x, y, 64, TUTTI_FLOAT32, TUTTI_SUM, c, NULL), TUTTI_SUCCESS);
    cr_assert(memcmp(x, y, sizeof(x)) == 0);
    cr_assert_eq(tutti_comm_deregister(c, h), TUTTI_SUCCESS);
    EXPECT_ERR(tutti_comm_deregister(c, h), TUTTI_ERR_INVALID_ARG, "deregistered twice");
    /* Left registered: destroy releases it. */
    cr_assert_eq(tutti_comm_destroy(c), TUTTI_SUCCESS);
}

static tutti_result_t nap(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    return TUTTI_SUCCESS;
}

/* Premul-sum operators: arguments named; handles of destroyed ops, of another communicator or
 * for another dtype refused by name; slots reused without reviving old handles; a call keeps
 * its scalar when the op is destroyed before a host stream runs it. */
Test(api, premul_sum_operators)
{
    tutti_comm_t c = solo(), d = solo();
    tutti_op_t op, op2, other;
    tutti_stream_t s;
    float k = 0.5f, x[3] = {2, -6, 10}, y[3] = {0};
    int32_t ik = 3, ix[2] = {5, -7}, iy[2];

    EXPECT_ERR(tutti_op_create_premul_sum(NULL, &k, TUTTI_FLOAT32, TUTTI_SCALAR_HOST_IMMEDIATE, c),
               TUTTI_ERR_INVALID_ARG, "op is NULL");
    EXPECT_ERR(tutti_op_create_premul_sum(&op, NULL, TUTTI_FLOAT32, TUTTI_SCALAR_HOST_IMMEDIATE, c),
               TUTTI_ERR_INVALID_ARG, "scalar is NULL");
    EXPECT_ERR(
        tutti_op_create_premul_sum(&op, &k, (tutti_dtype_t)42, TUTTI_SCALAR_HOST_IMMEDIATE, c),
        TUTTI_ERR_INVALID_ARG, "dtype 42");
    EXPECT_ERR(tutti_op_create_premul_sum(&op, &k, TUTTI_FLOAT32, (tutti_scalar_residence_t)7, c),
               TUTTI_ERR_INVALID_ARG, "residence 7");
    EXPECT_ERR(
        tutti_op_create_premul_sum(&op, &k, TUTTI_FLOAT32, TUTTI_SCALAR_HOST_IMMEDIATE, NULL),
        TUTTI_ERR_INVALID_ARG, "comm is NULL");
    if (tutti_cuda_devices(&(int){0}) != TUTTI_SUCCESS)
        EXPECT_ERR(tutti_op_create_premul_sum(&op, &k, TUTTI_FLOAT32, TUTTI_SCALAR_DEVICE, c),
                   TUTTI_ERR_UNSUPPORTED, "needs CUDA");
    else
        EXPECT_ERR(tutti_op_create_premul_sum(&op, &k, TUTTI_FLOAT32, TUTTI_SCALAR_DEVICE, c),
                   TUTTI_ERR_INVALID_ARG, "host memory");

    /* Read at creation: changing k afterwards changes nothing. */
    cr_assert_eq(tutti_op_create_premul_sum(&op, &k, TUTTI_FLOAT32, TUTTI_SCALAR_HOST_IMMEDIATE, c),
                 TUTTI_SUCCESS, "%s", tutti_last_error());
    k = 100;
    cr_assert_str_eq(tutti_op_name(op), "premul_sum");
    cr_assert_eq(tutti_all_reduce(x, y, 3, TUTTI_FLOAT32, op, c, NULL), TUTTI_SUCCESS, "%s",
                 tutti_comm_last_error(c));
    cr_assert(y[0] == 1 && y[1] == -3 && y[2] == 5, "%g %g %g", y[0], y[1], y[2]);
    cr_assert(x[0] == 2 && x[1] == -6 && x[2] == 10, "the send buffer was written");
    EXPECT_ERR(tutti_all_reduce(x, y, 1, TUTTI_FLOAT64, op, c, NULL), TUTTI_ERR_INVALID_ARG,
               "made for float32");
    EXPECT_ERR(tutti_all_reduce(x, y, 3, TUTTI_FLOAT32, op, d, NULL), TUTTI_ERR_INVALID_ARG,
               "was not made on this communicator");
    EXPECT_ERR(tutti_op_destroy(TUTTI_SUM, c), TUTTI_ERR_INVALID_ARG, "built in");
    cr_assert_eq(tutti_op_destroy(op, c), TUTTI_SUCCESS, "%s", tutti_last_error());
    EXPECT_ERR(tutti_op_destroy(op, c), TUTTI_ERR_INVALID_ARG, "destroyed");
    EXPECT_ERR(tutti_all_reduce(x, y, 3, TUTTI_FLOAT32, op, c, NULL), TUTTI_ERR_INVALID_ARG,
               "destroyed");
    EXPECT_ERR(tutti_all_reduce(x, y, 3, TUTTI_FLOAT32, (tutti_op_t)(TUTTI_NUM_OPS + 1), c, NULL),
               TUTTI_ERR_INVALID_ARG, "is not a tutti_op_t");

    /* The slot comes back with a new handle; the old one stays dead. */
    cr_assert_eq(tutti_op_create_premul_sum(&op2, &ik, TUTTI_INT32, TUTTI_SCALAR_HOST_IMMEDIATE, c),
                 TUTTI_SUCCESS);
    cr_assert_neq(op2, op);
    EXPECT_ERR(tutti_all_reduce(ix, iy, 2, TUTTI_INT32, op, c, NULL), TUTTI_ERR_INVALID_ARG,
               "destroyed");
    /* reduce-scatter (into the communicator's buffer) and reduce, in place */
    cr_assert_eq(tutti_reduce_scatter(ix, iy, 2, TUTTI_INT32, op2, c, NULL), TUTTI_SUCCESS);
    cr_assert(iy[0] == 15 && iy[1] == -21 && ix[0] == 5 && ix[1] == -7);
    cr_assert_eq(tutti_reduce_scatter(ix, ix, 2, TUTTI_INT32, op2, c, NULL), TUTTI_SUCCESS);
    cr_assert(ix[0] == 15 && ix[1] == -21);
    cr_assert_eq(tutti_reduce(ix, ix, 2, TUTTI_INT32, op2, 0, c, NULL), TUTTI_SUCCESS);
    cr_assert(ix[0] == 45 && ix[1] == -63);

    /* Queued on a host stream behind a blocking item, destroyed before it runs. */
    cr_assert_eq(tutti_op_create_premul_sum(&other, &(float){-2}, TUTTI_FLOAT32,
                                            TUTTI_SCALAR_HOST_IMMEDIATE, d),
                 TUTTI_SUCCESS);
    cr_assert_eq(tutti_stream_create(&s), TUTTI_SUCCESS);
    cr_assert_eq(tutti_stream_launch(s, nap, NULL), TUTTI_SUCCESS);
    cr_assert_eq(tutti_all_reduce(x, y, 3, TUTTI_FLOAT32, other, d, s), TUTTI_SUCCESS);
    cr_assert_eq(tutti_op_destroy(other, d), TUTTI_SUCCESS);
    cr_assert_eq(tutti_stream_sync(s), TUTTI_SUCCESS, "%s", tutti_stream_last_error(s));
    cr_assert(y[0] == -4 && y[1] == 12 && y[2] == -20, "%g %g %g", y[0], y[1], y[2]);
    cr_assert_eq(tutti_stream_destroy(s), TUTTI_SUCCESS);
    tutti_comm_destroy(c);
    tutti_comm_destroy(d);
}
