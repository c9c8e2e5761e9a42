/*
 * p2p_run.c -- running a batch of point-to-point operations (one call, or a group's): its
 * plan of one lane per peer and direction, TUTTI_CHECK_COLL's comparison of both ends of
 * every message, device buffers staged through pinned memory (lib/cuda) or on the device
 * path, and the run itself (lib/engine).
 */
#include "lib/coll/coll.h"
#include "lib/base/error.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"
#include "lib/core/comm.h"
#include "lib/core/memreg.h"
#include "lib/cuda/cuda.h"
#include "lib/exec/tag.h"
#include "lib/stream/stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    unsigned char *rdma = (unsigned char *)(regs + n);

    rc = tt_coll_check_health(comm, "point-to-point");
    if (rc == TUTTI_SUCCESS)
        rc = batch_plan(comm, ops, nops);
    if (rc != TUTTI_SUCCESS)
        return rc;
    memset(rdma, 0, n);
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
                rdma[i] = tp && tp->can_send_from && tp->can_send_from(regs[i]);
            }
            if (o->device && !rdma[i])
                regs[i] = NULL;
        }
        rc = tt_cuda_p2p_stage(comm, order, nops, bufs, rdma);
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
    struct tt_run run = {.bufs = bufs,
                         .regs = comm->memregs && !device ? regs : NULL,
                         .dtype = TUTTI_UINT8,
                         .op = TUTTI_SUM,
                         .what = &label,
                         .dev = device ? &tt_cuda_dev_hooks : NULL,
                         .after = after};
    int token = -1;
    double t_run = 0;
    if (comm->single_copy && !device && most &&
        (token = tt_coll_single_copy_pick(comm, TT_LABEL_P2P, most, &run)) >= 0)
        t_run = tt_now();
    rc = tt_engine_run_plan(comm, &run);
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
        rc = tt_cuda_p2p_finish(comm, order, nops, bufs, rdma);
    return rc;
}

/* What TUTTI_CHECK_COLL compares between the two ends of a message. */
struct msg_desc {
    uint64_t bytes;
    uint32_t is_send;
    uint32_t device_path; /* takes the device path (tt_cuda_dev_p2p) */
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
    return (struct msg_desc){op->bytes, (uint32_t)op->is_send, (uint32_t)tt_cuda_dev_p2p(comm, op)};
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
