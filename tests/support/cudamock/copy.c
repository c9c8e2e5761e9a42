/*
 * copy.c -- cudamock's copies and memsets (operations on a stream; the blocking ones on the
 * legacy default stream) and cuStreamWaitValue32 (stream_int.h).
 */
#include "stream_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- copies ---- */

struct copy {
    void *dst;
    const void *src;
    size_t bytes;
    int value; /* memset: the byte; copy: -1 */
};

static void do_copy(void *arg)
{
    struct copy *c = arg;
    if (c->value < 0)
        memmove(c->dst, c->src, c->bytes);
    else
        memset(c->dst, c->value, c->bytes);
}

static cudaError_t copy_async(void *dst, const void *src, size_t bytes, int value, cudaStream_t h,
                              uint64_t *seq)
{
    struct copy c = {dst, src, bytes, value};
    return cudamock_ret(cudamock_queue_fn(h, do_copy, &c, 0, sizeof(c), seq));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t h)
{
    GUARD();
    (void)kind;
    return copy_async(dst, src, bytes, -1, h, NULL);
}

/* The blocking calls run on the legacy default stream and return once done. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    uint64_t seq;
    cudaError_t e;

    GUARD();
    (void)kind;
    e = copy_async(dst, src, bytes, -1, NULL, &seq);
    if (e == cudaSuccess)
        cudamock_wait_for(cudamock_stream(NULL), seq);
    return e;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t h)
{
    GUARD();
    if (!cudamock_device_range(dst, bytes, "cudaMemsetAsync"))
        return cudamock_ret(cudaErrorInvalidValue);
    return copy_async(dst, NULL, bytes, value & 0xff, h, NULL);
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes)
{
    uint64_t seq;
    cudaError_t e;

    GUARD();
    if (!cudamock_device_range(dst, bytes, "cudaMemset"))
        return cudamock_ret(cudaErrorInvalidValue);
    e = copy_async(dst, NULL, bytes, value & 0xff, NULL, &seq);
    if (e == cudaSuccess)
        cudamock_wait_for(cudamock_stream(NULL), seq);
    return e;
}

/* ---- cuStreamWaitValue32, through cudaGetDriverEntryPointByVersion ---- */

CUresult cudamock_wait_value32(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    struct op *o;

    GUARD_CU();
    if (flags != CU_STREAM_WAIT_VALUE_GEQ)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!cudamock_device_range((const void *)(uintptr_t)addr, 4, "cuStreamWaitValue32"))
        return CUDA_ERROR_INVALID_VALUE;
    o = calloc(1, sizeof(*o));
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *o = (struct op){.run = cudamock_run_wait_value,
                     .addr = (const volatile uint32_t *)(uintptr_t)addr,
                     .value = value};
    return cudamock_enqueue(cudamock_stream(h), o, NULL) == cudaSuccess ? CUDA_SUCCESS
                                                                        : CUDA_ERROR_INVALID_VALUE;
}
