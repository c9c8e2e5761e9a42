/*
 * cuda.c -- device memory in collectives, staged through pinned host memory (cuda.h).
 *
 * The CUDA runtime is linked statically (libcudart_static): libtutti loads on machines
 * without a driver, where the first query fails, CUDA is reported unavailable at INFO and
 * never touched again.
 *
 * Data path (this version): a collective on device buffers copies its inputs to pinned host
 * memory, runs the host collective (any transport, any algorithm), and copies its outputs
 * back. On a CUDA-wrapped stream all three are queued on the user's stream, the middle one as
 * a host function (cudaLaunchHostFunc), so the call returns at once, sees the results of the
 * kernels queued before it and the kernels queued after it see its results. The host
 * function makes no CUDA call (CUDA forbids it there); a failure in it is kept by the tutti
 * stream and puts the communicator in its error state, so peers fail fast; the outputs then
 * hold whatever the staging buffer held, and tutti_stream_sync/query report the error.
 * Point-to-point calls stage the same way (on a wrapped stream: copies and a host function
 * on it, as for collectives),
 * except a send from device memory the user registered with the communicator to a peer
 * reached over net_ib whose HCA takes a dma-buf registration: that one is RDMA-written from
 * the GPU's memory (GPUDirect RDMA; tt_cuda_dmabuf exports the allocation for it).
 * Where every rank shares a host, collectives on device buffers take the device path instead
 * (cuda_dev.c: p2p connections over CUDA IPC, the kernels of cuda/kernels.cu).
 */
#include "cuda.h"

#include "comm.h"
#include "error.h"
#include "log.h"

#include "tutti_build.h"

#include <pthread.h>
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
    pthread_once(&once, probe);
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

/* Where each buffer's bytes live in the staging area, and which way they are copied. */
struct stage_plan {
    size_t in_off, in_len;   /* device -> host: from the call's `in_src` */
    size_t out_off, out_len; /* host -> device: to the call's `out_dst` */
    const void *in_src;
    void *out_dst;
    size_t total;
    struct tt_call staged; /* the call on staging pointers (filled by stage_bind) */
    size_t send_off, recv_off;
    int uses_send, uses_recv;
};

static size_t align64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static void stage_layout(const struct tutti_comm *comm, const struct tt_call *c,
                         struct stage_plan *p)
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
    p->recv_off = align64(uses_send ? send_b : 0);
    p->total = p->recv_off + (uses_recv ? recv_b : 0);
    p->in_src = c->sendbuf, p->in_off = 0, p->in_len = uses_send ? send_b : 0;
    p->out_dst = c->recvbuf, p->out_off = p->recv_off, p->out_len = uses_recv ? recv_b : 0;
}

/* Point the staged call at base. */
static void stage_bind(struct stage_plan *p, char *base)
{
    p->staged.sendbuf = p->uses_send || p->staged.inplace ? base + p->send_off : NULL;
    p->staged.recvbuf = p->uses_recv || p->staged.inplace ? base + p->recv_off : NULL;
}

/* Pinned memory of at least `need` bytes in *buf (capacity *cap), grown as needed. */
static tutti_result_t pinned(void **buf, size_t *cap, size_t need)
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

tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *))
{
    struct stage_plan p;
    cudaError_t e = cudaSuccess;
    tutti_result_t rc;

    stage_layout(comm, c, &p);
    rc = pinned(&comm->cuda_stage, &comm->cuda_stage_cap, p.total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    stage_bind(&p, comm->cuda_stage);
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
            total += align64(ops[i]->bytes);
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
    rc = pinned(&comm->cuda_stage, &comm->cuda_stage_cap, total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    for (int i = 0; i < nops; i++) {
        cudaError_t e = cudaSuccess;
        if (!ops[i]->device || direct[i])
            continue;
        bufs[i] = (char *)comm->cuda_stage + off;
        off += align64(ops[i]->bytes);
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

/* A wrapped stream's staging: one pinned buffer reused call after call (stream order keeps
 * the uses apart), and the ones it outgrew, freed when the stream is synchronised. */
struct cuda_state {
    void *buf;
    size_t cap;
    void **old;
    size_t nold;
};

struct host_item {
    tutti_stream_t s;
    struct tt_work w;
};

/* A wrapped stream's staging of at least `need` bytes. */
static tutti_result_t stream_stage(struct cuda_state *cst, size_t need)
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
    return pinned(&cst->buf, &cst->cap, need);
}

static void CUDART_CB host_fn(void *arg)
{
    struct host_item *it = arg;
    struct tutti_comm *comm = it->w.comm;

    if (tt_stream_failed(it->s)) {
        tt_coll_skip_work(&it->w, "an earlier operation on the CUDA stream failed");
    } else {
        tutti_result_t rc = tt_coll_exec_work(&it->w);
        if (rc != TUTTI_SUCCESS)
            tt_stream_record_failure(it->s, rc, tt_thread_error());
    }
    if (it->w.kind == TT_WORK_P2P)
        free(it->w.ops);
    free(it);
    tt_comm_work_done(comm);
}

tutti_result_t tt_cuda_enqueue(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s,
                               int device)
{
    cudaStream_t cs = (cudaStream_t)tt_stream_cuda_handle(s);
    struct cuda_state **st = (struct cuda_state **)tt_stream_cuda_state(s);
    struct host_item *it;
    struct stage_plan p;
    cudaError_t e = cudaSuccess;

    if (device && tt_cuda_direct_use(comm, c)) {
        struct tt_work w = {.kind = TT_WORK_COLL, .comm = comm, .call = *c};
        return tt_cuda_dev_on_stream(comm, &w, s);
    }
    it = calloc(1, sizeof(*it));
    if (!it || (!*st && !(*st = calloc(1, sizeof(**st))))) {
        free(it);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", c->fn);
    }
    it->s = s;
    it->w.kind = TT_WORK_COLL;
    it->w.comm = comm;
    if (!device) {
        it->w.call = *c; /* host buffers on a CUDA stream: stream-ordered, used in place */
    } else {
        struct cuda_state *cst = *st;
        stage_layout(comm, c, &p);
        if (stream_stage(cst, p.total) != TUTTI_SUCCESS) {
            free(it);
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: %s", c->fn, tt_thread_error());
        }
        stage_bind(&p, cst->buf);
        it->w.call = p.staged;
        if (p.in_len)
            e = cudaMemcpyAsync((char *)cst->buf + p.in_off, p.in_src, p.in_len,
                                cudaMemcpyDeviceToHost, cs);
        if (e != cudaSuccess) {
            free(it);
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: queueing the copy from the device: %s",
                           c->fn, cudaGetErrorString(e));
        }
    }
    tt_comm_work_queued(comm);
    e = cudaLaunchHostFunc(cs, host_fn, it);
    if (e != cudaSuccess) {
        free(it);
        tt_comm_work_done(comm);
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: queueing the collective on the CUDA stream: "
                                               "%s",
                                               c->fn, cudaGetErrorString(e)));
    }
    if (device && p.out_len) {
        e = cudaMemcpyAsync(p.out_dst, (char *)(*st)->buf + p.out_off, p.out_len,
                            cudaMemcpyHostToDevice, cs);
        if (e != cudaSuccess)
            return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                                   "%s: queueing the copy to the device: %s", c->fn,
                                                   cudaGetErrorString(e)));
    }
    return TUTTI_SUCCESS;
}

/* The operations of a batch that take the device path, first, on the runner (cuda_async.c);
 * the others are staged after them (a host function on s), as tt_p2p_exec orders them. */
static tutti_result_t enqueue_p2p_staged(struct tutti_comm *comm, const struct tt_p2p_op *ops,
                                         int nops, tutti_stream_t s);

tutti_result_t tt_cuda_enqueue_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                   tutti_stream_t s)
{
    struct tt_work w = {.kind = TT_WORK_P2P, .comm = comm};
    struct tt_p2p_op *dev, *rest;
    int ndev = 0, nrest = 0;
    tutti_result_t rc;

    for (int i = 0; i < nops; i++)
        ndev += tt_cuda_direct_p2p(comm, &ops[i]);
    if (ndev == 0)
        return enqueue_p2p_staged(comm, ops, nops, s);
    dev = malloc((size_t)ndev * sizeof(*dev));
    rest = malloc((size_t)nops * sizeof(*rest));
    if (!dev || !rest) {
        free(dev);
        free(rest);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    }
    ndev = 0;
    for (int i = 0; i < nops; i++) {
        if (tt_cuda_direct_p2p(comm, &ops[i]))
            dev[ndev++] = ops[i];
        else
            rest[nrest++] = ops[i];
    }
    w.ops = dev;
    w.nops = ndev;
    rc = tt_cuda_dev_on_stream(comm, &w, s); /* takes dev */
    if (rc == TUTTI_SUCCESS && nrest > 0)
        rc = enqueue_p2p_staged(comm, rest, nrest, s);
    free(rest);
    return rc;
}

static tutti_result_t enqueue_p2p_staged(struct tutti_comm *comm, const struct tt_p2p_op *ops,
                                         int nops, tutti_stream_t s)
{
    cudaStream_t cs = (cudaStream_t)tt_stream_cuda_handle(s);
    struct cuda_state **st = (struct cuda_state **)tt_stream_cuda_state(s);
    struct host_item *it = calloc(1, sizeof(*it));
    struct tt_p2p_op *mine = malloc((size_t)nops * sizeof(*mine));
    size_t total = 0, off = 0;
    cudaError_t e = cudaSuccess;

    if (!it || !mine || (!*st && !(*st = calloc(1, sizeof(**st))))) {
        free(it);
        free(mine);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    }
    for (int i = 0; i < nops; i++)
        if (ops[i].device)
            total += align64(ops[i].bytes);
    if (total && stream_stage(*st, total) != TUTTI_SUCCESS) {
        free(it);
        free(mine);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: %s", tt_thread_error());
    }
    /* The host function sees host memory only: device buffers become their staging. */
    for (int i = 0; i < nops && e == cudaSuccess; i++) {
        mine[i] = ops[i];
        if (!ops[i].device)
            continue;
        mine[i].buf = (char *)(*st)->buf + off;
        mine[i].device = 0;
        off += align64(ops[i].bytes);
        if (ops[i].is_send)
            e = cudaMemcpyAsync(mine[i].buf, ops[i].buf, ops[i].bytes, cudaMemcpyDeviceToHost, cs);
    }
    if (e != cudaSuccess) {
        free(it);
        free(mine);
        return tt_fail(comm, TUTTI_ERR_SYSTEM,
                       "point-to-point: queueing a copy from the device: %s",
                       cudaGetErrorString(e));
    }
    it->s = s;
    it->w.kind = TT_WORK_P2P;
    it->w.comm = comm;
    it->w.ops = mine;
    it->w.nops = nops;
    tt_comm_work_queued(comm);
    e = cudaLaunchHostFunc(cs, host_fn, it);
    if (e != cudaSuccess) {
        free(it);
        free(mine);
        tt_comm_work_done(comm);
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "point-to-point: queueing on the CUDA stream: %s",
                                               cudaGetErrorString(e)));
    }
    /* After the host function: receives go back to the device ("mine" may be freed by now,
     * the offsets are recomputed). */
    off = 0;
    for (int i = 0; i < nops && e == cudaSuccess; i++) {
        if (!ops[i].device)
            continue;
        if (!ops[i].is_send && ops[i].bytes)
            e = cudaMemcpyAsync(ops[i].buf, (char *)(*st)->buf + off, ops[i].bytes,
                                cudaMemcpyHostToDevice, cs);
        off += align64(ops[i].bytes);
    }
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "point-to-point: queueing a copy to the device: %s",
                                               cudaGetErrorString(e)));
    return TUTTI_SUCCESS;
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

void tt_cuda_stream_free(void *state)
{
    struct cuda_state *st = state;
    if (!st)
        return;
    for (size_t i = 0; i < st->nold; i++)
        cudaFreeHost(st->old[i]);
    if (st->buf)
        cudaFreeHost(st->buf);
    free(st->old);
    free(st);
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

tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *))
{
    (void)run;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "%s: built without CUDA", c->fn);
}

tutti_result_t tt_cuda_enqueue(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s,
                               int device)
{
    (void)s;
    (void)device;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "%s: built without CUDA", c->fn);
}

tutti_result_t tt_cuda_stream_sync(void *cuda_stream)
{
    (void)cuda_stream;
    return TUTTI_ERR_UNSUPPORTED;
}

tutti_result_t tt_cuda_enqueue_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                   tutti_stream_t s)
{
    (void)ops, (void)nops, (void)s;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}

tutti_result_t tt_cuda_stream_query(void *cuda_stream)
{
    (void)cuda_stream;
    return TUTTI_ERR_UNSUPPORTED;
}

void tt_cuda_stream_free(void *state)
{
    (void)state;
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
