/*
 * gpu.c -- the CUDA runtime as far as memory goes (gpu.h): whether CUDA is usable, which
 * memory a pointer is, blocking reads, pinned and device buffers, dma-buf export, waiting
 * for a CUDA stream. Built with CUDA; gpu_none.c stands in without it.
 *
 * The CUDA runtime is linked statically (libcudart_static): libtutti loads on machines
 * without a driver, where the first query fails, CUDA is reported unavailable at INFO and
 * never touched again.
 */
#include "lib/gpu/gpu.h"

#include "lib/base/error.h"
#include "lib/base/log.h"

#include <cuda.h> /* driver API types only: its entry points come through the runtime */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready, ndev;

static void probe(void)
{
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) {
        TT_INFO(TT_SUB_INIT, "CUDA unavailable: %s",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        (void)cudaGetLastError();
        ndev = 0;
        return;
    }
    ready = 1;
    TT_INFO(TT_SUB_INIT, "CUDA: %d device(s)", ndev);
}

int tt_cuda_ready(void)
{
    static _Atomic int probed; /* every point-to-point call asks: skip pthread_once's call */

    if (!atomic_load_explicit(&probed, memory_order_acquire)) {
        pthread_once(&once, probe);
        atomic_store_explicit(&probed, 1, memory_order_release);
    }
    return ready;
}

tutti_result_t tutti_cuda_devices(int *count)
{
    if (!count)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_cuda_devices: count is NULL");
    *count = 0;
    if (!tt_cuda_ready()) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        (void)cudaGetLastError();
        return tt_fail_quiet(NULL, TUTTI_ERR_UNSUPPORTED, "CUDA unavailable: %s",
                             e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    }
    *count = ndev;
    return TUTTI_SUCCESS;
}

enum tt_mem tt_cuda_kind(const void *p)
{
    struct cudaPointerAttributes a;

    if (!p || !tt_cuda_ready())
        return TT_MEM_HOST;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return TT_MEM_HOST;
    }
    return a.type == cudaMemoryTypeDevice    ? TT_MEM_DEVICE
           : a.type == cudaMemoryTypeManaged ? TT_MEM_MANAGED
                                             : TT_MEM_HOST;
}

tutti_result_t tt_stage_pinned(void **buf, size_t *cap, size_t need)
{
    cudaError_t e;

    if (*cap >= need && *buf)
        return TUTTI_SUCCESS;
    if (*buf)
        cudaFreeHost(*buf);
    *buf = NULL;
    *cap = 0;
    e = cudaHostAlloc(buf, need ? need : 64, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        *buf = NULL;
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cudaHostAlloc of %zu bytes: %s", need,
                       cudaGetErrorString(e));
    }
    *cap = need;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_read(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);

    if (e != cudaSuccess)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cudaMemcpy of %zu bytes from %p: %s", bytes, src,
                       cudaGetErrorString(e));
    return TUTTI_SUCCESS;
}

/* The pool's buffer of at least `need` bytes: one pinned buffer reused call after call
 * (stream order keeps the uses apart), and the ones it outgrew, freed with the pool. */
tutti_result_t tt_pinned_pool_get(struct tt_pinned_pool *cst, size_t need)
{
    if (cst->cap < need && cst->buf) { /* queued work may still use the old one */
        void **o = realloc(cst->old, (cst->nold + 1) * sizeof(*o));
        if (!o)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory");
        cst->old = o;
        cst->old[cst->nold++] = cst->buf;
        cst->buf = NULL;
        cst->cap = 0;
    }
    return tt_stage_pinned(&cst->buf, &cst->cap, need);
}

void tt_pinned_pool_free(struct tt_pinned_pool *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nold; i++)
        cudaFreeHost(st->old[i]);
    if (st->buf)
        cudaFreeHost(st->buf);
    free(st->old);
    free(st);
}

tutti_result_t tt_cuda_stream_sync(void *cuda_stream)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)cuda_stream);
    if (e != cudaSuccess)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_stream_query(void *cuda_stream)
{
    cudaError_t e = cudaStreamQuery((cudaStream_t)cuda_stream);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return TUTTI_IN_PROGRESS;
    }
    if (e != cudaSuccess)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cudaStreamQuery: %s", cudaGetErrorString(e));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_stream_id(void *cuda_stream, unsigned long long *id)
{
    cudaError_t e;

    *id = 0;
    if (!cuda_stream)
        return TUTTI_SUCCESS;
    e = cudaStreamGetId((cudaStream_t)cuda_stream, id);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "cudaStreamGetId: %s (a destroyed stream?)",
                       cudaGetErrorString(e));
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_scratch(void **buf, size_t *cap, size_t bytes, void *stream)
{
    cudaError_t e = cudaSuccess;
    void *p = NULL;

    if (bytes <= *cap && *buf)
        return TUTTI_SUCCESS;
    if (*buf)
        e = cudaFreeAsync(*buf, (cudaStream_t)stream);
    *buf = NULL;
    *cap = 0;
    if (e == cudaSuccess)
        e = cudaMallocAsync(&p, bytes ? bytes : 64, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cudaMallocAsync of %zu bytes: %s", bytes,
                       cudaGetErrorString(e));
    *buf = p;
    *cap = bytes;
    return TUTTI_SUCCESS;
}

void tt_cuda_free_scratch(void **buf, size_t *cap)
{
    if (*buf)
        cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
}

/* Run on device dev (-1: the current one), then back_to the thread's device. */
static cudaError_t on_device(int dev, int *prev)
{
    cudaError_t e = cudaGetDevice(prev);

    if (e == cudaSuccess && dev >= 0 && dev != *prev)
        e = cudaSetDevice(dev);
    return e;
}

static void back_to(int prev, int dev)
{
    if (prev >= 0 && dev >= 0 && prev != dev)
        cudaSetDevice(prev);
}

static tutti_result_t cuda_failed(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return tt_fail(NULL, TUTTI_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

tutti_result_t tt_cuda_sym_alloc(int dev, size_t bytes, void **p)
{
    int prev = -1;
    cudaError_t e = on_device(dev, &prev);

    *p = NULL;
    if (e == cudaSuccess)
        e = cudaMalloc(p, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(*p, 0, bytes);
    if (e != cudaSuccess && *p) {
        cudaFree(*p);
        *p = NULL;
    }
    back_to(prev, dev);
    return e == cudaSuccess ? TUTTI_SUCCESS : cuda_failed("cudaMalloc", e);
}

void tt_cuda_sym_free(void *p)
{
    if (p)
        cudaFree(p);
    (void)cudaGetLastError();
}

static tutti_result_t ipc_handle(void *p, unsigned char *handle)
{
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, p);

    _Static_assert(sizeof(h) == TT_CUDA_IPC_BYTES, "an IPC handle's size");
    if (e != cudaSuccess)
        return cuda_failed("cudaIpcGetMemHandle", e);
    memcpy(handle, &h, sizeof(h));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_ipc_open(int dev, const unsigned char *handle, void **p)
{
    cudaIpcMemHandle_t h;
    int prev = -1;
    cudaError_t e = on_device(dev, &prev);

    *p = NULL;
    memcpy(&h, handle, sizeof(h));
    if (e == cudaSuccess)
        e = cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
    back_to(prev, dev);
    return e == cudaSuccess
               ? TUTTI_SUCCESS
               : cuda_failed("opening a peer's device memory (cudaIpcOpenMemHandle)", e);
}

void tt_cuda_ipc_close(void *p)
{
    if (p)
        cudaIpcCloseMemHandle(p);
    (void)cudaGetLastError();
}

/* Driver entry points for dma-buf export, resolved through the runtime (no libcuda link). */
typedef CUresult (*range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr p);
typedef CUresult (*handle_fn)(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
                              unsigned long long flags);
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static range_fn get_range;
static handle_fn get_handle;

static void driver_resolve(void)
{
    void *f = NULL;
    enum cudaDriverEntryPointQueryResult q;

    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        memcpy(&get_range, &f, sizeof(f));
    f = NULL;
    if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &f, 12000,
                                         cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        memcpy(&get_handle, &f, sizeof(f));
    (void)cudaGetLastError();
}

tutti_result_t tt_cuda_ipc_of(const void *p, char **base, size_t *size, unsigned char *handle)
{
    CUdeviceptr b = 0;
    CUresult r;

    if (!tt_cuda_ready() || tt_cuda_kind(p) != TT_MEM_DEVICE)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "not CUDA device memory");
    pthread_once(&driver_once, driver_resolve);
    if (!get_range)
        return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "the CUDA driver has no cuMemGetAddressRange");
    r = get_range(&b, size, (CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "cuMemGetAddressRange failed (CUresult %d)", (int)r);
    *base = (char *)(uintptr_t)b;
    return ipc_handle(*base, handle);
}

int tt_cuda_dmabuf(const void *p, int *fd, uintptr_t *base, size_t *size, char *why,
                   size_t why_size)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r;
    int f = -1;

    if (!tt_cuda_ready() || tt_cuda_kind(p) != TT_MEM_DEVICE) {
        snprintf(why, why_size, "not CUDA device memory");
        return -1;
    }
    pthread_once(&driver_once, driver_resolve);
    if (!get_range || !get_handle) {
        snprintf(why, why_size, "the CUDA driver has no cuMemGetHandleForAddressRange");
        return -1;
    }
    r = get_range(&b, &s, (CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_size, "cuMemGetAddressRange failed (CUresult %d)", (int)r);
        return -1;
    }
    *base = (uintptr_t)b & ~(page - 1);
    *size = (((uintptr_t)b + s + page - 1) & ~(page - 1)) - *base;
    r = get_handle(&f, (CUdeviceptr)*base, *size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS || f < 0) {
        snprintf(why, why_size,
                 "cuMemGetHandleForAddressRange(dma-buf) failed (CUresult %d): the GPU or "
                 "driver offers no dma-buf export (it needs NVIDIA's open kernel modules)",
                 (int)r);
        return -1;
    }
    *fd = f;
    return 0;
}
