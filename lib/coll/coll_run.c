/*
 * coll_run.c -- running a checked collective (coll.c checks it): where it runs (a host
 * stream, a CUDA stream, now), which engine by its memory (host; CUDA staged; CUDA device
 * path), its plan, scratch and measured choices, and the run itself (lib/engine).
 */
#include "lib/coll/coll.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"
#include "lib/core/comm.h"
#include "lib/core/memreg.h"
#include "lib/core/redop.h"
#include "lib/cuda/cuda.h"
#include "lib/exec/tag.h"
#include "lib/stream/stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tt_coll_buf_bytes(const struct tutti_comm *comm, const struct tt_call *c, size_t *sb,
                       size_t *rb)
{
    size_t es = tutti_dtype_size(c->dtype), n = (size_t)comm->nranks;

    *sb = c->count * es * (c->coll == TT_COLL_REDUCE_SCATTER ? n : 1);
    *rb = c->count * es * (c->coll == TT_COLL_ALL_GATHER ? n : 1);
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
        was->inplace == a->inplace && was->nchannels == a->nchannels && was->topo == a->topo &&
        was->cross_only == a->cross_only)
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

/* Run a checked collective on this thread by its engine (host, or the device path, whose
 * plans run on its own connections and stream through e->dev): the host and device-path
 * engines' run; comm's run lock is held. */
static tutti_result_t plan_run(struct tutti_comm *comm, const struct tt_call *c)
{
    const struct tt_engine *e = tt_coll_engines[c->engine];
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
    label = (struct tt_label){tt_coll_name(a.coll), a.coll,     comm->seq,  c->count,  c->dtype,
                              call_tag(comm, c),    c->refused, c->refusal, comm->rank};
    /* Buffers in windows of symmetric memory on every rank: one pass, in place (coll_sym.c). */
    if (comm->sym && tt_coll_sym_try(comm, c, e->dev, &label, &rc))
        return rc;
    algo = tt_tune_pick(&comm->tuner, a.coll, bytes, &a.nchannels);
    if (algo->scratch && !e->scratch) /* the device path has no scratch buffer */
        algo = tt_algo_find(a.coll, "ring", comm->nranks, &comm->view);
    /* Across nodes, a hierarchical plan's stages inside the node on windows (coll_sym.c). */
    struct tt_sym_job hj;
    int hier_sym = 0;
    if (comm->sym && !e->dev &&
        (hier_sym = tt_coll_sym_hier(comm, c, &label, algo, a.nchannels, &hj, &rc)) < 0)
        return rc;
    a.cross_only = hier_sym;
    /* A premul-sum operator: a SUM over this rank's input, scaled as read or first (redop.c). */
    if (c->premul.on && !c->refused)
        TT_CHECK(tt_redop_prepare(comm, c, e->dev != NULL, bufs, &a.inplace, &pre));
    if (tt_log_on(TT_LOG_TRACE, TT_SUB_COLL))
        TT_TRACE(TT_SUB_COLL, "%s #%llu: %zu x %s, %s%s, %d channel(s)%s", label.name,
                 (unsigned long long)label.seq, c->count, tutti_dtype_name(c->dtype), algo->name,
                 hier_sym ? " (symmetric inside nodes)" : "", a.nchannels,
                 a.inplace ? ", in place" : "");
    build_plan(comm, algo, &a);
    if (c->refused) /* (refused_call: no buffer is touched) */
        bufs[TT_BUF_SCRATCH] = (void *)c->sendbuf;
    else if (algo->scratch &&
             (rc =
                  scratch_for(comm, tt_coll_in_elems(&a, comm->nranks) * tutti_dtype_size(c->dtype),
                              c->fn, &bufs[TT_BUF_SCRATCH])) != TUTTI_SUCCESS)
        return rc;
    if (comm->memregs && !c->refused) { /* tutti_comm_register: zero-copy sends */
        size_t sbytes, rbytes;
        tt_coll_buf_bytes(comm, c, &sbytes, &rbytes);
        /* (not the caller's input where the executor scales it as it reads: exec.h) */
        regs[TT_BUF_SEND] =
            c->premul.on && pre.fused ? NULL : tt_memreg_find(comm, bufs[TT_BUF_SEND], sbytes);
        regs[TT_BUF_RECV] = tt_memreg_find(comm, c->recvbuf, rbytes);
    }
    /* The measured choices for large calls (copy_pick.h): streaming stores into FIFO
     * slots, and for all-gather and broadcast over shm a single copy (point-to-point: sendrecv.c).
     */
    struct tt_run run = {.bufs = bufs,
                         .regs = comm->memregs && e->regs && !c->refused ? regs : NULL,
                         .dtype = c->dtype,
                         .op = c->op,
                         .what = &label,
                         .dev = e->dev,
                         .after = c->after,
                         .pre = c->premul.on && !c->refused ? &pre : NULL};
    int token = -1, token_sc = -1, token_net = -1;
    double t_run = 0;
    if (e->picks) {
        token = tt_coll_nt_pick(comm, c->coll, bytes, &run);
        if (comm->single_copy && (c->coll == TT_COLL_ALL_GATHER || c->coll == TT_COLL_BROADCAST))
            token_sc = tt_coll_single_copy_pick(comm, c->coll, bytes, &run);
        token_net = tt_coll_net_chunk_pick(comm, c->coll, bytes, &run);
        if (token >= 0 || token_sc >= 0 || token_net >= 0)
            t_run = tt_now();
    }
    rc = hier_sym ? tt_engine_sym_hier_run(comm, &hj, &run) : tt_engine_run_plan(comm, &run);
    int refused_by = run.refused_by;
    double took = token >= 0 || token_sc >= 0 || token_net >= 0 ? tt_now() - t_run : 0;
    /* A trial's vote (lib/engine/pick.c) runs only after a call that succeeded here; one that a
     * rank refused ran to its end everywhere all the same, and counts alike on every rank. */
    tutti_result_t vrc = tt_coll_nt_done(comm, token, took, rc == TUTTI_SUCCESS);
    tutti_result_t src = tt_coll_single_copy_done(comm, token_sc, took, rc == TUTTI_SUCCESS, 1);
    tutti_result_t nrc = tt_coll_net_chunk_done(comm, token_net, took, rc == TUTTI_SUCCESS);
    if (rc == TUTTI_SUCCESS)
        rc = vrc != TUTTI_SUCCESS ? vrc : src != TUTTI_SUCCESS ? src : nrc;
    if (rc == TUTTI_SUCCESS && refused_by >= 0 && !c->refused) {
        char name[96], who[32] = "a rank";
        tt_label_format(&label, name, sizeof(name));
        if (comm->nranks <= 256)
            snprintf(who, sizeof(who), "rank %d", refused_by);
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                     "%s: %s refused its part of this call: %s. No rank's call completes (this "
                     "rank's output may be partly written); the communicator is still usable",
                     name, who, tt_refusal_text(run.refused_why));
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

/* Run an item on this thread in comm's turn: a point-to-point batch, or a checked collective
 * by the engine it was classified for. */
tutti_result_t tt_coll_exec_work(const struct tt_work *w)
{
    tutti_result_t rc;

    pthread_mutex_lock(&w->comm->run_lock);
    if (w->kind != TT_WORK_COLL)
        rc = tt_p2p_exec(w->comm, w->ops, w->nops, w->call.after, w->collective);
    else
        rc = tt_coll_engines[w->call.engine]->run(w->comm, &w->call);
    pthread_mutex_unlock(&w->comm->run_lock);
    return rc;
}

/*
 * The engines. A collective is classified once as it enters (tt_coll_engine_kind, by its
 * memory); from then on one engine checks, runs and queues it:
 *   host         host buffers: plan_run with scratch, registrations and the measured choices
 *   CUDA staged  device buffers without the device path: the host engine's run between
 *                copies through pinned memory (lib/cuda/cuda.c)
 *   device path  device buffers that stay on the GPU: plan_run on the device path's
 *                connections and stream (lib/cuda/cuda_dev.c), without scratch or the host's
 *                choices
 * Each queues its calls on a wrapped CUDA stream its own way (lib/cuda).
 */
static tutti_result_t no_check(struct tutti_comm *comm, const struct tt_call *c)
{
    (void)comm, (void)c;
    return TUTTI_SUCCESS;
}

static tutti_result_t host_enqueue(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_stream_t s)
{
    return tt_cuda_enqueue(comm, c, s, 0, &tt_coll_work_ops);
}

static tutti_result_t staged_run(struct tutti_comm *comm, const struct tt_call *c)
{
    if (c->count == 0) /* nothing to stage */
        return plan_run(comm, c);
    TT_CHECK(tt_coll_check_health(comm, c->fn));
    return tt_cuda_staged_exec(comm, c, plan_run); /* the staged copy's engine: host */
}

static tutti_result_t staged_enqueue(struct tutti_comm *comm, const struct tt_call *c,
                                     tutti_stream_t s)
{
    return tt_cuda_enqueue(comm, c, s, 1, &tt_coll_work_ops);
}

static tutti_result_t devpath_enqueue(struct tutti_comm *comm, const struct tt_call *c,
                                      tutti_stream_t s)
{
    return tt_cuda_enqueue_dev(comm, c, s, &tt_coll_work_ops);
}

static const struct tt_engine host_engine = {.name = "host",
                                             .check = no_check,
                                             .run = plan_run,
                                             .enqueue = host_enqueue,
                                             .scratch = 1,
                                             .regs = 1,
                                             .picks = 1};
static const struct tt_engine staged_engine = {.name = "CUDA staged",
                                               .check = no_check,
                                               .run = staged_run,
                                               .enqueue = staged_enqueue,
                                               .scratch = 1,
                                               .regs = 1,
                                               .picks = 1};
static const struct tt_engine devpath_engine = {.name = "CUDA device path",
                                                .check = tt_cuda_dev_check,
                                                .run = plan_run,
                                                .enqueue = devpath_enqueue,
                                                .dev = &tt_cuda_dev_hooks};

const struct tt_engine *const tt_coll_engines[TT_NUM_ENGINES] = {
    [TT_ENGINE_HOST] = &host_engine,
    [TT_ENGINE_STAGED] = &staged_engine,
    [TT_ENGINE_DEVPATH] = &devpath_engine,
};

int tt_coll_engine_kind(const struct tutti_comm *comm, const struct tt_call *c)
{
    if (!c->device)
        return TT_ENGINE_HOST;
    return tt_cuda_dev_use(comm, c) ? TT_ENGINE_DEVPATH : TT_ENGINE_STAGED;
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
/* Queued stream work is rare: look at the count before the thread-local flag. */
void tt_coll_after_queued_work(struct tutti_comm *comm)
{
    if (__atomic_load_n(&comm->work_pending, __ATOMIC_ACQUIRE) != 0 && !tt_stream_in_worker())
        tt_comm_wait_idle(comm);
}

tutti_result_t tt_coll_run_now(struct tutti_comm *comm, const struct tt_work *w)
{
    tt_coll_after_queued_work(comm);
    return tt_coll_exec_work(w);
}

tutti_result_t tt_coll_dispatch(struct tutti_comm *comm, const struct tt_call *c,
                                tutti_stream_t stream)
{
    if (tt_stream_is_cuda(stream))
        return tt_coll_engines[c->engine]->enqueue(comm, c, stream);
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
    tt_coll_after_queued_work(comm);
    return tt_coll_exec_work(&w);
}
