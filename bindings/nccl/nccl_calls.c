/*
 * nccl_calls.c -- NCCL's collectives, point-to-point and operators on tutti. Every call is
 * asynchronous on its cudaStream_t, the NULL (legacy default) stream included: it goes to the
 * communicator's own tutti wrapper of that stream (tutti_comm_cuda_stream), made on first use
 * and freed with the communicator, so the program never destroys anything of ours and may
 * destroy its streams when it likes. Inside a group a call is only checked and recorded
 * (nccl_group.c); the group's end runs it here.
 */
#include "nccl_int.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define NC_ALIAS(name) __typeof__(p##name) name __attribute__((weak, alias("p" #name)));

/* ---- types ---- */

ncclResult_t nc_dtype(struct ncclComm *c, ncclDataType_t d, tutti_dtype_t *out, const char *fn)
{
    switch (d) {
    case ncclInt8: *out = TUTTI_INT8; break;
    case ncclUint8: *out = TUTTI_UINT8; break;
    case ncclInt32: *out = TUTTI_INT32; break;
    case ncclUint32: *out = TUTTI_UINT32; break;
    case ncclInt64: *out = TUTTI_INT64; break;
    case ncclUint64: *out = TUTTI_UINT64; break;
    case ncclFloat16: *out = TUTTI_FLOAT16; break;
    case ncclFloat32: *out = TUTTI_FLOAT32; break;
    case ncclFloat64: *out = TUTTI_FLOAT64; break;
    case ncclBfloat16: *out = TUTTI_BFLOAT16; break;
    case ncclFloat8e4m3: *out = TUTTI_FLOAT8_E4M3; break;
    case ncclFloat8e5m2: *out = TUTTI_FLOAT8_E5M2; break;
    default:
        return nc_error(c, ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", fn,
                        (int)d);
    }
    return ncclSuccess;
}

ncclResult_t nc_op(struct ncclComm *c, ncclRedOp_t op, tutti_op_t *out, const char *fn)
{
    int i = (int)op - (int)ncclNumOps, live = 0;

    switch (op) {
    case ncclSum: *out = TUTTI_SUM; return ncclSuccess;
    case ncclProd: *out = TUTTI_PROD; return ncclSuccess;
    case ncclMax: *out = TUTTI_MAX; return ncclSuccess;
    case ncclMin: *out = TUTTI_MIN; return ncclSuccess;
    case ncclAvg: *out = TUTTI_AVG; return ncclSuccess;
    default: break;
    }
    pthread_mutex_lock(&c->lock);
    if (i >= 0 && i < c->nops && c->ops[i] != TUTTI_NUM_OPS) {
        *out = c->ops[i];
        live = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (!live)
        return nc_error(c, ncclInvalidArgument,
                        "%s: op %d is neither built in nor a live operator of this communicator "
                        "(ncclRedOpCreatePreMulSum)",
                        fn, (int)op);
    return ncclSuccess;
}

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
{
    const char *fn = "ncclRedOpCreatePreMulSum";
    tutti_scalar_residence_t res;
    tutti_dtype_t dt;
    tutti_op_t top;
    tutti_result_t rc;
    ncclResult_t r;
    int slot = -1;

    if ((r = nc_comm(comm, fn, 1)) != ncclSuccess || (r = nc_dtype(comm, datatype, &dt, fn)))
        return r;
    if (!op)
        return nc_error(comm, ncclInvalidArgument, "%s: op is NULL", fn);
    if (residence == ncclScalarDevice)
        res = TUTTI_SCALAR_DEVICE;
    else if (residence == ncclScalarHostImmediate)
        res = TUTTI_SCALAR_HOST_IMMEDIATE;
    else
        return nc_error(comm, ncclInvalidArgument, "%s: residence %d", fn, (int)residence);
    rc = tutti_op_create_premul_sum(&top, scalar, dt, res, comm->tc);
    if (rc != TUTTI_SUCCESS)
        return nc_tutti_failed(comm, rc, fn);
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < comm->nops && slot < 0; i++)
        if (comm->ops[i] == TUTTI_NUM_OPS)
            slot = i;
    if (slot < 0) {
        tutti_op_t *t = realloc(comm->ops, (size_t)(comm->nops + 1) * sizeof(*t));
        if (t) {
            comm->ops = t;
            slot = comm->nops++;
        }
    }
    if (slot >= 0)
        comm->ops[slot] = top;
    pthread_mutex_unlock(&comm->lock);
    if (slot < 0) {
        tutti_op_destroy(top, comm->tc);
        return nc_error(comm, ncclSystemError, "%s: out of memory", fn);
    }
    *op = (ncclRedOp_t)((int)ncclNumOps + slot);
    return ncclSuccess;
}
NC_ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    const char *fn = "ncclRedOpDestroy";
    int i = (int)op - (int)ncclNumOps;
    tutti_op_t top = TUTTI_NUM_OPS;
    ncclResult_t r;

    if ((r = nc_comm(comm, fn, 1)) != ncclSuccess)
        return r;
    pthread_mutex_lock(&comm->lock);
    if (i >= 0 && i < comm->nops) {
        top = comm->ops[i];
        comm->ops[i] = TUTTI_NUM_OPS;
    }
    pthread_mutex_unlock(&comm->lock);
    if (top == TUTTI_NUM_OPS)
        return nc_error(comm, ncclInvalidArgument,
                        "%s: op %d is not a live operator of this communicator", fn, (int)op);
    tutti_result_t rc = tutti_op_destroy(top, comm->tc);
    return rc == TUTTI_SUCCESS ? ncclSuccess : nc_tutti_failed(comm, rc, fn);
}
NC_ALIAS(ncclRedOpDestroy)

/* ---- running calls ---- */

/* An in-place all-to-all's input, copied aside on the stream (tutti's has no in-place form). */
struct nc_temp {
    void *p;
    cudaStream_t stream;
};

static tutti_result_t issue(const struct nc_call *k, tutti_stream_t s, const struct nc_temp *temp)
{
    struct ncclComm *c = k->comm;
    const void *sb = k->sendbuf;

    switch (k->kind) {
    case NC_ALL_REDUCE:
        return tutti_all_reduce(sb, k->recvbuf, k->count, k->dtype, k->op, c->tc, s);
    case NC_ALL_GATHER: return tutti_all_gather(sb, k->recvbuf, k->count, k->dtype, c->tc, s);
    case NC_REDUCE_SCATTER:
        return tutti_reduce_scatter(sb, k->recvbuf, k->count, k->dtype, k->op, c->tc, s);
    case NC_BROADCAST:
        return tutti_broadcast(sb, k->recvbuf, k->count, k->dtype, k->root, c->tc, s);
    case NC_REDUCE:
        return tutti_reduce(sb, k->recvbuf, k->count, k->dtype, k->op, k->root, c->tc, s);
    case NC_ALL_TO_ALL:
        return tutti_all_to_all(temp->p ? temp->p : sb, k->recvbuf, k->count, k->dtype, c->tc, s);
    case NC_GATHER: return tutti_gather(sb, k->recvbuf, k->count, k->dtype, k->root, c->tc, s);
    case NC_SCATTER: return tutti_scatter(sb, k->recvbuf, k->count, k->dtype, k->root, c->tc, s);
    case NC_SEND: return tutti_send(sb, k->count, k->dtype, k->root, c->tc, s);
    case NC_RECV: return tutti_recv(k->recvbuf, k->count, k->dtype, k->root, c->tc, s);
    }
    return TUTTI_ERR_INTERNAL;
}

/* An in-place all-to-all's input goes aside first, on its stream (freed there after the call). */
static ncclResult_t set_aside(const struct nc_call *k, struct nc_temp *temp)
{
    size_t bytes = k->count * tutti_dtype_size(k->dtype) * (size_t)k->comm->nranks;
    cudaError_t e;

    if (k->kind != NC_ALL_TO_ALL || k->sendbuf != k->recvbuf || !k->sendbuf || !bytes)
        return ncclSuccess;
    e = cudaMallocAsync(&temp->p, bytes, k->stream);
    if (e == cudaSuccess) {
        temp->stream = k->stream;
        e = cudaMemcpyAsync(temp->p, k->sendbuf, bytes, cudaMemcpyDefault, k->stream);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nc_error(k->comm, ncclUnhandledCudaError,
                        "%s: in place: copying the input aside (%zu bytes): %s", k->fn, bytes,
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}

/* One stream orders against another: `after` starts once everything queued on `first` so far
 * has run. */
static ncclResult_t stream_after(struct ncclComm *c, cudaStream_t after, cudaStream_t first)
{
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);

    if (e == cudaSuccess) {
        e = cudaEventRecord(ev, first);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(after, ev, 0);
        cudaEventDestroy(ev);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nc_error(c, ncclUnhandledCudaError, "ncclGroupEnd: ordering the group's streams: %s",
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}

/* nc_run_calls with the communicator's device current. */
static ncclResult_t run_on_device(const struct nc_call *k, int n)
{
    struct ncclComm *c = k[0].comm;
    cudaStream_t main = k[0].stream;
    struct nc_temp *temps = calloc((size_t)n, sizeof(*temps));
    tutti_stream_t s = NULL;
    tutti_result_t rc;
    ncclResult_t r = ncclSuccess;
    const char *fn = n > 1 ? "ncclGroupEnd" : k[0].fn;

    if (!temps)
        return nc_error(c, ncclSystemError, "%s: out of memory", fn);
    if ((r = nc_comm(c, fn, 1)) != ncclSuccess) {
        free(temps);
        return r;
    }
    rc = tutti_comm_cuda_stream(c->tc, main, &s);
    if (rc != TUTTI_SUCCESS) {
        free(temps);
        return nc_tutti_failed(c, rc, fn);
    }
    for (int i = 1; i < n && r == ncclSuccess; i++)
        if (k[i].stream != main)
            r = stream_after(c, main, k[i].stream);
    for (int i = 0; i < n && r == ncclSuccess; i++)
        r = set_aside(&k[i], &temps[i]);
    int grouped = r == ncclSuccess && n > 1;
    rc = r != ncclSuccess ? TUTTI_ERR_SYSTEM : grouped ? tutti_group_start() : TUTTI_SUCCESS;
    for (int i = 0; i < n && rc == TUTTI_SUCCESS; i++)
        rc = issue(&k[i], s, &temps[i]);
    if (grouped) {
        tutti_result_t end = tutti_group_end();
        if (rc == TUTTI_SUCCESS)
            rc = end;
    }
    if (rc != TUTTI_SUCCESS && r == ncclSuccess)
        r = nc_tutti_failed(c, rc, fn);
    for (int i = 0; i < n; i++)
        if (temps[i].p)
            (void)cudaFreeAsync(temps[i].p, temps[i].stream);
    for (int i = 1; i < n && r == ncclSuccess; i++)
        if (k[i].stream != main)
            r = stream_after(c, k[i].stream, main);
    free(temps);
    return r;
}

/* The calls k[0..n) of one communicator: one tutti group on k[0]'s stream, queued with the
 * communicator's device current (the NULL stream is that device's; CUDA resources tutti makes
 * for the call belong to it), as NCCL queues them. */
ncclResult_t nc_run_calls(const struct nc_call *k, int n)
{
    int prev = -1;
    ncclResult_t r;

    if (cudaGetDevice(&prev) == cudaSuccess && prev != k[0].comm->device &&
        cudaSetDevice(k[0].comm->device) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        return nc_error(k[0].comm, ncclUnhandledCudaError, "%s: cudaSetDevice(%d): %s", k[0].fn,
                        k[0].comm->device, cudaGetErrorString(e));
    }
    r = run_on_device(k, n);
    if (prev >= 0 && prev != k[0].comm->device)
        (void)cudaSetDevice(prev);
    return r;
}

/* Record the call in the open group, or run it. */
static ncclResult_t submit(const struct nc_call *k)
{
    return nc_in_group() ? nc_group_record(k) : nc_run_calls(k, 1);
}

/* Check what every call names; inside a group the communicator may still be joining. */
static ncclResult_t make_call(struct nc_call *k, ncclComm_t comm, ncclDataType_t datatype,
                              const ncclRedOp_t *op)
{
    ncclResult_t r = nc_comm(comm, k->fn, !(nc_in_group() && comm && comm->group_init));

    if (r == ncclSuccess)
        r = nc_dtype(comm, datatype, &k->dtype, k->fn);
    if (r == ncclSuccess && op)
        r = nc_op(comm, *op, &k->op, k->fn);
    if (r != ncclSuccess)
        return nc_group_refused(r);
    k->comm = comm;
    return submit(k);
}

/* An entry point's call: checked, then recorded in the open group or run. */
static ncclResult_t call(enum nc_kind kind, const char *fn, const void *sendbuf, void *recvbuf,
                         size_t count, ncclDataType_t datatype, const ncclRedOp_t *op, int root,
                         ncclComm_t comm, cudaStream_t stream)
{
    struct nc_call k = {.kind = kind,
                        .fn = fn,
                        .sendbuf = sendbuf,
                        .recvbuf = recvbuf,
                        .count = count,
                        .root = root,
                        .stream = stream};
    return make_call(&k, comm, datatype, op);
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream)
{
    return call(NC_ALL_REDUCE, "ncclAllReduce", sendbuff, recvbuff, count, datatype, &op, 0, comm,
                stream);
}
NC_ALIAS(ncclAllReduce)

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_ALL_GATHER, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, NULL, 0,
                comm, stream);
}
NC_ALIAS(ncclAllGather)

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream)
{
    return call(NC_REDUCE_SCATTER, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype,
                &op, 0, comm, stream);
}
NC_ALIAS(ncclReduceScatter)

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_BROADCAST, "ncclBroadcast", sendbuff, recvbuff, count, datatype, NULL, root,
                comm, stream);
}
NC_ALIAS(ncclBroadcast)

ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_BROADCAST, "ncclBcast", buff, buff, count, datatype, NULL, root, comm, stream);
}
NC_ALIAS(ncclBcast)

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    return call(NC_REDUCE, "ncclReduce", sendbuff, recvbuff, count, datatype, &op, root, comm,
                stream);
}
NC_ALIAS(ncclReduce)

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_ALL_TO_ALL, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, NULL, 0, comm,
                stream);
}
NC_ALIAS(ncclAlltoAll)

ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_GATHER, "ncclGather", sendbuff, recvbuff, count, datatype, NULL, root, comm,
                stream);
}
NC_ALIAS(ncclGather)

ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_SCATTER, "ncclScatter", sendbuff, recvbuff, count, datatype, NULL, root, comm,
                stream);
}
NC_ALIAS(ncclScatter)

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_SEND, "ncclSend", sendbuff, NULL, count, datatype, NULL, peer, comm, stream);
}
NC_ALIAS(ncclSend)

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    return call(NC_RECV, "ncclRecv", NULL, recvbuff, count, datatype, NULL, peer, comm, stream);
}
NC_ALIAS(ncclRecv)
