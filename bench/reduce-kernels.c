/*
 * reduce-kernels.c -- the host reduction kernels (lib/kern/reduce.c) alone: nanoseconds per element
 * and GB/s of one input, in place (d0 == a, the way the executor calls them), best of 5, for
 * every dtype with SUM and the ops named, on buffers that stay in cache. The figure the
 * float16 and FP8 rows of BENCHMARKS.md come from. Three more: `premul` (tt_premul, the
 * pre-pass of a premul-sum operator, a = a * k), `mulsum` (the fused step, a = a + b * k) and
 * `divide` (tt_postop_avg, AVG's division, each time after a copy of fresh values: the figure
 * includes the copy).
 *
 *   build/bench/reduce-kernels [-p] [-d DIVISOR] [COUNT [OP ...]]   (defaults: 65536, sum)
 *
 * -d: the divisor of divide (default 3; by a power of two the kernels have a faster way).
 * -p: the portable kernels (tt_reduce_kernel_portable, tt_premul_portable,
 * tt_premul_sum_kernel_portable), without the CPU's conversion instructions (reduce_x86.c).
 */
#include "../lib/kern/reduce.h"
#include "values.h"
#include "../lib/base/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int portable = 0, divisor = 3;
    for (;;) {
        if (argc > 1 && strcmp(argv[1], "-p") == 0) {
            portable = 1;
            argv++, argc--;
        } else if (argc > 2 && strcmp(argv[1], "-d") == 0) {
            divisor = atoi(argv[2]);
            argv += 2, argc -= 2;
        } else {
            break;
        }
    }
    if (divisor < 2) {
        fprintf(stderr, "reduce-kernels: -d DIVISOR must be an integer of 2 or more\n");
        return 2;
    }

    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
    int nops = argc > 2 ? argc - 2 : 1;

    if (n == 0) {
        fprintf(stderr, "reduce-kernels: COUNT must be a positive number of elements\n");
        return 2;
    }
    printf("%-12s %-6s %10s %8s\n", "dtype", "op", "ns/elem", "GB/s");
    for (int k = 0; k < nops; k++) {
        int op = -1;
        const char *name = argc > 2 ? argv[2 + k] : "sum";
        for (int o = 0; o < TUTTI_NUM_OPS; o++)
            if (strcmp(name, tutti_op_name(o)) == 0)
                op = o;
        if (!strcmp(name, "premul") || !strcmp(name, "mulsum"))
            op = name[0] == 'p' ? TUTTI_NUM_OPS : TUTTI_NUM_OPS + 1;
        if (!strcmp(name, "divide"))
            op = TUTTI_NUM_OPS + 2;
        if (op < 0) {
            fprintf(stderr,
                    "reduce-kernels: unknown op %s (sum prod min max avg premul mulsum divide)\n",
                    name);
            return 2;
        }
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++) {
            size_t es = tutti_dtype_size(t);
            unsigned char *a = malloc(n * es), *b = malloc(n * es);
            tt_reduce_fn f = (portable ? tt_reduce_kernel_portable
                                       : tt_reduce_kernel)(t, op < TUTTI_NUM_OPS ? op : TUTTI_SUM);
            tt_premul_fn pm = (portable ? tt_premul_sum_kernel_portable : tt_premul_sum_kernel)(t);
            void (*scale)(tutti_dtype_t, void *, const void *, size_t, const void *) =
                portable ? tt_premul_portable : tt_premul;
            void (*avg)(tutti_dtype_t, void *, size_t, int) =
                portable ? tt_postop_avg_portable : tt_postop_avg;
            unsigned char one[8] = {0};
            long iters = (long)(100000000 / (n * es)) + 1;
            double best = 1e30;

            if (!a || !b) {
                fprintf(stderr, "reduce-kernels: out of memory for %zu elements\n", n);
                return 1;
            }
            /* Small integers, exact in every dtype (tools/values.c): no subnormal floats,
             * which x86 computes slowly. */
            val_fill(t, op < TUTTI_NUM_OPS ? op : TUTTI_SUM, 0, a, n, 0);
            val_fill(t, op < TUTTI_NUM_OPS ? op : TUTTI_SUM, 1, b, n, 0);
            val_encode(t, 1, 1.0, one);
            for (int r = 0; r < 5; r++) {
                double t0 = tt_now();
                for (long i = 0; i < iters; i++) {
                    if (op == TUTTI_NUM_OPS)
                        scale(t, a, a, n, one);
                    else if (op == TUTTI_NUM_OPS + 1)
                        pm(a, NULL, a, b, n, one);
                    else if (op == TUTTI_NUM_OPS + 2) {
                        memcpy(a, b, n * es); /* fresh values: no underflow to subnormals */
                        avg(t, a, n, divisor);
                    } else
                        f(a, NULL, a, b, n);
                }
                double dt = (tt_now() - t0) / (double)iters;
                best = dt < best ? dt : best;
            }
            printf("%-12s %-6s %10.3f %8.2f\n", tutti_dtype_name(t), name, best / (double)n * 1e9,
                   (double)(n * es) / best / 1e9);
            free(a);
            free(b);
        }
    }
    return 0;
}
