/*
 * reduce-kernels.c -- the host reduction kernels (lib/reduce.c) alone: nanoseconds per element
 * and GB/s of one input, in place (d0 == a, the way the executor calls them), best of 5, for
 * every dtype with SUM and the ops named, on buffers that stay in cache. The figure the
 * float16 and FP8 rows of BENCHMARKS.md come from.
 *
 *   build/bench/reduce-kernels [COUNT [OP ...]]   (default 65536 elements, sum)
 */
#include "reduce.h"
#include "values.h"
#include "wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
    int nops = argc > 2 ? argc - 2 : 1;

    if (n == 0) {
        fprintf(stderr, "reduce-kernels: COUNT must be a positive number of elements\n");
        return 2;
    }
    printf("%-12s %-5s %10s %8s\n", "dtype", "op", "ns/elem", "GB/s");
    for (int k = 0; k < nops; k++) {
        int op = -1;
        for (int o = 0; o < TUTTI_NUM_OPS; o++)
            if (argc <= 2 ? o == TUTTI_SUM : strcmp(argv[2 + k], tutti_op_name(o)) == 0)
                op = o;
        if (op < 0) {
            fprintf(stderr, "reduce-kernels: unknown op %s (sum prod min max avg)\n", argv[2 + k]);
            return 2;
        }
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++) {
            size_t es = tutti_dtype_size(t);
            unsigned char *a = malloc(n * es), *b = malloc(n * es);
            tt_reduce_fn f = tt_reduce_kernel(t, op);
            long iters = (long)(100000000 / (n * es)) + 1;
            double best = 1e30;

            if (!a || !b) {
                fprintf(stderr, "reduce-kernels: out of memory for %zu elements\n", n);
                return 1;
            }
            /* Small integers, exact in every dtype (tools/values.c): no subnormal floats,
             * which x86 computes slowly. */
            val_fill(t, op, 0, a, n, 0);
            val_fill(t, op, 1, b, n, 0);
            for (int r = 0; r < 5; r++) {
                double t0 = tt_now();
                for (long i = 0; i < iters; i++)
                    f(a, NULL, a, b, n);
                double dt = (tt_now() - t0) / (double)iters;
                best = dt < best ? dt : best;
            }
            printf("%-12s %-5s %10.3f %8.2f\n", tutti_dtype_name(t), tutti_op_name(op),
                   best / (double)n * 1e9, (double)(n * es) / best / 1e9);
            free(a);
            free(b);
        }
    }
    return 0;
}
