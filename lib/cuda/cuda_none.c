/*
 * cuda_none.c -- lib/cuda in a build without CUDA: no communicator has the device path, nothing
 * is staged, and whatever would need CUDA fails saying the library was built without it.
 * The only file of lib/cuda, besides choose.c, that such a build compiles.
 */
#include "lib/cuda/cuda.h"

#include "lib/base/error.h"
#include "lib/core/comm.h"

#include <stdio.h>

/* ---- lib/cuda/cuda.c */

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
                                 void **bufs, const unsigned char *rdma)
{
    (void)ops, (void)nops, (void)bufs, (void)rdma;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}

tutti_result_t tt_cuda_p2p_finish(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                  void *const *bufs, const unsigned char *rdma)
{
    (void)ops, (void)nops, (void)bufs, (void)rdma;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}

/* ---- lib/cuda/cuda_dev.c */

void tt_cuda_self(struct tutti_comm *c, struct tt_rank_info *me)
{
    me->cuda_bus[0] = '\0';
    c->cuda.dev = -1;
}

tutti_result_t tt_cuda_dev_setup(struct tutti_comm *c)
{
    c->cuda.dev_path = 0;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_dev_check(struct tutti_comm *c, const struct tt_call *call)
{
    (void)c, (void)call;
    return TUTTI_SUCCESS;
}

int tt_cuda_dev_use(const struct tutti_comm *c, const struct tt_call *call)
{
    (void)c, (void)call;
    return 0;
}

int tt_cuda_dev_p2p(const struct tutti_comm *c, const struct tt_p2p_op *op)
{
    (void)c, (void)op;
    return 0;
}

tutti_result_t tt_cuda_dev_check_p2p(struct tutti_comm *c, const char *fn,
                                     const struct tt_p2p_op *op)
{
    (void)c, (void)fn, (void)op;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_dev_prepare(struct tutti_comm *c)
{
    return tt_fail(c, TUTTI_ERR_UNSUPPORTED, "device path: built without CUDA");
}

tutti_result_t tt_cuda_dev_begin(struct tutti_comm *c, void *after, int *prev_dev)
{
    (void)after, (void)prev_dev;
    return tt_fail(c, TUTTI_ERR_UNSUPPORTED, "device path: built without CUDA");
}

tutti_result_t tt_cuda_dev_end(struct tutti_comm *c, int prev_dev)
{
    (void)c, (void)prev_dev;
    return TUTTI_SUCCESS;
}

void tt_cuda_dev_free(struct tutti_comm *c)
{
    (void)c;
}

/* ---- lib/cuda/cuda_async.c */

tutti_result_t tt_cuda_async_prepare(struct tutti_comm *c)
{
    c->cuda.async = 0;
    return TUTTI_SUCCESS;
}

void tt_cuda_async_free(struct tutti_comm *c)
{
    (void)c;
}

tutti_result_t tt_cuda_runner_prepare(struct tutti_comm *c)
{
    c->cuda.async = 0;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_dev_on_stream(struct tutti_comm *comm, struct tt_work *w, tutti_stream_t s)
{
    (void)s;
    tt_work_release(w);
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "device path: built without CUDA");
}

/* ---- lib/cuda/cuda_stream.c */

tutti_result_t tt_cuda_enqueue(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s,
                               int device, const struct tt_work_ops *ops)
{
    (void)s, (void)ops;
    (void)device;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "%s: built without CUDA", c->fn);
}

tutti_result_t tt_cuda_enqueue_dev(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_stream_t s, const struct tt_work_ops *ops)
{
    (void)s, (void)ops;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "%s: built without CUDA", c->fn);
}

tutti_result_t tt_cuda_enqueue_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                   tutti_stream_t s, const struct tt_work_ops *wops)
{
    (void)ops, (void)nops, (void)s, (void)wops;
    return tt_fail(comm, TUTTI_ERR_UNSUPPORTED, "point-to-point: built without CUDA");
}
