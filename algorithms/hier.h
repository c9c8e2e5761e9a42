/*
 * hier.h -- who is where, for the hierarchical schedules: the ranks of this rank's node in
 * local order, and the "column" of ranks with one local index, one per node in node order.
 */
#ifndef TT_HIER_H
#define TT_HIER_H

#include "algorithms/algorithms.h"

#include <stdlib.h>

struct tt_hier {
    int node, local; /* this rank's */
    int nnodes, L;   /* nodes; ranks on this rank's node */
    int *node_ranks; /* [L]: rank of each local index on this node */
};

/* Ranks on node `node` in local order, into out (node_size[node] entries). */
static inline void tt_hier_node_ranks(const struct tt_topo_view *t, int nranks, int node, int *out)
{
    for (int r = 0; r < nranks; r++)
        if (t->node_of[r] == node)
            out[t->local_of[r]] = r;
}

/* The rank with local index `local` on node `node`, or -1. */
static inline int tt_hier_rank(const struct tt_topo_view *t, int nranks, int node, int local)
{
    for (int r = 0; r < nranks; r++)
        if (t->node_of[r] == node && t->local_of[r] == local)
            return r;
    return -1;
}

static inline int tt_hier_init(struct tt_hier *h, const struct tt_topo_view *t, int nranks, int me)
{
    h->node = t->node_of[me];
    h->local = t->local_of[me];
    h->nnodes = t->nnodes;
    h->L = t->node_size[h->node];
    h->node_ranks = malloc((size_t)h->L * sizeof(int));
    if (!h->node_ranks)
        return -1;
    tt_hier_node_ranks(t, nranks, h->node, h->node_ranks);
    return 0;
}

static inline void tt_hier_free(struct tt_hier *h)
{
    free(h->node_ranks);
}

#endif
