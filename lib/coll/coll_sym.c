/*
 * coll_sym.c -- whether a collective (host memory, or the device path's) takes the symmetric path
 * (lib/engine/sym.c), decided by every rank of the host alike from the records they publish at the
 * call's gate: where each rank's buffers lie (which window, which offset) and whether its call can
 * take the path at all. If any rank's buffer that the pass must reach is in no window, every rank
 * takes the usual path (TUTTI_CHECK_COLL: the call fails on every rank, naming the first such rank,
 * where some ranks' buffers were in windows).
 */
#include "lib/coll/coll.h"

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/symmem.h"
#include "lib/engine/engine.h"
#include "lib/exec/tag.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SYM_BCAST_MIN 2048

/* Which buffers the pass must reach on every rank: 1 input, 2 output (of rank `root` alone
 * for broadcast's input and reduce's output). All-gather needs either (pull, push). */
static int needs(const struct tt_call *c, int rank, int which)
{
    switch (c->coll) {
    case TT_COLL_ALL_REDUCE: return 1;
    case TT_COLL_REDUCE_SCATTER: return which == 1;
    case TT_COLL_BROADCAST: return which == 1 && rank == c->root;
    case TT_COLL_REDUCE: return which == 1 || rank == c->root;
    }
    return 0;
}

/* The first rank lacking a buffer the pass needs (-1: none); *any: some rank had one. */
static int first_lacking(const struct tutti_comm *comm, const struct tt_call *c,
                         const struct tt_sym_rec *all, int pull, int *any, char *which)
{
    int lack = -1;

    *any = 0;
    for (int r = 0; r < comm->nranks; r++) {
        const struct tt_sym_rec *p = &all[comm->topo.local_of[r]];
        for (int k = 1; k <= 2; k++) {
            int need = c->coll == TT_COLL_ALL_GATHER ? (pull ? k == 1 : k == 2) : needs(c, r, k);
            uint32_t win = k == 1 ? p->send_win : p->recv_win;
            if (!need)
                continue;
            if (win)
                *any = 1;
            else if (lack < 0) {
                lack = r;
                *which = (char)k;
            }
        }
    }
    return lack;
}

/* The rank of local index i on this rank's node. */
static int rank_of_local(const struct tutti_comm *comm, int i)
{
    for (int r = 0; r < comm->nranks; r++)
        if (comm->topo.node_of[r] == comm->topo.node_of[comm->rank] && comm->topo.local_of[r] == i)
            return r;
    return -1;
}

/* Are the ranks of the host (all[], by local index) in the same call? If not, the call fails
 * on each of them, naming both calls, with nothing read or written (comm: the error state). */
static int same_call(struct tutti_comm *comm, const struct tt_sym_rec *all,
                     const struct tt_label *what, tutti_result_t *rc)
{
    const struct tt_sym_rec *p0 = &all[0];

    for (int i = 1; i < comm->local_size; i++) {
        const struct tt_sym_rec *p = &all[i];
        char why[256], *w;
        if (p->tag == p0->tag && p->count == p0->count)
            continue;
        tt_tag_explain(p0->tag, p->tag, comm->seq, why, sizeof(why));
        w = strstr(why, "(they differ in:"); /* (the rest names "this rank") */
        *rc = tt_comm_set_error(
            comm,
            tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                    "%s: the ranks are not in the same call: rank %d is in %s of %llu, "
                    "rank %d in %s of %llu %s; nothing was read or written",
                    what->name, rank_of_local(comm, 0), tt_coll_name(tt_tag_kind(p0->tag)),
                    (unsigned long long)p0->count, rank_of_local(comm, i),
                    tt_coll_name(tt_tag_kind(p->tag)), (unsigned long long)p->count, w ? w : ""));
        tt_engine_sym_read(comm);
        return 0;
    }
    return 1;
}

int tt_coll_sym_try(struct tutti_comm *comm, const struct tt_call *c,
                    const struct tt_dev_hooks *dev, const struct tt_label *what, tutti_result_t *rc)
{
    struct tt_sym *s = comm->sym;
    int n = comm->nranks, lack, any = 0, pull = 0, inline_;
    size_t sb, rb, mine_bytes;
    char which = 0;

    if (!s || !s->on || s->nwin == 0 || comm->topo.nnodes != 1 || n < 2)
        return 0;
    /* A small broadcast is one message one way on the usual path; here every rank would wait
     * for every other (2 ranks, 8 B to 2 KiB: 0.58-0.80x the usual path's bandwidth). Decided
     * by size alone, so alike on every rank. */
    if (c->coll == TT_COLL_BROADCAST && c->count * tutti_dtype_size(c->dtype) <= SYM_BCAST_MIN)
        return 0;
    struct tt_sym_rec mine = {.flags = TT_SYM_OK, .tag = what->tag, .count = c->count},
                      *all = s->all;
    const char **src = s->src;
    char **dst = s->dst;
    uint64_t *scal = s->scal;
    tt_coll_buf_bytes(comm, c, &sb, &rb);
    /* (on device memory a premul-sum operator takes the usual path) */
    if (c->refused || (c->premul.on && (dev || c->premul.dev || c->premul.pinned)))
        mine.flags = 0;
    if (dev)
        mine.flags |= TT_SYM_DEV;
    if (c->premul.on) {
        mine.flags |= TT_SYM_PREMUL;
        memcpy(&mine.scalar, c->premul.value, sizeof(mine.scalar));
    }
    if (mine.flags & TT_SYM_OK) {
        mine.send_win = c->sendbuf ? tt_sym_find(comm, c->sendbuf, sb, &mine.send_off) : 0;
        mine.recv_win = c->recvbuf ? tt_sym_find(comm, c->recvbuf, rb, &mine.recv_off) : 0;
    }
    /* A small call's input rides in the gate's line (broadcast: the root's alone); not on
     * device memory. */
    inline_ = !dev && c->coll != TT_COLL_BROADCAST && sb <= TT_SYM_INLINE;
    mine_bytes = inline_ && (mine.flags & TT_SYM_OK) ? sb : 0;
    /* On device memory the peers may reach this rank's buffers in windows (read its input,
     * write its output) only once what the caller queued before the call is done: wait for
     * it first. Buffers in no window only this rank touches, in its stream's order. */
    if (dev && (mine.send_win || mine.recv_win) &&
        (*rc = tt_engine_sym_dev_ready(comm, dev, c->after)) != TUTTI_SUCCESS) {
        *rc = tt_comm_set_error(comm, *rc);
        return 1;
    }
    *rc = tt_engine_sym_gate(comm, &mine, c->sendbuf, mine_bytes, what, all);
    if (*rc != TUTTI_SUCCESS)
        return 1;
    /* From here every rank of the host decides alike, from all[]. Ranks in different calls
     * (or counts) touch nothing: they fail, named, as the usual path's tags fail them. */
    if (!same_call(comm, all, what, rc))
        return 1;
    for (int i = 0; i < n; i++)
        if (!(all[i].flags & TT_SYM_OK) || (all[i].flags & TT_SYM_DEV) != (mine.flags & TT_SYM_DEV))
            goto usual; /* a refusal (its run says whose), a scalar read as the call runs, or
                         * ranks on host and device memory */
    struct tt_sym_job j = {.coll = c->coll,
                           .count = c->count,
                           .dtype = c->dtype,
                           .op = c->op,
                           .root = c->root,
                           .src = src,
                           .dst = dst,
                           .scalar = c->premul.on ? scal : NULL,
                           .dev = dev,
                           .after = c->after};
    if (inline_) {
        for (int r = 0; r < n; r++) {
            src[r] = tt_engine_sym_data(comm, r, sb);
            scal[r] = all[comm->topo.local_of[r]].scalar;
        }
        dst[comm->rank] = c->recvbuf;
        *rc = tt_engine_sym_local(comm, &j);
        return 1;
    }
    if (c->coll == TT_COLL_ALL_GATHER)
        pull = first_lacking(comm, c, all, 1, &any, &which) < 0;
    lack = first_lacking(comm, c, all, pull, &any, &which);
    if (lack >= 0) {
        if (comm->check_coll && any)
            *rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                          "%s: TUTTI_CHECK_COLL: rank %d's %s is not in a window "
                          "(tutti_comm_window_register) while other ranks' buffers are: the "
                          "call would not take the symmetric path",
                          c->fn, lack, which == 1 ? "sendbuf" : "recvbuf");
        goto usual;
    }
    for (int r = 0; r < n; r++) {
        const struct tt_sym_rec *p = &all[comm->topo.local_of[r]];
        struct tt_window *ws = tt_sym_window(comm, p->send_win);
        struct tt_window *wr = tt_sym_window(comm, p->recv_win);
        int l = comm->topo.local_of[r];
        if ((p->send_win && !ws) || (p->recv_win && !wr)) {
            *rc = tt_comm_set_error(
                comm, tt_fail(comm, TUTTI_ERR_INTERNAL,
                              "%s: rank %d names a window this rank does not have (windows "
                              "registered or deregistered in a different order?)",
                              c->fn, r));
            tt_engine_sym_read(comm);
            return 1;
        }
        src[r] = ws ? ws->peer[l] + p->send_off : NULL;
        dst[r] = wr ? wr->peer[l] + p->recv_off : NULL;
        scal[r] = p->scalar;
    }
    j.pull = pull;
    /* This rank's own buffers as it passed them (a rank's output the pass does not reach). */
    if (!src[comm->rank])
        src[comm->rank] = c->sendbuf;
    if (!dst[comm->rank])
        dst[comm->rank] = c->recvbuf;
    TT_TRACE(TT_SUB_COLL, "%s #%llu: symmetric path%s", what->name, (unsigned long long)comm->seq,
             dev ? " (device memory)" : "");
    tt_engine_sym_read(comm);
    *rc = tt_engine_sym_run(comm, &j, what);
    return 1;
usual:
    tt_engine_sym_read(comm);
    return *rc != TUTTI_SUCCESS;
}

/*
 * Across nodes: a hierarchical plan whose stages inside each node take the symmetric path
 * (lib/engine/sym.c), its steps between nodes the transports. The messages between nodes
 * are the same whichever way a node does its own stages, so each node decides alone, from
 * its gate: a node where any rank's buffer is in no window runs the whole plan the usual
 * way. Under TUTTI_CHECK_COLL every rank first learns every rank's windows (a small
 * all-gather), and where some ranks' buffers are in windows and a rank's are not, the call
 * fails on every rank, naming it, before anything moves.
 */
enum { HS_SEND = 1, HS_RECV = 2, HS_SKIP = 4 };

/* Which buffers the node's stages reach on every rank of it (HS_*). */
static unsigned hier_needs(const struct tt_call *c)
{
    return c->coll == TT_COLL_ALL_REDUCE ? HS_SEND | HS_RECV : HS_RECV;
}

static tutti_result_t hier_check(struct tutti_comm *comm, const struct tt_call *c, unsigned mine)
{
    uint8_t *all = calloc((size_t)comm->nranks, 1), me = (uint8_t)mine;
    unsigned need = hier_needs(c);
    int any = 0, lack = -1;
    tutti_result_t rc;

    if (!all)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory for TUTTI_CHECK_COLL", c->fn);
    rc = tt_coll_allgather_own(comm, "window check", 1, &me, 1, all);
    for (int r = 0; rc == TUTTI_SUCCESS && r < comm->nranks; r++) {
        if (all[r] & HS_SKIP)
            continue;
        any |= (all[r] & need) != 0;
        if ((all[r] & need) != need && lack < 0)
            lack = r;
    }
    if (rc == TUTTI_SUCCESS && any && lack >= 0)
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                     "%s: TUTTI_CHECK_COLL: rank %d's %s is not in a window "
                     "(tutti_comm_window_register) while other ranks' buffers are: its node "
                     "would not take the symmetric path",
                     c->fn, lack, (need & ~all[lack] & HS_SEND) ? "sendbuf" : "recvbuf");
    free(all);
    return rc;
}

int tt_coll_sym_hier(struct tutti_comm *comm, const struct tt_call *c, const struct tt_label *what,
                     const struct tt_algo *algo, int nchannels, struct tt_sym_job *j,
                     tutti_result_t *rc)
{
    struct tt_sym *s = comm->sym;
    int L = comm->local_size;
    size_t sb, rb;
    unsigned need = hier_needs(c), have = 0;

    *rc = TUTTI_SUCCESS;
    /* Alike on every rank: windows are registered by all ranks together; the plan is the
     * tuner's (or TUTTI_ALGO's) for this call. */
    if (!s || s->nwin == 0 || comm->topo.nnodes < 2 || strcmp(algo->name, "hier") != 0 ||
        c->premul.on ||
        (c->coll != TT_COLL_ALL_REDUCE && c->coll != TT_COLL_ALL_GATHER &&
         c->coll != TT_COLL_BROADCAST))
        return 0;
    tt_coll_buf_bytes(comm, c, &sb, &rb);
    struct tt_sym_rec mine = {.flags = TT_SYM_OK, .tag = what->tag, .count = c->count};
    if (c->refused || !s->on)
        mine.flags = 0;
    else {
        mine.send_win = c->sendbuf ? tt_sym_find(comm, c->sendbuf, sb, &mine.send_off) : 0;
        mine.recv_win = c->recvbuf ? tt_sym_find(comm, c->recvbuf, rb, &mine.recv_off) : 0;
        have = (mine.send_win ? HS_SEND : 0) | (mine.recv_win ? HS_RECV : 0);
    }
    if (comm->check_coll &&
        (*rc = hier_check(comm, c, mine.flags ? have : HS_SKIP)) != TUTTI_SUCCESS)
        return -1;
    if (!s->on) /* (this node's ranks have one rank, or a rank turned the path off) */
        return 0;
    if ((*rc = tt_engine_sym_gate(comm, &mine, NULL, 0, what, s->all)) != TUTTI_SUCCESS)
        return -1;
    if (!same_call(comm, s->all, what, rc))
        return -1;
    for (int i = 0; i < L; i++) {
        const struct tt_sym_rec *p = &s->all[i];
        struct tt_window *ws = tt_sym_window(comm, p->send_win);
        struct tt_window *wr = tt_sym_window(comm, p->recv_win);
        if (!(p->flags & TT_SYM_OK) || ((need & HS_SEND) && !ws) || ((need & HS_RECV) && !wr)) {
            tt_engine_sym_read(comm);
            return 0; /* the usual way on this node */
        }
        s->src[i] = ws ? ws->peer[i] + p->send_off : NULL;
        s->dst[i] = wr->peer[i] + p->recv_off;
    }
    tt_engine_sym_read(comm);
    *j = (struct tt_sym_job){.coll = c->coll,
                             .count = c->count,
                             .dtype = c->dtype,
                             .op = c->op,
                             .root = c->root,
                             .src = s->src,
                             .dst = s->dst,
                             .nchannels = nchannels};
    TT_TRACE(TT_SUB_COLL, "%s #%llu: hierarchical, symmetric path inside the node", what->name,
             (unsigned long long)comm->seq);
    return 1;
}
