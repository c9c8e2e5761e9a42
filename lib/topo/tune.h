/*
 * tune.h -- picks the algorithm and channel count for each call from an alpha-beta cost model.
 *
 * Links are of two kinds: inside a node (shared memory) and between nodes (network), each
 * with a latency per hop (alpha) and a bandwidth per rank (beta = 1/bandwidth). Each
 * algorithm has a formula for its time from (bytes, ranks, nodes, ranks per node, chunk
 * size); the tuner takes the cheapest that fits the call. TUTTI_ALGO overrides per
 * collective; with TUTTI_DEBUG=INFO and TUTTI_DEBUG_SUBSYS=TUNE each new choice (per
 * collective and power-of-two size) is logged with every candidate's predicted time.
 * tutti-topo --simulate evaluates the same formulas for machines we cannot run on.
 */
#ifndef TT_TUNE_H
#define TT_TUNE_H

#include "algorithms/algorithms.h"

#include "tutti.h"

/* Latency (us per hop) and bandwidth (GB/s per rank and direction) of the two link kinds. */
struct tt_links {
    double intra_us, intra_gbs;
    double inter_us, inter_gbs;
    double oversub_us;     /* latency per hop when ranks outnumber cores (a context switch) */
    double net_reduce_gbs; /* GB/s of the extra pass a reduction of bytes that came over the
                            * network makes (see tune.c) */
};

/* The shape a prediction is for. */
struct tt_model {
    struct tt_links links;
    int nranks, nnodes, per_node; /* per_node: ranks per node (rounded down if uneven) */
    size_t chunk;                 /* bytes per pipelined chunk (a FIFO slot) */
    int oversub;                  /* ranks outnumber cores */
};

/* What tt_tune_cost returns for an algorithm without a formula (det): never preferred, taken
 * only when forced. */
#define TT_TUNE_NO_FORMULA 1e9

/* Predicted seconds for algorithm a moving `bytes` (the whole array). */
double tt_tune_cost(const struct tt_model *m, const struct tt_algo *a, size_t bytes);

/* Links from TUTTI_TUNE_LINKS ("intra_us,intra_gbs,inter_us,inter_gbs"), else defaults. */
tutti_result_t tt_tune_links(struct tt_links *l);

/* TUTTI_TUNE_LINKS=measure: a communicator on several nodes measures its network link at init
 * (lib/init/net_measure.c) and sets it with tt_tune_set_network. */
int tt_tune_links_measured(void);

struct tt_tuner {
    const struct tt_algo *forced[TT_NUM_COLLS]; /* from TUTTI_ALGO, NULL: cost model */
    const struct tt_topo_view *topo;
    struct tt_model model;
    int max_channels;
    int deterministic;                      /* TUTTI_DETERMINISTIC: reductions take "det" */
    unsigned char logged[TT_NUM_COLLS][64]; /* choices already logged, per log2(bytes) */
    struct {                                /* the last pick per collective: a loop of */
        size_t bytes;                       /* same-sized calls skips the model */
        const struct tt_algo *algo;
        int nchannels;
    } last[TT_NUM_COLLS];
};

/* The network half of t's links (us a hop, GB/s); earlier picks are forgotten. */
void tt_tune_set_network(struct tt_tuner *t, double inter_us, double inter_gbs);

/* Read TUTTI_ALGO ("all_reduce:ring;all_gather:ring") and the link table. */
tutti_result_t tt_tune_init(struct tt_tuner *t, int nranks, int max_channels,
                            const struct tt_topo_view *topo, size_t chunk, int oversub);

/* Might a pick send to its own rank (an algorithm with to_self: det, flat)? Where ranks
 * outnumber cores the model may take flat; TUTTI_ALGO and TUTTI_DETERMINISTIC force them. */
int tt_tune_may_send_to_self(const struct tt_tuner *t);

/* Algorithm and data channels for a call moving `bytes` (the whole array). Algorithms with a
 * scratch buffer are candidates up to TT_SCRATCH_MAX bytes; forced above it, the ring runs. */
const struct tt_algo *tt_tune_pick(struct tt_tuner *t, enum tt_coll coll, size_t bytes,
                                   int *nchannels);

#endif
