/*
 * cuda_stream.c -- calls on a CUDA stream wrapped with tutti_stream_wrap_cuda (cuda.h).
 *
 * Staged calls queue on the user's stream: the inputs' copy into pinned memory, the host
 * collective or point-to-point batch (on the communicator's runner where it has one, else in a
 * host function, cudaLaunchHostFunc: queue_host_part), the outputs' copy back. The call returns at
 * once and runs in the stream's order. The host function makes no CUDA call (CUDA forbids it
 * there); a failure in it is kept by the tutti stream and puts the communicator in its error state.
 * Device-path calls go to cuda_async.c.
 */
#include "lib/cuda/cuda.h"
#include "lib/cuda/cuda_stage.h"

#include "lib/core/comm.h"
#include "lib/base/error.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

struct host_item {
    tutti_stream_t s;
    struct tt_work w;
};

static void CUDART_CB host_fn(void *arg)
{
    struct host_item *it = arg;
    struct tutti_comm *comm = it->w.comm;

    if (tt_stream_failed(it->s)) {
        it->w.how->skip(&it->w, "an earlier operation on the CUDA stream failed");
    } else {
        tutti_result_t rc = it->w.how->run(&it->w);
        if (rc != TUTTI_SUCCESS)
            tt_stream_record_failure(it->s, rc, tt_thread_error());
    }
    if (it->w.kind == TT_WORK_P2P)
        free(it->w.ops);
    free(it);
    tt_comm_work_done(comm);
}

/*
 * The host part of a staged call, in the stream's order (takes it, and a batch's operations).
 * Where the communicator has a runner (cuda_async.c) it runs there: the stream waits on the GPU
 * for it, as for a device-path call, and no host function holds the stream. Host functions run
 * one at a time on the driver's own thread, so ranks of one process whose host functions each
 * waited for the others' would wait for ever. Otherwise a host function runs it.
 */
static tutti_result_t queue_host_part(struct tutti_comm *comm, struct host_item *it,
                                      tutti_stream_t s, const char *fn)
{
    cudaError_t e;

    if (comm->cuda.async) {
        struct tt_work w = it->w;
        free(it);
        return tt_cuda_dev_on_stream(comm, &w, s);
    }
    tt_comm_work_queued(comm);
    e = cudaLaunchHostFunc((cudaStream_t)tt_stream_cuda_handle(s), host_fn, it);
    if (e != cudaSuccess) {
        if (it->w.kind == TT_WORK_P2P)
            free(it->w.ops);
        free(it);
        tt_comm_work_done(comm);
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: queueing on the CUDA stream: %s", fn,
                                               cudaGetErrorString(e)));
    }
    return TUTTI_SUCCESS;
}

/*
 * A CUDA stream being captured into a graph is refused before anything is queued: the calls
 * run host code once, when queued (the device path's runner) or hold per-call staging (a
 * host function that frees its item), so a graph replaying them would do nothing or use
 * freed memory.
 */
static tutti_result_t not_capturing(struct tutti_comm *comm, tutti_stream_t s, const char *fn)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)tt_stream_cuda_handle(s), &st);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                       "%s: the CUDA stream cannot be used now (%s): is a CUDA graph being "
                       "captured? tutti calls cannot be captured into CUDA graphs",
                       fn, cudaGetErrorString(e));
    }
    if (st != cudaStreamCaptureStatusNone)
        return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                       "%s: the CUDA stream is being captured into a CUDA graph; tutti calls "
                       "cannot be captured (call it outside the capture)",
                       fn);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_enqueue_dev(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_stream_t s, const struct tt_work_ops *ops)
{
    struct tt_work w = {.kind = TT_WORK_COLL, .how = ops, .comm = comm, .call = *c};

    TT_CHECK(not_capturing(comm, s, c->fn));
    return tt_cuda_dev_on_stream(comm, &w, s);
}

tutti_result_t tt_cuda_enqueue(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s,
                               int device, const struct tt_work_ops *ops)
{
    cudaStream_t cs = (cudaStream_t)tt_stream_cuda_handle(s);
    struct tt_pinned_pool **st = (struct tt_pinned_pool **)tt_stream_cuda_state(s);
    struct host_item *it;
    struct tt_stage_plan p;
    cudaError_t e = cudaSuccess;

    TT_CHECK(not_capturing(comm, s, c->fn));
    it = calloc(1, sizeof(*it));
    if (!it || (!*st && !(*st = calloc(1, sizeof(**st))))) {
        free(it);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", c->fn);
    }
    it->s = s;
    it->w.kind = TT_WORK_COLL;
    it->w.how = ops;
    it->w.comm = comm;
    if (device)
        tt_stage_layout(comm, c, &p);
    /* A premul-sum scalar in device memory comes too, after the staged bytes (the host
     * function may make no CUDA call to read it). */
    size_t at = device ? tt_align64(p.total) : 0, need = at + (c->premul.dev ? 64 : 0);
    if ((device || need) && tt_pinned_pool_get(*st, need) != TUTTI_SUCCESS) {
        free(it);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: %s", c->fn, tt_thread_error());
    }
    if (!device) {
        it->w.call = *c; /* host buffers on a CUDA stream: stream-ordered, used in place */
    } else {
        tt_stage_bind(&p, (*st)->buf);
        it->w.call = p.staged;
        if (p.in_len)
            e = cudaMemcpyAsync((char *)(*st)->buf + p.in_off, p.in_src, p.in_len,
                                cudaMemcpyDeviceToHost, cs);
    }
    if (e == cudaSuccess && c->premul.dev) {
        it->w.call.premul.dev = NULL;
        it->w.call.premul.pinned = (char *)(*st)->buf + at;
        e = cudaMemcpyAsync((char *)(*st)->buf + at, c->premul.dev, tutti_dtype_size(c->dtype),
                            cudaMemcpyDeviceToHost, cs);
    }
    if (e != cudaSuccess) {
        free(it);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: queueing the copy from the device: %s", c->fn,
                       cudaGetErrorString(e));
    }
    TT_CHECK(queue_host_part(comm, it, s, c->fn));
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
                                         int nops, tutti_stream_t s,
                                         const struct tt_work_ops *wops);

tutti_result_t tt_cuda_enqueue_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                   tutti_stream_t s, const struct tt_work_ops *wops)
{
    struct tt_work w = {.kind = TT_WORK_P2P, .how = wops, .comm = comm};
    struct tt_p2p_op *dev, *rest;
    int ndev, nrest;
    tutti_result_t rc;

    TT_CHECK(not_capturing(comm, s, "point-to-point"));
    ndev = tt_cuda_p2p_split(comm, ops, nops, NULL);
    if (ndev == 0)
        return enqueue_p2p_staged(comm, ops, nops, s, wops);
    /* Two arrays: the runner owns (and may free) the device part while the rest is queued. */
    dev = malloc((size_t)ndev * sizeof(*dev));
    rest = malloc((size_t)nops * sizeof(*rest));
    if (!dev || !rest) {
        free(dev);
        free(rest);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    }
    tt_cuda_p2p_split(comm, ops, nops, rest);
    memcpy(dev, rest, (size_t)ndev * sizeof(*dev));
    nrest = nops - ndev;
    w.ops = dev;
    w.nops = ndev;
    rc = tt_cuda_dev_on_stream(comm, &w, s); /* takes dev */
    if (rc == TUTTI_SUCCESS && nrest > 0)
        rc = enqueue_p2p_staged(comm, rest + ndev, nrest, s, wops);
    free(rest);
    return rc;
}

static tutti_result_t enqueue_p2p_staged(struct tutti_comm *comm, const struct tt_p2p_op *ops,
                                         int nops, tutti_stream_t s, const struct tt_work_ops *wops)
{
    cudaStream_t cs = (cudaStream_t)tt_stream_cuda_handle(s);
    struct tt_pinned_pool **st = (struct tt_pinned_pool **)tt_stream_cuda_state(s);
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
            total += tt_align64(ops[i].bytes);
    if (total && tt_pinned_pool_get(*st, total) != TUTTI_SUCCESS) {
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
        off += tt_align64(ops[i].bytes);
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
    it->w.how = wops;
    it->w.comm = comm;
    it->w.ops = mine;
    it->w.nops = nops;
    TT_CHECK(queue_host_part(comm, it, s, "point-to-point"));
    /* After the host function: receives go back to the device ("mine" may be freed by now,
     * the offsets are recomputed). */
    off = 0;
    for (int i = 0; i < nops && e == cudaSuccess; i++) {
        if (!ops[i].device)
            continue;
        if (!ops[i].is_send && ops[i].bytes)
            e = cudaMemcpyAsync(ops[i].buf, (char *)(*st)->buf + off, ops[i].bytes,
                                cudaMemcpyHostToDevice, cs);
        off += tt_align64(ops[i].bytes);
    }
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "point-to-point: queueing a copy to the device: %s",
                                               cudaGetErrorString(e)));
    return TUTTI_SUCCESS;
}
