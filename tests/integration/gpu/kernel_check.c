/*
 * kernel_check -- the CUDA reduction kernels and the staging copies alone, without
 * collectives (gpu_common.h says what the gpu suite's programs share).
 *
 *   kernel_check kernels  the CUDA reduction kernels (one process): every dtype x op, counts
 *                         1 to 1M+3, vector-aligned and not, the fused second output, in
 *                         place; AVG through the division kernel (in place) and in the
 *                         reduction's own pass (out of place); the premul-sum kernel
 *                         (scalar by value and by address); against tools/values.c's
 *                         expectations (computed without tutti)
 *   kernel_check bench    reduction kernel (float32 sum, 256 MiB) bandwidth against
 *                         cudaMemcpy device-to-device on the same buffers (one process)
 *   kernel_check copylat  the latency of one staging copy (cudaMemcpy to / from pinned
 *                         memory, 8 B to 256 KiB), every rank at once (under tutti-run: ranks
 *                         share the GPU)
 * Exit 0: all checks passed; 77: no usable CUDA device.
 */
#include "gpu_common.h"
#include "values.h"

static tutti_comm_t comm;

/* The premul-sum kernel: rank 0's inputs times its scalar (values.h: 2), the scalar by value
 * and by device address, in place and not, against values.c's expectation for one rank. */
static size_t premuls(void)
{
    size_t counts[] = {1, 7, 1000, big(1000003)}, checked = 0;
    unsigned char table[VAL_MAX_PERIOD * 8], k[8] = {0};

    for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int mode = 0; mode < 4; mode++) { /* bit 0: by address; bit 1: in place */
                size_t n = counts[c], es = tutti_dtype_size((tutti_dtype_t)t), bad = 0, wrong;
                unsigned char *h = malloc(n * es);
                char *s, *d, *dk;
                CU(cudaMalloc((void **)&s, n * es));
                CU(cudaMalloc((void **)&d, n * es));
                CU(cudaMalloc((void **)&dk, 8));
                val_fill((tutti_dtype_t)t, VAL_PREMUL, 0, h, n, 0);
                val_premul_scalar((tutti_dtype_t)t, 0, k);
                CU(cudaMemcpy(s, h, n * es, cudaMemcpyHostToDevice));
                CU(cudaMemcpy(dk, k, 8, cudaMemcpyHostToDevice));
                char *dst = mode & 2 ? s : d;
                if (tt_cuda_premul(dst, s, n, (tutti_dtype_t)t, mode & 1 ? NULL : k,
                                   mode & 1 ? dk : NULL, NULL) != 0)
                    fail("premul: launch failed for %s", tutti_dtype_name((tutti_dtype_t)t));
                CU(cudaMemcpy(h, dst, n * es, cudaMemcpyDeviceToHost));
                val_expect_reduce((tutti_dtype_t)t, VAL_PREMUL, 1, table);
                wrong = val_count_wrong((tutti_dtype_t)t, VAL_PREMUL, h, n, 0, table, &bad);
                if (wrong)
                    fail("premul: %s count %zu%s%s: %zu element(s) wrong, first [%zu]",
                         tutti_dtype_name((tutti_dtype_t)t), n, mode & 1 ? " by address" : "",
                         mode & 2 ? " in place" : "", wrong, bad);
                checked++;
                cudaFree(s);
                cudaFree(d);
                cudaFree(dk);
                free(h);
            }
    return checked;
}

/* AVG's division of the 8-bit integers by rank counts the type cannot hold (as on the host:
 * the quotient by the int), by the division kernel and in the reduction's pass (a + 0). */
static size_t wide_divisors(void)
{
    const int divs[] = {127, 128, 200, 255, 256, 300, 1000};
    size_t checked = 0;
    unsigned char h[256], z[256] = {0}, g[256];
    char *d, *zero;

    CU(cudaMalloc((void **)&d, 256));
    CU(cudaMalloc((void **)&zero, 256));
    CU(cudaMemcpy(zero, z, 256, cudaMemcpyHostToDevice));
    for (int t = TUTTI_INT8; t <= TUTTI_UINT8; t++)
        for (size_t j = 0; j < sizeof(divs) / sizeof(divs[0]); j++)
            for (int fused = 0; fused < 2; fused++) {
                for (int i = 0; i < 256; i++)
                    h[i] = (unsigned char)i;
                CU(cudaMemcpy(d, h, 256, cudaMemcpyHostToDevice));
                if ((fused ? tt_cuda_reduce_copy(d, NULL, d, zero, 256, (tutti_dtype_t)t, TUTTI_AVG,
                                                 divs[j], NULL)
                           : tt_cuda_divide(d, 256, (tutti_dtype_t)t, divs[j], NULL)) != 0)
                    fail("kernels: division launch failed for %s",
                         tutti_dtype_name((tutti_dtype_t)t));
                CU(cudaMemcpy(g, d, 256, cudaMemcpyDeviceToHost));
                for (int i = 0; i < 256; i++) {
                    int x = t == TUTTI_INT8 ? (int)(int8_t)i : i, want = x / divs[j];
                    int got = t == TUTTI_INT8 ? (int)(int8_t)g[i] : (int)g[i];
                    if (got != want)
                        fail("kernels: %s %d / %d%s: want %d, got %d",
                             tutti_dtype_name((tutti_dtype_t)t), x, divs[j],
                             fused ? " (in the reduction)" : "", want, got);
                }
                checked++;
            }
    cudaFree(d);
    cudaFree(zero);
    return checked;
}

/* The kernels against expectations computed without tutti: inputs of "ranks" 0 and 1. */
static void kernels(void)
{
    size_t counts[] = {1, 7, 1000, big(1000003)};
    unsigned char table[VAL_MAX_PERIOD * 8];
    size_t checked = 0;

    for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
        for (int op = 0; op < TUTTI_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                for (int shift = 0; shift < 2; shift++) /* 1: off the 16-byte vector path */
                    for (int inplace = 0; inplace < 2; inplace++) {
                        size_t n = counts[k], es = tutti_dtype_size((tutti_dtype_t)t);
                        size_t bytes = (n + 1) * es, off = (size_t)shift * es, bad = 0, wrong;
                        unsigned char *h = malloc(bytes), *g = malloc(bytes);
                        char *a, *b, *d, *d2;
                        CU(cudaMalloc((void **)&a, bytes));
                        CU(cudaMalloc((void **)&b, bytes));
                        CU(cudaMalloc((void **)&d, bytes));
                        CU(cudaMalloc((void **)&d2, bytes));
                        val_fill((tutti_dtype_t)t, op, 0, h, n, 0);
                        CU(cudaMemcpy(a + off, h, n * es, cudaMemcpyHostToDevice));
                        val_fill((tutti_dtype_t)t, op, 1, h, n, 0);
                        CU(cudaMemcpy(b + off, h, n * es, cudaMemcpyHostToDevice));
                        char *dst = inplace ? a + off : d + off;
                        /* AVG: in place, the division kernel after the reduction; out
                         * of place, the division in the reduction's own pass */
                        int fused = op == TUTTI_AVG ? 2 : 0;
                        if (tt_cuda_reduce_copy(dst, d2 + off, a + off, b + off, n,
                                                (tutti_dtype_t)t, (tutti_op_t)op,
                                                inplace ? 0 : fused, NULL) != 0 ||
                            (op == TUTTI_AVG && inplace &&
                             (tt_cuda_divide(dst, n, (tutti_dtype_t)t, 2, NULL) != 0 ||
                              tt_cuda_divide(d2 + off, n, (tutti_dtype_t)t, 2, NULL) != 0)))
                            fail("kernels: launch failed for %s %s",
                                 tutti_dtype_name((tutti_dtype_t)t), tutti_op_name((tutti_op_t)op));
                        CU(cudaMemcpy(h, dst, n * es, cudaMemcpyDeviceToHost));
                        CU(cudaMemcpy(g, d2 + off, n * es, cudaMemcpyDeviceToHost));
                        val_expect_reduce((tutti_dtype_t)t, op, 2, table);
                        wrong = val_count_wrong((tutti_dtype_t)t, op, h, n, 0, table, &bad) +
                                val_count_wrong((tutti_dtype_t)t, op, g, n, 0, table, &bad);
                        if (wrong)
                            fail("kernels: %s %s count %zu%s%s: %zu element(s) wrong, first [%zu]",
                                 tutti_dtype_name((tutti_dtype_t)t), tutti_op_name((tutti_op_t)op),
                                 n, shift ? " unaligned" : "", inplace ? " in place" : "", wrong,
                                 bad);
                        checked++;
                        cudaFree(a);
                        cudaFree(b);
                        cudaFree(d);
                        cudaFree(d2);
                        free(h);
                        free(g);
                    }
    printf("kernels: %zu dtype x op x count x alignment x placement cases checked\n", checked);
    printf("kernels: %zu divisions by more ranks than an 8-bit integer holds checked\n",
           wide_divisors());
    printf("kernels: %zu premul-sum cases checked\n", premuls());
}

/*
 * What one staging copy costs by size (the staged path does two per call): blocking
 * cudaMemcpy between device memory and pinned host memory, median of 101, every rank at
 * once (ranks sharing the GPU take turns on it: run on 1 and on 2 ranks to see the cost).
 */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void copy_latency(void)
{
    size_t sizes[] = {8, 512, 4096, 32768, 262144};
    void *d, *h;
    double t[101];

    CU(cudaMalloc(&d, 262144));
    CU(cudaHostAlloc(&h, 262144, cudaHostAllocDefault));
    CU(cudaMemset(d, 0, 262144));
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        double med[2];
        for (int dir = 0; dir < 2; dir++) {
            tutti_barrier(comm, NULL);
            for (int i = 0; i < 101; i++) {
                double t0 = now();
                CU(cudaMemcpy(dir ? d : h, dir ? h : d, sizes[k],
                              dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
                t[i] = now() - t0;
            }
            qsort(t, 101, sizeof(t[0]), cmp_double);
            med[dir] = t[50] * 1e6;
        }
        printf("copy latency, rank %d of %d: %7zu B: device to host %8.2f us, host to device "
               "%8.2f us (blocking cudaMemcpy, pinned, median of 101)\n",
               rank, nranks, sizes[k], med[0], med[1]);
    }
    cudaFreeHost(h);
    cudaFree(d);
}

static void bench(void)
{
    size_t n = (size_t)64 << 20, bytes = n * sizeof(float); /* 256 MiB per buffer */
    float *a, *b, *c, ms;
    cudaEvent_t e0, e1;
    const int iters = 20;

    CU(cudaMalloc((void **)&a, bytes));
    CU(cudaMalloc((void **)&b, bytes));
    CU(cudaMalloc((void **)&c, bytes));
    CU(cudaMemset(a, 0, bytes));
    CU(cudaMemset(b, 0, bytes));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    tt_cuda_reduce(c, a, b, n, TUTTI_FLOAT32, TUTTI_SUM, NULL); /* warm-up */
    CU(cudaEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++)
        if (tt_cuda_reduce(c, a, b, n, TUTTI_FLOAT32, TUTTI_SUM, NULL) != 0)
            fail("tt_cuda_reduce launch");
    CU(cudaEventRecord(e1, NULL));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    double red = 3.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
    CU(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++)
        CU(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, NULL));
    CU(cudaEventRecord(e1, NULL));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    double cpy = 2.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
    printf("kernel bench: float32 sum of 2 x 256 MiB into a third: %.1f GB/s moved; "
           "cudaMemcpy device-to-device: %.1f GB/s moved; ratio %.2f\n",
           red, cpy, red / cpy);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    gpu_begin();
    if (!strcmp(mode, "kernels"))
        kernels();
    else if (!strcmp(mode, "bench"))
        bench();
    else if (!strcmp(mode, "copylat"))
        comm = report_join("kernel_check"), copy_latency();
    else {
        fprintf(stderr, "usage: kernel_check kernels|bench|copylat\n");
        return 2;
    }
    return report_end(comm, "kernel_check", mode);
}
