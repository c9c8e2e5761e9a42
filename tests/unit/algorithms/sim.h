/*
 * sim.h -- the schedule simulator: every rank's plan run in one process over in-memory FIFOs
 * (the real executor, the real FIFO code), round-robin, so algorithms are checked at any
 * rank count in milliseconds. A round in which no rank moves while some are unfinished is a
 * deadlock and fails the run.
 */
#ifndef TT_SIM_H
#define TT_SIM_H

#include "../../../algorithms/algorithms.h"
#include "tutti.h"

struct sim_config {
    int nranks;
    int nchannels;
    size_t slot_bytes; /* small slots force many chunks */
    int nslots;
    const int *ring_order;           /* NULL: 0..n-1 */
    const struct tt_topo_view *topo; /* NULL: one node */
    /* The device path's shape on the CPU: every rank's byte moves go through a mover into a
     * queue (its "stream") that runs later, a pseudo-random number of operations at a time
     * (seeded), and connections are dfifo.h queues (the p2p transport's protocol) that publish
     * a commit or release only once the queue has passed it. */
    int deferred;
    unsigned seed;
    /* exec.h tt_exec_single_copy: a final send goes whole, by address (the mem transport
     * reads it in place), and its receiver skips the chunks it took at once; 1: every rank
     * sends that way, 2: only odd ranks do (each rank picks for itself), the others send
     * through their queues as usual and take whole what they are sent whole */
    int single_copy;
};

/*
 * Run collective `a` (a->nchannels is overwritten with cfg->nchannels) on every rank.
 * send[r] / recv[r] are rank r's buffers. Returns TUTTI_SUCCESS, or an error with the reason
 * in tutti_last_error() (a deadlock is TUTTI_ERR_INTERNAL).
 */
tutti_result_t sim_run(const struct sim_config *cfg, const struct tt_algo *algo,
                       struct tt_coll_args a, void **send, void **recv, tutti_dtype_t dtype,
                       tutti_op_t op);

/*
 * Run plans[r] on every rank r (cfg->nchannels: the channels they use), over buffers
 * bufs[r][i] (the steps' buffer indices). sim_run builds its plans and calls this.
 */
tutti_result_t sim_run_plans(const struct sim_config *cfg, const struct tt_plan *plans,
                             void *const *const *bufs, tutti_dtype_t dtype, tutti_op_t op);

#endif
