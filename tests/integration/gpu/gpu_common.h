/*
 * gpu_common.h -- what the gpu suite's check programs share (gpu_check.c: collectives and
 * point-to-point on device buffers; soak_check.c: random sequences and a failing kernel;
 * kernel_check.c: the CUDA kernels and staging copies alone): the CUDA error check, the
 * count cap, the clock, the collectives' names and the test kernels (joining and leaving the
 * job: report.h). Each program is also linked against tests/support/cudamock instead of CUDA's
 * runtime (its name then ends in _mock), so the same checks run where there is no GPU.
 */
#ifndef TT_GPU_COMMON_H
#define TT_GPU_COMMON_H

#include "tutti.h"
#include "../../support/report.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* tests/integration/gpu/gpu_kernels.cu (or cudamock's stand-ins); tutti's kernels (or cudamock's).
 */
int gpu_slow_fill(float *buf, size_t n, float value, long long spin, void *stream);
int gpu_twice(float *buf, size_t n, void *stream);
#include "../../../lib/cuda/kernels.h"

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fail("%s: %s", #call, cudaGetErrorString(e_));                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { AR, AG, RS, BC, RD, NCOLL };
static const char *const coll_name[NCOLL]
    __attribute__((unused)) = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"};

/* The largest element count a check uses: n, or less where GPU_CHECK_MAX_COUNT says so (the
 * cudamock run keeps its host copies short). */
static size_t big(size_t n) __attribute__((unused));
static size_t big(size_t n)
{
    const char *v = getenv("GPU_CHECK_MAX_COUNT");
    size_t most = v && *v ? strtoull(v, NULL, 10) : 0;
    return most && most < n ? most : n;
}

static double now(void) __attribute__((unused));
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Without a usable device: say why and exit 77 (meson's skip). Else device 0 is current. */
static void gpu_begin(void)
{
    int ndev = 0;

    if (tutti_cuda_devices(&ndev) != TUTTI_SUCCESS) {
        printf("SKIP: no usable CUDA device: %s\n", tutti_last_error());
        exit(77);
    }
    CU(cudaSetDevice(0));
}

#endif
