/*
 * coll.h -- what the collectives (coll.c) and the point-to-point calls (sendrecv.c) share: the
 * checks every call makes, running a plan, and running work now on the calling thread.
 */
#ifndef TT_COLL_H
#define TT_COLL_H

#include "lib/core/comm.h"
#include "lib/engine/engine.h"
#include "lib/core/redop.h"
#include "lib/stream/stream.h"

/* Is comm healthy? Also turns a pending abort into the error state. */
tutti_result_t tt_coll_check_health(struct tutti_comm *comm, const char *fn);
/* Checks shared by every call: handle, health, stream. */
tutti_result_t tt_coll_check_comm(struct tutti_comm *comm, tutti_stream_t stream, const char *fn);
/* A refusal this rank may make alone where its peers cannot run the call with it: the
 * communicator enters the error state and tells them (coll_check.c). */
tutti_result_t tt_coll_refuse_alone(struct tutti_comm *comm, tutti_result_t rc);
/* A collective's arguments (coll_check.c): TUTTI_SUCCESS and whether it is in place, or the
 * refusal (message set) and in *own its reason (enum tt_refusal) where it concerns this rank's
 * own buffers (0: something every rank passes alike). */
tutti_result_t tt_coll_check_args(struct tutti_comm *comm, const struct tt_call *c, int *inplace,
                                  unsigned *own);
/* Host and device buffers are not mixed; sets c->device (c->refusal where they are). */
tutti_result_t tt_coll_check_memory(struct tutti_comm *comm, struct tt_call *c);
/* TUTTI_CHECK_COLL: every rank makes the same call (an all-gather of its description). */
tutti_result_t tt_coll_check_match(struct tutti_comm *comm, const struct tt_call *c);
/* This rank refused c (rc, message set) for its own buffers (why): run it refused where it
 * can, else enter the error state; returns the refusal (or the refused run's failure). */
tutti_result_t tt_coll_refused(struct tutti_comm *comm, const struct tt_call *c,
                               tutti_stream_t stream, tutti_result_t rc, unsigned why);
/* c->dtype (and c->op when has_op) are valid. */
tutti_result_t tt_coll_check_dtype_op(struct tutti_comm *comm, const struct tt_call *c, int has_op);
/* An engine (coll_run.c): what runs a collective by the memory it was given. check: its own
 * checks as the call is made; run: now, on this thread, comm's run lock held; enqueue: on a
 * wrapped CUDA stream. What its plan runs may use: dev (the device path's hooks, NULL on the
 * host), a scratch buffer, registrations (zero-copy sends), the measured choices (picks). */
struct tt_engine {
    const char *name;
    tutti_result_t (*check)(struct tutti_comm *comm, const struct tt_call *c);
    tutti_result_t (*run)(struct tutti_comm *comm, const struct tt_call *c);
    tutti_result_t (*enqueue)(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s);
    const struct tt_dev_hooks *dev;
    int scratch, regs, picks;
};
/* The engines by enum tt_engine_kind, and the kind a checked call c takes. */
extern const struct tt_engine *const tt_coll_engines[TT_NUM_ENGINES];
int tt_coll_engine_kind(const struct tutti_comm *comm, const struct tt_call *c);
/* How the COLL and P2P items this layer makes run (stream.h). */
extern const struct tt_work_ops tt_coll_work_ops;
/* Run w now on this thread, after whatever streams hold for its communicator. */
tutti_result_t tt_coll_run_now(struct tutti_comm *comm, const struct tt_work *w);

/* Run a batch of point-to-point operations (sendrecv.c); comm's run lock is held. `after`: where
 * its device-path operations start (a cudaEvent_t; NULL: after CUDA's default stream). */
tutti_result_t tt_p2p_exec(struct tutti_comm *comm, struct tt_p2p_op *ops, int nops, void *after,
                           const char *collective);
/* Bytes of this rank's input and output for call c (coll_run.c). */
void tt_coll_buf_bytes(const struct tutti_comm *comm, const struct tt_call *c, size_t *sb,
                       size_t *rb);
/* Wait for what streams still hold for comm, unless this is a stream's worker: what a call
 * made now does first (coll_run.c). */
void tt_coll_after_queued_work(struct tutti_comm *comm);
/* A collective on a communicator with windows (coll_sym.c), on host memory or on the device
 * path (dev: its hooks): take the symmetric path if every rank of the host can (1: it ran, or
 * failed: *rc says), else 0 (the usual path). */
struct tt_label;
struct tt_dev_hooks;
int tt_coll_sym_try(struct tutti_comm *comm, const struct tt_call *c,
                    const struct tt_dev_hooks *dev, const struct tt_label *what,
                    tutti_result_t *rc);
/* Across nodes, a call whose plan is algo (coll_sym.c): 1 where its stages inside this node
 * take the symmetric path (*j filled; build the plan cross_only and run it by
 * tt_engine_sym_hier_run), 0 the usual way, -1 failed (*rc). */
struct tt_algo;
struct tt_sym_job;
int tt_coll_sym_hier(struct tutti_comm *comm, const struct tt_call *c, const struct tt_label *what,
                     const struct tt_algo *algo, int nchannels, struct tt_sym_job *j,
                     tutti_result_t *rc);
/* Is a group open on this thread (between tutti_group_start and tutti_group_end)? */
int tt_group_open(void);
/* The group just opened is collective fn's own batch (gather, scatter, all-to-all): under
 * TUTTI_CHECK_COLL its ranks agree on the check's verdict (sendrecv.c). Nothing where the caller
 * opened a group around the collective. */
void tt_group_collective(const char *fn);
/* A checked collective call inside the open group: recorded for tutti_group_end (sendrecv.c). */
tutti_result_t tt_group_add_coll(struct tutti_comm *comm, const struct tt_call *c,
                                 tutti_stream_t stream);
/* Queue a checked collective call on stream (host or CUDA), or run it now (NULL). */
tutti_result_t tt_coll_dispatch(struct tutti_comm *comm, const struct tt_call *c,
                                tutti_stream_t stream);
/* tutti_group_end's collectives, in call order, after its point-to-point batch; runs of
 * small host all-reduces go as one (coll_group.c). */
tutti_result_t tt_coll_run_group(struct tutti_comm *comm, const struct tt_call *calls, int n,
                                 tutti_stream_t stream);

/* Personalized exchanges (all_to_all.c, gather.c), whose batch has this rank's own block: may
 * it move by memcpy once the batch is done (a call that runs now, on host memory)? */
int tt_own_copy_ok(tutti_stream_t stream, const void *src, const void *dst, size_t bytes);
/* That copy, after comm's queued work and only on a healthy comm. */
tutti_result_t tt_own_copy(struct tutti_comm *comm, const char *fn, void *dst, const void *src,
                           size_t bytes);

#endif
