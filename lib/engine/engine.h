/*
 * engine.h -- running a plan on this thread, for the layers above (lib/cuda, lib/coll): the
 * run itself with its wait policy and error state (run_plan.c), the library's own small
 * all-gather, and the measured choices of how a host call moves its bytes (pick.c). It knows
 * no CUDA: the device path brings its start and end as hooks.
 */
#ifndef TT_ENGINE_H
#define TT_ENGINE_H

#include "lib/core/comm.h"
#include "lib/core/redop.h"
#include "lib/exec/exec.h"

/* The device path's side of a run (lib/cuda/cuda_dev.c): make the communicator's device
 * current and order its stream after `after` (prev: the device to restore), and at the end
 * restore it. */
struct tt_dev_hooks {
    tutti_result_t (*begin)(struct tutti_comm *comm, void *after, int *prev_dev);
    tutti_result_t (*end)(struct tutti_comm *comm, int prev_dev);
};

/* One run of comm->plan: what it runs over, and the call's options (set by its caller, never
 * parked on the communicator). */
struct tt_run {
    void *const *bufs;             /* send, recv, scratch (TT_BUF_*) */
    struct tt_memreg *const *regs; /* their registrations (zero-copy sends), or NULL */
    tutti_dtype_t dtype;
    tutti_op_t op;
    const struct tt_label *what; /* names the call; its tag, and whether this rank refused it */
    /* NULL on host memory; on the device path its hooks (lib/cuda: tt_cuda_dev_hooks), and the
     * work starts after the CUDA event `after` (NULL: after what CUDA's default stream holds) */
    const struct tt_dev_hooks *dev;
    void *after;
    const struct tt_pre *pre; /* a premul-sum call's pre-pass (redop.h), run first, or NULL */
    /* the measured choices (pick.c): streaming stores into FIFO slots; sending by address
     * (single copy), and whether the picker times this call (it then ends only once its
     * receivers have all read) */
    int nt_slots, single_send, single_trial;
    /* the executor's chunk (0: the communicator's slot; pick.c's net chunk picker) */
    size_t chunk_bytes;
    /* out: the run ended under poison (exec.h): the rank that refused its part (-1: none),
     * and why (enum tt_refusal) */
    int refused_by;
    unsigned refused_why;
};

/* Connect what comm->plan needs and run it; a failure puts comm in the error state. */
tutti_result_t tt_engine_run_plan(struct tutti_comm *comm, struct tt_run *r);
/* The library's own small exchange among all ranks (a check, a vote): `each` bytes from every
 * rank into all (nranks blocks), as an all-gather tagged as the library's (`which` tells its
 * kinds apart, tag.h). */
tutti_result_t tt_coll_allgather_own(struct tutti_comm *comm, const char *name, unsigned which,
                                     const void *mine, size_t each, void *all);
/* Streaming stores into FIFO slots for a host call of collective `kind` moving `bytes`: sets
 * r->nt_slots; returns the picker's token (-1: not timed). */
int tt_coll_nt_pick(struct tutti_comm *comm, unsigned kind, size_t bytes, struct tt_run *r);
/* That call is over: it took `seconds` (`ok`: it succeeded). At a trial's end the ranks vote
 * (pick.c); the vote's own failure is returned. */
tutti_result_t tt_coll_nt_done(struct tutti_comm *comm, int token, double seconds, int ok);
/* Sockets with every rank alone on its host (comm_init.c fit_net): the executor's chunk for a
 * host call of collective `kind` moving `bytes`, a whole slot or a quarter of one (sets
 * r->chunk_bytes); returns the picker's token (-1: not timed). The _done as the others'. */
int tt_coll_net_chunk_pick(struct tutti_comm *comm, unsigned kind, size_t bytes, struct tt_run *r);
tutti_result_t tt_coll_net_chunk_done(struct tutti_comm *comm, int token, double seconds, int ok);
/* Single copy over shm for a host call of `kind` (enum tt_coll, or TT_LABEL_P2P) whose
 * sends' size class is `bytes`: sets r->single_send (and single_trial when the picker times
 * this call); returns the picker's token (-1: not timed). */
int tt_coll_single_copy_pick(struct tutti_comm *comm, unsigned kind, size_t bytes,
                             struct tt_run *r);
/* That call is over: it took `seconds` (`ok`: it succeeded). `vote`: a collective, whose ranks
 * decide a trial together (pick.c); the vote's own failure is returned. */
tutti_result_t tt_coll_single_copy_done(struct tutti_comm *comm, int token, double seconds, int ok,
                                        int vote);

/*
 * The symmetric path (sym.c), on a communicator whose ranks share one host and have windows
 * (symmem.h). The gate: publish this rank's record for the call comm->seq on the control
 * lines and wait until every rank of the host has published its own; all[] (by local index)
 * then holds them. The run: this rank's part of the single pass over every rank's buffers,
 * then the closing barrier (on device memory: the pass queued on the device path's stream,
 * finished before the barrier). Either fails under the communicator's timeout, abort, a dead
 * peer's process or a peer's give-up notice, putting comm in the error state.
 */
struct tt_sym_job {
    int coll; /* enum tt_coll */
    size_t count;
    tutti_dtype_t dtype;
    tutti_op_t op;
    int root;
    int pull;               /* all-gather: read every rank's input (else write every output) */
    const char **src;       /* by rank: its input (mapped here), as the collective needs them */
    char **dst;             /* by rank: its output */
    const uint64_t *scalar; /* by rank: a premul-sum operator's values, or NULL */
    int nchannels;          /* tt_engine_sym_hier_run: the plan's channels */
    /* Device memory (the device path): its hooks, and the CUDA event the call comes after
     * (tt_run's dev and after); the pass is queued through comm's mover. NULL: host memory. */
    const struct tt_dev_hooks *dev;
    void *after;
};
tutti_result_t tt_engine_sym_gate(struct tutti_comm *comm, const struct tt_sym_rec *mine,
                                  const void *data, size_t bytes, const struct tt_label *what,
                                  struct tt_sym_rec *all);
tutti_result_t tt_engine_sym_run(struct tutti_comm *comm, const struct tt_sym_job *j,
                                 const struct tt_label *what);
/* Device memory: wait for what the caller queued before the call (its inputs are then
 * there for the peers to read), before the gate. */
tutti_result_t tt_engine_sym_dev_ready(struct tutti_comm *comm, const struct tt_dev_hooks *dev,
                                       void *after);
/* A small call: the gate carried each rank's input (`data`, bytes <= TT_SYM_INLINE, in its
 * line, or in its record: tt_engine_sym_data, by the input's size); this rank computes its own
 * output from them, with no pass and no closing barrier. */
tutti_result_t tt_engine_sym_local(struct tutti_comm *comm, const struct tt_sym_job *j);
const char *tt_engine_sym_data(struct tutti_comm *comm, int rank, size_t bytes);
/* Across nodes: a hierarchical plan (comm->plan, built cross_only: its steps between nodes)
 * with its stages inside this node on the symmetric path. j's src and dst are by local index;
 * j->nchannels is the plan's. All-reduce: this node's sum of the rank's segment into its
 * recvbuf first; after the plan, every rank copies what it holds of the result (all-reduce:
 * its segment; all-gather: its column's blocks; broadcast: the node's head, all of it) into
 * every output of its node; then the closing barrier. */
tutti_result_t tt_engine_sym_hier_run(struct tutti_comm *comm, const struct tt_sym_job *j,
                                      struct tt_run *run);
/* This rank is done with the call's records (and inline inputs): the gate of two calls on may
 * replace them. */
void tt_engine_sym_read(struct tutti_comm *comm);

#endif
