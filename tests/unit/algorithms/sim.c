/* sim.c -- the schedule simulator; see sim.h. */
#include "sim.h"

#include "../../../lib/base/error.h"
#include "../../../lib/exec/exec.h"
#include "../../../lib/kern/reduce.h"
#include "../../../transport/dfifo.h"
#include "../../../transport/transport.h"

#include <stdlib.h>
#include <string.h>

/* Deferred mode (sim.h): a rank's queue of byte operations, run in order, later. */
enum { OP_COPY, OP_REDUCE, OP_DIVIDE };

struct sim_op {
    int kind;
    void *d, *d2;
    const void *a, *b;
    size_t n;   /* bytes (copy) or elements */
    int divide; /* a reduction that ends an AVG: divided, then copied to d2 */
};

struct sim_queue {
    struct sim_op *ops;
    size_t cap, queued, done;
    tutti_dtype_t dtype;
    tutti_op_t op;
    int divisor;
};

static tutti_result_t q_push(struct sim_queue *q, struct sim_op o)
{
    if (q->queued == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        struct sim_op *g = realloc(q->ops, cap * sizeof(*g));
        if (!g)
            return tt_fail_quiet(NULL, TUTTI_ERR_SYSTEM, "sim: out of memory");
        q->ops = g;
        q->cap = cap;
    }
    q->ops[q->queued++] = o;
    return TUTTI_SUCCESS;
}

/* Run up to k queued operations; how many ran. */
static size_t q_run(struct sim_queue *q, size_t k)
{
    size_t ran = 0;

    for (; ran < k && q->done < q->queued; ran++) {
        struct sim_op *o = &q->ops[q->done++];
        switch (o->kind) {
        case OP_COPY: memmove(o->d, o->a, o->n); break;
        case OP_REDUCE:
            if (!o->divide) {
                tt_reduce_kernel(q->dtype, q->op)(o->d, o->d2, o->a, o->b, o->n);
                break;
            }
            tt_reduce_kernel(q->dtype, q->op)(o->d, NULL, o->a, o->b, o->n);
            tt_postop_avg(q->dtype, o->d, o->n, q->divisor);
            if (o->d2)
                memcpy(o->d2, o->d, o->n * tutti_dtype_size(q->dtype));
            break;
        default: tt_postop_avg(q->dtype, o->d, o->n, q->divisor);
        }
    }
    return ran;
}

static tutti_result_t mv_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    return q_push(ctx, (struct sim_op){.kind = OP_COPY, .d = dst, .a = src, .n = bytes});
}

static tutti_result_t mv_reduce(void *ctx, void *dst, void *dst2, const void *a, const void *b,
                                size_t n, tutti_dtype_t dtype, tutti_op_t op, int divisor)
{
    struct sim_queue *q = ctx;
    if (dtype != q->dtype || op != q->op)
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: mover asked for another dtype/op");
    if (divisor > 1 && (op != TUTTI_AVG || divisor != q->divisor))
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: mover asked for another divisor");
    return q_push(q, (struct sim_op){.kind = OP_REDUCE,
                                     .d = dst,
                                     .d2 = dst2,
                                     .a = a,
                                     .b = b,
                                     .n = n,
                                     .divide = divisor > 1});
}

static tutti_result_t mv_divide(void *ctx, void *buf, size_t n, tutti_dtype_t dtype, int divisor)
{
    struct sim_queue *q = ctx;
    if (dtype != q->dtype || divisor != q->divisor)
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: mover asked for another divisor");
    return q_push(q, (struct sim_op){.kind = OP_DIVIDE, .d = buf, .n = n});
}

/* A deferred connection: dfifo.h over plain memory, marks are positions in a rank's queue. */
struct dmem_conn {
    struct tt_conn base;
    struct tt_dfifo f;
    struct sim_queue *q; /* the queue of the rank owning this side */
    size_t mark_at[TT_MAX_SLOTS];
    void *region; /* receiver: control block and slots */
};

static int dmem_mark(void *arg, uint32_t k)
{
    struct dmem_conn *c = arg;
    c->mark_at[k] = c->q->queued;
    return 0;
}

static int dmem_passed(void *arg, uint32_t k)
{
    struct dmem_conn *c = arg;
    return c->q->done >= c->mark_at[k];
}

static const struct tt_transport dmem;

static struct dmem_conn *dmem_new(const struct tt_transport_ctx *ctx, int peer, int channel)
{
    struct dmem_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base.tp = &dmem;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = ctx->slot_bytes;
    c->q = ctx->cuda_stream;
    return c;
}

static void dmem_view(struct dmem_conn *c, void *region, int owner)
{
    tt_dfifo_view(&c->f, region, (char *)region + sizeof(struct tt_dfifo_ctrl), owner);
    c->f.mark = dmem_mark;
    c->f.passed = dmem_passed;
    c->f.arg = c;
}

static tutti_result_t dmem_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                      void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct dmem_conn *c = dmem_new(ctx, peer, channel);
    size_t bytes = sizeof(struct tt_dfifo_ctrl) + (size_t)ctx->nslots * ctx->slot_bytes;

    if (!c || !(c->region = aligned_alloc(64, (bytes + 63) & ~(size_t)63))) {
        free(c);
        return tt_fail_quiet(NULL, TUTTI_ERR_SYSTEM, "sim: out of memory");
    }
    memset(c->region, 0x77, bytes); /* slots hold garbage until written */
    tt_dfifo_format(c->region, (uint32_t)ctx->nslots, ctx->slot_bytes);
    dmem_view(c, c->region, 1);
    memcpy(blob, &c->region, sizeof(c->region));
    *blob_len = sizeof(c->region);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

static tutti_result_t dmem_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                        const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct dmem_conn *c = dmem_new(ctx, peer, channel);
    void *region;

    if (!c || blob_len != sizeof(region)) {
        free(c);
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: bad connection blob");
    }
    memcpy(&region, blob, sizeof(region));
    dmem_view(c, region, 0);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

static tutti_result_t dmem_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    (void)bytes;
    *slot = tt_dfifo_send_slot(&((struct dmem_conn *)conn)->f);
    return *slot ? TUTTI_SUCCESS : TUTTI_IN_PROGRESS;
}

static tutti_result_t dmem_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    tt_dfifo_send_commit(&((struct dmem_conn *)conn)->f, bytes, tag);
    return TUTTI_SUCCESS;
}

static tutti_result_t dmem_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                     uint32_t *tag)
{
    *slot = tt_dfifo_recv_peek(&((struct dmem_conn *)conn)->f, bytes, tag);
    return *slot ? TUTTI_SUCCESS : TUTTI_IN_PROGRESS;
}

static tutti_result_t dmem_recv_release(struct tt_conn *conn)
{
    tt_dfifo_recv_release(&((struct dmem_conn *)conn)->f);
    return TUTTI_SUCCESS;
}

static tutti_result_t dmem_progress(struct tt_conn *conn)
{
    tt_dfifo_publish(&((struct dmem_conn *)conn)->f);
    return TUTTI_SUCCESS;
}

static tutti_result_t dmem_flush(struct tt_conn *conn)
{
    struct dmem_conn *c = (struct dmem_conn *)conn;
    tt_dfifo_publish(&c->f);
    return tt_dfifo_pending(&c->f) ? TUTTI_IN_PROGRESS : TUTTI_SUCCESS;
}

static void dmem_fail(struct tt_conn *conn)
{
    tt_dfifo_fail(&((struct dmem_conn *)conn)->f);
}

static void dmem_close(struct tt_conn *conn)
{
    struct dmem_conn *c = (struct dmem_conn *)conn;
    if (c)
        free(c->region);
    free(c);
}

static const struct tt_transport dmem = {
    .size = sizeof(struct tt_transport),
    .name = "sim-deferred",
    .recv_setup = dmem_recv_setup,
    .send_connect = dmem_send_connect,
    .finish = tt_transport_no_finish,
    .send_slot = dmem_send_slot,
    .send_commit = dmem_send_commit,
    .flush = dmem_flush,
    .recv_peek = dmem_recv_peek,
    .recv_release = dmem_recv_release,
    .progress = dmem_progress,
    .wait = tt_transport_sleep,
    .alive = tt_transport_no_alive,
    .fail = dmem_fail,
    .close = dmem_close,
};

/* Connection from rank s to rank d on channel ch, if not there yet. */
static tutti_result_t sim_connect(const struct tt_transport_ctx *ctx, struct tt_exec_conns *conns,
                                  struct sim_queue *queues, int ch, int s, int d)
{
    const struct tt_transport *tp = queues ? &dmem : &tt_transport_mem;
    struct tt_transport_ctx at_d = *ctx, at_s = *ctx;
    int n = conns[0].nranks;
    size_t idx_at_d = (size_t)ch * (size_t)n + (size_t)s,
           idx_at_s = (size_t)ch * (size_t)n + (size_t)d;
    unsigned char blob[TT_BLOB_MAX];
    size_t len;
    tutti_result_t rc;

    if (s < 0 || s >= n || d < 0 || d >= n)
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: plan names peer %d",
                             s < 0 || s >= n ? s : d);
    if (conns[s].send[idx_at_s])
        return TUTTI_SUCCESS;
    if (queues) {
        at_d.cuda_stream = &queues[d];
        at_s.cuda_stream = &queues[s];
    }
    rc = tp->recv_setup(&at_d, s, ch, blob, &len, &conns[d].recv[idx_at_d]);
    if (rc == TUTTI_SUCCESS)
        rc = tp->send_connect(&at_s, d, ch, blob, len, &conns[s].send[idx_at_s]);
    return rc;
}

tutti_result_t sim_run(const struct sim_config *cfg, const struct tt_algo *algo,
                       struct tt_coll_args a, void **send, void **recv, tutti_dtype_t dtype,
                       tutti_op_t op)
{
    int n = cfg->nranks, nch = cfg->nchannels;
    struct tt_plan *plans = calloc((size_t)n, sizeof(*plans));
    struct tt_ring *rings = calloc((size_t)n * (size_t)nch, sizeof(*rings));
    int *order = malloc((size_t)n * sizeof(int)), *pos = malloc((size_t)n * sizeof(int));
    void *bufs[64][TT_COLL_NBUFS] = {{0}}, *const * per_rank[64] = {0};
    size_t scratch = algo->scratch ? tt_coll_in_elems(&a, n) * tutti_dtype_size(dtype) : 0;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (n > 64)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "sim: at most 64 ranks");
    for (int k = 0; k < n; k++)
        order[k] = cfg->ring_order ? cfg->ring_order[k] : k;
    for (int k = 0; k < n; k++)
        pos[order[k]] = k;
    a.nchannels = nch;
    a.topo = cfg->topo;
    for (int r = 0; r < n; r++)
        for (int ch = 0; ch < nch; ch++)
            rings[(size_t)r * (size_t)nch + (size_t)ch] =
                (struct tt_ring){.nranks = n, .pos = pos[r], .order = order};
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++) {
        algo->build(&plans[r], &rings[(size_t)r * (size_t)nch], &a);
        if (plans[r].oom)
            rc = tt_fail_quiet(NULL, TUTTI_ERR_SYSTEM, "sim: plan out of memory");
        bufs[r][TT_BUF_SEND] = send[r];
        bufs[r][TT_BUF_RECV] = recv[r];
        /* garbage in the scratch buffer: a plan must write what it reads there */
        if (scratch && (bufs[r][TT_BUF_SCRATCH] = malloc(scratch)) == NULL)
            rc = tt_fail_quiet(NULL, TUTTI_ERR_SYSTEM, "sim: out of memory");
        else if (scratch)
            memset(bufs[r][TT_BUF_SCRATCH], 0xa5, scratch);
        per_rank[r] = bufs[r];
    }
    if (rc == TUTTI_SUCCESS)
        rc = sim_run_plans(cfg, plans, per_rank, dtype, op);
    for (int r = 0; r < n; r++) {
        tt_plan_free(&plans[r]);
        free(bufs[r][TT_BUF_SCRATCH]);
    }
    free(plans);
    free(rings);
    free(order);
    free(pos);
    return rc;
}

tutti_result_t sim_run_plans(const struct sim_config *cfg, const struct tt_plan *plans,
                             void *const *const *bufs, tutti_dtype_t dtype, tutti_op_t op)
{
    int n = cfg->nranks, nch = cfg->nchannels;
    size_t nconn = (size_t)n * 2 * (size_t)nch; /* two connection channels per data channel */
    struct tt_transport_ctx ctx = {
        .job_tag = "sim", .slot_bytes = cfg->slot_bytes, .nslots = cfg->nslots};
    struct tt_exec_conns *conns = calloc((size_t)n, sizeof(*conns));
    struct tt_exec *x = calloc((size_t)n, sizeof(*x));
    struct tt_exec_mem *mem = calloc((size_t)n, sizeof(*mem));
    struct sim_queue *queues = cfg->deferred ? calloc((size_t)n, sizeof(*queues)) : NULL;
    struct tt_mover *movers = cfg->deferred ? calloc((size_t)n, sizeof(*movers)) : NULL;
    const struct tt_transport *tp = cfg->deferred ? &dmem : &tt_transport_mem;
    unsigned seed = cfg->seed * 2654435761u + 1;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (n > 64)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "sim: at most 64 ranks");
    for (int r = 0; r < n; r++)
        conns[r] = (struct tt_exec_conns){.nranks = n,
                                          .nchannels = 2 * nch,
                                          .send = calloc(nconn, sizeof(void *)),
                                          .recv = calloc(nconn, sizeof(void *))};
    /* Connect the pairs the plans use, both ends at once. */
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++)
        for (int l = 0; l < plans[r].nlanes && rc == TUTTI_SUCCESS; l++) {
            const struct tt_lane *lane = &plans[r].lanes[l];
            for (size_t i = 0; i < lane->nsteps && rc == TUTTI_SUCCESS; i++) {
                const struct tt_step *st = &plans[r].steps[lane->first + i];
                if (st->prim == TT_PRIM_SEND || st->prim == TT_PRIM_RECV_REDUCE_SEND ||
                    st->prim == TT_PRIM_RECV_REDUCE_COPY_SEND || st->prim == TT_PRIM_RECV_COPY_SEND)
                    rc = sim_connect(&ctx, conns, queues, lane->channel, r, st->send_peer);
                if (st->prim != TT_PRIM_SEND && st->prim != TT_PRIM_COPY && rc == TUTTI_SUCCESS)
                    rc = sim_connect(&ctx, conns, queues, lane->channel, st->recv_peer, r);
            }
        }
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++) {
        rc = tt_exec_init(&x[r], &plans[r], bufs[r], dtype, op, n, cfg->slot_bytes, &conns[r],
                          &mem[r]);
        if (rc == TUTTI_SUCCESS && cfg->single_copy)
            rc = tt_exec_single_copy(&x[r], cfg->single_copy == 1 || r % 2);
        if (queues) {
            queues[r] = (struct sim_queue){.dtype = dtype, .op = op, .divisor = n};
            movers[r] = (struct tt_mover){
                .copy = mv_copy, .reduce = mv_reduce, .divide = mv_divide, .ctx = &queues[r]};
            x[r].mover = &movers[r];
        }
    }
    /* Deferred connections publish inside a later progress call, which counts as no move: a
     * round without a move is a deadlock only when the round after it has none either. */
    for (int idle = 0; rc == TUTTI_SUCCESS;) {
        int moved = 0, done = 0;
        for (int r = 0; r < n; r++) {
            tutti_result_t p = tt_exec_progress(&x[r]);
            if (p == TUTTI_SUCCESS)
                done++;
            else if (p != TUTTI_IN_PROGRESS)
                rc = p;
            moved |= x[r].moved;
            if (queues) { /* the rank's "GPU" runs some of what is queued: 0 to 3 operations */
                seed = seed * 1103515245u + 12345u;
                moved |= q_run(&queues[r], (seed >> 16) % 4) > 0;
            }
        }
        if (rc != TUTTI_SUCCESS || done == n)
            break;
        if (!moved && queues) /* nothing moved: let one rank's queue run dry */
            for (int r = 0; r < n && !moved; r++)
                moved = q_run(&queues[r], (size_t)-1) > 0;
        idle = moved ? 0 : idle + 1;
        if (idle > (queues ? 1 : 0))
            rc = tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL,
                               "sim: deadlock: %d of %d ranks done and none can move", done, n);
    }
    /* The end of the operation waits for each rank's queue (the device path's stream sync). */
    for (int r = 0; queues && r < n; r++)
        q_run(&queues[r], (size_t)-1);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < nconn; i++)
            if (conns[r].send[i])
                tp->close(conns[r].send[i]);
    }
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < nconn; i++)
            if (conns[r].recv[i])
                tp->close(conns[r].recv[i]);
        free(conns[r].send);
        free(conns[r].recv);
        tt_exec_mem_free(&mem[r]);
    }
    free(conns);
    free(x);
    free(mem);
    for (int r = 0; queues && r < n; r++)
        free(queues[r].ops);
    free(queues);
    free(movers);
    return rc;
}
