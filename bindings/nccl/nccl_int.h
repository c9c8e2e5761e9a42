/*
 * nccl_int.h -- what the NCCL API's files share: a communicator as NCCL's handle names it
 * (struct ncclComm, around a tutti_comm_t), the mapping of NCCL's codes to tutti's and back,
 * and the last-error strings. nccl.c: errors, queries, memory; nccl_init.c: making and ending
 * communicators; nccl_calls.c: collectives, point-to-point, operators; nccl_group.c: groups.
 *
 * The binding sits on include/tutti.h (and the CUDA runtime) only.
 */
#ifndef NC_INT_H
#define NC_INT_H

#include "tutti.h"

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define NC_MAGIC 0x6e63636c636f6d6dull /* "ncclcomm" */
#define NC_ERRLEN 1024

struct ncclComm {
    uint64_t magic;
    tutti_comm_t tc; /* set once the init has succeeded (state ncclSuccess) */
    int rank, nranks, device;
    int blocking;          /* config.blocking: 0 makes init and group ends return at once */
    _Atomic int state;     /* ncclInProgress while the init runs; then ncclSuccess or its error */
    ncclUniqueId id;       /* what a deferred (group) or background init joins */
    pthread_t init_thread; /* non-blocking init */
    int has_thread;
    int finalized;                 /* ncclCommFinalize ran */
    int group_init;                /* made inside a group: its init runs at the group's end */
    struct ncclComm *split_parent; /* ... by splitting this one (ncclCommSplit in a group) */
    int split_color, split_key;
    double timeout_s;
    pthread_mutex_t lock; /* ops, err */
    tutti_op_t *ops;      /* operator ncclNumOps + i is ops[i] (TUTTI_NUM_OPS once destroyed) */
    int nops;
    char err[NC_ERRLEN]; /* the last failure on this communicator ("" if none) */
};

/* Each function is pncclX, exported as ncclX too (a weak alias a profiler may interpose). */
#define NC_ALIAS(name) __typeof__(p##name) name __attribute__((weak, alias("p" #name)));

/* NCCL's result for a tutti result. */
ncclResult_t nc_result(tutti_result_t rc);

/* Record a failure on c (NULL: the calling thread only) and return r. */
ncclResult_t nc_error(struct ncclComm *c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A tutti call's failure: its message (the communicator's, else the thread's), after `fn: `. */
ncclResult_t nc_tutti_failed(struct ncclComm *c, tutti_result_t rc, const char *fn);

/* tutti's messages name TUTTI_TIMEOUT; this library's communicators wait TUTTI_NCCL_TIMEOUT:
 * a note saying so into buf where msg names it, else "". */
const char *nc_timeout_note(const struct ncclComm *c, const char *msg, char *buf, size_t size);

/* comm is a live communicator of this library (ncclInvalidArgument otherwise); with ready
 * set it must also have finished its init (ncclInvalidUsage while it runs, its failure if it
 * failed). */
ncclResult_t nc_comm(ncclComm_t comm, const char *fn, int ready);

/* Map NCCL's types (ncclInvalidArgument, named, for a value out of range). */
ncclResult_t nc_dtype(struct ncclComm *c, ncclDataType_t d, tutti_dtype_t *out, const char *fn);
ncclResult_t nc_op(struct ncclComm *c, ncclRedOp_t op, tutti_op_t *out, const char *fn);

/* A collective or point-to-point call, as recorded in a group. */
enum nc_kind {
    NC_ALL_REDUCE,
    NC_ALL_GATHER,
    NC_REDUCE_SCATTER,
    NC_BROADCAST,
    NC_REDUCE,
    NC_ALL_TO_ALL,
    NC_GATHER,
    NC_SCATTER,
    NC_SEND,
    NC_RECV
};

struct nc_call {
    enum nc_kind kind;
    const char *fn;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    tutti_dtype_t dtype;
    tutti_op_t op;
    int root; /* or peer */
    struct ncclComm *comm;
    cudaStream_t stream;
};

/* Run the calls k[0..n) of one communicator (nccl_calls.c): one tutti group on k[0]'s stream. */
ncclResult_t nc_run_calls(const struct nc_call *k, int n);

/* The deferred inits of this thread's open group: run them all (nccl_init.c), concurrently. */
ncclResult_t nc_group_run_inits(struct ncclComm **comms, int n);

/* nccl_group.c: is this thread inside ncclGroupStart/End; register c as made inside it; record
 * a checked call; note a refused call (the group's end then runs nothing and returns r). */
int nc_in_group(void);
void nc_group_add_init(struct ncclComm *c);
ncclResult_t nc_group_record(const struct nc_call *k);
ncclResult_t nc_group_refused(ncclResult_t r);

#endif
