/*
 * comm.h -- the communicator: who the ranks are, how they are connected, its error state.
 */
#ifndef TT_COMM_H
#define TT_COMM_H

#include "algorithms/algorithms.h"
#include "transport/transport.h"
#include "lib/base/error.h" /* TT_ERRMSG_LEN */
#include "lib/boot/bootstrap.h"
#include "lib/boot/board.h"
#include "lib/exec/exec.h"
#include "lib/core/memreg.h"
#include "lib/core/symmem.h"
#include "lib/topo/copy_pick.h"
#include "lib/topo/topo.h"
#include "lib/topo/tune.h"

#include <pthread.h>
#include <stdint.h>

#define TT_COMM_MAGIC 0x7475747469636f6dull /* "tutticom" */

/* A communicator's CUDA state: lib/cuda's, which alone reads or writes it (core connects and
 * closes the device path's connections, conns, like the host path's). */
struct tt_comm_cuda {
    void *stage; /* pinned staging for device buffers (cuda.c), under run_lock */
    size_t stage_cap;
    /* The device path (cuda_dev.c): every rank on one host with a CUDA device that reaches
     * every other rank's; device buffers then move GPU to GPU over p2p connections. */
    int dev_path;
    int dev;           /* the device this rank had current at init */
    size_t slot_bytes; /* slot size of p2p connections (TUTTI_CUDA_BUFFSIZE / steps) */
    size_t min_bytes;  /* smaller collectives are staged all the same (TUTTI_CUDA_P2P_MIN) */
    int min_auto;      /* TUTTI_CUDA_P2P_MIN=auto: decided with dev_path */
    struct tt_exec_conns conns; /* the device path's connections */
    void *stream;               /* cudaStream_t (non-blocking) the device path queues work on */
    void *event;                /* cudaEvent_t: where the default stream was at the call */
    struct tt_mover mover;      /* the executor's byte moves on stream */
    /* Device-path calls on wrapped CUDA streams that return at once (cuda_async.c). */
    int async;
    tutti_stream_t runner;   /* runs them in call order */
    volatile uint32_t *flag; /* pinned, mapped: the last one finished; user streams wait on the
                              * GPU until it reaches their call's number */
    void *flag_dev;          /* its device address */
    uint32_t seq;            /* calls queued so far */
};

struct tutti_comm {
    uint64_t magic;
    int rank, nranks;
    int local_rank, local_size;
    double timeout_s;
    int nchannels;
    size_t slot_bytes;
    int nslots;
    unsigned spin;    /* polls before a wait yields */
    double yield_s;   /* then seconds it yields before it sleeps (TUTTI_YIELD_US) */
    int sleepy;       /* this host's ranks outnumber its cores: waits block (exec.h) */
    int net_logged;   /* the network interface has been logged */
    char ib_why[256]; /* why this rank has no verbs HCA ("" if it has one) */
    struct tt_tuner tuner;
    struct tt_pick pick;    /* streaming stores into FIFO slots for large calls (copy_pick.h) */
    struct tt_pick pick_sc; /* single copy over shm: all-gather, broadcast, point-to-point */
    /* every rank alone on its host, over sockets (comm_init.c fit_net): a message per slot, or
     * a quarter slot (copy_pick.h) */
    struct tt_pick pick_net;
    /* and a broadcast's (a large all-gather's) messages up to this size there (fit_net,
     * TUTTI_NET_COPY_MSG), read straight into place; 0: a slot */
    size_t net_copy_bytes;
    int pick_agree; /* every rank runs the same trials: collectives decide together */
    char job_tag[64];
    unsigned char secret[TT_SECRET_BYTES]; /* the id's (tutti_comm_shrink derives its own) */

    struct tt_boot *boot;
    struct tt_rank_info *peers; /* every rank's record (topo.h) */
    struct tt_topo topo;        /* nodes, local ranks, ring order */
    struct tt_topo_view view;   /* the same, as algorithms see it */
    struct tt_comm_board board; /* where this node's ranks are (board.h) */
    double stall_s;             /* TUTTI_STALL_WARN */
    int check_coll;             /* TUTTI_CHECK_COLL */
    struct tt_ring *rings;      /* one per channel */
    struct tt_exec_conns conns;
    const struct tt_transport **tp_of; /* transport chosen per peer, NULL if none yet */

    tutti_result_t error;      /* sticky: TUTTI_SUCCESS while healthy */
    int error_claimed;         /* the first tt_comm_set_error took it (it alone writes fatal) */
    char fatal[TT_ERRMSG_LEN]; /* message of the error that made it unusable: written once,
                                * before `error` is published */
    volatile int abort_flag;   /* set by tutti_comm_abort, from any thread */
    int32_t *pids;             /* process id of every rank */
    uint64_t seq;              /* collectives started (the same count on every rank) */
    uint64_t p2p_seq;          /* point-to-point batches run (this rank's own count) */
    char last_error[TT_ERRMSG_LEN];

    /* Streams (stream.c): one operation runs at a time; NULL-stream calls wait for the work
     * queued on streams first. */
    pthread_mutex_t run_lock;
    pthread_mutex_t work_lock;
    pthread_cond_t work_cv;
    int work_pending; /* items queued on streams, not finished */
    uint8_t barrier_buf[2];
    struct tt_comm_cuda cuda;  /* lib/cuda's state (zero where the device is not used) */
    struct tt_memreg *memregs; /* tutti_comm_register (memreg.c) */
    struct tt_sym *sym;        /* symmetric memory and windows (symmem.c), NULL until used */
    /* tutti_comm_shrink (lib/init/comm_shrink.c): called on this communicator (once); then
     * which ranks the survivors agreed had failed (nranks flags), NULL before. */
    int shrink_called;
    uint8_t *shrink_failed;
    int grown_from; /* made by tutti_comm_grow/join: the ranks that were members (else 0) */

    /* Reused between calls so the hot path does not allocate. */
    struct tt_plan plan;
    struct { /* the collective plan holds, while plan.resets says nothing rebuilt it */
        unsigned long resets;
        const struct tt_algo *algo; /* NULL: none */
        struct tt_coll_args args;
    } plan_for;
    struct { /* the point-to-point plan holds for these messages, while plan.resets says so */
        unsigned long resets;
        struct tt_msg *msgs; /* the batch's, in call order (NULL: none yet) */
        int *perm;           /* step i moves message perm[i] */
        int n, cap;
        void *work; /* run_batch's working arrays, grown to the largest batch's */
        size_t work_bytes;
    } p2p;
    struct tt_exec_mem exec_mem;
    int single_copy; /* TUTTI_SHM_SINGLE_COPY not 0: all-gather, broadcast
                        and point-to-point batches may go by address over shm (exec.h
                        tt_exec_single_copy); pick_sc says when this rank sends that way */
    void *scratch;   /* TT_BUF_SCRATCH of host collectives, grown to the largest call's */
    size_t scratch_bytes;
    /* Operators of tutti_op_create_premul_sum (redop.c), under redop_lock, and the scaled
     * inputs of calls whose result does not land on this rank (host; device path). */
    pthread_mutex_t redop_lock;
    struct tt_redop *redops;
    int nredops, redops_cap;
    void *premul_buf;
    size_t premul_bytes;
    void *premul_dev;
    size_t premul_dev_bytes;
    /* tutti_comm_cuda_stream's wrappers (cuda_streams.c), under streams_lock. */
    pthread_mutex_t streams_lock;
    struct tt_comm_stream *streams;
    int nstreams, streams_cap;
};

/* A slot of comm->redops. */
struct tt_redop {
    unsigned gen; /* in the handle: a destroyed op's handle no longer matches */
    int live;
    tutti_dtype_t dtype;
    unsigned char value[8]; /* the scalar, TUTTI_SCALAR_HOST_IMMEDIATE */
    const void *dev;        /* its address, TUTTI_SCALAR_DEVICE (else NULL) */
};

/* Validate a handle: NULL, destroyed or foreign pointers give TUTTI_ERR_INVALID_ARG. */
tutti_result_t tt_comm_check(struct tutti_comm *comm, const char *fn);
/* Has rank r's process exited? Known only for ranks of this machine (0 for the others, for
 * this rank, and before the ranks' records are in). */
int tt_comm_peer_exited(const struct tutti_comm *c, int r);
/* The registry of live communicators (lib/init adds and removes them): 0 out of memory /
 * not there. */
int tt_comm_registry_add(struct tutti_comm *c);
int tt_comm_registry_remove(struct tutti_comm *c);
/* Fail (close = 0) or close every connection, host and device path, senders first. */
void tt_comm_each_conn(struct tutti_comm *c, int close);

/*
 * Connect whatever the plan sends to or receives from that is not connected yet. Plans of one
 * operation match across ranks (a send from A to B is a receive from A at B), so every pair
 * sets up its connections at the same operation; peers meet in any order. device: the p2p
 * connections of the device path (comm->cuda.conns) rather than comm->conns.
 */
/* connect.c: the ring's connections (init); the device path's connection to every rank
 * (init), once its stream and kernels are `prepared` (the result of tt_cuda_dev_prepare:
 * anything but TUTTI_SUCCESS fails naming the device path). */
tutti_result_t tt_comm_connect_ring(struct tutti_comm *c, int prev, int next);
tutti_result_t tt_comm_connect_device_mesh(struct tutti_comm *c, tutti_result_t prepared);

tutti_result_t tt_comm_connect_plan(struct tutti_comm *comm, const struct tt_plan *plan,
                                    int device);

/* The transport this rank uses (or will use) to reach peer; NULL if none may. */
const struct tt_transport *tt_comm_transport(const struct tutti_comm *comm, int peer);

/* Name of the transport rank a uses to reach rank b ("shm", "socket"; "none"). */
const char *tt_comm_transport_name(const struct tutti_comm *comm, int a, int b);

/* Put the communicator into its error state (first error wins) and return rc. */
tutti_result_t tt_comm_set_error(struct tutti_comm *comm, tutti_result_t rc);

/* The sticky error (TUTTI_SUCCESS while healthy); safe from any thread. */
static inline tutti_result_t tt_comm_error(const struct tutti_comm *comm)
{
    return __atomic_load_n(&comm->error, __ATOMIC_ACQUIRE);
}

/* Stream bookkeeping: an item on comm was queued / has finished; wait until none is queued. */
void tt_comm_work_queued(struct tutti_comm *comm);
void tt_comm_work_done(struct tutti_comm *comm);
void tt_comm_wait_idle(struct tutti_comm *comm);

/* Free the wrappers of tutti_comm_cuda_stream (cuda_streams.c); queued work has finished. */
void tt_comm_streams_free(struct tutti_comm *comm);

#endif
