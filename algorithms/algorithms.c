/* algorithms.c -- the algorithm table; see algorithms.h. */
#include "algorithms/algorithms.h"

#include <string.h>

static int fits_multinode(int nranks, const struct tt_topo_view *t)
{
    return t && t->nnodes > 1 && nranks > 2;
}

const struct tt_algo tt_algos[] = {
    {0, "ring", "reduce-scatter then all-gather around a ring; bandwidth-optimal",
     TT_COLL_ALL_REDUCE, tt_allreduce_ring, NULL, 0, 0},
    {1, "ring", "each block travels n-1 hops around a ring", TT_COLL_ALL_GATHER, tt_allgather_ring,
     NULL, 0, 0},
    {2, "ring", "partial sums travel n-1 hops around a ring", TT_COLL_REDUCE_SCATTER,
     tt_reducescatter_ring, NULL, 0, 0},
    {3, "chain", "pipelined chain along the ring from the root", TT_COLL_BROADCAST,
     tt_broadcast_chain, NULL, 0, 0},
    {4, "chain", "pipelined chain along the ring ending at the root", TT_COLL_REDUCE,
     tt_reduce_chain, NULL, 0, 0},
    {5, "rd", "recursive doubling: log2(n) whole-array exchanges (extra ranks fold in)",
     TT_COLL_ALL_REDUCE, tt_allreduce_rd, NULL, 0, 0},
    {6, "tree", "binomial tree from the root: log2(n) hops", TT_COLL_BROADCAST, tt_broadcast_tree,
     NULL, 0, 0},
    {7, "rd",
     "recursive doubling: log2(n) exchanges of the blocks gathered so far (extra ranks fold in)",
     TT_COLL_ALL_GATHER, tt_allgather_rd, NULL, 0, 0},
    {8, "rabenseifner", "recursive halving reduce-scatter + recursive doubling all-gather",
     TT_COLL_ALL_REDUCE, tt_allreduce_rabenseifner, NULL, 0, 0},
    {9, "tree", "pipelined double binary tree (two trees, half the data each)", TT_COLL_ALL_REDUCE,
     tt_allreduce_dbtree, NULL, 0, 0},
    {10, "hier", "reduce-scatter in nodes, all-reduce across, all-gather in nodes; 2+ equal nodes",
     TT_COLL_ALL_REDUCE, tt_allreduce_hier, tt_fits_hier, 0, 0},
    {11, "hier", "all-gather across nodes per local index, then inside nodes; 2+ equal nodes",
     TT_COLL_ALL_GATHER, tt_allgather_hier, tt_fits_hier, 0, 0},
    {12, "hier", "chain across node heads, then chains inside nodes; 2+ nodes", TT_COLL_BROADCAST,
     tt_broadcast_hier, fits_multinode, 0, 0},
    {13, "det", "fixed rank-order reduction at each block's owner (TUTTI_DETERMINISTIC)",
     TT_COLL_ALL_REDUCE, tt_allreduce_det, NULL, 1, 0},
    {14, "det", "fixed rank-order reduction at each block's owner (TUTTI_DETERMINISTIC)",
     TT_COLL_REDUCE_SCATTER, tt_reducescatter_det, NULL, 1, 0},
    {15, "det", "fixed rank-order reduction at the root (TUTTI_DETERMINISTIC)", TT_COLL_REDUCE,
     tt_reduce_det, NULL, 1, 0},
    {16, "direct",
     "every rank sends each block straight to its owner: one hop; one node, <= 16 ranks",
     TT_COLL_REDUCE_SCATTER, tt_direct, tt_fits_direct, 0, 0},
    {17, "direct",
     "every rank sends its block straight to every other: one hop; one node, <= 16 ranks",
     TT_COLL_ALL_GATHER, tt_direct, tt_fits_direct, 0, 0},
    {18, "direct", "direct reduce-scatter, then direct all-gather: two hops; one node, <= 16 ranks",
     TT_COLL_ALL_REDUCE, tt_direct, tt_fits_direct, 0, 0},
    {19, "flat",
     "every rank sends its vector to every rank, folds all n in rank order; one node, <= 16",
     TT_COLL_ALL_REDUCE, tt_allreduce_flat, tt_fits_direct, 1, 0},
    {20, "rh", "recursive halving: log2(n) exchanges of half the blocks held (extra ranks fold in)",
     TT_COLL_REDUCE_SCATTER, tt_reducescatter_rh, NULL, 0, 1},
};
const int tt_num_algos = (int)(sizeof(tt_algos) / sizeof(tt_algos[0]));

const struct tt_algo *tt_algo_find(enum tt_coll coll, const char *name, int nranks,
                                   const struct tt_topo_view *topo)
{
    for (int i = 0; i < tt_num_algos; i++) {
        const struct tt_algo *a = &tt_algos[i];
        if (a->coll == coll && (!name || strcmp(name, a->name) == 0) &&
            (!a->fits || a->fits(nranks, topo)))
            return a;
    }
    return NULL;
}

int tt_algo_channels(const struct tt_algo *a, int nchannels)
{
    return a->build == tt_allreduce_dbtree ? 2 * nchannels : nchannels;
}

const char *tt_coll_name(enum tt_coll coll)
{
    static const char *names[TT_NUM_COLLS] = {"all_reduce", "all_gather", "reduce_scatter",
                                              "broadcast", "reduce"};
    return ((unsigned)coll < TT_NUM_COLLS) ? names[coll] : "?";
}
