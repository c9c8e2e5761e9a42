/*
 * sym-limit.c -- the machine's limit for a collective among n ranks of one host: n threads of
 * one address space doing the collective's least memory traffic, with nothing else (no
 * library, no processes, one spinning barrier per call). tutti's symmetric path reads and
 * writes the same bytes across processes, so this is the figure to put it beside.
 *
 *   build/bench/sym-limit COLL [-n N] [-b MIN] [-e MAX] [-f FACTOR] [-i ITERS] [-I 0|1]
 *
 * COLL: all_reduce (float32 sum: each thread sums its part of every input, in one pass, into
 * every output), all_gather (each copies its input into every output), reduce_scatter (each
 * sums its block of every input into its output), broadcast (each copies rank 0's input
 * into its output). -I 1: in place (each rank's output is its input). Sizes and bus bandwidth
 * as tutti-perf prints them (SIZE: the collective's bytes, all-gather and reduce-scatter the
 * whole array), the median call time of ITERS (default: about 0.2 s of calls, at least 5).
 * Each thread allocates and first touches its own buffers.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum coll { AR, AG, RS, BC };

static int n = 2, inplace, coll, iters;
static size_t count; /* elements per rank (the collective's count) */
static float **in, **out;
static _Atomic long arrived;
static double *times;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void barrier(long *round)
{
    long want = ++*round * n;
    atomic_fetch_add_explicit(&arrived, 1, memory_order_acq_rel);
    for (int spins = 0; atomic_load_explicit(&arrived, memory_order_acquire) < want; spins++)
        if (spins > 1000) /* threads may outnumber cores */
            sched_yield();
}

/* o0[i] = o1[i] = a[i] + b[i]: two ranks, one pass (restrict: vectorised). */
static void sum2(float *restrict o0, float *restrict o1, const float *restrict a,
                 const float *restrict b, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        float v = a[i] + b[i];
        o0[i] = v;
        if (o1)
            o1[i] = v;
    }
}

static void add(float *restrict acc, const float *restrict x, size_t m)
{
    for (size_t i = 0; i < m; i++)
        acc[i] += x[i];
}

/* Sum of every input over [lo, hi) + off, into every output (or one, `only` >= 0): with two
 * ranks straight into the outputs, with more through an L1-sized block. In place the
 * outputs are the inputs (same index only, read before written). */
static void sum_into(size_t lo, size_t hi, size_t off, int only)
{
    enum { B = 2048 };
    float acc[B];

    if (n == 2 && !inplace) {
        sum2(out[only >= 0 ? only : 0] + lo, only >= 0 ? NULL : out[1] + lo, in[0] + off + lo,
             in[1] + off + lo, hi - lo);
        return;
    }
    for (size_t at = lo; at < hi; at += B) {
        size_t m = hi - at < B ? hi - at : B;
        memcpy(acc, in[0] + off + at, m * 4);
        for (int r = 1; r < n; r++)
            add(acc, in[r] + off + at, m);
        for (int r = 0; r < n; r++)
            if (only < 0 || r == only)
                memcpy(out[r] + at, acc, m * 4);
    }
}

static void *thread(void *arg)
{
    int me = (int)(long)arg;
    size_t in_n = coll == RS ? count * (size_t)n : count, out_n = coll == AG ? count * n : count;
    long round = 0;

    in[me] = aligned_alloc(64, ((in_n > out_n ? in_n : out_n) * 4 + 63) / 64 * 64);
    for (size_t i = 0; i < in_n; i++)
        in[me][i] = (float)((me + i) % 7);
    out[me] = inplace ? in[me] : aligned_alloc(64, (out_n * 4 + 63) / 64 * 64);
    memset(out[me], 0, out_n * 4);
    if (inplace && coll == AG)
        memmove(in[me] + (size_t)me * count, in[me], count * 4);
    barrier(&round);
    for (int it = -2; it < iters; it++) { /* two warm-up calls */
        double t0 = now();
        size_t lo = count * (size_t)me / (size_t)n / 16 * 16;
        size_t hi = me == n - 1 ? count : count * (size_t)(me + 1) / (size_t)n / 16 * 16;
        switch (coll) {
        case AR: sum_into(lo, hi, 0, -1); break;
        case RS: sum_into(0, count, (size_t)me * count, me); break;
        case AG:
            for (int r = 0; r < n; r++) {
                float *d = out[r] + (size_t)me * count, *s = inplace ? in[me] + me * count : in[me];
                if (d != s)
                    memcpy(d, s, count * 4);
            }
            break;
        case BC:
            if (out[me] != in[0])
                memcpy(out[me], in[0], count * 4);
            break;
        }
        barrier(&round);
        if (me == 0 && it >= 0)
            times[it] = now() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
    size_t minb = 8, maxb = (size_t)64 << 20;
    double factor = 2;
    int fixed_iters = 0;

    for (coll = 0; coll < 4 && (argc < 2 || strcmp(argv[1], names[coll]) != 0); coll++)
        ;
    if (coll == 4) {
        fprintf(stderr, "usage: sym-limit all_reduce|all_gather|reduce_scatter|broadcast [-n N] "
                        "[-b MIN] [-e MAX] [-f FACTOR] [-i ITERS] [-I 0|1]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        char *v = argv[i + 1];
        double x = strtod(v, &v);
        x *= *v == 'K' ? 1024 : *v == 'M' ? 1 << 20 : *v == 'G' ? 1 << 30 : 1;
        switch (argv[i][1]) {
        case 'n': n = (int)x; break;
        case 'b': minb = (size_t)x; break;
        case 'e': maxb = (size_t)x; break;
        case 'f': factor = x; break;
        case 'i': fixed_iters = (int)x; break;
        case 'I': inplace = (int)x; break;
        }
    }
    if (n < 1 || factor <= 1) {
        fprintf(stderr, "sym-limit: -n at least 1, -f above 1\n");
        return 2;
    }
    printf("# sym-limit %s, %d threads, float32%s\n#  size(B)   time(us)  busbw(GB/s)\n",
           names[coll], n, inplace ? ", in place" : "");
    in = calloc((size_t)n, sizeof(*in));
    out = calloc((size_t)n, sizeof(*out));
    for (size_t size = minb; size <= maxb; size = (size_t)((double)size * factor)) {
        pthread_t *t = calloc((size_t)n, sizeof(*t));
        double bus = coll == BC ? 1 : coll == AR ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
        size_t whole = size / 4;
        count = coll == AG || coll == RS ? whole / (size_t)n : whole;
        if (count == 0)
            continue;
        /* about 0.2 s at 20 GB/s, 5 to 20000 calls */
        iters = fixed_iters ? fixed_iters : (int)(4e9 / (double)(size + 4096) + 5);
        if (iters > 20000)
            iters = 20000;
        times = calloc((size_t)iters, sizeof(*times));
        arrived = 0;
        for (long r = 0; r < n; r++)
            pthread_create(&t[r], NULL, thread, (void *)r);
        for (int r = 0; r < n; r++)
            pthread_join(t[r], NULL);
        qsort(times, (size_t)iters, sizeof(*times), cmp);
        double med = times[iters / 2];
        size_t bytes = (coll == AG || coll == RS ? count * (size_t)n : count) * 4;
        printf("%10zu %10.2f %12.3f\n", bytes, med * 1e6, (double)bytes / med / 1e9 * bus);
        fflush(stdout);
        for (int r = 0; r < n; r++) {
            if (out[r] != in[r])
                free(out[r]);
            free(in[r]);
        }
        free(times);
        free(t);
    }
    return 0;
}
