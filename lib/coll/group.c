/*
 * group.c -- the group this thread has open (tutti_group_start .. tutti_group_end; group.h):
 * the calls it holds, and its rules (one communicator, one stream). Running it at
 * tutti_group_end: sendrecv.c (its point-to-point batch) and coll_group.c (its collectives).
 */
#include "lib/coll/group.h"
#include "lib/coll/coll.h"
#include "lib/base/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

_Thread_local struct tt_group tt_group;

int tt_group_open(void)
{
    return tt_group.depth > 0;
}

void tt_group_collective(const char *fn)
{
    if (tt_group.depth == 1) /* its own group, not one the caller opened around it */
        tt_group.collective = fn;
}

/* A call joins the open group: one communicator and one stream for all of its calls. */
tutti_result_t tt_group_join(struct tt_group *g, struct tutti_comm *comm, tutti_stream_t stream,
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

tutti_result_t tt_group_add_p2p(struct tt_group *g, struct tutti_comm *comm, tutti_stream_t stream,
                                const char *fn, const struct tt_p2p_op *op)
{
    TT_CHECK(tt_group_join(g, comm, stream, fn));
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
    g->ops[g->nops++] = *op;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_group_add_coll(struct tutti_comm *comm, const struct tt_call *c,
                                 tutti_stream_t stream)
{
    struct tt_group *g = &tt_group;

    TT_CHECK(tt_group_join(g, comm, stream, c->fn));
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

tutti_result_t tutti_group_start(void)
{
    struct tt_group *g = &tt_group;

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

void tt_group_reset(struct tt_group *g)
{
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
}
