/*
 * exec_chunk.c -- the executor's chunk-major walk (tt_exec_progress: every lane, chunk by
 * chunk through the steps of its phase, until one must wait) and one chunk of one step: take
 * the received message (checking its tag and size), a send slot, move the bytes by the step's
 * primitive (one function each, exec_move.c's movers), commit the send (zero copy where the
 * bytes already lie in registered or final memory) and release the message.
 */
#include "lib/base/trace.h"
#include "lib/exec/exec.h"
#include "lib/base/error.h"
#include "lib/exec/tag.h"
#include "lib/kern/copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A receiving transport that hands out messages by address (single copy), or whose payload is
 * still in the kernel (sockets): how this chunk takes the bytes, pulled once nothing else can
 * make the chunk wait (no side effects before; a socket's pull may wait, and goes on). */
enum tt_pull {
    TT_PULL_NONE, /* through the slot, as usual */
    TT_PULL_DST,  /* the chunk straight into place: a step that only copies it out */
    TT_PULL_SLOT, /* the chunk into its slot: a step that also reduces or sends it */
    TT_PULL_REST, /* the sender's whole rest into place, at the step's first chunk */
};

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

/* Queue c for flushing (its committed messages, or a device connection's releases). */
static void pend_add(struct tt_exec *x, struct tt_conn *c)
{
    if (!c->queued) {
        c->queued = 1;
        x->pend[x->npend++] = c;
    }
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
                                   struct tt_conn *sc, enum tt_pull pull, size_t *ahead)
{
    tutti_result_t r;

    if (pull == TT_PULL_REST)
        ahead[0] = s->count;
    if (sc) {
        r = sc->tp->send_commit(sc, 0, tt_tag_refused(x->tag, x->refusal, x->refused_by));
        if (r != TUTTI_SUCCESS)
            return r;
        pend_add(x, sc);
    }
    return rc ? release(x, rc) : TUTTI_SUCCESS;
}

/* One chunk of a step: what exec_chunk's pieces share. */
struct chunk {
    const struct tt_step *s;
    size_t gi, lo, n, bytes,
        rest; /* step gi's elements [lo, lo + n); bytes of those, of the rest */
    const char *src;
    char *dst;
    size_t *ahead; /* single copy: ahead[0] received, ahead[1] sent (NULL: no single copy) */
    int in_dst;    /* the received bytes are in dst already */
    struct tt_conn *rc, *sc;
    const void *rslot;
    void *sslot;
    size_t rbytes;
    enum tt_pull pull;
    uint32_t tag;
    /* zero copy: the send's bytes are read from zc_src (registered by zc_reg, or by address) */
    const char *zc_src;
    size_t zc_bytes;
    struct tt_memreg *zc_reg;
};

/* The step receives: peek at the message, check its tag and size, pick how to take it. */
static tutti_result_t chunk_recv(struct tt_exec *x, int channel, struct chunk *k)
{
    const struct tt_step *s = k->s;
    uint32_t rtag = 0;
    tutti_result_t r;

    k->rc = conn_at(x->conns->recv, x->conns, channel, s->recv_peer);
    if (!k->rc)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "no connection from rank %d on channel %d",
                       s->recv_peer, channel);
    r = poll_peek(k->rc, &k->rslot, &k->rbytes, &rtag);
    if (r == TUTTI_IN_PROGRESS) {
        x->wait_conn = k->rc;
        x->wait_peer = s->recv_peer;
        x->wait_dir = 'r';
    }
    if (r != TUTTI_SUCCESS)
        return r;
    if (rtag != k->tag) {
        if (!tt_tag_refuses(rtag, k->tag))
            return tag_mismatch(x, s->recv_peer, k->tag, rtag, k->rbytes, k->bytes);
        if (!x->poison) { /* a rank refused the call: go on without the buffers */
            x->poison = 1;
            x->refused_by = tt_tag_refuser(rtag);
            x->refusal = tt_tag_refusal(rtag);
        }
    }
    if (k->rc->tp->recv_remote && k->rc->tp->recv_remote(k->rc))
        k->pull = (s->prim == TT_PRIM_RECV || s->prim == TT_PRIM_RECV_COPY_SEND) && !x->mover
                      ? TT_PULL_DST
                      : TT_PULL_SLOT; /* (a mover's destination may be device memory) */
    if (k->pull == TT_PULL_DST && k->ahead && k->lo == 0 && k->rbytes == k->rest &&
        k->rest != k->bytes) {
        k->pull = TT_PULL_REST;
        if (x->nzc && (r = zc_wait(x, k->dst, k->rest)) != TUTTI_SUCCESS)
            return r;
    } else if (k->pull == TT_PULL_SLOT && k->rbytes > k->rc->slot_bytes && !x->poison) {
        return tt_fail(NULL, TUTTI_ERR_REMOTE,
                       "rank %d sent a message of %zu bytes to a step that takes at most a slot "
                       "(%zu): do all ranks set TUTTI_NET_COPY_MSG alike?",
                       s->recv_peer, k->rbytes, k->rc->slot_bytes);
    } else if (k->rbytes != k->bytes && !x->poison) {
        return tt_fail(NULL, TUTTI_ERR_REMOTE,
                       "rank %d sent %zu bytes where %zu were expected: do all ranks pass the "
                       "same count, dtype and root?",
                       s->recv_peer, k->rbytes, k->bytes);
    }
    return TUTTI_SUCCESS;
}

/* The step sends: a slot for the chunk. */
static tutti_result_t chunk_send_slot(struct tt_exec *x, int channel, struct chunk *k)
{
    const struct tt_step *s = k->s;
    tutti_result_t r;

    k->sc = conn_at(x->conns->send, x->conns, channel, s->send_peer);
    if (!k->sc)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "no connection to rank %d on channel %d",
                       s->send_peer, channel);
    r = poll_slot(k->sc, k->bytes, &k->sslot);
    if (r == TUTTI_IN_PROGRESS) {
        x->wait_conn = k->sc;
        x->wait_peer = s->send_peer;
        x->wait_dir = 's';
    }
    return r;
}

/*
 * Zero copy: the bytes this step sends already sit in registered memory, or in any host memory
 * where the transport takes that (sockets) -- the source of a send, or the destination a
 * copying step writes anyway: the transport reads them from there instead of from the slot. A
 * single-copy transport (shm) instead takes the whole rest of a send whose bytes are final, from
 * any host memory.
 */
static void chunk_zero_copy(const struct tt_exec *x, const struct tt_lane *lane,
                            const struct tt_lane_state *ls, struct chunk *k)
{
    const struct tt_step *s = k->s;
    struct tt_conn *sc = k->sc;
    int any; /* the transport takes any host memory (sockets) */

    if (!sc || !sc->tp->send_commit_from)
        return;
    any = sc->tp->sends_from_any && !x->mover;
    if (sc->tp->by_address) {
        if (!x->single_send || !k->ahead || k->lo != 0)
            return; /* two copies: this rank does not send by address in this call */
        if (s->prim == TT_PRIM_SEND &&
            source_final(x, lane, ls, k->gi, s->src, s->src_off, s->count))
            k->zc_src = k->src, k->zc_bytes = k->rest;
        else if (s->prim == TT_PRIM_RECV_COPY_SEND &&
                 (k->ahead[0] == s->count || k->rest == k->bytes))
            k->zc_src = k->dst, k->zc_bytes = k->rest;
    } else if (x->regs || any) {
        struct tt_memreg *rs = x->regs ? x->regs[s->src] : NULL;
        struct tt_memreg *rd = x->regs ? x->regs[s->dst] : NULL;
        /* (not the caller's input of a premul sum: its copy into the slot scales it) */
        if (s->prim == TT_PRIM_SEND && (rs || any) && !(x->premul && s->src == TT_BUF_SEND))
            k->zc_reg = rs, k->zc_src = k->src;
        else if ((s->prim == TT_PRIM_RECV_COPY_SEND || s->prim == TT_PRIM_RECV_REDUCE_COPY_SEND) &&
                 (rd || any))
            k->zc_reg = rd, k->zc_src = k->dst;
    }
}

/* The primitives: what each moves between its buffers, the received slot and the send slot. */
static tutti_result_t prim_send(struct tt_exec *x, struct chunk *k)
{
    return k->zc_src ? TUTTI_SUCCESS : tt_mv_copy_src(x, k->s, k->sc, k->sslot, k->src, k->n);
}

static tutti_result_t prim_recv(struct tt_exec *x, struct chunk *k)
{
    return k->in_dst ? TUTTI_SUCCESS : tt_mv_copy(x, k->dst, k->rslot, k->bytes);
}

static tutti_result_t prim_recv_reduce_send(struct tt_exec *x, struct chunk *k)
{
    return tt_mv_reduce_src(x, k->s, k->sslot, NULL, k->rslot, k->src, k->n);
}

static tutti_result_t prim_recv_reduce_copy(struct tt_exec *x, struct chunk *k)
{
    return tt_mv_reduce_final(x, k->s, NULL, k->dst, NULL, k->rslot, k->src, k->n);
}

static tutti_result_t prim_recv_reduce_copy_send(struct tt_exec *x, struct chunk *k)
{
    return tt_mv_reduce_final(x, k->s, k->sc, k->dst, k->zc_src ? NULL : k->sslot, k->rslot, k->src,
                              k->n);
}

static tutti_result_t prim_recv_copy_send(struct tt_exec *x, struct chunk *k)
{
    tutti_result_t r = k->in_dst ? TUTTI_SUCCESS : tt_mv_copy(x, k->dst, k->rslot, k->bytes);

    if (r == TUTTI_SUCCESS && k->sc && !k->zc_src)
        r = tt_mv_copy_out(x, k->sc, k->sslot, k->in_dst ? k->dst : k->rslot, k->bytes);
    return r;
}

static tutti_result_t prim_copy(struct tt_exec *x, struct chunk *k)
{
    /* (in place a premul-sum call still scales the copy's source) */
    tutti_result_t r = k->dst != k->src || (x->premul && k->s->src == TT_BUF_SEND)
                           ? tt_mv_copy_src(x, k->s, NULL, k->dst, k->src, k->n)
                           : TUTTI_SUCCESS;

    return r == TUTTI_SUCCESS ? tt_mv_postop(x, k->s, k->dst, k->n) : r;
}

/* The step's primitive on the chunk (a switch: each call inlines). */
static tutti_result_t prim_run(struct tt_exec *x, struct chunk *k)
{
    switch (k->s->prim) {
    case TT_PRIM_SEND: return prim_send(x, k);
    case TT_PRIM_RECV: return prim_recv(x, k);
    case TT_PRIM_RECV_REDUCE_SEND: return prim_recv_reduce_send(x, k);
    case TT_PRIM_RECV_REDUCE_COPY: return prim_recv_reduce_copy(x, k);
    case TT_PRIM_RECV_REDUCE_COPY_SEND: return prim_recv_reduce_copy_send(x, k);
    case TT_PRIM_RECV_COPY_SEND: return prim_recv_copy_send(x, k);
    case TT_PRIM_COPY: return prim_copy(x, k);
    }
    return tt_fail(NULL, TUTTI_ERR_INTERNAL, "bad primitive %d in plan", k->s->prim);
}

/* A chunk longer than a slot (a broadcast's, a large all-gather's over sockets alone) that cannot
 * be sent from where it lies. */
static tutti_result_t slot_overrun(const struct chunk *k)
{
    return tt_fail(NULL, TUTTI_ERR_INTERNAL,
                   "a chunk of %zu bytes to rank %d is longer than a slot (%zu) and cannot be "
                   "sent from where it lies",
                   k->bytes, k->s->send_peer, k->sc->slot_bytes);
}

/* One chunk of lane step gi: elements [lo, lo + n) of its range. TUTTI_IN_PROGRESS: not now
 * (nothing of it was done). */
static tutti_result_t exec_chunk(struct tt_exec *x, const struct tt_lane *lane,
                                 const struct tt_lane_state *ls, size_t gi, size_t lo, size_t n)
{
    const struct tt_step *s = &x->plan->steps[gi];
    struct chunk k;
    tutti_result_t r;

    /* (every field set here: no zeroing of the whole struct on each poll) */
    k.s = s, k.gi = gi, k.lo = lo, k.n = n;
    k.bytes = n * x->esize;
    k.rest = (s->count - lo) * x->esize;
    k.src = (const char *)x->bufs[s->src] + (s->src_off + lo) * x->esize;
    k.dst = (char *)x->bufs[s->dst] + (s->dst_off + lo) * x->esize;
    k.ahead = x->ahead ? &x->ahead[2 * gi] : NULL;
    k.in_dst = k.ahead && lo < k.ahead[0];
    k.rc = k.sc = NULL;
    k.rslot = NULL;
    k.sslot = NULL;
    k.rbytes = 0;
    k.pull = TT_PULL_NONE;
    k.tag = x->tag_steps ? tt_tag_p2p(s->count) : x->tag;
    k.zc_src = NULL;
    k.zc_bytes = k.bytes;
    k.zc_reg = NULL;
    if (x->nzc && tt_prim_writes(s->prim) && !k.in_dst && (r = zc_wait(x, k.dst, k.bytes)))
        return r;
    if (tt_prim_recvs(s->prim) && !k.in_dst && (r = chunk_recv(x, lane->channel, &k)))
        return r;
    if (tt_prim_sends(s->prim) && !(k.ahead && lo < k.ahead[1]) &&
        (r = chunk_send_slot(x, lane->channel, &k)))
        return r;
    if (x->poison)
        return poison_chunk(x, s, k.rc, k.sc, k.pull, k.ahead);
    if (k.pull != TT_PULL_NONE) {
        r = k.rc->tp->recv_pull(k.rc, k.pull == TT_PULL_SLOT ? (void *)k.rslot : k.dst,
                                k.pull == TT_PULL_REST ? k.rest : k.bytes);
        if (r == TUTTI_IN_PROGRESS) { /* (sockets: the payload has not all come) */
            x->wait_conn = k.rc;
            x->wait_peer = s->recv_peer;
            x->wait_dir = 'r';
        }
        if (r != TUTTI_SUCCESS)
            return r;
        k.in_dst = k.pull != TT_PULL_SLOT;
        if (k.pull == TT_PULL_REST)
            k.ahead[0] = s->count;
    }
    chunk_zero_copy(x, lane, ls, &k);
    if (k.sc && !k.zc_src && k.bytes > k.sc->slot_bytes) /* (a message past a slot: pick.c) */
        return slot_overrun(&k);
    if ((r = prim_run(x, &k)) != TUTTI_SUCCESS)
        return r;
    if (k.sc) { /* the send goes: from where its bytes lie (zero copy), else from its slot */
        r = TUTTI_ERR_UNSUPPORTED;
        if (k.zc_src) {
            uint64_t ticket;
            r = k.sc->tp->send_commit_from(k.sc, k.zc_src, k.zc_bytes, k.tag, k.zc_reg, &ticket);
            if (r == TUTTI_SUCCESS) {
                r = zc_note(x, k.zc_src, k.zc_bytes, k.sc, ticket);
                if (k.zc_bytes != k.bytes)
                    k.ahead[1] = s->count;
            } else if (r == TUTTI_ERR_UNSUPPORTED) { /* the transport cannot: copy after all */
                if (k.bytes > k.sc->slot_bytes)
                    return slot_overrun(&k);
                tt_copy(k.sslot, k.zc_src, k.bytes); /* host memory */
            }
        }
        if (r == TUTTI_ERR_UNSUPPORTED)
            r = k.sc->tp->send_commit(k.sc, k.bytes, k.tag);
        if (r != TUTTI_SUCCESS)
            return r;
        pend_add(x, k.sc);
    }
    return k.rc ? release(x, k.rc) : TUTTI_SUCCESS;
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
    /* Each lane: chunk by chunk, every step of its phase, until one must wait. */
    for (int l = 0; l < x->plan->nlanes && x->lanes_left > 0; l++) {
        struct tt_lane_state *ls = &x->lanes[l];
        const struct tt_lane *lane = &x->plan->lanes[l];
        const struct tt_step *steps = x->plan->steps + lane->first;

        if (ls->chunk >= ls->nchunks)
            continue;
        while (ls->chunk < ls->nchunks) {
            size_t lo = ls->chunk * x->chunk_elems;

            for (; ls->step < ls->end; ls->step++) {
                const struct tt_step *s = &steps[ls->step];
                if (lo < s->count && !(x->ahead && chunk_ahead(x, s, lane->first + ls->step, lo))) {
                    size_t n = s->count - lo < x->chunk_elems ? s->count - lo : x->chunk_elems;
                    tutti_result_t r = exec_chunk(x, lane, ls, lane->first + ls->step, lo, n);
                    if (r == TUTTI_IN_PROGRESS)
                        break;
                    if (r != TUTTI_SUCCESS)
                        return r;
                    x->moved = 1;
                }
            }
            if (ls->step < ls->end) /* waiting */
                break;
            ls->step = ls->phase;
            if (++ls->chunk == ls->nchunks) {
                if (tt_trace_on)
                    trace_phase(x, lane, ls);
                tt_exec_phase_begin(x, lane, ls, ls->end); /* next phase, or the end of the lane */
            }
        }
        if (ls->chunk >= ls->nchunks)
            x->lanes_left--;
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
