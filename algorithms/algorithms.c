/* algorithms.c -- the algorithm table; see algorithms.h. */
#include "algorithms.h"

#include <string.h>

const struct tt_algo tt_algos[] = {
    {0, "ring", "reduce-scatter then all-gather around a ring; bandwidth-optimal",
     TT_COLL_ALL_REDUCE, tt_allreduce_ring, NULL},
    {1, "ring", "each block travels n-1 hops around a ring", TT_COLL_ALL_GATHER, tt_allgather_ring,
     NULL},
    {2, "ring", "partial sums travel n-1 hops around a ring", TT_COLL_REDUCE_SCATTER,
     tt_reducescatter_ring, NULL},
    {3, "chain", "pipelined chain along the ring from the root", TT_COLL_BROADCAST,
     tt_broadcast_chain, NULL},
    {4, "chain", "pipelined chain along the ring ending at the root", TT_COLL_REDUCE,
     tt_reduce_chain, NULL},
    {5, "rd", "recursive doubling: log2(n) whole-array exchanges; small messages",
     TT_COLL_ALL_REDUCE, tt_allreduce_rd, tt_allreduce_rd_fits},
    {6, "tree", "binomial tree from the root: log2(n) hops; small messages", TT_COLL_BROADCAST,
     tt_broadcast_tree, NULL},
    {7, "rd", "recursive doubling: log2(n) exchanges of the blocks gathered so far",
     TT_COLL_ALL_GATHER, tt_allgather_rd, tt_allreduce_rd_fits},
};
const int tt_num_algos = (int)(sizeof(tt_algos) / sizeof(tt_algos[0]));

const struct tt_algo *tt_algo_find(enum tt_coll coll, const char *name, int nranks)
{
    for (int i = 0; i < tt_num_algos; i++) {
        const struct tt_algo *a = &tt_algos[i];
        if (a->coll == coll && (!name || strcmp(name, a->name) == 0) &&
            (!a->fits || a->fits(nranks)))
            return a;
    }
    return NULL;
}

const char *tt_coll_name(enum tt_coll coll)
{
    static const char *names[TT_NUM_COLLS] = {"all_reduce", "all_gather", "reduce_scatter",
                                              "broadcast", "reduce"};
    return ((unsigned)coll < TT_NUM_COLLS) ? names[coll] : "?";
}
