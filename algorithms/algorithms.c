/* algorithms.c -- the algorithm table; see algorithms.h. */
#include "algorithms.h"

#include <string.h>

const struct tt_algo tt_algos[] = {
    {0, "ring", "reduce-scatter then all-gather around a ring; bandwidth-optimal",
     TT_COLL_ALL_REDUCE, tt_allreduce_ring},
    {1, "ring", "each block travels n-1 hops around a ring", TT_COLL_ALL_GATHER, tt_allgather_ring},
    {2, "ring", "partial sums travel n-1 hops around a ring", TT_COLL_REDUCE_SCATTER,
     tt_reducescatter_ring},
    {3, "chain", "pipelined chain along the ring from the root", TT_COLL_BROADCAST,
     tt_broadcast_chain},
    {4, "chain", "pipelined chain along the ring ending at the root", TT_COLL_REDUCE,
     tt_reduce_chain},
};
const int tt_num_algos = (int)(sizeof(tt_algos) / sizeof(tt_algos[0]));

const struct tt_algo *tt_algo_find(enum tt_coll coll, const char *name)
{
    for (int i = 0; i < tt_num_algos; i++)
        if (tt_algos[i].coll == coll && (!name || strcmp(name, tt_algos[i].name) == 0))
            return &tt_algos[i];
    return NULL;
}

const char *tt_coll_name(enum tt_coll coll)
{
    static const char *names[TT_NUM_COLLS] = {"all_reduce", "all_gather", "reduce_scatter",
                                              "broadcast", "reduce"};
    return ((unsigned)coll < TT_NUM_COLLS) ? names[coll] : "?";
}
