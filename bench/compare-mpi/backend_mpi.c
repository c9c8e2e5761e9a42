/*
 * backend_mpi.c -- mpi-perf's backend (tools/perf/perf.h): MPI_Allreduce, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce, MPI_Sendrecv, MPI_Alltoall, MPI_Gather and
 * MPI_Scatter, so the reference peer is measured by the same driver, table and check as
 * tutti-perf.
 *
 * Layout differences, handled here and counted in MPI's time:
 *   - out-of-place broadcast: MPI_Bcast has one buffer, so the root first copies send to recv;
 *   - in-place reduce-scatter: MPI leaves the block at the start of the buffer, tutti (NCCL)
 *     at rank * count; the block is moved there.
 * fp16, bf16 and AVG have no MPI equivalent and are reported as not supported.
 */
#include "perf.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int me, n;
static char err[MPI_MAX_ERROR_STRING + 64];

static MPI_Datatype mtype(tutti_dtype_t t)
{
    switch (t) {
    case TUTTI_INT8: return MPI_INT8_T;
    case TUTTI_UINT8: return MPI_UINT8_T;
    case TUTTI_INT32: return MPI_INT32_T;
    case TUTTI_UINT32: return MPI_UINT32_T;
    case TUTTI_INT64: return MPI_INT64_T;
    case TUTTI_UINT64: return MPI_UINT64_T;
    case TUTTI_FLOAT32: return MPI_FLOAT;
    case TUTTI_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mop(int op)
{
    switch (op) {
    case TUTTI_SUM: return MPI_SUM;
    case TUTTI_PROD: return MPI_PROD;
    case TUTTI_MIN: return MPI_MIN;
    case TUTTI_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

static int m_init(int *argc, char ***argv, int *rank, int *nranks)
{
    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    *rank = me;
    *nranks = n;
    return 0;
}

static int m_supports(enum pcoll c, tutti_dtype_t t, int op)
{
    int reduces = c == ALL_REDUCE || c == REDUCE_SCATTER || c == REDUCE;
    return mtype(t) != MPI_DATATYPE_NULL && (!reduces || mop(op) != MPI_OP_NULL);
}

static int check(int rc)
{
    int len = 0;

    if (rc == MPI_SUCCESS)
        return 0;
    MPI_Error_string(rc, err, &len);
    return -1;
}

static int m_run(enum pcoll c, void *s, void *r, size_t count, tutti_dtype_t t, int op, int root,
                 int inplace)
{
    MPI_Datatype dt = mtype(t);
    int cnt = (int)count;
    size_t es = tutti_dtype_size(t);

    switch (c) {
    case ALL_REDUCE:
        return check(
            MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, cnt, dt, mop(op), MPI_COMM_WORLD));
    case ALL_GATHER:
        return check(
            MPI_Allgather(inplace ? MPI_IN_PLACE : s, cnt, dt, r, cnt, dt, MPI_COMM_WORLD));
    case REDUCE_SCATTER: {
        if (!inplace)
            return check(MPI_Reduce_scatter_block(s, r, cnt, dt, mop(op), MPI_COMM_WORLD));
        /* tutti.h in place: recv == send + me * count; MPI leaves the block at send. */
        int rc = check(MPI_Reduce_scatter_block(MPI_IN_PLACE, s, cnt, dt, mop(op), MPI_COMM_WORLD));
        if (rc == 0 && r != s)
            memmove(r, s, count * es);
        return rc;
    }
    case BROADCAST:
        if (!inplace && me == root)
            memcpy(r, s, count * es);
        return check(MPI_Bcast(r, cnt, dt, root, MPI_COMM_WORLD));
    case REDUCE:
        return check(MPI_Reduce(inplace && me == root ? MPI_IN_PLACE : s, r, cnt, dt, mop(op), root,
                                MPI_COMM_WORLD));
    case ALL_TO_ALL: return check(MPI_Alltoall(s, cnt, dt, r, cnt, dt, MPI_COMM_WORLD));
    /* In place on the root, tutti.h's layout is MPI's: the root's block already in its slot. */
    case GATHER:
        return check(MPI_Gather(inplace && me == root ? MPI_IN_PLACE : s, cnt, dt, r, cnt, dt, root,
                                MPI_COMM_WORLD));
    case SCATTER:
        return check(MPI_Scatter(s, cnt, dt, inplace && me == root ? MPI_IN_PLACE : r, cnt, dt,
                                 root, MPI_COMM_WORLD));
    default:
        return check(MPI_Sendrecv(s, cnt, dt, (me + 1) % n, 0, r, cnt, dt, (me + n - 1) % n, 0,
                                  MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
}

static void m_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

static void m_allreduce_double(double *v, enum perf_agg agg)
{
    MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE,
                  agg == AGG_MIN   ? MPI_MIN
                  : agg == AGG_MAX ? MPI_MAX
                                   : MPI_SUM,
                  MPI_COMM_WORLD);
    if (agg == AGG_AVG)
        *v /= n;
}

static void m_allreduce_sum_ll(long long *v)
{
    MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

static const char *m_last_error(void)
{
    return err;
}

static void m_fini(void)
{
    MPI_Finalize();
}

const struct perf_backend perf_backend = {
    .name = "mpi",
    .init = m_init,
    .supports = m_supports,
    .run = m_run,
    .barrier = m_barrier,
    .allreduce_double = m_allreduce_double,
    .allreduce_sum_ll = m_allreduce_sum_ll,
    .last_error = m_last_error,
    .fini = m_fini,
};
