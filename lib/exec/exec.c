/* exec.c -- the executor; see exec.h and algorithms/plan.h for the chunk-major walk. */
#include "lib/exec/exec.h"
#include "lib/kern/copy.h"
#include "lib/base/error.h"
#include "lib/exec/tag.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tt_exec_mem_free(struct tt_exec_mem *m)
{
    free(m->lanes);
    free(m->pend);
    free(m->zc);
    free(m->ahead);
    free(m->bounce);
    memset(m, 0, sizeof(*m));
}

int tt_buffer_grow(void **buf, size_t *cap, size_t bytes)
{
    void *p = NULL;

    if (bytes <= *cap)
        return 0;
    if (posix_memalign(&p, 64, bytes) != 0)
        return -1;
    free(*buf);
    *buf = p;
    *cap = bytes;
    return 0;
}

static int mem_reserve(struct tt_exec_mem *m, size_t nlanes, size_t nsteps)
{
    if (nlanes > m->lanes_cap) {
        struct tt_lane_state *g = realloc(m->lanes, nlanes * sizeof(*g));
        if (!g)
            return -1;
        m->lanes = g;
        m->lanes_cap = nlanes;
    }
    if (nsteps > m->pend_cap) {
        struct tt_conn **g = realloc(m->pend, nsteps * sizeof(*g));
        if (!g)
            return -1;
        m->pend = g;
        m->pend_cap = nsteps;
    }
    return 0;
}

/*
 * Start the phase at lane step `first`: find its end and its chunk count. Phases with nothing
 * to move are skipped; at the end of the lane, chunk == nchunks == 0.
 */
static void phase_begin(struct tt_exec *x, const struct tt_lane *lane, struct tt_lane_state *ls,
                        size_t first)
{
    const struct tt_step *steps = x->plan->steps + lane->first;
    double t0 = ls->t0;

    for (;;) {
        size_t most = 0, end = first;

        if (first >= lane->nsteps) {
            *ls = (struct tt_lane_state){.phase = first, .end = first, .t0 = t0};
            return;
        }
        do {
            most = steps[end].count > most ? steps[end].count : most;
            end++;
        } while (end < lane->nsteps && !(steps[end].flags & TT_STEP_PHASE));
        *ls = (struct tt_lane_state){.chunk = 0,
                                     /* no division for the common one-chunk phase */
                                     .nchunks = most <= x->chunk_elems
                                                    ? most > 0
                                                    : (most + x->chunk_elems - 1) / x->chunk_elems,
                                     .step = first,
                                     .phase = first,
                                     .end = end,
                                     .t0 = t0};
        if (ls->nchunks > 0)
            return;
        first = end;
    }
}

tutti_result_t tt_exec_init(struct tt_exec *x, const struct tt_plan *plan, void *const *bufs,
                            tutti_dtype_t dtype, tutti_op_t op, int avg_divisor, size_t chunk_bytes,
                            const struct tt_exec_conns *conns, struct tt_exec_mem *mem)
{
    size_t esize = tutti_dtype_size(dtype);

    if (mem_reserve(mem, (size_t)plan->nlanes, 2 * plan->nsteps) != 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
    /* Every field, one by one: a small call is a fraction of a microsecond, and zeroing the
     * struct first (a string store) was 8% of a one-rank broadcast. */
    x->plan = plan;
    x->bufs = bufs;
    x->esize = esize;
    x->dtype = dtype;
    x->op = op;
    x->avg_divisor = avg_divisor;
    x->kernel = tt_reduce_kernel(dtype, op);
    x->chunk_elems = chunk_bytes >> __builtin_ctzl(esize); /* esize: a power of two */
    x->conns = conns;
    x->regs = NULL;
    x->ahead = NULL;
    x->single_send = 0;
    x->tag = 0;
    x->tag_steps = 0;
    x->label = NULL;
    x->poison = 0;
    x->refused_by = -1;
    x->refusal = 0;
    x->drain = 0;
    x->mover = NULL;
    x->stream_slots = 0;
    x->premul = NULL;
    x->pm_kernel = NULL;
    x->mem = mem;
    x->nzc = 0;
    x->lanes = mem->lanes;
    x->lanes_left = plan->nlanes;
    x->pend = mem->pend;
    x->npend = 0;
    x->moved = 0;
    x->wait_conn = NULL;
    x->wait_peer = -1;
    x->wait_dir = 0;
    for (int l = 0; l < plan->nlanes; l++) {
        phase_begin(x, &plan->lanes[l], &x->lanes[l], 0);
        x->lanes[l].t0 = tt_trace_on ? tt_trace_us() : 0;
        if (x->lanes[l].chunk >= x->lanes[l].nchunks)
            x->lanes_left--;
    }
    return TUTTI_SUCCESS;
}

static struct tt_conn *conn_at(struct tt_conn **table, const struct tt_exec_conns *c, int channel,
                               int peer)
{
    if (peer < 0 || peer >= c->nranks || channel < 0 || channel >= c->nchannels)
        return NULL;
    return table[(size_t)channel * (size_t)c->nranks + (size_t)peer];
}

/* Peek / get a slot; pump the connection once if the transport says "not yet". */
static tutti_result_t poll_peek(struct tt_conn *c, const void **slot, size_t *bytes, uint32_t *tag)
{
    tutti_result_t r = c->tp->recv_peek(c, slot, bytes, tag);

    if (r == TUTTI_IN_PROGRESS) {
        r = c->tp->progress(c);
        if (r == TUTTI_SUCCESS)
            r = c->tp->recv_peek(c, slot, bytes, tag);
    }
    return r;
}

static tutti_result_t poll_slot(struct tt_conn *c, size_t bytes, void **slot)
{
    tutti_result_t r = c->tp->send_slot(c, bytes, slot);

    if (r == TUTTI_IN_PROGRESS) {
        r = c->tp->progress(c);
        if (r == TUTTI_SUCCESS)
            r = c->tp->send_slot(c, bytes, slot);
    }
    return r;
}

/*
 * Zero-copy sends in flight: the executor records each one's source bytes, and a step that
 * would write any of them waits until the transport has finished reading them (a send from
 * a buffer that a later step of the same operation overwrites: in-place recursive doubling,
 * say). Entries the transport has finished with are dropped as they are met.
 */
static tutti_result_t zc_note(struct tt_exec *x, const char *src, size_t bytes, struct tt_conn *c,
                              uint64_t ticket)
{
    struct tt_exec_mem *m = x->mem;

    if (x->nzc == m->zc_cap) {
        for (size_t i = 0; i < x->nzc;) /* make room: forget the finished ones */
            if (m->zc[i].conn->tp->sent(m->zc[i].conn, m->zc[i].ticket))
                m->zc[i] = m->zc[--x->nzc];
            else
                i++;
    }
    if (x->nzc == m->zc_cap) {
        size_t cap = m->zc_cap ? 2 * m->zc_cap : 64;
        struct tt_zc *g = realloc(m->zc, cap * sizeof(*g));
        if (!g)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
        m->zc = g;
        m->zc_cap = cap;
    }
    m->zc[x->nzc++] = (struct tt_zc){src, src + bytes, c, ticket};
    return TUTTI_SUCCESS;
}

static tutti_result_t zc_wait(struct tt_exec *x, const char *dst, size_t bytes)
{
    struct tt_zc *z = x->mem->zc;

    for (size_t i = 0; i < x->nzc;) {
        struct tt_conn *c = z[i].conn;
        if (!(z[i].lo < dst + bytes && dst < z[i].hi)) {
            i++;
            continue;
        }
        if (!c->tp->sent(c, z[i].ticket)) {
            tutti_result_t r = c->tp->progress(c);
            if (r != TUTTI_SUCCESS)
                return r;
            if (!c->tp->sent(c, z[i].ticket)) {
                x->wait_conn = c;
                x->wait_peer = c->peer;
                x->wait_dir = 's';
                return TUTTI_IN_PROGRESS;
            }
        }
        z[i] = z[--x->nzc];
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_exec_single_copy(struct tt_exec *x, int send)
{
    struct tt_exec_mem *m = x->mem;
    size_t need = 2 * x->plan->nsteps;

    if (need == 0) /* nothing moves (one rank) */
        return TUTTI_SUCCESS;
    if (need > m->ahead_cap) {
        size_t *g = realloc(m->ahead, need * sizeof(*g));
        if (!g)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
        m->ahead = g;
        m->ahead_cap = need;
    }
    memset(m->ahead, 0, need * sizeof(*m->ahead));
    x->ahead = m->ahead;
    x->single_send = send;
    return TUTTI_SUCCESS;
}

/* Queue c for flushing (its committed messages, or a device connection's releases). */
static void pend_add(struct tt_exec *x, struct tt_conn *c)
{
    if (!c->queued) {
        c->queued = 1;
        x->pend[x->npend++] = c;
    }
}

/*
 * Single copy (x->ahead): a step may move the whole rest of its range in one message by
 * address, at its first chunk; ahead[2 gi] / ahead[2 gi + 1] record how far step gi has
 * received / sent ahead of the chunk walk, whose later chunks then skip that part.
 */
static int chunk_ahead(const struct tt_exec *x, const struct tt_step *s, size_t gi, size_t lo)
{
    int r = tt_prim_recvs(s->prim), w = tt_prim_sends(s->prim);

    return (r || w) && (!r || lo < x->ahead[2 * gi]) && (!w || lo < x->ahead[2 * gi + 1]);
}

/* May a send read elements [off, off + count) of buffer buf all at once: does no other step
 * of the lane's phase still write any of them? (Earlier phases are done; a later phase that
 * writes them waits for the send, zc_wait; channels own disjoint parts.) */
static int source_final(const struct tt_exec *x, const struct tt_lane *lane,
                        const struct tt_lane_state *ls, size_t gi, uint16_t buf, size_t off,
                        size_t count)
{
    for (size_t j = ls->phase; j < ls->end; j++) {
        const struct tt_step *t = &x->plan->steps[lane->first + j];
        if (lane->first + j == gi || !tt_prim_writes(t->prim) || t->dst != buf ||
            t->dst_off >= off + count || off >= t->dst_off + t->count)
            continue;
        if (!tt_prim_recvs(t->prim) || x->ahead[2 * (lane->first + j)] < t->count)
            return 0;
    }
    return 1;
}

/* A received message whose tag is not this step's (tag.h): fail, naming both calls. A message
 * of a point-to-point operation of another size keeps its own message (bytes). */
static tutti_result_t tag_mismatch(const struct tt_exec *x, int peer, uint32_t want, uint32_t got,
                                   size_t rbytes, size_t bytes)
{
    char what[96] = "this call", why[400];

    if (x->label)
        tt_label_format(x->label, what, sizeof(what));
    if (tt_tag_kind(want) == TT_TAG_P2P && tt_tag_kind(got) == TT_TAG_P2P && rbytes != bytes)
        return tt_fail(NULL, TUTTI_ERR_REMOTE,
                       "%s: rank %d sent %zu bytes where %zu were expected: do both ends name the "
                       "same count and dtype?",
                       what, peer, rbytes, bytes);
    tt_tag_explain(want, got, x->label ? x->label->seq : 0, why, sizeof(why));
    return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                   "%s: rank %d sent a message of %s: do all ranks make the same calls in the same "
                   "order, with the same count, dtype, op and root?",
                   what, peer, why);
}

/* Done with the peeked message of rc. */
static tutti_result_t release(struct tt_exec *x, struct tt_conn *rc)
{
    tutti_result_t r = rc->tp->recv_release(rc);

    if (r == TUTTI_SUCCESS && x->mover) /* published once the device has used the slot */
        pend_add(x, rc);
    return r;
}

/* The rest of a chunk under poison (exec.h): no byte moves; sends go empty, tagged refused;
 * a message by address is released unread (its sender's flush needs only the release). */
static tutti_result_t poison_chunk(struct tt_exec *x, const struct tt_step *s, struct tt_conn *rc,
                                   struct tt_conn *sc, int pull, size_t *ahead)
{
    tutti_result_t r;

    if (pull == 3)
        ahead[0] = s->count;
    if (sc) {
        r = sc->tp->send_commit(sc, 0, tt_tag_refused(x->tag, x->refusal, x->refused_by));
        if (r != TUTTI_SUCCESS)
            return r;
        pend_add(x, sc);
    }
    return rc ? release(x, rc) : TUTTI_SUCCESS;
}

/* One chunk of step gi (s) of a lane: elements [lo, lo + n) of the step's range. */
static tutti_result_t exec_chunk(struct tt_exec *x, const struct tt_lane *lane,
                                 const struct tt_lane_state *ls, size_t gi, size_t lo, size_t n)
{
    const struct tt_step *s = &x->plan->steps[gi];
    int channel = lane->channel;
    size_t bytes = n * x->esize, rest = (s->count - lo) * x->esize;
    const char *src = (const char *)x->bufs[s->src] + (s->src_off + lo) * x->esize;
    char *dst = (char *)x->bufs[s->dst] + (s->dst_off + lo) * x->esize;
    size_t *ahead = x->ahead ? &x->ahead[2 * gi] : NULL;
    int in_dst = ahead && lo < ahead[0]; /* the received bytes are in dst already */
    struct tt_conn *rc = NULL, *sc = NULL;
    const void *rslot = NULL;
    void *sslot = NULL;
    size_t rbytes = 0, zc_bytes = bytes;
    struct tt_memreg *zc_reg = NULL;
    const char *zc_src = NULL;
    int pull = 0; /* by address: 1 a chunk into dst, 2 into its slot, 3 the whole rest */
    uint32_t tag = x->tag_steps ? tt_tag_p2p(s->count) : x->tag, rtag = 0;
    tutti_result_t r;

    if (x->nzc && tt_prim_writes(s->prim) && !in_dst) {
        r = zc_wait(x, dst, bytes);
        if (r != TUTTI_SUCCESS)
            return r;
    }
    if (tt_prim_recvs(s->prim) && !in_dst) {
        rc = conn_at(x->conns->recv, x->conns, channel, s->recv_peer);
        if (!rc)
            return tt_fail(NULL, TUTTI_ERR_INTERNAL, "no connection from rank %d on channel %d",
                           s->recv_peer, channel);
        r = poll_peek(rc, &rslot, &rbytes, &rtag);
        if (r == TUTTI_IN_PROGRESS) {
            x->wait_conn = rc;
            x->wait_peer = s->recv_peer;
            x->wait_dir = 'r';
        }
        if (r != TUTTI_SUCCESS)
            return r;
        if (rtag != tag) {
            if (!tt_tag_refuses(rtag, tag))
                return tag_mismatch(x, s->recv_peer, tag, rtag, rbytes, bytes);
            if (!x->poison) { /* a rank refused the call: go on without the buffers */
                x->poison = 1;
                x->refused_by = tt_tag_refuser(rtag);
                x->refusal = tt_tag_refusal(rtag);
            }
        }
        /* By address (single copy): a step that only copies the bytes out takes them
         * straight into place (the sender's whole rest, or a chunk), any other into its slot;
         * pulled below, once nothing can make the chunk wait (no side effects before). */
        if (rc->tp->recv_remote && rc->tp->recv_remote(rc))
            pull = s->prim == TT_PRIM_RECV || s->prim == TT_PRIM_RECV_COPY_SEND ? 1 : 2;
        if (pull == 1 && ahead && lo == 0 && rbytes == rest && rest != bytes) {
            pull = 3;
            if (x->nzc && (r = zc_wait(x, dst, rest)) != TUTTI_SUCCESS)
                return r;
        } else if (rbytes != bytes && !x->poison) {
            return tt_fail(NULL, TUTTI_ERR_REMOTE,
                           "rank %d sent %zu bytes where %zu were expected: do all ranks pass the "
                           "same count, dtype and root?",
                           s->recv_peer, rbytes, bytes);
        }
    }
    if (tt_prim_sends(s->prim) && !(ahead && lo < ahead[1])) {
        sc = conn_at(x->conns->send, x->conns, channel, s->send_peer);
        if (!sc)
            return tt_fail(NULL, TUTTI_ERR_INTERNAL, "no connection to rank %d on channel %d",
                           s->send_peer, channel);
        r = poll_slot(sc, bytes, &sslot);
        if (r == TUTTI_IN_PROGRESS) {
            x->wait_conn = sc;
            x->wait_peer = s->send_peer;
            x->wait_dir = 's';
        }
        if (r != TUTTI_SUCCESS)
            return r;
    }
    if (x->poison)
        return poison_chunk(x, s, rc, sc, pull, ahead);
    if (pull) {
        r = rc->tp->recv_pull(rc, pull == 2 ? (void *)rslot : dst, pull == 3 ? rest : bytes);
        if (r != TUTTI_SUCCESS)
            return r;
        in_dst = pull != 2;
        if (pull == 3)
            ahead[0] = s->count;
    }

    /* Zero copy: the bytes this step sends already sit in registered memory (the source of
     * a send, or the destination a copying step writes anyway): the transport reads them
     * from there instead of from the slot. A single-copy transport (shm) instead takes the
     * whole rest of a send whose bytes are final, from any host memory. */
    if (sc && sc->tp->send_commit_from && sc->tp->recv_pull) {
        if (!x->single_send || !ahead || lo != 0)
            ; /* two copies: this rank does not send by address in this call */
        else if (s->prim == TT_PRIM_SEND &&
                 source_final(x, lane, ls, gi, s->src, s->src_off, s->count))
            zc_src = src, zc_bytes = rest;
        else if (s->prim == TT_PRIM_RECV_COPY_SEND && (ahead[0] == s->count || rest == bytes))
            zc_src = dst, zc_bytes = rest;
    } else if (sc && sc->tp->send_commit_from && x->regs) {
        if (s->prim == TT_PRIM_SEND && x->regs[s->src])
            zc_reg = x->regs[s->src], zc_src = src;
        else if ((s->prim == TT_PRIM_RECV_COPY_SEND || s->prim == TT_PRIM_RECV_REDUCE_COPY_SEND) &&
                 x->regs[s->dst])
            zc_reg = x->regs[s->dst], zc_src = dst;
    }
    switch (s->prim) {
    case TT_PRIM_SEND: r = zc_src ? TUTTI_SUCCESS : tt_mv_copy_src(x, s, sc, sslot, src, n); break;
    case TT_PRIM_RECV: r = in_dst ? TUTTI_SUCCESS : tt_mv_copy(x, dst, rslot, bytes); break;
    case TT_PRIM_RECV_REDUCE_SEND: r = tt_mv_reduce_src(x, s, sslot, NULL, rslot, src, n); break;
    case TT_PRIM_RECV_REDUCE_COPY:
        r = tt_mv_reduce_final(x, s, NULL, dst, NULL, rslot, src, n);
        break;
    case TT_PRIM_RECV_REDUCE_COPY_SEND:
        r = tt_mv_reduce_final(x, s, sc, dst, zc_src ? NULL : sslot, rslot, src, n);
        break;
    case TT_PRIM_RECV_COPY_SEND:
        r = in_dst ? TUTTI_SUCCESS : tt_mv_copy(x, dst, rslot, bytes);
        if (r == TUTTI_SUCCESS && sc && !zc_src)
            r = tt_mv_copy_out(x, sc, sslot, in_dst ? dst : rslot, bytes);
        break;
    case TT_PRIM_COPY:
        /* (in place a premul-sum call still scales the copy's source) */
        r = dst != src || (x->premul && s->src == TT_BUF_SEND)
                ? tt_mv_copy_src(x, s, NULL, dst, src, n)
                : TUTTI_SUCCESS;
        if (r == TUTTI_SUCCESS)
            r = tt_mv_postop(x, s, dst, n);
        break;
    default: return tt_fail(NULL, TUTTI_ERR_INTERNAL, "bad primitive %d in plan", s->prim);
    }
    if (r != TUTTI_SUCCESS)
        return r;
    if (sc) {
        r = TUTTI_ERR_UNSUPPORTED;
        if (zc_src) {
            uint64_t ticket;
            r = sc->tp->send_commit_from(sc, zc_src, zc_bytes, tag, zc_reg, &ticket);
            if (r == TUTTI_SUCCESS) {
                r = zc_note(x, zc_src, zc_bytes, sc, ticket);
                if (zc_bytes != bytes)
                    ahead[1] = s->count;
            } else if (r == TUTTI_ERR_UNSUPPORTED) { /* the transport cannot: copy after all */
                tt_copy(sslot, zc_src, bytes);       /* host memory */
            }
        }
        if (r == TUTTI_ERR_UNSUPPORTED)
            r = sc->tp->send_commit(sc, bytes, tag);
        if (r != TUTTI_SUCCESS)
            return r;
        pend_add(x, sc);
    }
    return rc ? release(x, rc) : TUTTI_SUCCESS;
}

/* TUTTI_TRACE: the phase just finished, as a span on its lane's track. */
static void trace_phase(struct tt_exec *x, const struct tt_lane *lane, struct tt_lane_state *ls)
{
    static const char *names[TT_NUM_PRIMS] = {
        "send",           "recv", "recv-reduce-send", "recv-reduce-copy", "recv-reduce-copy-send",
        "recv-copy-send", "copy"};
    const struct tt_step *first = x->plan->steps + lane->first + ls->phase;
    double now = tt_trace_us();
    size_t elems = 0;
    char args[160];

    for (size_t i = ls->phase; i < ls->end; i++)
        elems += x->plan->steps[lane->first + i].count;
    snprintf(args, sizeof(args),
             "{\"steps\":%zu,\"chunks\":%zu,\"elements\":%zu,\"send_peer\":%d,\"recv_peer\":%d}",
             ls->end - ls->phase, ls->nchunks, elems, (int)first->send_peer, (int)first->recv_peer);
    tt_trace_add("step", first->prim < TT_NUM_PRIMS ? names[first->prim] : "step", ls->t0,
                 now - ls->t0, (int)(lane - x->plan->lanes), args);
    ls->t0 = now;
}

static tutti_result_t lane_progress(struct tt_exec *x, const struct tt_lane *lane,
                                    struct tt_lane_state *ls)
{
    const struct tt_step *steps = x->plan->steps + lane->first;

    while (ls->chunk < ls->nchunks) {
        size_t lo = ls->chunk * x->chunk_elems;

        while (ls->step < ls->end) {
            const struct tt_step *s = &steps[ls->step];

            if (lo < s->count && !(x->ahead && chunk_ahead(x, s, lane->first + ls->step, lo))) {
                size_t n = s->count - lo < x->chunk_elems ? s->count - lo : x->chunk_elems;
                tutti_result_t r = exec_chunk(x, lane, ls, lane->first + ls->step, lo, n);
                if (r != TUTTI_SUCCESS)
                    return r;
                x->moved = 1;
            }
            ls->step++;
        }
        ls->step = ls->phase;
        if (++ls->chunk == ls->nchunks) {
            if (tt_trace_on)
                trace_phase(x, lane, ls);
            phase_begin(x, lane, ls, ls->end); /* next phase, or the end of the lane */
        }
    }
    return TUTTI_SUCCESS;
}

/* Push what network connections still hold; drop those that are empty. */
static tutti_result_t flush_pending(struct tt_exec *x)
{
    for (size_t i = 0; i < x->npend;) {
        struct tt_conn *c = x->pend[i];
        tutti_result_t r = c->tp->flush(c);

        if (r == TUTTI_SUCCESS && x->drain && c->tp->drained && !c->tp->drained(c))
            r = TUTTI_IN_PROGRESS;
        if (r == TUTTI_IN_PROGRESS) {
            i++;
            continue;
        }
        c->queued = 0;
        x->pend[i] = x->pend[--x->npend];
        if (r != TUTTI_SUCCESS)
            return r;
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_exec_progress(struct tt_exec *x)
{
    tutti_result_t fr;

    x->moved = 0;
    fr = flush_pending(x);
    if (fr != TUTTI_SUCCESS)
        return fr;
    for (int l = 0; l < x->plan->nlanes && x->lanes_left > 0; l++) {
        struct tt_lane_state *ls = &x->lanes[l];

        if (ls->chunk >= ls->nchunks)
            continue;
        tutti_result_t r = lane_progress(x, &x->plan->lanes[l], ls);
        if (r == TUTTI_SUCCESS)
            x->lanes_left--;
        else if (r != TUTTI_IN_PROGRESS)
            return r;
    }
    if (x->lanes_left > 0)
        return TUTTI_IN_PROGRESS;
    fr = flush_pending(x);
    if (fr == TUTTI_SUCCESS && x->npend > 0) {
        x->wait_conn = x->pend[0]; /* only sends left: wait for the network to take them */
        x->wait_peer = x->pend[0]->peer;
        x->wait_dir = 's';
    }
    if (fr != TUTTI_SUCCESS)
        return fr;
    return x->npend == 0 ? TUTTI_SUCCESS : TUTTI_IN_PROGRESS;
}

/* A failed run clears the queued mark of the sends it still had pending. */
static void unqueue(struct tt_exec *x)
{
    for (size_t i = 0; i < x->npend; i++)
        x->pend[i]->queued = 0;
}

tutti_result_t tt_exec_run(struct tt_exec *x, const struct tt_wait_policy *w,
                           const struct tt_label *what)
{
    struct tt_backoff b;
    /* Set at the first wait: most calls never wait. */
    double last_move = 0, last_alive = 0, last_told = 0;
    int stalled = 0;
    char name[96];

    x->label = what;
    tt_backoff_init(&b, w->spin, w->yield_s);
    for (;;) {
        tutti_result_t r = tt_exec_progress(x);
        double now;

        if (r != TUTTI_IN_PROGRESS) {
            if (r != TUTTI_SUCCESS)
                unqueue(x);
            return r;
        }
        if (x->moved) {
            tt_backoff_reset(&b);
            last_move = 0;
            continue;
        }
        if (w->sleepy) {
            /* Yields hand the core to a peer queued on it; after yield_s without progress,
             * block until woken (a woken rank waits its turn for a core: comm.c wait_yield). */
            now = tt_now();
            if (b.yield_until == 0)
                b.yield_until = now + b.yield_s;
            if (now < b.yield_until || !x->wait_conn)
                sched_yield();
            else if (x->npend > 0) /* our sends need pumping: never sleep past the network */
                x->pend[0]->tp->wait(x->pend[0], 200 * 1000);
            else
                x->wait_conn->tp->wait(x->wait_conn, 200 * 1000);
            now = tt_now();
        } else {
            now = tt_backoff_wait(&b);
            if (now == 0)
                continue;
        }
        if (last_move == 0)
            last_move = now;
        if (last_alive == 0)
            last_alive = last_told = now;
        /* Every 20 ms of waiting, ask whether the peer we wait for is still there. */
        if (x->wait_conn && now - last_alive > 0.02) {
            tutti_result_t a = x->wait_conn->tp->alive(x->wait_conn);
            last_alive = now;
            if (a != TUTTI_SUCCESS) {
                /* A peer that finished may exit right after its last write, between our poll
                 * and this check: what it wrote is still there, so look once more. */
                r = tt_exec_progress(x);
                if (r == TUTTI_SUCCESS)
                    return r;
                if (r == TUTTI_IN_PROGRESS && x->moved) {
                    tt_backoff_reset(&b);
                    last_move = 0;
                    continue;
                }
                tt_label_format(what, name, sizeof(name));
                unqueue(x);
                return tt_fail(NULL, a, "%s: %s", name, tt_thread_error());
            }
        }
        if (w->abort_flag && __atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE)) {
            tt_label_format(what, name, sizeof(name));
            return tt_fail(NULL, TUTTI_ERR_ABORTED, "%s: aborted", name);
        }
        if (w->gave_up && now - last_told > 0.1) {
            char why[512];
            int who = w->gave_up(w->gave_up_arg, why, sizeof(why));
            last_told = now;
            if (who >= 0) {
                tt_label_format(what, name, sizeof(name));
                unqueue(x);
                return tt_fail(NULL, TUTTI_ERR_REMOTE, "%s: rank %d gave up: %s", name, who, why);
            }
        }
        if (w->stall_s > 0 && !stalled && now - last_move > w->stall_s) {
            stalled = 1; /* once per operation */
            w->stall(w->stall_arg, x, now - last_move);
        }
        if (now - last_move > w->timeout_s) {
            tt_label_format(what, name, sizeof(name));
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT,
                           "%s: no progress for %.0f s while %s rank %d (TUTTI_TIMEOUT)", name,
                           w->timeout_s, x->wait_dir == 's' ? "sending to" : "receiving from",
                           x->wait_peer);
        }
    }
}

void tt_label_format(const struct tt_label *l, char *buf, size_t size)
{
    if (l->dtype == TUTTI_NUM_DTYPES)
        snprintf(buf, size, "%s #%llu (%zu op(s))", l->name, l->seq, l->count);
    else
        snprintf(buf, size, "%s #%llu (%zu x %s)", l->name, l->seq, l->count,
                 tutti_dtype_name(l->dtype));
}
