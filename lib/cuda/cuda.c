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

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h> /* driver API types only: its entry points come through the runtime */
#include <cuda_runtime_api.h>

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
    p->staged.engine = TT_ENGINE_HOST;
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

tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *))
{
    struct tt_stage_plan p;
    cudaError_t e = cudaSuccess;
    tutti_result_t rc;

    tt_stage_layout(comm, c, &p);
    rc = tt_stage_pinned(&comm->cuda.stage, &comm->cuda.stage_cap, p.total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    tt_stage_bind(&p, comm->cuda.stage);
    if (p.in_len)
        e = cudaMemcpy((char *)comm->cuda.stage + p.in_off, p.in_src, p.in_len,
                       cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: copying %zu bytes from the device: %s", c->fn,
                                               p.in_len, cudaGetErrorString(e)));
    rc = run(comm, &p.staged);
    if (rc != TUTTI_SUCCESS)
        return rc;
    if (p.out_len)
        e = cudaMemcpy(p.out_dst, (char *)comm->cuda.stage + p.out_off, p.out_len,
                       cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: copying %zu bytes to the device: %s", c->fn,
                                               p.out_len, cudaGetErrorString(e)));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_p2p_stage(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                 void **bufs, const unsigned char *rdma)
{
    size_t total = 0, off = 0;
    int nrdma = 0;
    tutti_result_t rc;

    for (int i = 0; i < nops; i++) {
        if (ops[i]->device && !rdma[i])
            total += tt_align64(ops[i]->bytes);
        nrdma += rdma[i];
    }
    if (nrdma) { /* the HCA reads those itself: what the GPU still writes must land first,
                  * as a staging copy would have waited for it */
        cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
        if (e != cudaSuccess)
            return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                                   "point-to-point: waiting for CUDA's default "
                                                   "stream: %s",
                                                   cudaGetErrorString(e)));
    }
    rc = tt_stage_pinned(&comm->cuda.stage, &comm->cuda.stage_cap, total);
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    for (int i = 0; i < nops; i++) {
        cudaError_t e = cudaSuccess;
        if (!ops[i]->device || rdma[i])
            continue;
        bufs[i] = (char *)comm->cuda.stage + off;
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
                                  void *const *bufs, const unsigned char *rdma)
{
    for (int i = 0; i < nops; i++) {
        cudaError_t e;
        if (!ops[i]->device || rdma[i] || ops[i]->is_send || !ops[i]->bytes)
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

void tt_cuda_comm_free(struct tutti_comm *comm)
{
    tt_cuda_dev_free(comm);
    if (comm->cuda.stage)
        cudaFreeHost(comm->cuda.stage);
    comm->cuda.stage = NULL;
    comm->cuda.stage_cap = 0;
}
