/*
 * tutti-demo -- an all-reduce every rank verifies: run as `tutti-run -n 4 tutti-demo [count]`.
 *
 * Rank r contributes x_r[i] = (r + 1) * (i % 251) as float32; the sum over n ranks is
 * (i % 251) * n(n+1)/2, an integer small enough to be exact in float32, so every element is
 * checked for equality. Then a few timed runs report the bus bandwidth (nccl-tests' formula:
 * bytes * 2(n-1)/n / time).
 */
#include "tutti.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000003;
    tutti_comm_t comm;
    int rank, n, iters = 5;
    size_t wrong = 0;
    float *x, *y;
    double t0, dt;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-demo: init failed: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &n);
    x = malloc(count * sizeof(float) + 1);
    y = malloc(count * sizeof(float) + 1);
    if (!x || !y) {
        fprintf(stderr, "tutti-demo: out of memory for %zu floats\n", count);
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        x[i] = (float)((rank + 1) * (int)(i % 251));
    if (tutti_all_reduce(x, y, count, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-demo: all_reduce failed: %s\n", tutti_comm_last_error(comm));
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        wrong += y[i] != (float)((int)(i % 251) * n * (n + 1) / 2);

    tutti_barrier(comm, NULL);
    t0 = now();
    for (int k = 0; k < iters; k++)
        if (tutti_all_reduce(x, y, count, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS) {
            fprintf(stderr, "tutti-demo: all_reduce failed: %s\n", tutti_comm_last_error(comm));
            return 1;
        }
    dt = (now() - t0) / iters;
    printf("rank %d of %d: all_reduce of %zu float32 %s (%zu of %zu elements wrong); "
           "%.3f ms per call, busbw %.2f GB/s\n",
           rank, n, count, wrong ? "FAILED" : "verified", wrong, count, dt * 1e3,
           n > 1 ? (double)count * 4 * 2 * (n - 1) / n / dt / 1e9 : 0.0);
    free(x);
    free(y);
    tutti_comm_destroy(comm);
    return wrong ? 1 : 0;
}
