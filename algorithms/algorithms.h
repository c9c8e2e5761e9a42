/*
 * algorithms.h -- the table of schedule builders, one {id, name, desc} entry per algorithm
 * and collective. Builders are pure: (collective arguments, rings) -> plan.
 */
#ifndef TT_ALGORITHMS_H
#define TT_ALGORITHMS_H

#include "algorithms/plan.h"

enum tt_coll {
    TT_COLL_ALL_REDUCE = 0,
    TT_COLL_ALL_GATHER,
    TT_COLL_REDUCE_SCATTER,
    TT_COLL_BROADCAST,
    TT_COLL_REDUCE,
    TT_NUM_COLLS
};

/* Where ranks are, for hierarchical schedules (NULL in tt_coll_args: one node). */
struct tt_topo_view {
    int nnodes;
    const int *node_of;   /* node index of each rank */
    const int *local_of;  /* index of each rank within its node */
    const int *node_size; /* ranks on each node */
    int uniform;          /* every node has the same number of ranks */
};

/* What a builder needs to know of a call. */
struct tt_coll_args {
    enum tt_coll coll;
    size_t count;  /* all_reduce/broadcast/reduce: elements; all_gather: per rank (send count);
                      reduce_scatter: per rank (recv count) */
    int root;      /* broadcast, reduce */
    int inplace;   /* the call is in place (tutti.h's rules) */
    int nchannels; /* lanes to spread the data over, >= 1 (the tree uses 2 per channel) */
    const struct tt_topo_view *topo; /* NULL: every rank on one node */
    /* The hierarchical plans: only the steps across nodes (their intra-node stages are done by
     * the symmetric path: lib/engine/sym.c). The messages between nodes are the same. */
    int cross_only;
};

/* rings[c] is channel c's ring; every ring has the same ranks. */
typedef int (*tt_fits_fn)(int nranks, const struct tt_topo_view *topo);

typedef void (*tt_build_fn)(struct tt_plan *p, const struct tt_ring *rings,
                            const struct tt_coll_args *a);

struct tt_algo {
    int id;
    const char *name;
    const char *desc;
    enum tt_coll coll;
    tt_build_fn build;
    tt_fits_fn fits; /* NULL: any rank count */
    int to_self;     /* sends to its own rank (the device path connects to itself for it) */
    int scratch;     /* uses TT_BUF_SCRATCH (host memory, as large as the input: taken on
                        host buffers up to TT_SCRATCH_MAX bytes) */
};

/* The largest input an algorithm with a scratch buffer is taken for (the communicator keeps
 * a scratch buffer as large as the largest such call). */
#define TT_SCRATCH_MAX ((size_t)64 << 20)

/* Elements of a call's input (sendbuf): what a scratch buffer must hold. */
static inline size_t tt_coll_in_elems(const struct tt_coll_args *a, int nranks)
{
    return a->coll == TT_COLL_REDUCE_SCATTER ? a->count * (size_t)nranks : a->count;
}

/* Open channel ch's lane and give this channel's part [*off, *off + *cnt) of a->count. */
static inline void tt_plan_channel(struct tt_plan *p, const struct tt_coll_args *a, int ch,
                                   size_t *off, size_t *cnt)
{
    tt_plan_lane(p, ch);
    tt_split(a->count, a->nchannels, ch, off, cnt);
}

/*
 * This rank's own data into place: a copy unless in place. flags TT_STEP_POSTOP for the
 * whole of a one-rank reduction (its input is its result), 0 for data that is not reduced.
 */
static inline void tt_plan_self_copy(struct tt_plan *p, const struct tt_coll_args *a,
                                     size_t src_off, size_t dst_off, size_t cnt, uint8_t flags)
{
    if (!a->inplace)
        tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_COPY,
                                          .flags = flags,
                                          .src = TT_BUF_SEND,
                                          .dst = TT_BUF_RECV,
                                          .src_off = src_off,
                                          .dst_off = dst_off,
                                          .count = cnt});
}

/* A folded rank's last step (fold.h): once all it sent has gone (a new phase), the result
 * [off, off + cnt) from its buddy into recvbuf. */
static inline void tt_plan_fold_result(struct tt_plan *p, int buddy, size_t off, size_t cnt)
{
    tt_plan_phase(p);
    tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                      .dst = TT_BUF_RECV,
                                      .recv_peer = buddy,
                                      .dst_off = off,
                                      .count = cnt});
}

/* Distance of this rank from `root` along the ring (0 at the root). */
static inline int tt_ring_dist(const struct tt_ring *r, int root)
{
    int rootpos = 0;

    for (int k = 0; k < r->nranks; k++)
        if (r->order[k] == root)
            rootpos = k;
    return ((r->pos - rootpos) % r->nranks + r->nranks) % r->nranks;
}

extern const struct tt_algo tt_algos[];
extern const int tt_num_algos;

/* First algorithm for coll with this name that fits (NULL name: the first), or NULL. */
const struct tt_algo *tt_algo_find(enum tt_coll coll, const char *name, int nranks,
                                   const struct tt_topo_view *topo);

/* Fits: nodes of equal size, more than one, each with > 1 rank. */
int tt_fits_hier(int nranks, const struct tt_topo_view *topo);
/* Fits: 1 to TT_DIRECT_MAX_RANKS ranks, all on one node (every rank connects to every other,
 * a FIFO per pair). Across nodes each remote message is a network send, and on 2 emulated
 * nodes (bench/tuner-check, BENCHMARKS.md) direct was never the fastest: 4 ranks, 8 B-1 MiB,
 * every collective, 1.5-3.4x the best; 8 ranks 1.49x and 16 ranks 2.02x of the ring. */
#define TT_DIRECT_MAX_RANKS 16
int tt_fits_direct(int nranks, const struct tt_topo_view *topo);

/* Channels a call on `nchannels` data channels uses (the double tree: two per channel). */
int tt_algo_channels(const struct tt_algo *a, int nchannels);

const char *tt_coll_name(enum tt_coll coll);

void tt_allreduce_rabenseifner(struct tt_plan *p, const struct tt_ring *rings,
                               const struct tt_coll_args *a);
void tt_allreduce_dbtree(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a);
void tt_allreduce_hier(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_allgather_hier(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_broadcast_hier(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_allreduce_det(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);
void tt_allreduce_flat(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_reducescatter_det(struct tt_plan *p, const struct tt_ring *rings,
                          const struct tt_coll_args *a);
void tt_reduce_det(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);
void tt_allreduce_rd(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);
void tt_allreduce_ring(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_allgather_ring(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
/* The direct reduce-scatter, all-gather and all-reduce (direct.c). */
void tt_direct(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);
void tt_reducescatter_ring(struct tt_plan *p, const struct tt_ring *rings,
                           const struct tt_coll_args *a);
void tt_reducescatter_rh(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a);
void tt_broadcast_tree(struct tt_plan *p, const struct tt_ring *rings,
                       const struct tt_coll_args *a);
void tt_allgather_rd(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);
void tt_broadcast_chain(struct tt_plan *p, const struct tt_ring *rings,
                        const struct tt_coll_args *a);
void tt_reduce_chain(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a);

/* A message of a point-to-point batch, as its plan sees it. */
struct tt_msg {
    int is_send;
    int peer;
    size_t bytes;
};

/*
 * The plan of a point-to-point batch of n (< 65536) messages (p2p_plan.c): one lane per (peer,
 * direction) on channel 0, in call order within a lane. Step i moves buffer i, which is
 * message perm[i] (filled here). Sets p->oom if it cannot allocate.
 */
void tt_plan_p2p(struct tt_plan *p, const struct tt_msg *msgs, int n, int *perm);

#endif
