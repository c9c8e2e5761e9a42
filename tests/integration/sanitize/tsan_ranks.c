/*
 * tsan_ranks -- ranks as threads of one process, for ThreadSanitizer (Criterion's runner does
 * not run under it): 4 ranks over shared memory do collectives and a point-to-point group
 * with checked results (also on symmetric memory), then one blocks while another thread aborts it
 * (and polls tutti_comm_get_error meanwhile, as a watchdog would). Exit 0 when every result is
 * right; TSan's own reports fail the run (halt_on_error).
 */
#include "tutti.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 4
static tutti_id_t id, id2;
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(int rank, const char *what)
{
    pthread_mutex_lock(&lock);
    failures++;
    fprintf(stderr, "rank %d: %s\n", rank, what);
    pthread_mutex_unlock(&lock);
}

static void *rank_main(void *arg)
{
    int rank = (int)(long)arg;
    size_t n = 300001;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * N * sizeof(float));
    tutti_comm_t c;

    if (tutti_comm_init(&c, N, &id, rank, NULL) != TUTTI_SUCCESS) {
        fail(rank, tutti_last_error());
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rank + (int)(i % 7));
    if (tutti_all_reduce(x, y, n, TUTTI_FLOAT32, TUTTI_SUM, c, NULL) != TUTTI_SUCCESS)
        fail(rank, "all_reduce");
    for (size_t i = 0; i < n; i++)
        if (y[i] != (float)(6 + 4 * (int)(i % 7))) {
            fail(rank, "all_reduce result");
            break;
        }
    if (tutti_all_gather(x, y, n, TUTTI_FLOAT32, c, NULL) != TUTTI_SUCCESS ||
        y[(size_t)2 * n + 3] != (float)(2 + 3))
        fail(rank, "all_gather");
    tutti_group_start();
    tutti_send(x, n, TUTTI_FLOAT32, (rank + 1) % N, c, NULL);
    tutti_recv(y, n, TUTTI_FLOAT32, (rank + N - 1) % N, c, NULL);
    if (tutti_group_end() != TUTTI_SUCCESS || y[5] != (float)((rank + N - 1) % N + 5))
        fail(rank, "send/recv");
    /* Symmetric memory: windows among threads, one large (the pass) and one small all-reduce
     * (through the gate's lines). */
    void *sym = NULL, *win = NULL;
    if (tutti_mem_alloc(c, 2 * n * sizeof(float), &sym) != TUTTI_SUCCESS ||
        tutti_comm_window_register(c, sym, 2 * n * sizeof(float), &win) != TUTTI_SUCCESS)
        fail(rank, tutti_comm_last_error(c));
    else {
        float *sx = sym, *sy = sx + n;
        memcpy(sx, x, n * sizeof(float));
        for (size_t m = n; m >= 3; m = m == n ? 3 : 0) {
            if (tutti_all_reduce(sx, sy, m, TUTTI_FLOAT32, TUTTI_SUM, c, NULL) != TUTTI_SUCCESS)
                fail(rank, "all_reduce on symmetric memory");
            for (size_t i = 0; i < m; i++)
                if (sy[i] != (float)(6 + 4 * (int)(i % 7))) {
                    fail(rank, "all_reduce on symmetric memory: result");
                    break;
                }
        }
        if (tutti_comm_window_deregister(c, win) != TUTTI_SUCCESS ||
            tutti_mem_free(c, sym) != TUTTI_SUCCESS)
            fail(rank, tutti_comm_last_error(c));
    }
    tutti_comm_destroy(c);
    free(x);
    free(y);
    return NULL;
}

static tutti_comm_t victim; /* published with release once initialised */

static void *blocked(void *arg)
{
    float v[16] = {0};
    tutti_comm_t c;
    (void)arg;
    if (tutti_comm_init(&c, 2, &id2, 0, NULL) != TUTTI_SUCCESS) {
        fail(0, tutti_last_error());
        return NULL;
    }
    __atomic_store_n(&victim, c, __ATOMIC_RELEASE);
    /* Rank 1 never joins this all-reduce: only the abort ends it. */
    if (tutti_all_reduce(v, v, 16, TUTTI_FLOAT32, TUTTI_SUM, c, NULL) != TUTTI_ERR_ABORTED)
        fail(0, "an aborted all-reduce did not return TUTTI_ERR_ABORTED");
    return NULL;
}

static void *idle_peer(void *arg)
{
    tutti_comm_t c;
    (void)arg;
    if (tutti_comm_init(&c, 2, &id2, 1, NULL) != TUTTI_SUCCESS)
        return NULL;
    sleep(2);
    tutti_comm_destroy(c);
    return NULL;
}

int main(void)
{
    pthread_t t[N], b, p;

    if (tutti_get_id(&id) != TUTTI_SUCCESS || tutti_get_id(&id2) != TUTTI_SUCCESS)
        return 2;
    for (long r = 0; r < N; r++)
        pthread_create(&t[r], NULL, rank_main, (void *)r);
    for (int r = 0; r < N; r++)
        pthread_join(t[r], NULL);
    pthread_create(&b, NULL, blocked, NULL);
    pthread_create(&p, NULL, idle_peer, NULL);
    sleep(1);
    while (!__atomic_load_n(&victim, __ATOMIC_ACQUIRE))
        usleep(1000);
    tutti_comm_t v = __atomic_load_n(&victim, __ATOMIC_ACQUIRE);
    tutti_result_t e = TUTTI_ERR_INTERNAL;
    char msg[256];
    /* This thread is also a watchdog: healthy while the other blocks, aborted from the abort on,
     * polled while the blocked thread turns the abort into the error state and its message. */
    if (tutti_comm_get_error(v, &e, msg, sizeof(msg)) != TUTTI_SUCCESS || e != TUTTI_SUCCESS)
        fail(0, "tutti_comm_get_error: a blocked communicator is not healthy");
    tutti_comm_abort(v);
    for (int i = 0; i < 20000; i++)
        if (tutti_comm_get_error(v, &e, msg, sizeof(msg)) != TUTTI_SUCCESS ||
            e != TUTTI_ERR_ABORTED || !msg[0]) {
            fail(0, "tutti_comm_get_error: an aborted communicator is not TUTTI_ERR_ABORTED");
            break;
        }
    pthread_join(b, NULL);
    if (tutti_comm_get_error(v, &e, msg, sizeof(msg)) != TUTTI_SUCCESS || e != TUTTI_ERR_ABORTED ||
        !strstr(msg, "all_reduce #1"))
        fail(0, "tutti_comm_get_error: the aborted all-reduce's message is not the state's");
    pthread_join(p, NULL);
    tutti_comm_destroy(victim);
    printf("tsan_ranks: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
