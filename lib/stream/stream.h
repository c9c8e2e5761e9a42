/*
 * stream.h -- host streams: an ordered queue of work per stream, run by the stream's worker
 * thread. The collectives layer (lib/coll) makes the items and says how each runs (struct
 * tt_work_ops); this module owns the queue, the worker, completion tickets, events and the
 * sticky error, and calls nothing above it.
 */
#ifndef TT_STREAM_H
#define TT_STREAM_H

#include "tutti.h"

#include <stddef.h>

struct tutti_comm;

/* One collective as the caller described it (validated before it is queued). */
struct tt_call {
    int coll; /* enum tt_coll */
    const char *fn;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    tutti_dtype_t dtype;
    tutti_op_t op;
    int root;
    int inplace;
    int device; /* the buffers are CUDA device memory (cuda.c, cuda_dev.c) */
    int engine; /* enum tt_engine_kind: which engine runs it, classified once as the call
                 * enters (lib/coll); a staged call's host copy is TT_ENGINE_HOST */
    /* This rank refused its own arguments for this reason (enum tt_refusal): the call runs
     * without its buffers, to tell its peers and consume their messages (exec.h poison). */
    int refused;
    unsigned refusal;
    void *after; /* device path: a cudaEvent_t on the caller's CUDA stream to start after
                  * (NULL: after CUDA's default stream) */
    struct {     /* a premul-sum operator, bound when the call was made (redop.c); op is SUM */
        int on;
        unsigned char value[8]; /* the scalar (host residence) */
        const void *dev;        /* or its device address */
        const void *pinned;     /* or a pinned copy of that, to read as the call runs */
    } premul;
};

/* The engines a collective runs on, by the memory it was given (lib/coll/coll_run.c). */
enum tt_engine_kind { TT_ENGINE_HOST = 0, TT_ENGINE_STAGED, TT_ENGINE_DEVPATH, TT_NUM_ENGINES };

struct tt_p2p_op {
    int is_send;
    int peer;
    void *buf;
    size_t bytes;
    int device; /* buf is CUDA device (or managed) memory */
};

enum tt_work_kind { TT_WORK_COLL, TT_WORK_P2P, TT_WORK_HOST, TT_WORK_WAIT };

struct tt_work;

/* What a COLL or P2P item's maker (lib/coll) does with it: streams call these and nothing
 * above them. */
struct tt_work_ops {
    /* Run it on the calling thread, in its communicator's turn. */
    tutti_result_t (*run)(const struct tt_work *w);
    /* Run it on the calling thread once the communicator's queued work is done. */
    tutti_result_t (*run_now)(const struct tt_work *w);
    /* It is not run: an earlier item of its stream failed (why). */
    void (*skip)(const struct tt_work *w, const char *why);
    /* It was queued / has left its queue (the last touch of comm). */
    void (*queued)(struct tutti_comm *comm);
    void (*done)(struct tutti_comm *comm);
};

/* An item of a stream's queue. */
struct tt_work {
    enum tt_work_kind kind;
    const struct tt_work_ops *how; /* COLL, P2P; with comm on any item */
    struct tutti_comm *comm; /* COLL, P2P; any item counted as comm's work (how->queued/done) */
    struct tt_call call;     /* COLL; P2P: only call.after (the device path's start) */
    struct tt_p2p_op *ops;   /* P2P: owned by the item */
    int nops;
    const char *collective; /* P2P: the collective this batch is (gather, scatter, all-to-all),
                             * whose ranks agree on TUTTI_CHECK_COLL's verdict; NULL if none */
    tutti_host_fn_t fn;     /* HOST */
    void *arg;
    struct tutti_stream *wait_stream; /* WAIT: until that stream's ticket is done */
    unsigned long long wait_ticket;
};

/* Non-NULL handle that is not a live stream: TUTTI_ERR_INVALID_ARG naming fn. */
tutti_result_t tt_stream_check(tutti_stream_t s, struct tutti_comm *comm, const char *fn);

/* Queue w (copied; the stream takes ownership of w->ops). */
tutti_result_t tt_stream_push(tutti_stream_t s, const struct tt_work *w);

/* Is the calling thread a stream worker? (NULL-stream calls there run at once.) */
int tt_stream_in_worker(void);

/* CUDA-wrapped streams (tutti_stream_wrap_cuda): is s one, its cudaStream_t, the slot where
 * cuda.c keeps its staging; the sticky failure a CUDA host function records. */
int tt_stream_is_cuda(tutti_stream_t s);
void *tt_stream_cuda_handle(tutti_stream_t s);
void **tt_stream_cuda_state(tutti_stream_t s);
int tt_stream_failed(tutti_stream_t s);
/* Free a CUDA-wrapped stream without touching its cudaStream_t (which may be destroyed by
 * now): the caller knows that nothing queued through it still runs on the host. */
void tt_stream_cuda_release(tutti_stream_t s);
/* Mark a CUDA-wrapped stream as a communicator's: tutti_stream_destroy refuses it. */
void tt_stream_cuda_adopt(tutti_stream_t s);
void tt_stream_record_failure(tutti_stream_t s, tutti_result_t rc, const char *msg);

/* Free what an item owns. */
void tt_work_release(struct tt_work *w);

#endif
