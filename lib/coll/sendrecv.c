/*
 * sendrecv.c -- point-to-point calls (tutti_send, tutti_recv) and groups of them: each call is
 * checked at once; a batch (one call, or a group) becomes a plan of one lane per peer and
 * direction, run like a collective (coll.h). Device buffers move GPU to GPU where the
 * communicator has the device path (cuda_dev.c), else they are staged (cuda.c), except a
 * registered device send buffer a transport reads itself (GPUDirect RDMA over net_ib).
 */
#include "lib/coll/coll.h"
#include "lib/coll/group.h"
#include "lib/core/comm.h"
#include "lib/cuda/cuda.h"
#include "lib/base/error.h"
#include "lib/core/memreg.h"
#include "lib/stream/stream.h"
#include "lib/exec/tag.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run a batch now on this thread. Only the fields a P2P item uses are set: zeroing the whole
 * item was most of tutti_group_end's time in a loop of small exchanges. */
static tutti_result_t run_now(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops,
                              const char *collective)
{
    struct tt_work w;

    w.kind = TT_WORK_P2P;
    w.how = &tt_coll_work_ops;
    w.comm = comm;
    w.ops = ops;
    w.nops = nops;
    w.collective = collective;
    w.call.after = NULL;
    return tt_coll_run_now(comm, &w);
}

static tutti_result_t p2p_call(int is_send, void *buf, size_t count, tutti_dtype_t dtype, int peer,
                               struct tutti_comm *comm, tutti_stream_t stream)
{
    const char *fn = is_send ? "tutti_send" : "tutti_recv";
    struct tt_call c = {.fn = fn, .dtype = dtype};
    struct tt_p2p_op op;
    struct tt_group *g;
    size_t esize;

    TT_CHECK(tt_coll_check_comm(comm, stream, fn));
    TT_CHECK(tt_coll_check_dtype_op(comm, &c, 0));
    if (peer < 0 || peer >= comm->nranks)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: peer %d is out of range [0, %d)", fn, peer,
                       comm->nranks);
    esize = tutti_dtype_size(dtype); /* a power of two: no division on the hot path */
    if (count > (SIZE_MAX / 2) >> __builtin_ctzl(esize))
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: count %zu overflows", fn, count);
    if (count > 0 && !buf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", fn,
                       is_send ? "sendbuf" : "recvbuf", count);
    op = (struct tt_p2p_op){is_send, peer, buf, count * esize, 0};
    /* Device memory: staged through pinned memory when the batch runs (cuda.c). */
    op.device = count > 0 && tt_cuda_ready() && tt_cuda_kind(buf) != TT_MEM_HOST;
    TT_CHECK(tt_cuda_dev_check_p2p(comm, fn, &op));
    g = &tt_group; /* one thread-local lookup */
    if (g->depth == 0) {
        if (peer == comm->rank)
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                           "%s: peer is this rank (%d); a send to self and its receive must be in "
                           "one tutti_group_start/end",
                           fn, peer);
        if (!stream)
            return run_now(comm, &op, 1, NULL);
        if (tt_stream_is_cuda(stream))
            return tt_cuda_enqueue_p2p(comm, &op, 1, stream, &tt_coll_work_ops);
        struct tt_work w = {.kind = TT_WORK_P2P,
                            .how = &tt_coll_work_ops,
                            .comm = comm,
                            .ops = malloc(sizeof(op)),
                            .nops = 1};
        if (!w.ops)
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
        *w.ops = op;
        return tt_stream_push(stream, &w);
    }
    return tt_group_add_p2p(g, comm, stream, fn, &op);
}

tutti_result_t tutti_send(const void *sendbuf, size_t count, tutti_dtype_t dtype, int peer,
                          tutti_comm_t comm, tutti_stream_t stream)
{
    return p2p_call(1, (void *)sendbuf, count, dtype, peer, comm, stream);
}

tutti_result_t tutti_recv(void *recvbuf, size_t count, tutti_dtype_t dtype, int peer,
                          tutti_comm_t comm, tutti_stream_t stream)
{
    return p2p_call(0, recvbuf, count, dtype, peer, comm, stream);
}

tutti_result_t tutti_group_end(void)
{
    struct tt_group *g = &tt_group; /* one thread-local lookup */
    tutti_result_t rc;

    if (g->depth == 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_group_end: no group is open (missing tutti_group_start)");
    if (--g->depth > 0)
        return TUTTI_SUCCESS;
    rc = g->err;
    if (rc == TUTTI_SUCCESS && g->nops + g->ncolls > 0) {
        rc = tt_comm_check(g->comm, "tutti_group_end");
        if (rc == TUTTI_SUCCESS && g->stream)
            rc = tt_stream_check(g->stream, g->comm, "tutti_group_end");
    }
    if (rc == TUTTI_SUCCESS && g->nops > 0) {
        if (tt_stream_is_cuda(g->stream)) {
            rc = tt_cuda_enqueue_p2p(g->comm, g->ops, g->nops, g->stream, &tt_coll_work_ops);
        } else if (g->stream) {
            /* The stream owns what it is given: the heap array, or a heap copy of small[]. */
            struct tt_work w = {.kind = TT_WORK_P2P,
                                .how = &tt_coll_work_ops,
                                .comm = g->comm,
                                .ops = g->ops,
                                .nops = g->nops,
                                .collective = g->collective};
            if (w.ops == g->small && (w.ops = malloc((size_t)w.nops * sizeof(*w.ops))))
                memcpy(w.ops, g->small, (size_t)w.nops * sizeof(*w.ops));
            rc = w.ops ? tt_stream_push(g->stream, &w)
                       : tt_fail(g->comm, TUTTI_ERR_SYSTEM, "tutti_group_end: out of memory");
            if (rc == TUTTI_SUCCESS)
                g->ops = g->small; /* the heap array, if any, is the stream's now */
            else if (w.ops != g->ops)
                free(w.ops); /* a copy the stream did not take */
        } else {
            rc = run_now(g->comm, g->ops, g->nops, g->collective);
        }
    }
    if (rc == TUTTI_SUCCESS && g->ncolls > 0)
        rc = tt_coll_run_group(g->comm, g->colls, g->ncolls, g->stream);
    tt_group_reset(g);
    return rc;
}
