/*
 * sym.c -- the symmetric path's run on this thread (engine.h): the per-call gate where the
 * ranks of a host publish where their buffers lie, and the single pass that reads and writes
 * every rank's buffers in place, closed by a barrier on the control lines (symmem.h).
 *
 * The pass splits the elements into one part per rank (64-byte aligned). A rank reduces its
 * part a block at a time into a small buffer of its own (so every element is reduced once, in
 * rank order, whatever aliases what: in place, or the output of one rank over its input) and
 * then writes the block to every destination. All-gather and broadcast copy straight.
 */
#include "lib/engine/engine.h"

#include "algorithms/hier.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"
#include "lib/boot/bootstrap.h"
#include "lib/core/comm.h"
#include "lib/kern/copy.h"
#include "lib/kern/reduce.h"
#include "transport/transport.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block of a rank's reduction: small enough to stay in L1 between the reduce and the copies
 * out. */
#define SYM_BLOCK ((size_t)16 << 10)

enum sym_what { GATE, DONE, READ };

struct sym_wait {
    struct tutti_comm *comm;
    const struct tt_label *what;
    uint64_t seq;
    enum sym_what until; /* every rank's record for seq is there; every rank has finished
                          * seq's pass; every rank has read the records of seq */
};

static int all_there(const struct sym_wait *w)
{
    const struct tt_sym_line *l = w->comm->sym->lines;
    int n = w->comm->local_size;

    for (int i = 0; i < n; i++) {
        if (w->until == GATE ? atomic_load_explicit(&l[i].rec[w->seq % TT_SYM_SLOTS].r.seq,
                                                    memory_order_acquire) != w->seq
                             : atomic_load_explicit(w->until == DONE ? &l[i].done : &l[i].read,
                                                    memory_order_acquire) < w->seq)
            return 0;
    }
    return 1;
}

/* The first rank of this host whose process has died (-1: none). */
static int dead_peer(const struct tutti_comm *c)
{
    int32_t me = c->pids[c->rank];

    for (int r = 0; r < c->nranks; r++) {
        int32_t pid = c->pids[r];
        if (r == c->rank || pid == me || pid <= 0 || c->topo.node_of[r] != c->topo.node_of[c->rank])
            continue;
        if (tt_transport_pid_gone(pid))
            return r;
    }
    return -1;
}

/* Wait until every rank of the host is there (its record, or its end of the pass). */
static tutti_result_t sym_wait(const struct sym_wait *w)
{
    struct tutti_comm *c = w->comm;
    struct tt_backoff b;
    double start = 0, last_check = 0;
    char name[96], why[256], lost[300];
    int r;

    if (all_there(w))
        return TUTTI_SUCCESS;
    tt_backoff_init(&b, c->spin, c->yield_s);
    for (;;) {
        double now = tt_backoff_wait(&b);
        if (all_there(w))
            return TUTTI_SUCCESS;
        if (c->abort_flag) {
            tt_label_format(w->what, name, sizeof(name));
            return tt_fail(c, TUTTI_ERR_ABORTED, "%s: aborted", name);
        }
        if (now == 0 || now - last_check < 0.02)
            continue;
        if (start == 0)
            start = now;
        last_check = now;
        tt_label_format(w->what, name, sizeof(name));
        if ((r = dead_peer(c)) >= 0)
            snprintf(lost, sizeof(lost), "rank %d (pid %d) has died", r, (int)c->pids[r]);
        else if (c->nranks > 1 && c->boot && (r = tt_boot_told(c->boot, 0, why, sizeof(why))) >= 0)
            snprintf(lost, sizeof(lost), "rank %d gave up: %s", r, why);
        /* A rank that finished its part may exit right after it, between our last look and
         * these checks (an inline call ends at the gate): what it wrote is still there, so
         * look once more before blaming it. */
        if (r >= 0)
            return all_there(w) ? TUTTI_SUCCESS
                                : tt_fail(c, TUTTI_ERR_REMOTE, "%s: %s", name, lost);
        if (now - start > c->timeout_s)
            return tt_fail(c, TUTTI_ERR_TIMEOUT,
                           "%s: the ranks of this host did not all reach the call's %s within "
                           "%.0f s (TUTTI_TIMEOUT)",
                           name,
                           w->until == DONE   ? "end"
                           : w->until == GATE ? "start (symmetric gate)"
                                              : "start (symmetric gate, the previous records read)",
                           c->timeout_s);
    }
}

tutti_result_t tt_engine_sym_gate(struct tutti_comm *comm, const struct tt_sym_rec *mine,
                                  const void *data, size_t bytes, const struct tt_label *what,
                                  struct tt_sym_rec *all)
{
    struct tt_sym_line *l = comm->sym->lines;
    int me = comm->topo.local_of[comm->rank], n = comm->local_size;
    unsigned slot = (unsigned)(comm->seq % TT_SYM_SLOTS);
    struct tt_sym_rec *r = &l[me].rec[slot].r;
    uint64_t prev = atomic_load_explicit(&r->seq, memory_order_relaxed);
    struct sym_wait w = {comm, what, prev, READ};
    tutti_result_t rc = TUTTI_SUCCESS;

    /* A rank may run calls ahead of a peer (a call of count 0, or one its plan lets it leave
     * early): the record this one replaces must have been read by every rank first. Once this
     * rank has passed a later gate, every rank has posted a later record, so has. */
    if (prev && comm->sym->passed <= prev)
        rc = sym_wait(&w);
    if (rc == TUTTI_SUCCESS) {
        r->scalar = mine->scalar;
        r->flags = mine->flags;
        r->tag = mine->tag;
        r->count = mine->count;
        if (bytes && bytes <= TT_SYM_SMALL) {
            memcpy(r->small, data, bytes);
        } else {
            r->send_win = mine->send_win;
            r->recv_win = mine->recv_win;
            r->send_off = mine->send_off;
            r->recv_off = mine->recv_off;
            if (bytes)
                memcpy(l[me].data[slot], data, bytes);
        }
        atomic_store_explicit(&r->seq, comm->seq, memory_order_release);
        /* The next call's record (and data area, as far as this call used it): the peers last
         * read those lines TT_SYM_SLOTS - 1 calls ago; own them now, so the stores do not wait
         * for the peers' copies to go. */
        tt_prefetch_write(&l[me].rec[(comm->seq + 1) % TT_SYM_SLOTS].r);
        if (bytes > TT_SYM_SMALL)
            for (size_t b = 0; b < bytes; b += 64)
                tt_prefetch_write(l[me].data[(comm->seq + 1) % TT_SYM_SLOTS] + b);
        w = (struct sym_wait){comm, what, comm->seq, GATE};
        rc = sym_wait(&w);
    }
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    for (int i = 0; i < n; i++) { /* all but seq: flags, scalar, windows or small input */
        const struct tt_sym_rec *p = &l[i].rec[slot].r;
        memcpy((char *)&all[i] + offsetof(struct tt_sym_rec, flags),
               (const char *)p + offsetof(struct tt_sym_rec, flags),
               sizeof(*p) - offsetof(struct tt_sym_rec, flags));
    }
    comm->sym->passed = comm->seq;
    return TUTTI_SUCCESS;
}

void tt_engine_sym_read(struct tutti_comm *comm)
{
    atomic_store_explicit(&comm->sym->lines[comm->topo.local_of[comm->rank]].read, comm->seq,
                          memory_order_release);
}

const char *tt_engine_sym_data(struct tutti_comm *comm, int rank, size_t bytes)
{
    int l = comm->topo.local_of[rank];

    return bytes <= TT_SYM_SMALL ? (const char *)comm->sym->all[l].small
                                 : (const char *)comm->sym->lines[l].data[comm->seq % TT_SYM_SLOTS];
}

/* [lo, hi) of count elements: rank `part` of n's share, in 64-byte units. */
static void share(size_t count, size_t es, int part, int n, size_t *lo, size_t *hi)
{
    size_t unit = es >= 64 ? 1 : 64 / es, units = (count + unit - 1) / unit;

    *lo = units * (size_t)part / (size_t)n * unit;
    *hi = units * (size_t)(part + 1) / (size_t)n * unit;
    if (*lo > count)
        *lo = count;
    if (*hi > count)
        *hi = count;
}

/* tmp[0, m) = the reduction over every rank's src[i] + b (bytes), in rank order (tmp may be
 * an output no src overlaps). */
static void reduce_block(const struct tt_sym_job *j, int n, void *tmp, size_t b, size_t m)
{

    if (j->scalar) {
        tt_premul_fn pm = tt_premul_sum_kernel(j->dtype);
        tt_premul(j->dtype, tmp, j->src[0] + b, m, &j->scalar[0]);
        for (int i = 1; i < n; i++)
            pm(tmp, NULL, tmp, j->src[i] + b, m, &j->scalar[i]);
        return;
    }
    if (n == 1) {
        memcpy(tmp, j->src[0] + b, m * tutti_dtype_size(j->dtype));
    } else {
        tt_reduce_fn k = tt_reduce_kernel(j->dtype, j->op);
        k(tmp, NULL, j->src[0] + b, j->src[1] + b, m);
        for (int i = 2; i < n; i++)
            k(tmp, NULL, tmp, j->src[i] + b, m);
    }
    if (j->op == TUTTI_AVG)
        tt_postop_avg(j->dtype, tmp, m, n);
}

/* Two ranks' all-reduce: do the four buffers lie apart (the kernel's second output may
 * overlap nothing)? Out of place on both ranks they do. */
static int apart(const struct tt_sym_job *j, size_t bytes)
{
    const char *p[4] = {j->src[0], j->src[1], j->dst[0], j->dst[1]};

    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            if (p[a] < p[b] + bytes && p[b] < p[a] + bytes)
                return 0;
    return 1;
}

/* This rank's part of the pass. */
static void pass(struct tutti_comm *comm, const struct tt_sym_job *j, void *tmp)
{
    int n = comm->nranks, me = comm->rank;
    size_t es = tutti_dtype_size(j->dtype), lo, hi, blk = SYM_BLOCK / es;

    switch (j->coll) {
    case TT_COLL_ALL_REDUCE:
    case TT_COLL_REDUCE:
        share(j->count, es, me, n, &lo, &hi);
        if (n == 2 && j->coll == TT_COLL_ALL_REDUCE && !j->scalar && j->op != TUTTI_AVG &&
            apart(j, (hi - lo) * es)) { /* both outputs in the kernel's one pass */
            size_t b = lo * es;
            tt_reduce_kernel(j->dtype, j->op)(j->dst[me] + b, j->dst[1 - me] + b, j->src[0] + b,
                                              j->src[1] + b, hi - lo);
            break;
        }
        for (size_t at = lo; at < hi; at += blk) {
            size_t m = hi - at < blk ? hi - at : blk;
            reduce_block(j, n, tmp, at * es, m);
            for (int i = 0; i < n; i++)
                if (j->coll == TT_COLL_ALL_REDUCE || i == j->root)
                    tt_copy(j->dst[i] + at * es, tmp, m * es);
        }
        break;
    case TT_COLL_REDUCE_SCATTER: /* our block of every rank's input */
        for (size_t at = 0; at < j->count; at += blk) {
            size_t m = j->count - at < blk ? j->count - at : blk;
            reduce_block(j, n, tmp, ((size_t)me * j->count + at) * es, m);
            tt_copy(j->dst[me] + at * es, tmp, m * es);
        }
        break;
    case TT_COLL_ALL_GATHER: /* pull every rank's input, or push ours to every output */
        for (int i = 0; i < n; i++) {
            int from = j->pull ? i : me, to = j->pull ? me : i;
            char *d = j->dst[to] + (size_t)from * j->count * es;
            if (d != j->src[from])
                tt_copy_large(d, j->src[from], j->count * es);
        }
        break;
    case TT_COLL_BROADCAST:
        if (j->dst[me] != j->src[j->root])
            tt_copy_large(j->dst[me], j->src[j->root], j->count * es);
        break;
    }
}

/*
 * This rank's part of the pass on device memory, queued through the device path's mover (the
 * reduction kernels and peer copies on its stream). A rank reduces its part of every input
 * straight into one output (its own; reduce: the root's), starting from the input of that
 * output's rank (so in place is safe: nobody else reads that part of it), then copies the part
 * into every other output. Each part is read and written by its rank alone.
 */
static tutti_result_t pass_dev(struct tutti_comm *comm, const struct tt_sym_job *j)
{
    const struct tt_mover *mv = &comm->cuda.mover;
    int n = comm->nranks, me = comm->rank, avg = j->op == TUTTI_AVG;
    int t = j->coll == TT_COLL_REDUCE ? j->root : me; /* whose output gathers the part */
    size_t es = tutti_dtype_size(j->dtype), lo = 0, hi = j->count, b, at;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (j->coll == TT_COLL_ALL_GATHER) { /* pull every rank's input, or push ours */
        for (int i = 0; i < n && rc == TUTTI_SUCCESS; i++) {
            int from = j->pull ? i : me, to = j->pull ? me : i;
            char *d = j->dst[to] + (size_t)from * j->count * es;
            if (d != j->src[from])
                rc = mv->copy(mv->ctx, d, j->src[from], j->count * es);
        }
        return rc;
    }
    if (j->coll == TT_COLL_BROADCAST)
        return j->dst[me] == j->src[j->root]
                   ? TUTTI_SUCCESS
                   : mv->copy(mv->ctx, j->dst[me], j->src[j->root], j->count * es);
    if (j->coll == TT_COLL_REDUCE_SCATTER) { /* our block of every rank's input */
        b = (size_t)me * j->count * es;
        at = 0;
    } else {
        share(j->count, es, me, n, &lo, &hi);
        b = at = lo * es;
    }
    if (hi <= lo)
        return TUTTI_SUCCESS;
    if (n == 2 && j->coll == TT_COLL_ALL_REDUCE && apart(j, (hi - lo) * es))
        return mv->reduce(mv->ctx, j->dst[me] + b, j->dst[1 - me] + b, j->src[0] + b, j->src[1] + b,
                          hi - lo, j->dtype, j->op, avg ? n : 0);
    char *d = j->dst[t] + at;
    for (int i = 1; i < n && rc == TUTTI_SUCCESS; i++)
        rc = mv->reduce(mv->ctx, d, NULL, i == 1 ? j->src[t] + b : d, j->src[(t + i) % n] + b,
                        hi - lo, j->dtype, j->op, avg && i == n - 1 ? n : 0);
    for (int i = 0; i < n && rc == TUTTI_SUCCESS && j->coll == TT_COLL_ALL_REDUCE; i++)
        if (i != me)
            rc = mv->copy(mv->ctx, j->dst[i] + b, d, (hi - lo) * es);
    return rc;
}

/* Device memory: on the device path's stream after the caller's work, j's pass (NULL: none),
 * finished when this returns. */
static tutti_result_t on_stream(struct tutti_comm *comm, const struct tt_dev_hooks *dev,
                                void *after, const struct tt_sym_job *j)
{
    int prev = -1;
    tutti_result_t rc = dev->begin(comm, after, &prev), end;

    if (rc == TUTTI_SUCCESS && j)
        rc = pass_dev(comm, j);
    end = dev->end(comm, prev);
    return rc != TUTTI_SUCCESS ? rc : end;
}

tutti_result_t tt_engine_sym_dev_ready(struct tutti_comm *comm, const struct tt_dev_hooks *dev,
                                       void *after)
{
    return on_stream(comm, dev, after, NULL);
}

tutti_result_t tt_engine_sym_run(struct tutti_comm *comm, const struct tt_sym_job *j,
                                 const struct tt_label *what)
{
    struct tt_sym *s = comm->sym;
    int me = comm->topo.local_of[comm->rank];
    struct sym_wait w = {comm, what, comm->seq, DONE};
    tutti_result_t rc;

    if (!j->dev && !s->tmp && !(s->tmp = aligned_alloc(64, SYM_BLOCK)))
        return tt_comm_set_error(
            comm, tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory for a block", what->name));
    tt_board_enter(&comm->board, me, comm->seq, what->coll);
    if (j->dev) {
        if ((rc = on_stream(comm, j->dev, j->after, j)) != TUTTI_SUCCESS) {
            tt_board_leave(&comm->board, me);
            return tt_comm_set_error(comm, rc); /* (the peers learn of it at the barrier) */
        }
    } else {
        pass(comm, j, s->tmp);
    }
    atomic_store_explicit(&s->lines[me].done, comm->seq, memory_order_release);
    rc = sym_wait(&w);
    tt_board_leave(&comm->board, me);
    return rc == TUTTI_SUCCESS ? TUTTI_SUCCESS : tt_comm_set_error(comm, rc);
}

/* [*o, *o + *n): local index l's segment of channel ch's part of count (the hierarchical
 * plans' split: algorithms/allreduce_hier.c). */
static void hier_seg(const struct tt_sym_job *j, int ch, int L, int l, size_t *o, size_t *n)
{
    size_t off, cnt;

    tt_split(j->count, j->nchannels, ch, &off, &cnt);
    tt_split(cnt, L, l, o, n);
    *o += off;
}

/* All-reduce's stage before the plan: this node's sum of this rank's segments into its
 * recvbuf, a block at a time (every rank of the node reads only its own segment of the
 * others' inputs, and writes only its own segment of its own output). */
static void hier_reduce(struct tutti_comm *comm, const struct tt_sym_job *j)
{
    int L = comm->local_size, l = comm->topo.local_of[comm->rank];
    size_t es = tutti_dtype_size(j->dtype), blk = SYM_BLOCK / es, o, n;
    tt_reduce_fn k = tt_reduce_kernel(j->dtype, j->op); /* (AVG: a sum; the plan divides) */

    for (int ch = 0; ch < j->nchannels; ch++) {
        hier_seg(j, ch, L, l, &o, &n);
        for (size_t at = o; at < o + n; at += blk) {
            size_t m = o + n - at < blk ? o + n - at : blk, b = at * es;
            char *d = j->dst[l] + b;
            /* from this rank's own input (in place, d is it), around the node */
            k(d, NULL, j->src[l] + b, j->src[(l + 1) % L] + b, m);
            for (int i = 2; i < L; i++)
                k(d, NULL, d, j->src[(l + i) % L] + b, m);
        }
    }
}

/* The stage after the plan: what this rank holds of the result into every output of its
 * node. Nobody else writes those bytes, and nobody reads them before the closing barrier. */
static void hier_push(struct tutti_comm *comm, const struct tt_sym_job *j)
{
    const struct tt_topo_view *t = &comm->view;
    int L = comm->local_size, l = t->local_of[comm->rank];
    size_t es = tutti_dtype_size(j->dtype), o, n;

    switch (j->coll) {
    case TT_COLL_ALL_REDUCE:
        for (int ch = 0; ch < j->nchannels; ch++) {
            hier_seg(j, ch, L, l, &o, &n);
            for (int i = 0; i < L; i++)
                if (i != l)
                    tt_copy_large(j->dst[i] + o * es, j->dst[l] + o * es, n * es);
        }
        break;
    case TT_COLL_ALL_GATHER: /* the blocks of this rank's column, one per node */
        for (int node = 0; node < t->nnodes; node++) {
            int owner = tt_hier_rank(t, comm->nranks, node, l);
            size_t b = (size_t)owner * j->count * es;
            for (int i = 0; i < L && owner >= 0; i++)
                if (i != l)
                    tt_copy_large(j->dst[i] + b, j->dst[l] + b, j->count * es);
        }
        break;
    case TT_COLL_BROADCAST: { /* the node's head (algorithms/broadcast_hier.c) */
        int lr = t->local_of[j->root];
        if (l != (lr < L ? lr : 0))
            break;
        for (int i = 0; i < L; i++)
            if (i != l)
                tt_copy_large(j->dst[i], j->dst[l], j->count * es);
        break;
    }
    }
}

tutti_result_t tt_engine_sym_hier_run(struct tutti_comm *comm, const struct tt_sym_job *j,
                                      struct tt_run *run)
{
    struct tt_sym *s = comm->sym;
    int me = comm->topo.local_of[comm->rank];
    struct sym_wait w = {comm, run->what, comm->seq, DONE};
    tutti_result_t rc;

    if (j->coll == TT_COLL_ALL_REDUCE)
        hier_reduce(comm, j);
    rc = tt_engine_run_plan(comm, run);
    if (rc != TUTTI_SUCCESS)
        return rc; /* (comm is in the error state: the node's ranks learn of it) */
    /* A refusal (poison) left recvbuf unwritten by the plan: the call fails on every rank;
     * the copies still run, so that no rank leaves before another has finished. */
    hier_push(comm, j);
    tt_board_enter(&comm->board, me, comm->seq, run->what->coll);
    atomic_store_explicit(&s->lines[me].done, comm->seq, memory_order_release);
    rc = sym_wait(&w);
    tt_board_leave(&comm->board, me);
    return rc == TUTTI_SUCCESS ? TUTTI_SUCCESS : tt_comm_set_error(comm, rc);
}

tutti_result_t tt_engine_sym_local(struct tutti_comm *comm, const struct tt_sym_job *j)
{
    int n = comm->nranks, me = comm->rank;
    size_t es = tutti_dtype_size(j->dtype), bytes = j->count * es;
    char *out = j->dst[me];

    switch (j->coll) {
    case TT_COLL_ALL_REDUCE:
    case TT_COLL_REDUCE:
        if (j->coll == TT_COLL_ALL_REDUCE || me == j->root)
            reduce_block(j, n, out, 0, j->count);
        break;
    case TT_COLL_REDUCE_SCATTER: reduce_block(j, n, out, (size_t)me * bytes, j->count); break;
    case TT_COLL_ALL_GATHER:
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)i * bytes, j->src[i], bytes);
        break;
    case TT_COLL_BROADCAST: memcpy(out, j->src[j->root], bytes); break;
    }
    tt_engine_sym_read(comm);
    return TUTTI_SUCCESS;
}
