/*
 * stream_int.h -- what cudamock's stream files share: a stream, its operations and events
 * (stream.c: streams, queueing, the stall report; event.c: events; copy.c: copies, memsets and
 * GPU-side waits on host memory), and the one lock they all take.
 */
#ifndef CUDAMOCK_STREAM_INT_H
#define CUDAMOCK_STREAM_INT_H

#include "mock.h"

#include <pthread.h>
#include <stdint.h>

struct op;
typedef void (*op_fn)(struct CUstream_st *, struct op *);

struct op {
    op_fn run;
    void (*fn)(void *); /* kernels, copies, host functions: fn(arg) */
    void *arg;
    int host_fn;               /* a host function: it may make no CUDA call; else arg is a
                                * copy of a kernel's or a copy's arguments, freed after it */
    struct CUstream_st *other; /* a wait for another stream to reach `until` */
    uint64_t until;
    const volatile uint32_t *addr; /* a wait for *addr to reach `value` (cyclic >=) */
    uint32_t value;
    struct CUevent_st *ev; /* an event record */
    uint64_t seq;
    struct op *next;
};

struct CUstream_st {
    struct op *head, *tail;
    uint64_t queued, done; /* operations queued and run so far */
    int blocking;          /* orders against the legacy default stream */
    int legacy;
    int device; /* the current device when it was made; the legacy stream's device */
    int capturing;
    int destroyed;
    int id;            /* in the order streams were made: 0 is the legacy default stream */
    double since;      /* when the running operation started; 0: none runs */
    uint64_t reported; /* the operation last reported as stalled (its number) */
    pthread_t thread;
    pthread_cond_t work; /* its thread waits here for an operation (or its destruction) */
    struct CUstream_st *next_stream;
};

struct CUevent_st {
    struct CUstream_st *stream; /* of the latest record; NULL: never recorded */
    uint64_t seq;
    double at; /* when the latest record ran */
    int refs;  /* the handle, and each record not yet run */
};

struct CUgraph_st {
    int empty;
};

/* One lock for every stream, event and wait of the process, and one condition for every wait
 * on another stream's progress. */
extern pthread_mutex_t cudamock_lock;
extern pthread_cond_t cudamock_moved;

/* A handle as a stream: NULL, cudaStreamLegacy and cudaStreamPerThread are the current
 * device's legacy default stream. */
struct CUstream_st *cudamock_stream(cudaStream_t h);
/* Queue o on s with the legacy stream's ordering (lock held / taken); *seq: its number. */
cudaError_t cudamock_enqueue_locked(struct CUstream_st *s, struct op *o);
cudaError_t cudamock_enqueue(struct CUstream_st *s, struct op *o, uint64_t *seq);
/* Queue fn on h: a host function (fn(arg)), or a kernel or copy (fn on a copy of `size`
 * bytes at arg, freed once it has run). */
cudaError_t cudamock_queue_fn(cudaStream_t h, void (*fn)(void *), void *arg, int host_fn,
                              size_t size, uint64_t *seq);
/* Until s has run operation seq. */
void cudamock_wait_for(struct CUstream_st *s, uint64_t seq);
/* Operation bodies (lock held) and an event's last reference. */
void cudamock_run_record(struct CUstream_st *s, struct op *o);
void cudamock_run_wait_stream(struct CUstream_st *s, struct op *o);
void cudamock_run_wait_value(struct CUstream_st *s, struct op *o);
void cudamock_event_unref(struct CUevent_st *e);

#endif
