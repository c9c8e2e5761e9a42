/*
 * gpu_common.h -- what the gpu suite's check programs share (gpu_check.c: collectives and
 * point-to-point on device buffers; soak_check.c: random sequences and a failing kernel;
 * kernel_check.c: the CUDA kernels and staging copies alone): the CUDA error check, the
 * count cap, the clock, the collectives' names, the test kernels, and the start and end of
 * a run. Each program is also linked against tests/cudamock instead of CUDA's runtime (its
 * name then ends in _mock), so the same checks run where there is no GPU.
 */
#ifndef TT_GPU_COMMON_H
#define TT_GPU_COMMON_H

#include "tutti.h"
#include "../report.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* tests/gpu/gpu_kernels.cu (or cudamock's stand-ins); tutti's kernels (or cudamock's). */
int gpu_slow_fill(float *buf, size_t n, float value, long long spin, void *stream);
int gpu_twice(float *buf, size_t n, void *stream);
#include "../../lib/cuda/kernels.h"

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

/* Join the job tutti-run started; rank and nranks are set. */
static tutti_comm_t gpu_join(const char *prog) __attribute__((unused));
static tutti_comm_t gpu_join(const char *prog)
{
    tutti_comm_t comm;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "%s: %s\n", prog, tutti_last_error());
        exit(1);
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    return comm;
}

/* The exit status of a run: 0 when this rank saw no failure (then it says so). */
static int gpu_end(tutti_comm_t comm, const char *prog, const char *mode)
{
    if (comm)
        tutti_comm_destroy(comm);
    if (!failures)
        printf("%s %s: rank %d ok\n", prog, mode, rank);
    return failures ? 1 : 0;
}

#endif
