/*
 * gpu.h -- the CUDA runtime as far as memory goes, for every layer that meets device memory:
 * transports (GPUDirect RDMA), registrations, operators, streams and the CUDA engines above.
 * gpu.c with CUDA; without it gpu_none.c, where tt_cuda_ready() is 0, every pointer is host
 * memory and whatever would touch the GPU fails saying so.
 */
#ifndef TT_GPU_H
#define TT_GPU_H

#include "tutti.h"

#include <stddef.h>
#include <stdint.h>

/* Memory kinds of a pointer. */
enum tt_mem { TT_MEM_HOST = 0, TT_MEM_DEVICE, TT_MEM_MANAGED };

/* A usable CUDA device is present (checked once; logged at INFO either way). */
int tt_cuda_ready(void);

/* The kind of memory p points to (TT_MEM_HOST when CUDA is not ready). */
enum tt_mem tt_cuda_kind(const void *p);

/* Copy `bytes` from device (or managed) memory at src to host memory at dst, blocking. */
tutti_result_t tt_cuda_read(void *dst, const void *src, size_t bytes);

/* Pinned memory of at least `need` bytes in *buf (capacity *cap), grown as needed. */
tutti_result_t tt_stage_pinned(void **buf, size_t *cap, size_t need);

/* A pool of pinned staging for work queued in stream order (a wrapped CUDA stream's): one
 * buffer reused call after call, and the ones it outgrew, kept until the pool is freed
 * (queued work may still use them). tt_pinned_pool_free frees the pool itself too. */
struct tt_pinned_pool {
    void *buf;
    size_t cap;
    void **old;
    size_t nold;
};
tutti_result_t tt_pinned_pool_get(struct tt_pinned_pool *pool, size_t need);
void tt_pinned_pool_free(struct tt_pinned_pool *pool);

/* Wait for / poll a cudaStream_t (TUTTI_IN_PROGRESS while work is pending). */
tutti_result_t tt_cuda_stream_sync(void *cuda_stream);
tutti_result_t tt_cuda_stream_query(void *cuda_stream);
/* The CUDA stream's id (cudaStreamGetId: unique in the process, never reused, unlike the
 * handle's address); 0 for the legacy default stream. */
tutti_result_t tt_cuda_stream_id(void *cuda_stream, unsigned long long *id);

/* A device buffer, *buf of *cap bytes, grown to `bytes` in the order of CUDA stream `stream`
 * (cudaMallocAsync / cudaFreeAsync: no device-wide wait, which a user's stream held for this
 * very call would never end); tt_cuda_free_scratch frees it. */
tutti_result_t tt_cuda_scratch(void **buf, size_t *cap, size_t bytes, void *stream);
void tt_cuda_free_scratch(void **buf, size_t *cap);

/* Symmetric device memory (lib/core/symmem.c, lib/coll/window.c): `bytes` of zeroed memory
 * on device `dev` (-1: the current one). tt_cuda_ipc_of: the cudaMalloc allocation holding p
 * ([*base, *base + *size)) and its IPC handle (TT_CUDA_IPC_BYTES; memory from a
 * stream-ordered pool has none: the message says so), which another process of the host
 * opens on device `dev` and closes. The calling thread's current device is left as it was. */
#define TT_CUDA_IPC_BYTES 64
tutti_result_t tt_cuda_sym_alloc(int dev, size_t bytes, void **p);
void tt_cuda_sym_free(void *p);
tutti_result_t tt_cuda_ipc_of(const void *p, char **base, size_t *size, unsigned char *handle);
tutti_result_t tt_cuda_ipc_open(int dev, const unsigned char *handle, void **p);
void tt_cuda_ipc_close(void *p);

/*
 * GPUDirect RDMA: a dma-buf file descriptor (*fd, the caller closes it) for the device
 * allocation holding p, with the range it covers ([*base, *base + *size), whole host pages).
 * 0 on success; -1 with the reason in why (no CUDA, a driver without dma-buf support, not
 * device memory).
 */
int tt_cuda_dmabuf(const void *p, int *fd, uintptr_t *base, size_t *size, char *why,
                   size_t why_size);

#endif
