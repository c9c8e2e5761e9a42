/*
 * coll_sym.c -- whether a host collective takes the symmetric path (lib/engine/sym.c), decided
 * by every rank of the host alike from the records they publish at the call's gate: where
 * each rank's buffers lie (which window, which offset) and whether its call can take the path
 * at all. If any rank's buffer that the pass must reach is in no window, every rank takes the
 * usual path (TUTTI_CHECK_COLL: the call fails on every rank, naming the first such rank,
 * where some ranks' buffers were in windows).
 */
#include "lib/coll/coll.h"

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/symmem.h"
#include "lib/engine/engine.h"
#include "lib/exec/tag.h"

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

int tt_coll_sym_try(struct tutti_comm *comm, const struct tt_call *c, const struct tt_label *what,
                    tutti_result_t *rc)
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
    if (c->refused || (c->premul.on && (c->premul.dev || c->premul.pinned)))
        mine.flags = 0;
    if (c->premul.on) {
        mine.flags |= TT_SYM_PREMUL;
        memcpy(&mine.scalar, c->premul.value, sizeof(mine.scalar));
    }
    if (mine.flags & TT_SYM_OK) {
        mine.send_win = c->sendbuf ? tt_sym_find(comm, c->sendbuf, sb, &mine.send_off) : 0;
        mine.recv_win = c->recvbuf ? tt_sym_find(comm, c->recvbuf, rb, &mine.recv_off) : 0;
    }
    /* A small call's input rides in the gate's line (broadcast: the root's alone). */
    inline_ = c->coll != TT_COLL_BROADCAST && sb <= TT_SYM_INLINE; /* (broadcasts: above) */
    mine_bytes = inline_ && (mine.flags & TT_SYM_OK) ? sb : 0;
    *rc = tt_engine_sym_gate(comm, &mine, c->sendbuf, mine_bytes, what, all);
    if (*rc != TUTTI_SUCCESS)
        return 1;
    /* From here every rank of the host decides alike, from all[]. Ranks in different calls
     * (or counts) touch nothing: they fail, named, as the usual path's tags fail them. */
    for (int r = 1; r < n; r++) {
        const struct tt_sym_rec *p = &all[comm->topo.local_of[r]],
                                *p0 = &all[comm->topo.local_of[0]];
        if (p->tag != p0->tag || p->count != p0->count) {
            char why[256], *w;
            tt_tag_explain(p0->tag, p->tag, comm->seq, why, sizeof(why));
            w = strstr(why, "(they differ in:"); /* (the rest names "this rank") */
            *rc = tt_comm_set_error(
                comm, tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                              "%s: the ranks are not in the same call: rank 0 is in %s of %llu, "
                              "rank %d in %s of %llu %s; nothing was read or written",
                              what->name, tt_coll_name(tt_tag_kind(p0->tag)),
                              (unsigned long long)p0->count, r, tt_coll_name(tt_tag_kind(p->tag)),
                              (unsigned long long)p->count, w ? w : ""));
            tt_engine_sym_read(comm);
            return 1;
        }
    }
    for (int i = 0; i < n; i++)
        if (!(all[i].flags & TT_SYM_OK))
            goto usual; /* a refusal (its run says whose), or a scalar read as the call runs */
    struct tt_sym_job j = {.coll = c->coll,
                           .count = c->count,
                           .dtype = c->dtype,
                           .op = c->op,
                           .root = c->root,
                           .src = src,
                           .dst = dst,
                           .scalar = c->premul.on ? scal : NULL};
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
    TT_TRACE(TT_SUB_COLL, "%s #%llu: symmetric path", what->name, (unsigned long long)comm->seq);
    tt_engine_sym_read(comm);
    *rc = tt_engine_sym_run(comm, &j, what);
    return 1;
usual:
    tt_engine_sym_read(comm);
    return *rc != TUTTI_SUCCESS;
}
