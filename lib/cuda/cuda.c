/*
 * cuda.c -- device memory in collectives, staged through pinned host memory (cuda.h).
 *
 * The CUDA runtime is linked statically (libcudart_static): libtutti loads on machines
 * without a driver, where the first query fails, CUDA is reported unavailable at INFO and
 * never touched again.
 *
 * Data path: a collective on device buffers copies its inputs to pinned host memory, runs
 * the host collective (any transport, any algorithm), and copies its outputs back (on a
 * CUDA-wrapped stream all three are queued on the user's stream: cuda_stream.c). The outputs
 * of a failed call hold whatever the staging buffer held. Point-to-point calls stage the
 * same way, except a send from device memory the user registered with the communicator to a
 * peer reached over net_ib whose HCA takes a dma-buf registration: that one is RDMA-written
 * from the GPU's memory (GPUDirect RDMA; tt_cuda_dmabuf exports the allocation for it).
 * Where every rank shares a host, device buffers take the device path instead (cuda_dev.c:
 * p2p connections over CUDA IPC, the kernels of cuda/kernels.cu).
 */
#include "lib/cuda/cuda.h"
#include "lib/cuda/cuda_stage.h"

#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include "tutti_build.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if TUTTI_HAVE_CUDA
#include <cuda.h> /* driver API types only: its entry points come through the runtime */
#include <cuda_runtime_api.h>

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

void tt_stage_layout(const struct tutti_comm *comm, const struct tt_call *c,
                     struct tt_stage_plan *p)
{
    size_t es = tutti_dtype_size(c->dtype), n = (size_t)comm->nranks, me = (size_t)comm->rank;
    size_t send_b = (c->coll == TT_COLL_REDUCE_SCATTER ? c->count * n : c->count) * es;
    size_t recv_b = (c->coll == TT_COLL_ALL_GATHER ? c->count * n : c->count) * es;
    int uses_send = 1, uses_recv = 1;

    if (c->coll == TT_COLL_BROADCAST || c->coll == TT_COLL_REDUCE) {
        uses_send = c->coll == TT_COLL_REDUCE || comm->rank == c->root;
        uses_recv = c->coll == TT_COLL_BROADCAST || comm->rank == c->root;
    }
    memset(p, 0, sizeof(*p));
    p->staged = *c;
    p->staged.device = 0;
    p->uses_send = uses_send;
    p->uses_recv = uses_recv;
    if (c->inplace) {
        if (c->coll == TT_COLL_ALL_GATHER) { /* the send block sits inside recv */
            p->total = recv_b;
            p->in_src = c->recvbuf, p->in_len = recv_b;
            p->out_dst = c->recvbuf, p->out_len = recv_b;
            p->recv_off = 0, p->send_off = me * c->count * es;
        } else if (c->coll == TT_COLL_REDUCE_SCATTER) { /* recv sits inside send */
            p->total = send_b;
            p->in_src = c->sendbuf, p->in_len = send_b;
            p->out_dst = c->recvbuf, p->out_off = me * c->count * es, p->out_len = recv_b;
            p->send_off = 0, p->recv_off = me * c->count * es;
        } else {
            p->total = recv_b;
            p->in_src = c->sendbuf, p->in_len = uses_send ? send_b : 0;
            p->out_dst = c->recvbuf, p->out_len = uses_recv ? recv_b : 0;
        }
        return;
    }
    p->send_off = 0;
    p->recv_off = tt_align64(uses_send ? send_b : 0);
    p->total = p->recv_off + (uses_recv ? recv_b : 0);
    p->in_src = c->sendbuf, p->in_off = 0, p->in_len = uses_send ? send_b : 0;
    p->out_dst = c->recvbuf, p->out_off = p->recv_off, p->out_len = uses_recv ? recv_b : 0;
}

void tt_stage_bind(struct tt_stage_plan *p, char *base)
{
    p->staged.sendbuf = p->uses_send || p->staged.inplace ? base + p->send_off : NULL;
    p->staged.recvbuf = p->uses_recv || p->staged.inplace ? base + p->recv_off : NULL;
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

tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *))
{
    struct tt_stage_plan p;
    cudaError_t e = cudaSuccess;
    tutti_result_t rc;

    tt_stage_layout(comm, c, &p);
    rc = tt_stage_pinned(&comm->cuda_stage, &comm->cuda_stage_cap, p.total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    tt_stage_bind(&p, comm->cuda_stage);
    if (p.in_len)
        e = cudaMemcpy((char *)comm->cuda_stage + p.in_off, p.in_src, p.in_len,
                       cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: copying %zu bytes from the device: %s", c->fn,
                                               p.in_len, cudaGetErrorString(e)));
    rc = run(comm, &p.staged);
    if (rc != TUTTI_SUCCESS)
        return rc;
    if (p.out_len)
        e = cudaMemcpy(p.out_dst, (char *)comm->cuda_stage + p.out_off, p.out_len,
                       cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: copying %zu bytes to the device: %s", c->fn,
                                               p.out_len, cudaGetErrorString(e)));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_p2p_stage(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                 void **bufs, const unsigned char *direct)
{
    size_t total = 0, off = 0;
    int ndirect = 0;
    tutti_result_t rc;

    for (int i = 0; i < nops; i++) {
        if (ops[i]->device && !direct[i])
            total += tt_align64(ops[i]->bytes);
        ndirect += direct[i];
    }
    if (ndirect) { /* the HCA reads those itself: what the GPU still writes must land first,
                    * as a staging copy would have waited for it */
        cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
        if (e != cudaSuccess)
            return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                                   "point-to-point: waiting for CUDA's default "
                                                   "stream: %s",
                                                   cudaGetErrorString(e)));
    }
    rc = tt_stage_pinned(&comm->cuda_stage, &comm->cuda_stage_cap, total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    for (int i = 0; i < nops; i++) {
        cudaError_t e = cudaSuccess;
        if (!ops[i]->device || direct[i])
            continue;
        bufs[i] = (char *)comm->cuda_stage + off;
        off += tt_align64(ops[i]->bytes);
        if (ops[i]->is_send)
            e = cudaMemcpy(bufs[i], ops[i]->buf, ops[i]->bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            return tt_comm_set_error(
                comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                              "tutti_send to rank %d: copying %zu bytes from the device: %s",
                              ops[i]->peer, ops[i]->bytes, cudaGetErrorString(e)));
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_p2p_finish(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                  void *const *bufs, const unsigned char *direct)
{
    for (int i = 0; i < nops; i++) {
        cudaError_t e;
        if (!ops[i]->device || direct[i] || ops[i]->is_send || !ops[i]->bytes)
            continue;
        e = cudaMemcpy(ops[i]->buf, bufs[i], ops[i]->bytes, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            return tt_comm_set_error(
                comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                              "tutti_recv from rank %d: copying %zu bytes to the device: %s",
                              ops[i]->peer, ops[i]->bytes, cudaGetErrorString(e)));
    }
    return TUTTI_SUCCESS;
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

void tt_cuda_comm_free(struct tutti_comm *comm)
{
    tt_cuda_dev_free(comm);
    if (comm->cuda_stage)
        cudaFreeHost(comm->cuda_stage);
    comm->cuda_stage = NULL;
    comm->cuda_stage_cap = 0;
}

#else /* built without CUDA */

int tt_cuda_ready(void)
{
    return 0;
}

tutti_result_t tutti_cuda_devices(int *count)
{
    if (!count)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_cuda_devices: count is NULL");
    *count = 0;
    return tt_fail_quiet(NULL, TUTTI_ERR_UNSUPPORTED,
                         "CUDA unavailable: this libtutti was built without CUDA (-Dcuda)");
}

enum tt_mem tt_cuda_kind(const void *p)
{
    (void)p;
    return TT_MEM_HOST;
}

tutti_result_t tt_cuda_read(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "built without CUDA");
}

tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *))
{
    (void)run;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "%s: built without CUDA", c->fn);
}

void tt_cuda_comm_free(struct tutti_comm *comm)
{
    (void)comm;
}

tutti_result_t tt_cuda_p2p_stage(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                 void **bufs, const unsigned char *direct)
{
    (void)ops, (void)nops, (void)bufs, (void)direct;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}

tutti_result_t tt_cuda_p2p_finish(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                  void *const *bufs, const unsigned char *direct)
{
    (void)ops, (void)nops, (void)bufs, (void)direct;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}

int tt_cuda_dmabuf(const void *p, int *fd, uintptr_t *base, size_t *size, char *why,
                   size_t why_size)
{
    (void)p, (void)fd, (void)base, (void)size;
    snprintf(why, why_size, "this libtutti was built without CUDA");
    return -1;
}

#endif
