/*
 * event.c -- cudamock's events: record, query, synchronize, elapsed time, and a stream's wait
 * for one (stream_int.h).
 */
#include "stream_int.h"

#include <stdlib.h>

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    GUARD();
    (void)flags;
    if (!e)
        return cudamock_ret(cudaErrorInvalidValue);
    *e = calloc(1, sizeof(**e));
    if (!*e)
        return cudamock_ret(cudaErrorMemoryAllocation);
    (*e)->refs = 1;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    GUARD();
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    GUARD();
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&cudamock_lock);
    cudamock_event_unref(e);
    pthread_mutex_unlock(&cudamock_lock);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
    struct CUstream_st *s = cudamock_stream(h);
    struct op *o = calloc(1, sizeof(*o));
    cudaError_t r;

    GUARD();
    if (!e || !o) {
        free(o);
        return cudamock_ret(e ? cudaErrorMemoryAllocation : cudaErrorInvalidResourceHandle);
    }
    *o = (struct op){.run = cudamock_run_record, .ev = e};
    pthread_mutex_lock(&cudamock_lock);
    e->refs++;
    r = cudamock_enqueue_locked(s, o);
    if (r == cudaSuccess) {
        e->stream = s;
        e->seq = s->queued;
    } else {
        e->refs--;
    }
    pthread_mutex_unlock(&cudamock_lock);
    return cudamock_ret(r);
}

static int event_done_locked(struct CUevent_st *e)
{
    return !e->stream || e->stream->done >= e->seq;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    int done;

    GUARD();
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&cudamock_lock);
    done = event_done_locked(e);
    pthread_mutex_unlock(&cudamock_lock);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    GUARD();
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&cudamock_lock);
    while (!event_done_locked(e))
        pthread_cond_wait(&cudamock_moved, &cudamock_lock);
    pthread_mutex_unlock(&cudamock_lock);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t r = cudaSuccess;

    GUARD();
    if (!ms || !a || !b)
        return cudamock_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&cudamock_lock);
    if (!a->stream || !b->stream)
        r = cudaErrorInvalidResourceHandle;
    else if (!event_done_locked(a) || !event_done_locked(b))
        r = cudaErrorNotReady;
    else
        *ms = (float)((b->at - a->at) * 1e3);
    pthread_mutex_unlock(&cudamock_lock);
    return cudamock_ret(r);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
    struct CUstream_st *s = cudamock_stream(h);
    cudaError_t r = cudaSuccess;

    GUARD();
    (void)flags;
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&cudamock_lock);
    if (!event_done_locked(e)) {
        struct op *w = calloc(1, sizeof(*w));
        if (!w) {
            r = cudaErrorMemoryAllocation;
        } else {
            *w = (struct op){.run = cudamock_run_wait_stream, .other = e->stream, .until = e->seq};
            r = cudamock_enqueue_locked(s, w);
        }
    }
    pthread_mutex_unlock(&cudamock_lock);
    return cudamock_ret(r);
}
