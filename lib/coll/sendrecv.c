/*
 * sendrecv.c -- point-to-point calls (tutti_send, tutti_recv) and groups of them: each call is
 * checked at once; a batch (one call, or a group) becomes a plan of one lane per peer and
 * direction, run like a collective (coll.h). Device buffers move GPU to GPU where the
 * communicator has the device path (cuda_dev.c), else they are staged (cuda.c), except a
 * registered device send buffer a transport reads itself (GPUDirect RDMA over net_ib).
 */
#include "lib/coll/coll.h"
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

#define GROUP_INLINE 8 /* a group of up to this many calls does not allocate */

static _Thread_local struct group {
    int depth;
    struct tutti_comm *comm;
    tutti_stream_t stream;
    struct tt_p2p_op *ops; /* small[], or the heap once the group outgrows it */
    int nops, cap;
    struct tt_call *colls; /* collectives, in call order (coll_group.c runs them) */
    int ncolls, ccap;
    const char *collective; /* the group is this collective's batch (tt_group_collective) */
    tutti_result_t err;
    struct tt_p2p_op small[GROUP_INLINE];
} group;

int tt_group_open(void)
{
    return group.depth > 0;
}

void tt_group_collective(const char *fn)
{
    if (group.depth == 1) /* its own group, not one the caller opened around it */
        group.collective = fn;
}

/*
 * comm->plan := the plan of this batch's messages, unless it holds it already (a loop of the
 * same exchange); then comm->p2p.perm[i] is the operation step i moves.
 */
static tutti_result_t batch_plan(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops)
{
    struct tt_msg *m = comm->p2p.msgs;
    int i = 0;

    if (m && comm->p2p.n == nops && comm->p2p.resets == comm->plan.resets) {
        while (i < nops && m[i].is_send == (ops[i].is_send != 0) && m[i].peer == ops[i].peer &&
               m[i].bytes == ops[i].bytes)
            i++;
        if (i == nops)
            return TUTTI_SUCCESS;
    }
    comm->p2p.n = -1; /* holds nothing until built */
    if (nops >= comm->p2p.cap) {
        int cap = nops + 1;
        m = realloc(comm->p2p.msgs, (size_t)cap * sizeof(*m));
        if (m)
            comm->p2p.msgs = m;
        int *perm = m ? realloc(comm->p2p.perm, (size_t)cap * sizeof(*perm)) : NULL;
        if (!perm)
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
        comm->p2p.perm = perm;
        comm->p2p.cap = cap;
    }
    m = comm->p2p.msgs;
    for (i = 0; i < nops; i++)
        m[i] = (struct tt_msg){ops[i].is_send != 0, ops[i].peer, ops[i].bytes};
    tt_plan_reset(&comm->plan);
    tt_plan_p2p(&comm->plan, m, nops, comm->p2p.perm); /* step i moves ops[perm[i]] */
    if (comm->plan.oom)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory building the plan");
    comm->p2p.n = nops;
    comm->p2p.resets = comm->plan.resets;
    return TUTTI_SUCCESS;
}

/*
 * Run point-to-point operations concurrently: one lane per (peer, direction). `device`: every
 * operation takes the device path (p2p connections, the device mover, after the cudaEvent_t
 * `after`, NULL: after CUDA's default stream); else device buffers are staged.
 */
static tutti_result_t run_batch(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops,
                                int device, void *after)
{
    /* The batch's working arrays, in one block the communicator keeps (pointers first, for
     * alignment): the hot path does not allocate. */
    size_t n = (size_t)(nops ? nops : 1), need = n * (sizeof(struct tt_p2p_op *) + sizeof(void *) +
                                                      sizeof(struct tt_memreg *) + 1);
    tutti_result_t rc;
    struct tt_label label;
    int ndev = 0;
    size_t most = 0; /* the largest send */

    if (need > comm->p2p.work_bytes) {
        void *g = realloc(comm->p2p.work, need);
        if (!g)
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
        comm->p2p.work = g;
        comm->p2p.work_bytes = need;
    }
    struct tt_p2p_op **order = comm->p2p.work;
    void **bufs = (void **)(order + n);
    struct tt_memreg **regs = (struct tt_memreg **)(bufs + n);
    unsigned char *direct = (unsigned char *)(regs + n);

    rc = tt_coll_check_health(comm, "point-to-point");
    if (rc == TUTTI_SUCCESS)
        rc = batch_plan(comm, ops, nops);
    if (rc != TUTTI_SUCCESS)
        return rc;
    memset(direct, 0, n);
    for (int i = 0; i < nops; i++) {
        const struct tt_p2p_op *o = order[i] = &ops[comm->p2p.perm[i]];

        bufs[i] = o->buf;
        regs[i] = o->is_send ? tt_memreg_find(comm, o->buf, o->bytes) : NULL;
        ndev += o->device;
        if (o->is_send && o->bytes > most)
            most = o->bytes;
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
            return rc;
    }
    comm->p2p_seq++; /* not comm->seq: point-to-point among some ranks is no collective of all */
    /* On the device path a peer that passed host memory waits on its other connection: the
     * name says which path this side took, for the timeout's message. */
    label = (struct tt_label){.name = device ? "point-to-point (device path)" : "point-to-point",
                              .coll = TT_LABEL_P2P,
                              .seq = comm->p2p_seq,
                              .count = (size_t)nops,
                              .dtype = TUTTI_NUM_DTYPES,
                              .tag = tt_tag_p2p(0)};
    double t0 = tt_trace_on ? tt_trace_us() : 0;
    /* Over shm, how this rank sends (copy_pick.h): whole messages by address, for the
     * receiver to copy out of this process, or through the FIFO; picked by the size of its
     * largest send (a batch of receives only has nothing to pick). */
    int token = -1;
    double t_run = 0;
    if (comm->single_copy && !device && most &&
        (token = tt_coll_single_copy_pick(comm, TT_LABEL_P2P, most)) >= 0)
        t_run = tt_now();
    rc = tt_coll_run_plan(comm, bufs, comm->memregs && !device ? regs : NULL, TUTTI_UINT8,
                          TUTTI_SUM, &label, device, after, NULL);
    /* A batch's largest send differs by rank, so its ranks' trials do not line up: each
     * rank decides alone (no vote). */
    (void)tt_coll_single_copy_done(comm, token, token >= 0 ? tt_now() - t_run : 0,
                                   rc == TUTTI_SUCCESS, 0);
    if (tt_trace_on) {
        char args[64];
        snprintf(args, sizeof(args), "{\"seq\":%llu,\"ops\":%d}", label.seq, nops);
        tt_trace_add("p2p", label.name, t0, tt_trace_us() - t0, -1, args);
    }
    if (rc == TUTTI_SUCCESS && ndev && !device)
        rc = tt_cuda_p2p_finish(comm, order, nops, bufs, direct);
    return rc;
}

/* What TUTTI_CHECK_COLL compares between the two ends of a message. */
struct msg_desc {
    uint64_t bytes;
    uint32_t is_send;
    uint32_t device_path; /* takes the device path (tt_cuda_direct_p2p) */
};

/*
 * A collective's batch under TUTTI_CHECK_COLL: every rank learns every rank's verdict (the peer
 * it disagrees with, or -1) and all refuse if any does. `rc` is this rank's own.
 */
static tutti_result_t agree(struct tutti_comm *comm, const char *fn, int peer, tutti_result_t rc)
{
    int32_t mine = peer, *all = calloc((size_t)comm->nranks, sizeof(*all));
    tutti_result_t arc;

    if (!all)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory for TUTTI_CHECK_COLL", fn);
    arc = tt_coll_allgather_own(comm, "collective batch check", 2, &mine, sizeof(mine), all);
    for (int r = 0; arc == TUTTI_SUCCESS && rc == TUTTI_SUCCESS && r < comm->nranks; r++)
        if (all[r] >= 0)
            rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                         "%s: TUTTI_CHECK_COLL: rank %d and rank %d disagree on a message of "
                         "this call (their errors name it): every rank refuses it, nothing of "
                         "it is sent",
                         fn, r, (int)all[r]);
    free(all);
    return arc != TUTTI_SUCCESS ? arc : rc;
}

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
 * list different numbers of operations fail the check's own exchange (its sizes differ). The
 * batch of a collective (gather, scatter, all-to-all: `collective` names it) is every rank's:
 * its ranks then agree on the verdict (a small all-gather), so a rank whose own messages
 * match refuses too, sending nothing its peers would leave unread.
 */
static tutti_result_t check_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                const char *collective)
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
                     "%s: TUTTI_CHECK_COLL: this rank's %s with rank %d meets that "
                     "rank's %s (%d of this rank's %d operation(s) disagree with their peer's)",
                     collective ? collective : "point-to-point", desc_str(&me, a, sizeof(a)),
                     ops[first].peer, desc_str(&in[at[first]], b, sizeof(b)), bad, nops);
    }
    if (collective)
        rc = agree(comm, collective, bad ? ops[first].peer : -1, rc);
out:
    free(off);
    free(fill);
    free(at);
    free(out);
    free(in);
    free(chk);
    return rc;
}

/* A batch: its device-path operations first, then the others (tt_p2p_split). */
tutti_result_t tt_p2p_exec(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops, void *after,
                           const char *collective)
{
    struct tt_p2p_op *split;
    int ndev;
    tutti_result_t rc;

    if (comm->check_coll)
        TT_CHECK(check_p2p(comm, ops, nops, collective));
    ndev = tt_cuda_p2p_split(comm, ops, nops, NULL);
    if (ndev == 0 || ndev == nops)
        return run_batch(comm, ops, nops, ndev > 0, ndev > 0 ? after : NULL);
    split = malloc((size_t)nops * sizeof(*split));
    if (!split)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "point-to-point: out of memory");
    tt_cuda_p2p_split(comm, ops, nops, split);
    rc = run_batch(comm, split, ndev, 1, after);
    if (rc == TUTTI_SUCCESS)
        rc = run_batch(comm, split + ndev, nops - ndev, 0, NULL);
    free(split);
    return rc;
}

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

/* A call joins the open group: one communicator and one stream for all of its calls. */
static tutti_result_t group_join(struct group *g, struct tutti_comm *comm, tutti_stream_t stream,
                                 const char *fn)
{
    if (g->comm && g->comm != comm)
        return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                       "%s: a group may only hold calls on one communicator", fn);
    if (g->nops + g->ncolls > 0 && g->stream != stream)
        return g->err = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                "%s: every call in a group must name the same stream", fn);
    g->comm = comm;
    g->stream = stream;
    return TUTTI_SUCCESS;
}

static tutti_result_t p2p_call(int is_send, void *buf, size_t count, tutti_dtype_t dtype, int peer,
                               struct tutti_comm *comm, tutti_stream_t stream)
{
    const char *fn = is_send ? "tutti_send" : "tutti_recv";
    struct tt_call c = {.fn = fn, .dtype = dtype};
    struct tt_p2p_op op;
    struct group *g;
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
    TT_CHECK(tt_cuda_direct_check_p2p(comm, fn, &op));
    g = &group; /* one thread-local lookup */
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
    TT_CHECK(group_join(g, comm, stream, fn));
    if (g->nops == g->cap) {
        int cap = 2 * g->cap;
        struct tt_p2p_op *grown = g->ops == g->small
                                      ? malloc((size_t)cap * sizeof(*grown))
                                      : realloc(g->ops, (size_t)cap * sizeof(*grown));
        if (!grown)
            return g->err = tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
        if (g->ops == g->small)
            memcpy(grown, g->small, sizeof(g->small));
        g->ops = grown;
        g->cap = cap;
    }
    if (g->nops >= UINT16_MAX)
        return g->err = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                "%s: a group holds at most %d operations", fn, UINT16_MAX);
    g->ops[g->nops++] = op;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_group_add_coll(struct tutti_comm *comm, const struct tt_call *c,
                                 tutti_stream_t stream)
{
    struct group *g = &group;

    TT_CHECK(group_join(g, comm, stream, c->fn));
    if (g->ncolls == g->ccap) {
        int cap = g->ccap ? 2 * g->ccap : 16;
        struct tt_call *grown = realloc(g->colls, (size_t)cap * sizeof(*grown));
        if (!grown)
            return g->err = tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", c->fn);
        g->colls = grown;
        g->ccap = cap;
    }
    if (g->ncolls >= UINT16_MAX)
        return g->err = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                "%s: a group holds at most %d collectives", c->fn, UINT16_MAX);
    g->colls[g->ncolls++] = *c;
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
    struct group *g = &group;

    if (g->depth == 0) {
        g->ops = g->small;
        g->cap = GROUP_INLINE;
        g->nops = 0;
        g->ncolls = 0;
        g->comm = NULL;
        g->stream = NULL;
        g->err = TUTTI_SUCCESS;
        g->collective = NULL;
    }
    g->depth++;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_group_end(void)
{
    struct group *g = &group; /* one thread-local lookup */
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
    if (g->ops != g->small)
        free(g->ops);
    g->ops = g->small;
    g->nops = 0;
    free(g->colls); /* collectives in groups are rare: no array kept between groups */
    g->colls = NULL;
    g->ncolls = g->ccap = 0;
    g->cap = GROUP_INLINE;
    g->comm = NULL;
    g->stream = NULL;
    g->collective = NULL;
    return rc;
}
