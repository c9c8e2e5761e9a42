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

struct stall_ctx {
    struct tutti_comm *comm;
    const struct tt_label *what;
};

/* TUTTI_STALL_WARN: say whom we wait for and which ranks of this node are elsewhere. */
static void stall_report(void *arg, const struct tt_exec *x, double waited)
{
    const struct stall_ctx *sc = arg;
    const struct tutti_comm *c = sc->comm;
    char msg[1024], name[96];
    int n = 0, me = c->topo.local_of[c->rank], node = c->topo.node_of[c->rank];

    tt_label_format(sc->what, name, sizeof(name));
    n += snprintf(msg + n, sizeof(msg) - (size_t)n, "%s: no progress for %.0f s, %s rank %d", name,
                  waited, x->wait_dir == 's' ? "sending to" : "waiting for", x->wait_peer);
    for (int r = 0; c->board.lines && r < c->nranks && n < (int)sizeof(msg) - 96; r++) {
        const struct tt_board_line *l;
        uint64_t seq;
        if (c->topo.node_of[r] != node || c->topo.local_of[r] == me)
            continue;
        l = &c->board.lines[c->topo.local_of[r]];
        seq = atomic_load_explicit(&l->seq, memory_order_acquire);
        if (seq < c->seq)
            n += snprintf(msg + n, sizeof(msg) - (size_t)n,
                          "; rank %d has not reached it (its last operation: #%llu)", r,
                          (unsigned long long)seq);
        else if (seq == c->seq && !atomic_load_explicit(&l->active, memory_order_acquire))
            n += snprintf(msg + n, sizeof(msg) - (size_t)n, "; rank %d has finished it", r);
    }
    if (c->topo.nnodes > 1)
        snprintf(msg + n, sizeof(msg) - (size_t)n, "; ranks on other nodes are not visible here");
    TT_WARN(TT_SUB_COLL, "%s (TUTTI_STALL_WARN)", msg);
}

/* The wait policy's gave_up: a rank's notice over bootstrap that its communicator failed. */
static int gave_up_notice(void *arg, char *why, size_t size)
{
    struct tutti_comm *c = arg;

    return c->nranks > 1 && c->boot ? tt_boot_told(c->boot, 0, why, size) : -1;
}

tutti_result_t tt_coll_run_plan(struct tutti_comm *comm, void *const *bufs,
                                struct tt_memreg *const *regs, tutti_dtype_t dtype, tutti_op_t op,
                                const struct tt_label *what, int device, void *after,
                                const struct tt_pre *pre)
{
    int prev_dev = 0;
    struct tt_exec x;
    tutti_result_t rc, end;

    if (comm->plan.oom)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory building the plan", what->name);
    if (device) {
        rc = tt_cuda_dev_begin(comm, after, &prev_dev);
        if (rc != TUTTI_SUCCESS)
            return tt_comm_set_error(comm, rc);
    }
    rc = pre && !pre->fused ? tt_redop_run_pre(comm, pre, device) : TUTTI_SUCCESS;
    if (rc == TUTTI_SUCCESS)
        rc = tt_comm_connect_plan(comm, &comm->plan, device);
    if (rc == TUTTI_SUCCESS)
        rc = tt_exec_init(&x, &comm->plan, bufs, dtype, op, comm->nranks,
                          device ? comm->dslot_bytes : comm->slot_bytes,
                          device ? &comm->dconns : &comm->conns, &comm->exec_mem);
    comm->refused_by = -1;
    if (rc == TUTTI_SUCCESS) {
        x.tag = what->tag;
        x.tag_steps = what->coll == TT_LABEL_P2P;
        x.poison = what->refused;
        x.refusal = what->refusal;
        x.refused_by = what->refused_by;
        x.regs = regs;
        x.mover = device ? &comm->cuda_mover : NULL;
        x.stream_slots = !device && comm->stream_slots;
        if (pre && pre->fused) {
            x.premul = pre->value;
            x.pm_kernel = tt_premul_sum_kernel(dtype);
        }
        if (comm->single_copy && !device &&
            (what->coll == TT_COLL_ALL_GATHER || what->coll == TT_COLL_BROADCAST ||
             what->coll == TT_LABEL_P2P)) {
            rc = tt_exec_single_copy(&x, comm->single_send);
            x.drain = comm->single_trial;
        }
    }
    if (rc == TUTTI_SUCCESS) {
        struct stall_ctx sc = {comm, what};
        struct tt_wait_policy w = {.timeout_s = comm->timeout_s,
                                   .spin = comm->spin,
                                   .yield_s = comm->yield_s,
                                   .sleepy = comm->sleepy,
                                   .abort_flag = &comm->abort_flag,
                                   .stall_s = comm->stall_s,
                                   .stall = stall_report,
                                   .stall_arg = &sc,
                                   .gave_up = gave_up_notice,
                                   .gave_up_arg = comm};
        int local = comm->topo.local_of[comm->rank];

        tt_board_enter(&comm->board, local, comm->seq, what->coll);
        rc = tt_exec_run(&x, &w, what);
        tt_board_leave(&comm->board, local);
        if (rc == TUTTI_SUCCESS && x.poison) {
            comm->refused_by = x.refused_by;
            comm->refused_why = x.refusal;
        }
    }
    if (device) {
        end = tt_cuda_dev_end(comm, prev_dev);
        if (rc == TUTTI_SUCCESS)
            rc = end;
    }
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    return TUTTI_SUCCESS;
}

/* The tag of a collective's messages (tag.h): what every rank must agree on. */
static uint32_t call_tag(const struct tutti_comm *comm, const struct tt_call *c)
{
    int reduces = c->coll == TT_COLL_ALL_REDUCE || c->coll == TT_COLL_REDUCE_SCATTER ||
                  c->coll == TT_COLL_REDUCE;
    int rooted = c->coll == TT_COLL_BROADCAST || c->coll == TT_COLL_REDUCE;

    return tt_tag_call((unsigned)c->coll, comm->seq, (unsigned)c->dtype,
                       !reduces       ? 0
                       : c->premul.on ? TUTTI_NUM_OPS
                                      : (unsigned)c->op,
                       c->count, rooted ? c->root : 0);
}

/* comm->plan := algo's plan for a, unless it holds it already (a loop of the same call). */
static void build_plan(struct tutti_comm *comm, const struct tt_algo *algo,
                       const struct tt_coll_args *a)
{
    const struct tt_coll_args *was = &comm->plan_for.args;

    if (comm->plan_for.algo == algo && comm->plan_for.resets == comm->plan.resets &&
        was->coll == a->coll && was->count == a->count && was->root == a->root &&
        was->inplace == a->inplace && was->nchannels == a->nchannels && was->topo == a->topo)
        return;
    tt_plan_reset(&comm->plan);
    algo->build(&comm->plan, comm->rings, a);
    comm->plan_for.algo = comm->plan.oom ? NULL : algo;
    comm->plan_for.resets = comm->plan.resets;
    comm->plan_for.args = *a;
}

/* The scratch buffer of a host collective: grown (never shrunk) to `bytes`. */
static tutti_result_t scratch_for(struct tutti_comm *comm, size_t bytes, const char *fn, void **out)
{
    if (tt_buffer_grow(&comm->scratch, &comm->scratch_bytes, bytes) != 0)
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: out of memory for its %zu-byte scratch buffer",
                                               fn, bytes));
    *out = comm->scratch;
    return TUTTI_SUCCESS;
}

/* Run a checked collective on host buffers on this thread; comm's run lock is held. */
static tutti_result_t coll_exec_host(struct tutti_comm *comm, const struct tt_call *c)
{
    struct tt_coll_args a = {.coll = (enum tt_coll)c->coll,
                             .count = c->count,
                             .root = c->root,
                             .inplace = c->inplace,
                             .topo = &comm->view};
    const struct tt_algo *algo;
    size_t bytes;
    struct tt_label label;
    void *bufs[TT_COLL_NBUFS] = {(void *)c->sendbuf, c->recvbuf, NULL};
    struct tt_memreg *regs[TT_COLL_NBUFS] = {NULL};
    struct tt_pre pre;

    double t0 = tt_trace_on ? tt_trace_us() : 0;
    tutti_result_t rc;

    TT_CHECK(tt_coll_check_health(comm, c->fn));
    comm->seq++;
    if (comm->check_coll) {
        tutti_result_t rc = tt_coll_check_match(comm, c);
        if (rc != TUTTI_SUCCESS)
            return rc;
    }
    if (c->count == 0)
        return TUTTI_SUCCESS;
    bytes = c->count * tutti_dtype_size(c->dtype);
    if (c->coll == TT_COLL_ALL_GATHER || c->coll == TT_COLL_REDUCE_SCATTER)
        bytes *= (size_t)comm->nranks;
    algo = tt_tune_pick(&comm->tuner, a.coll, bytes, &a.nchannels);
    if (algo->scratch && c->device) /* the device path has no scratch buffer */
        algo = tt_algo_find(a.coll, "ring", comm->nranks, &comm->view);
    /* A premul-sum operator: a SUM over this rank's input, scaled as read or first (redop.c). */
    if (c->premul.on && !c->refused)
        TT_CHECK(tt_redop_prepare(comm, c, c->device, bufs, &a.inplace, &pre));
    label = (struct tt_label){tt_coll_name(a.coll), a.coll,     comm->seq,  c->count,  c->dtype,
                              call_tag(comm, c),    c->refused, c->refusal, comm->rank};
    if (tt_log_on(TT_LOG_TRACE, TT_SUB_COLL))
        TT_TRACE(TT_SUB_COLL, "%s #%llu: %zu x %s, %s, %d channel(s)%s", label.name,
                 (unsigned long long)label.seq, c->count, tutti_dtype_name(c->dtype), algo->name,
                 a.nchannels, a.inplace ? ", in place" : "");
    build_plan(comm, algo, &a);
    if (c->refused) /* (refused_call: no buffer is touched) */
        bufs[TT_BUF_SCRATCH] = (void *)c->sendbuf;
    else if (algo->scratch &&
             (rc =
                  scratch_for(comm, tt_coll_in_elems(&a, comm->nranks) * tutti_dtype_size(c->dtype),
                              c->fn, &bufs[TT_BUF_SCRATCH])) != TUTTI_SUCCESS)
        return rc;
    if (comm->memregs && !c->refused) { /* tutti_comm_register: zero-copy sends */
        size_t es = tutti_dtype_size(c->dtype), n = (size_t)comm->nranks;
        size_t sbytes = c->count * es * (c->coll == TT_COLL_REDUCE_SCATTER ? n : 1);
        size_t rbytes = c->count * es * (c->coll == TT_COLL_ALL_GATHER ? n : 1);
        /* (not the caller's input where the executor scales it as it reads: exec.h) */
        regs[TT_BUF_SEND] =
            c->premul.on && pre.fused ? NULL : tt_memreg_find(comm, bufs[TT_BUF_SEND], sbytes);
        regs[TT_BUF_RECV] = tt_memreg_find(comm, c->recvbuf, rbytes);
    }
    /* The measured choices for large calls (copy_pick.h): streaming stores into FIFO
     * slots, and for all-gather and broadcast over shm a single copy (point-to-point: sendrecv.c).
     */
    int token = -1, token_sc = -1;
    double t_run = 0;
    if (!c->device) {
        token = tt_coll_stream_pick(comm, c->coll, bytes);
        if (comm->single_copy && (c->coll == TT_COLL_ALL_GATHER || c->coll == TT_COLL_BROADCAST))
            token_sc = tt_coll_single_copy_pick(comm, c->coll, bytes);
        if (token >= 0 || token_sc >= 0)
            t_run = tt_now();
    }
    rc = tt_coll_run_plan(comm, bufs, comm->memregs && !c->device && !c->refused ? regs : NULL,
                          c->dtype, c->op, &label, c->device, c->after,
                          c->premul.on && !c->refused ? &pre : NULL);
    comm->stream_slots = 0;
    int refused_by = comm->refused_by;
    double took = token >= 0 || token_sc >= 0 ? tt_now() - t_run : 0;
    /* A trial's vote (coll_pick.c) runs only after a call that succeeded here; one that a rank
     * refused ran to its end everywhere all the same, and counts alike on every rank. */
    tutti_result_t vrc = tt_coll_stream_done(comm, token, took, rc == TUTTI_SUCCESS);
    tutti_result_t src = tt_coll_single_copy_done(comm, token_sc, took, rc == TUTTI_SUCCESS, 1);
    if (rc == TUTTI_SUCCESS)
        rc = vrc != TUTTI_SUCCESS ? vrc : src;
    if (rc == TUTTI_SUCCESS && refused_by >= 0 && !c->refused) {
        char name[96], who[32] = "a rank";
        tt_label_format(&label, name, sizeof(name));
        if (comm->nranks <= 256)
            snprintf(who, sizeof(who), "rank %d", refused_by);
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                     "%s: %s refused its part of this call: %s. No rank's call completes (this "
                     "rank's output may be partly written); the communicator is still usable",
                     name, who, tt_refusal_text(comm->refused_why));
    }
    if (tt_trace_on) {
        char args[160];
        snprintf(args, sizeof(args),
                 "{\"seq\":%llu,\"count\":%zu,\"dtype\":\"%s\",\"bytes\":%zu,\"algo\":\"%s\","
                 "\"channels\":%d,\"ok\":%d}",
                 label.seq, c->count, tutti_dtype_name(c->dtype), bytes, algo->name, a.nchannels,
                 rc == TUTTI_SUCCESS);
        tt_trace_add("coll", label.name, t0, tt_trace_us() - t0, -1, args);
    }
    return rc;
}

/* Run a checked collective: device buffers stay on the GPU where the communicator has the
 * device path (cuda_dev.c), else go through pinned memory (cuda.c). */
static tutti_result_t coll_exec(struct tutti_comm *comm, const struct tt_call *c)
{
    if (c->device && c->count > 0 && !tt_cuda_direct_use(comm, c)) {
        TT_CHECK(tt_coll_check_health(comm, c->fn));
        return tt_cuda_staged_exec(comm, c, coll_exec_host);
    }
    return coll_exec_host(comm, c);
}

tutti_result_t tt_coll_exec_work(const struct tt_work *w)
{
    tutti_result_t rc;

    pthread_mutex_lock(&w->comm->run_lock);
    if (w->kind == TT_WORK_COLL)
        rc = coll_exec(w->comm, &w->call);
    else
        rc = tt_p2p_exec(w->comm, w->ops, w->nops, w->call.after, w->collective);
    pthread_mutex_unlock(&w->comm->run_lock);
    return rc;
}

void tt_coll_skip_work(const struct tt_work *w, const char *why)
{
    pthread_mutex_lock(&w->comm->run_lock);
    if (tt_comm_error(w->comm) == TUTTI_SUCCESS)
        tt_comm_set_error(w->comm,
                          tt_fail(w->comm, TUTTI_ERR_ABORTED,
                                  "%s: not run: an earlier operation on its stream failed (%s)",
                                  w->kind == TT_WORK_COLL ? w->call.fn : "point-to-point", why));
    pthread_mutex_unlock(&w->comm->run_lock);
}

static tutti_result_t run_now(const struct tt_work *w)
{
    return tt_coll_run_now(w->comm, w);
}

const struct tt_work_ops tt_coll_work_ops = {
    tt_coll_exec_work, run_now, tt_coll_skip_work, tt_comm_work_queued, tt_comm_work_done,
};

/* Run now on this thread, after whatever streams hold for comm. */
tutti_result_t tt_coll_run_now(struct tutti_comm *comm, const struct tt_work *w)
{
    /* Queued stream work is rare: look at the count before the thread-local flag. */
    if (__atomic_load_n(&comm->work_pending, __ATOMIC_ACQUIRE) != 0 && !tt_stream_in_worker())
        tt_comm_wait_idle(comm);
    return tt_coll_exec_work(w);
}

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
    TT_CHECK(tt_cuda_direct_check(comm, c));
    if (tt_group_open()) /* checked: tutti_group_end runs it (coll_group.c) */
        return tt_group_add_coll(comm, c, stream);
    return tt_coll_dispatch(comm, c, stream);
}

tutti_result_t tt_coll_dispatch(struct tutti_comm *comm, const struct tt_call *c,
                                tutti_stream_t stream)
{
    if (tt_stream_is_cuda(stream))
        return tt_cuda_enqueue(comm, c, stream, c->device, &tt_coll_work_ops);
    if (stream) {
        struct tt_work w = {
            .kind = TT_WORK_COLL, .how = &tt_coll_work_ops, .comm = comm, .call = *c};
        return tt_stream_push(stream, &w);
    }
    /* Run now: only the fields a COLL item uses (zeroing the whole item was 8% of a one-rank
     * broadcast). */
    struct tt_work w;
    w.kind = TT_WORK_COLL;
    w.how = &tt_coll_work_ops;
    w.comm = comm;
    w.call = *c;
    return tt_coll_run_now(comm, &w);
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
