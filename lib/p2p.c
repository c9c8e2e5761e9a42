/*
 * p2p.c -- point-to-point calls (tutti_send, tutti_recv) and groups of them: each call is
 * checked at once; a batch (one call, or a group) becomes a plan of one lane per peer and
 * direction, run like a collective (coll.h). Device buffers move GPU to GPU where the
 * communicator has the device path (cuda_dev.c), else they are staged (cuda.c), except a
 * registered device send buffer a transport reads itself (GPUDirect RDMA over net_ib).
 */
#include "coll.h"
#include "comm.h"
#include "cuda.h"
#include "error.h"
#include "memreg.h"
#include "stream.h"
#include "trace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local struct {
    int depth;
    struct tutti_comm *comm;
    tutti_stream_t stream;
    struct tt_p2p_op *ops;
    int nops, cap;
    tutti_result_t err;
} group;

int tt_group_open(void)
{
    return group.depth > 0;
}

/*
 * Run point-to-point operations concurrently: one lane per (peer, direction). `device`: every
 * operation takes the device path (p2p connections, the device mover, after the cudaEvent_t
 * `after`, NULL: after CUDA's default stream); else device buffers are staged.
 */
static tutti_result_t run_batch(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops,
                                int device, void *after)
{
    /* One allocation for the batch's working arrays (pointers first, for alignment). */
    size_t n = (size_t)nops;
    char *mem =
        calloc(n ? n : 1, sizeof(struct tt_p2p_op *) + sizeof(void *) + sizeof(struct tt_memreg *) +
                              sizeof(struct tt_msg) + sizeof(int) + 1);
    struct tt_p2p_op **order = (struct tt_p2p_op **)mem;
    void **bufs = (void **)(order + n);
    struct tt_memreg **regs = (struct tt_memreg **)(bufs + n);
    struct tt_msg *msgs = (struct tt_msg *)(regs + n);
    int *perm = (int *)(msgs + n);
    unsigned char *direct = (unsigned char *)(perm + n);
    tutti_result_t rc;
    struct tt_label label;
    int ndev = 0;

    if (!mem)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    rc = tt_coll_check_health(comm, "point-to-point");
    if (rc != TUTTI_SUCCESS)
        goto out;
    for (int i = 0; i < nops; i++)
        msgs[i] = (struct tt_msg){ops[i].is_send, ops[i].peer, ops[i].bytes};
    tt_plan_reset(&comm->plan);
    tt_plan_p2p(&comm->plan, msgs, nops, perm); /* step i moves ops[perm[i]] */
    if (comm->plan.oom) {
        rc = tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory building the plan");
        goto out;
    }
    for (int i = 0; i < nops; i++) {
        const struct tt_p2p_op *o = order[i] = &ops[perm[i]];

        bufs[i] = o->buf;
        if (o->is_send)
            regs[i] = tt_memreg_find(comm, o->buf, o->bytes);
        ndev += o->device;
    }
    if (ndev && !device) {
        /* Device memory goes through pinned staging, except a registered send buffer the
         * peer's transport reads where it lies (net_ib with GPUDirect RDMA). */
        for (int i = 0; i < nops; i++) {
            const struct tt_p2p_op *o = order[i];
            if (o->device && o->is_send && regs[i]) {
                const struct tt_transport *tp = tt_comm_transport(comm, o->peer);
                direct[i] = tp && tp->can_send_from && tp->can_send_from(regs[i]);
            }
            if (o->device && !direct[i])
                regs[i] = NULL;
        }
        rc = tt_cuda_p2p_stage(comm, order, nops, bufs, direct);
        if (rc != TUTTI_SUCCESS)
            goto out;
    }
    comm->seq++;
    /* On the device path a peer that passed host memory waits on its other connection: the
     * name says which path this side took, for the timeout's message. */
    label = (struct tt_label){device ? "point-to-point (device path)" : "point-to-point", 0xff,
                              comm->seq, (size_t)nops, TUTTI_NUM_DTYPES};
    double t0 = tt_trace_on ? tt_trace_us() : 0;
    rc = tt_coll_run_plan(comm, bufs, comm->memregs && !device ? regs : NULL, TUTTI_UINT8,
                          TUTTI_SUM, &label, device, after);
    if (tt_trace_on) {
        char args[64];
        snprintf(args, sizeof(args), "{\"seq\":%llu,\"ops\":%d}", label.seq, nops);
        tt_trace_add("p2p", label.name, t0, tt_trace_us() - t0, -1, args);
    }
    if (rc == TUTTI_SUCCESS && ndev && !device)
        rc = tt_cuda_p2p_finish(comm, order, nops, bufs, direct);
out:
    free(mem);
    return rc;
}

/* What TUTTI_CHECK_COLL compares between the two ends of a message. */
struct msg_desc {
    uint64_t bytes;
    uint32_t is_send;
    uint32_t device_path; /* takes the device path (tt_cuda_direct_p2p) */
};

static struct msg_desc describe(const struct tutti_comm *comm, const struct tt_p2p_op *op)
{
    return (struct msg_desc){op->bytes, (uint32_t)op->is_send,
                             (uint32_t)tt_cuda_direct_p2p(comm, op)};
}

static const char *desc_str(const struct msg_desc *d, char *buf, size_t size)
{
    snprintf(buf, size, "%s of %llu bytes (%s)", d->is_send ? "send" : "receive",
             (unsigned long long)d->bytes, d->device_path ? "device path" : "not the device path");
    return buf;
}

/*
 * TUTTI_CHECK_COLL for a batch: before it runs, each rank sends every peer it names one
 * message describing its operations with that peer (its sends to the peer in call order, then
 * its receives from it) and receives the peer's; the k-th send to a peer meets that peer's
 * k-th receive from this rank. A pair that disagrees (size, or one end on the device path
 * and the other not, which would wait on different connections) fails the batch on both
 * ends, before anything of it is sent, with TUTTI_ERR_INVALID_ARG naming both; ends that
 * list different numbers of operations fail the check's own exchange (its sizes differ).
 */
static tutti_result_t check_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops)
{
    size_t n = (size_t)comm->nranks, nn = (size_t)nops;
    size_t *off = calloc(n + 1, sizeof(*off)), *fill = calloc(n, sizeof(*fill));
    size_t *at = malloc((nn ? nn : 1) * sizeof(*at));
    struct msg_desc *out = calloc(nn ? nn : 1, sizeof(*out)),
                    *in = calloc(nn ? nn : 1, sizeof(*in));
    struct tt_p2p_op *chk = calloc(2 * n, sizeof(*chk));
    tutti_result_t rc = TUTTI_SUCCESS;
    int nchk = 0, bad = 0, first = -1;

    if (!off || !fill || !at || !out || !in || !chk) {
        rc = tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory for TUTTI_CHECK_COLL");
        goto out;
    }
    for (int i = 0; i < nops; i++)
        off[ops[i].peer + 1]++;
    for (size_t p = 0; p < n; p++)
        off[p + 1] += off[p];
    /* Outgoing, per peer: sends, then receives. Incoming: the peer's sends answer this rank's
     * receives, so receives first, then sends. */
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < nops; i++)
            if (ops[i].is_send == pass) {
                size_t p = (size_t)ops[i].peer;
                out[off[p] + fill[p]++] = describe(comm, &ops[i]);
            }
    memset(fill, 0, n * sizeof(*fill));
    for (int pass = 0; pass <= 1; pass++)
        for (int i = 0; i < nops; i++)
            if (ops[i].is_send == pass) {
                size_t p = (size_t)ops[i].peer;
                at[i] = off[p] + fill[p]++;
            }
    for (size_t p = 0; p < n; p++) {
        size_t bytes = (off[p + 1] - off[p]) * sizeof(*out);
        if (!bytes)
            continue;
        chk[nchk++] = (struct tt_p2p_op){1, (int)p, out + off[p], bytes, 0};
        chk[nchk++] = (struct tt_p2p_op){0, (int)p, in + off[p], bytes, 0};
    }
    rc = run_batch(comm, chk, nchk, 0, NULL);
    if (rc != TUTTI_SUCCESS)
        goto out;
    for (int i = 0; i < nops; i++) {
        struct msg_desc me = describe(comm, &ops[i]), *theirs = &in[at[i]];
        if (theirs->is_send == me.is_send || theirs->bytes != me.bytes ||
            theirs->device_path != me.device_path) {
            bad++;
            if (first < 0)
                first = i;
        }
    }
    if (bad) {
        char a[96], b[96];
        struct msg_desc me = describe(comm, &ops[first]);
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                     "point-to-point: TUTTI_CHECK_COLL: this rank's %s with rank %d meets that "
                     "rank's %s (%d of this rank's %d operation(s) disagree with their peer's)",
                     desc_str(&me, a, sizeof(a)), ops[first].peer,
                     desc_str(&in[at[first]], b, sizeof(b)), bad, nops);
    }
out:
    free(off);
    free(fill);
    free(at);
    free(out);
    free(in);
    free(chk);
    return rc;
}

int tt_p2p_split(const struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                 struct tt_p2p_op *out)
{
    int ndev = 0, k = 0;

    for (int i = 0; i < nops; i++)
        ndev += tt_cuda_direct_p2p(comm, &ops[i]);
    for (int pass = 1; out && pass >= 0; pass--)
        for (int i = 0; i < nops; i++)
            if (tt_cuda_direct_p2p(comm, &ops[i]) == pass)
                out[k++] = ops[i];
    return ndev;
}

/* A batch: its device-path operations first, then the others (tt_p2p_split). */
tutti_result_t tt_p2p_exec(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops, void *after)
{
    struct tt_p2p_op *split;
    int ndev;
    tutti_result_t rc;

    if (comm->check_coll)
        TT_CHECK(check_p2p(comm, ops, nops));
    ndev = tt_p2p_split(comm, ops, nops, NULL);
    if (ndev == 0 || ndev == nops)
        return run_batch(comm, ops, nops, ndev > 0, ndev > 0 ? after : NULL);
    split = malloc((size_t)nops * sizeof(*split));
    if (!split)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    tt_p2p_split(comm, ops, nops, split);
    rc = run_batch(comm, split, ndev, 1, after);
    if (rc == TUTTI_SUCCESS)
        rc = run_batch(comm, split + ndev, nops - ndev, 0, NULL);
    free(split);
    return rc;
}

static tutti_result_t p2p_call(int is_send, void *buf, size_t count, tutti_dtype_t dtype, int peer,
                               struct tutti_comm *comm, tutti_stream_t stream)
{
    const char *fn = is_send ? "tutti_send" : "tutti_recv";
    struct tt_call c = {.fn = fn, .dtype = dtype};
    struct tt_p2p_op op;

    TT_CHECK(tt_coll_check_comm(comm, stream, fn));
    TT_CHECK(tt_coll_check_dtype_op(comm, &c, 0));
    if (peer < 0 || peer >= comm->nranks)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: peer %d is out of range [0, %d)", fn, peer,
                       comm->nranks);
    if (count > SIZE_MAX / 2 / tutti_dtype_size(dtype))
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: count %zu overflows", fn, count);
    if (count > 0 && !buf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", fn,
                       is_send ? "sendbuf" : "recvbuf", count);
    op = (struct tt_p2p_op){is_send, peer, buf, count * tutti_dtype_size(dtype), 0};
    /* Device memory: staged through pinned memory when the batch runs (cuda.c). */
    op.device = count > 0 && tt_cuda_ready() && tt_cuda_kind(buf) != TT_MEM_HOST;
    TT_CHECK(tt_cuda_direct_check_p2p(comm, fn, &op));
    if (group.depth == 0) {
        struct tt_work w = {.kind = TT_WORK_P2P, .comm = comm, .nops = 1};
        if (peer == comm->rank)
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                           "%s: peer is this rank (%d); a send to self and its receive must be in "
                           "one tutti_group_start/end",
                           fn, peer);
        if (!stream) {
            w.ops = &op;
            return tt_coll_run_now(comm, &w);
        }
        if (tt_stream_is_cuda(stream))
            return tt_cuda_enqueue_p2p(comm, &op, 1, stream);
        w.ops = malloc(sizeof(op));
        if (!w.ops)
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
        *w.ops = op;
        return tt_stream_push(stream, &w);
    }
    if (group.comm && group.comm != comm)
        return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                       "%s: a group may only hold calls on one communicator", fn);
    if (group.nops > 0 && group.stream != stream)
        return group.err = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                   "%s: every call in a group must name the same stream", fn);
    if (group.nops == group.cap) {
        int cap = group.cap ? 2 * group.cap : 16;
        struct tt_p2p_op *g = realloc(group.ops, (size_t)cap * sizeof(*g));
        if (!g)
            return group.err = tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
        group.ops = g;
        group.cap = cap;
    }
    if (group.nops >= UINT16_MAX)
        return group.err = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                   "%s: a group holds at most %d operations", fn, UINT16_MAX);
    group.comm = comm;
    group.stream = stream;
    group.ops[group.nops++] = op;
    return TUTTI_SUCCESS;
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

tutti_result_t tutti_group_start(void)
{
    if (group.depth == 0) {
        group.nops = 0;
        group.comm = NULL;
        group.stream = NULL;
        group.err = TUTTI_SUCCESS;
    }
    group.depth++;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_group_end(void)
{
    struct tt_work w = {.kind = TT_WORK_P2P};
    tutti_result_t rc;

    if (group.depth == 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_group_end: no group is open (missing tutti_group_start)");
    if (--group.depth > 0)
        return TUTTI_SUCCESS;
    rc = group.err;
    if (rc == TUTTI_SUCCESS && group.nops > 0) {
        rc = tt_comm_check(group.comm, "tutti_group_end");
        if (rc == TUTTI_SUCCESS && group.stream)
            rc = tt_stream_check(group.stream, group.comm, "tutti_group_end");
        w.comm = group.comm;
        w.ops = group.ops;
        w.nops = group.nops;
        if (rc == TUTTI_SUCCESS && tt_stream_is_cuda(group.stream)) {
            rc = tt_cuda_enqueue_p2p(group.comm, group.ops, group.nops, group.stream);
        } else if (rc == TUTTI_SUCCESS && group.stream) {
            rc = tt_stream_push(group.stream, &w);
            if (rc == TUTTI_SUCCESS)
                group.ops = NULL; /* the stream owns them now */
        } else if (rc == TUTTI_SUCCESS) {
            rc = tt_coll_run_now(group.comm, &w);
        }
    }
    free(group.ops);
    group.ops = NULL;
    group.nops = group.cap = 0;
    group.comm = NULL;
    group.stream = NULL;
    return rc;
}
