/*
 * coll.c -- the public collectives: check the call (coll_check.c), describe it, build its plan,
 * run it. Nothing of a rank's data is sent before every argument has been checked.
 * Point-to-point calls and groups: sendrecv.c.
 */
#include "lib/boot/bootstrap.h"
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/cuda/cuda.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/core/redop.h"
#include "lib/base/log.h"
#include "lib/stream/stream.h"
#include "lib/exec/tag.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tutti_result_t coll_run(struct tutti_comm *comm, struct tt_call *c, tutti_stream_t stream)
{
    unsigned own = 0;
    tutti_result_t rc;

    TT_CHECK(tt_coll_check_comm(comm, stream, c->fn));
    rc = tt_coll_check_args(comm, c, &c->inplace, &own);
    if (rc != TUTTI_SUCCESS)
        return own ? tt_coll_refused(comm, c, stream, rc, own) : rc;
    if (tt_redop_is_custom(c->op)) /* bound now: the op may be destroyed once this returns */
        TT_CHECK(tt_redop_bind(comm, c));
    c->refusal = 0;
    rc = tt_coll_check_memory(comm, c);
    if (rc != TUTTI_SUCCESS)
        return c->refusal ? tt_coll_refused(comm, c, stream, rc, c->refusal) : rc;
    c->engine = tt_coll_engine_kind(comm, c); /* classified once: host, staged, device path */
    TT_CHECK(tt_coll_engines[c->engine]->check(comm, c));
    if (tt_group_open()) /* checked: tutti_group_end runs it (coll_group.c) */
        return tt_group_add_coll(comm, c, stream);
    return tt_coll_dispatch(comm, c, stream);
}

tutti_result_t tutti_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                tutti_dtype_t dtype, tutti_op_t op, tutti_comm_t comm,
                                tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_ALL_REDUCE,
                        .fn = "tutti_all_reduce",
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = count,
                        .dtype = dtype,
                        .op = op,
                        .root = 0};
    return coll_run(comm, &c, stream);
}

tutti_result_t tutti_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                tutti_dtype_t dtype, tutti_comm_t comm, tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_ALL_GATHER,
                        .fn = "tutti_all_gather",
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = sendcount,
                        .dtype = dtype,
                        .op = TUTTI_SUM,
                        .root = 0};
    return coll_run(comm, &c, stream);
}

tutti_result_t tutti_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    tutti_dtype_t dtype, tutti_op_t op, tutti_comm_t comm,
                                    tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_REDUCE_SCATTER,
                        .fn = "tutti_reduce_scatter",
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = recvcount,
                        .dtype = dtype,
                        .op = op,
                        .root = 0};
    return coll_run(comm, &c, stream);
}

tutti_result_t tutti_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                               tutti_dtype_t dtype, int root, tutti_comm_t comm,
                               tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_BROADCAST,
                        .fn = "tutti_broadcast",
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = count,
                        .dtype = dtype,
                        .op = TUTTI_SUM,
                        .root = root};
    return coll_run(comm, &c, stream);
}

tutti_result_t tutti_reduce(const void *sendbuf, void *recvbuf, size_t count, tutti_dtype_t dtype,
                            tutti_op_t op, int root, tutti_comm_t comm, tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_REDUCE,
                        .fn = "tutti_reduce",
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = count,
                        .dtype = dtype,
                        .op = op,
                        .root = root};
    return coll_run(comm, &c, stream);
}

tutti_result_t tutti_barrier(tutti_comm_t comm, tutti_stream_t stream)
{
    struct tt_call c = {.coll = TT_COLL_ALL_REDUCE,
                        .fn = "tutti_barrier",
                        .sendbuf = NULL,
                        .recvbuf = NULL,
                        .count = 1,
                        .dtype = TUTTI_UINT8,
                        .op = TUTTI_SUM,
                        .root = 0};

    TT_CHECK(tt_comm_check(comm, "tutti_barrier"));
    /* The communicator's own bytes: a queued barrier outlives this frame. */
    c.sendbuf = &comm->barrier_buf[0];
    c.recvbuf = &comm->barrier_buf[1];
    return coll_run(comm, &c, stream);
}
