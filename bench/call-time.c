/*
 * call-time -- the time of one small collective to four decimals of a microsecond, where
 * tutti-perf prints one: SIZE bytes of float32 (summed where it reduces; SIZE per rank's
 * block for all_gather and reduce_scatter), ITERS calls after ITERS/10 warm-up calls, the
 * best of 5 repeats, printed by rank 0. For comparing two builds of the library side by side
 * (LD_LIBRARY_PATH picks one; BENCHMARKS.md, "Message tags" and "Layers").
 *
 *   tutti-run -n 2 build/bench/call-time SIZE ITERS
 * [all_reduce|all_gather|reduce_scatter|broadcast]
 */
#include "tutti.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *coll = "all_reduce";
static size_t n;
static float *a, *b;

static tutti_result_t one(tutti_comm_t c)
{
    if (strcmp(coll, "all_gather") == 0)
        return tutti_all_gather(a, b, n, TUTTI_FLOAT32, c, NULL);
    if (strcmp(coll, "reduce_scatter") == 0)
        return tutti_reduce_scatter(a, b, n, TUTTI_FLOAT32, TUTTI_SUM, c, NULL);
    if (strcmp(coll, "broadcast") == 0)
        return tutti_broadcast(a, b, n, TUTTI_FLOAT32, 0, c, NULL);
    return tutti_all_reduce(a, b, n, TUTTI_FLOAT32, TUTTI_SUM, c, NULL);
}

int main(int argc, char **argv)
{
    tutti_comm_t c;
    int iters = argc > 2 ? atoi(argv[2]) : 100000, rank, size;
    double best = 1e9;

    n = argc > 1 ? (size_t)atol(argv[1]) / 4 : 2;
    if (argc > 3)
        coll = argv[3];

    if (n == 0)
        n = 1;
    if (tutti_comm_init_env(&c) != TUTTI_SUCCESS) {
        fprintf(stderr, "call-time: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(c, &rank);
    tutti_comm_size(c, &size);
    a = calloc(n * (size_t)size, sizeof(float)); /* a reduce-scatter's input, an all-gather's */
    b = calloc(n * (size_t)size, sizeof(float)); /* output: nranks blocks */
    for (int i = 0; i < iters / 10; i++)
        one(c);
    for (int rep = 0; rep < 5; rep++) {
        double t0;
        tutti_barrier(c, NULL);
        t0 = now();
        for (int i = 0; i < iters; i++)
            if (one(c) != TUTTI_SUCCESS) {
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
