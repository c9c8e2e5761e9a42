/*
 * call-time -- the time of one small all-reduce to four decimals of a microsecond, where
 * tutti-perf prints one: SIZE bytes of float32 summed ITERS times after ITERS/10 warm-up
 * calls, the best of 5 repeats, printed by rank 0. For comparing two builds of the library
 * side by side (LD_LIBRARY_PATH picks one; BENCHMARKS.md, "Message tags").
 *
 *   tutti-run -n 2 build/bench/call-time SIZE ITERS
 */
#include "tutti.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    tutti_comm_t c;
    size_t n = argc > 1 ? (size_t)atol(argv[1]) / 4 : 2;
    int iters = argc > 2 ? atoi(argv[2]) : 100000, rank;
    float *a, *b;
    double best = 1e9;

    if (n == 0)
        n = 1;
    if (tutti_comm_init_env(&c) != TUTTI_SUCCESS) {
        fprintf(stderr, "call-time: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(c, &rank);
    a = calloc(n, sizeof(float));
    b = calloc(n, sizeof(float));
    for (int i = 0; i < iters / 10; i++)
        tutti_all_reduce(a, b, n, TUTTI_FLOAT32, TUTTI_SUM, c, NULL);
    for (int rep = 0; rep < 5; rep++) {
        double t0;
        tutti_barrier(c, NULL);
        t0 = now();
        for (int i = 0; i < iters; i++)
            if (tutti_all_reduce(a, b, n, TUTTI_FLOAT32, TUTTI_SUM, c, NULL) != TUTTI_SUCCESS) {
                fprintf(stderr, "call-time: %s\n", tutti_last_error());
                return 1;
            }
        if ((now() - t0) / iters < best)
            best = (now() - t0) / iters;
    }
    if (rank == 0)
        printf("%.4f us\n", best * 1e6);
    free(a);
    free(b);
    tutti_comm_destroy(c);
    return 0;
}
