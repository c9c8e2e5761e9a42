/*
 * stream_int.h -- a stream inside lib/stream: its state, shared by stream.c (host streams,
 * events, the worker) and stream_cuda.c (streams that wrap a cudaStream_t), and the table of
 * what differs between the two kinds.
 */
#ifndef TT_STREAM_INT_H
#define TT_STREAM_INT_H

#include "lib/base/error.h"
#include "lib/stream/stream.h"

#include <pthread.h>
#include <stdint.h>

/* What a kind of stream does for tutti_stream_sync, _query and _destroy (s is live). */
struct tt_stream_kind {
    tutti_result_t (*sync)(tutti_stream_t s);
    tutti_result_t (*query)(tutti_stream_t s);
    tutti_result_t (*destroy)(tutti_stream_t s);
};

#define TT_STREAM_MAGIC 0x7474737472656d61ull /* "ttstrema" */

struct tutti_stream {
    uint64_t magic;
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* the worker waits here for items */
    pthread_cond_t done_cv; /* waiters for `done` wait here */
    pthread_t worker;
    struct tt_work *ring;
    size_t cap, head, len;        /* items [head, head + len) modulo cap */
    unsigned long long queued;    /* ticket of the last item queued */
    unsigned long long done;      /* ticket of the last item finished */
    unsigned long long failed_at; /* ticket of the first failure; 0 while healthy */
    tutti_result_t error;
    int stop;
    unsigned id;                       /* 1, 2, ... in creation order: the trace's track name */
    const struct tt_stream_kind *kind; /* host (a worker), or a wrapped cudaStream_t (no
                                        * worker; work goes on cuda_stream) */
    void *cuda_stream;
    void *cuda_state; /* lib/cuda's staging for it (a struct tt_pinned_pool) */
    int comm_owned;   /* a communicator's (tutti_comm_cuda_stream): never destroyed by hand */
    char msg[TT_ERRMSG_LEN];
};

/* Streams are numbered 1, 2, ... in creation order (the trace's track names). */
unsigned tt_stream_next_id(void);

#endif
