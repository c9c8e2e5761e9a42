/*
 * stream.c -- cudamock's streams (see cudamock.c for what the mock models): each stream is a
 * thread that runs its operations in order; each device's legacy default stream orders against
 * every blocking stream of its device both ways; kernels (cudamock_launch), host functions,
 * capture, and the report of a stalled stream. event.c has the events, copy.c the copies,
 * memsets and GPU-side waits on host memory; stream_int.h what they share.
 */
#include "stream_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- streams ---- */

/* One lock for every stream, event and wait of the process, and one condition for every
 * wait on another stream's progress; a stream's thread waits for work on its own condition,
 * so an idle stream sleeps through the others' operations. */
pthread_mutex_t cudamock_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cudamock_moved = PTHREAD_COND_INITIALIZER;
static struct CUstream_st *streams, *legacy_streams[64]; /* one legacy stream per device */
static int nstreams;

void cudamock_event_unref(struct CUevent_st *e)
{
    if (--e->refs == 0)
        free(e);
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;

    pthread_mutex_lock(&cudamock_lock);
    for (;;) {
        struct op *o;
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->work, &cudamock_lock);
        if (!(o = s->head))
            break;
        s->since = cudamock_now();
        o->run(s, o);
        s->since = 0;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        pthread_cond_broadcast(&cudamock_moved);
        free(o);
    }
    pthread_mutex_unlock(&cudamock_lock);
    return NULL;
}

/* The driver runs host functions on a thread of its own, one at a time, whatever stream they
 * came from: a host function that waits for another stream's host function waits for ever.
 * One lock models that. */
static pthread_mutex_t host_fn_thread = PTHREAD_MUTEX_INITIALIZER;

/* Operation bodies: called on the stream's thread with the lock held. */
static void run_fn(struct CUstream_st *s, struct op *o)
{
    (void)s;
    pthread_mutex_unlock(&cudamock_lock);
    if (o->host_fn)
        pthread_mutex_lock(&host_fn_thread);
    cudamock_in_host_fn = o->host_fn;
    o->fn(o->arg);
    cudamock_in_host_fn = 0;
    if (o->host_fn)
        pthread_mutex_unlock(&host_fn_thread);
    if (!o->host_fn)
        free(o->arg);
    pthread_mutex_lock(&cudamock_lock);
}

void cudamock_run_wait_stream(struct CUstream_st *s, struct op *o)
{
    (void)s;
    while (o->other->done < o->until)
        pthread_cond_wait(&cudamock_moved, &cudamock_lock);
}

void cudamock_run_wait_value(struct CUstream_st *s, struct op *o)
{
    long ns = 10000;

    (void)s;
    pthread_mutex_unlock(&cudamock_lock);
    while ((int32_t)(__atomic_load_n(o->addr, __ATOMIC_ACQUIRE) - o->value) < 0) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns < 500000 ? 2 * ns : ns;
    }
    pthread_mutex_lock(&cudamock_lock);
}

void cudamock_run_record(struct CUstream_st *s, struct op *o)
{
    if (o->ev->stream == s && o->ev->seq == o->seq)
        o->ev->at = cudamock_now();
    cudamock_event_unref(o->ev);
}

static struct CUstream_st *stream_new(int blocking, int legacy)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->blocking = blocking;
    s->legacy = legacy;
    s->device = cudamock_current_device();
    pthread_cond_init(&s->work, NULL);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->work);
        free(s);
        return NULL;
    }
    pthread_detach(s->thread);
    pthread_mutex_lock(&cudamock_lock);
    s->id = nstreams++;
    s->next_stream = streams;
    streams = s;
    pthread_mutex_unlock(&cudamock_lock);
    return s;
}

/*
 * A stream whose operation has run for CUDAMOCK_STALL_S seconds (default 20) is reported
 * once, with every stream's state: a hang on the mock then says where it is (a rank stuck in
 * a CUDA wait never reaches tutti's own TUTTI_TIMEOUT).
 */
static void describe(const struct CUstream_st *t, double at)
{
    const struct op *o = t->head;

    fprintf(stderr, "cudamock:   stream %d (%s%s): %llu queued, %llu done", t->id,
            t->legacy     ? "legacy default"
            : t->blocking ? "blocking"
                          : "non-blocking",
            t->destroyed ? ", destroyed" : "", (unsigned long long)t->queued,
            (unsigned long long)t->done);
    if (o && t->since > 0)
        fprintf(stderr, "; running for %.1f s: ", at - t->since);
    else if (o)
        fprintf(stderr, "; next: ");
    if (!o)
        fprintf(stderr, "; idle\n");
    else if (o->other)
        fprintf(stderr, "a wait for stream %d to reach %llu\n", o->other->id,
                (unsigned long long)o->until);
    else if (o->addr)
        fprintf(stderr, "a wait for the value at %p (now %u) to reach %u\n", (void *)o->addr,
                (unsigned)*o->addr, (unsigned)o->value);
    else if (o->ev)
        fprintf(stderr, "an event record\n");
    else
        fprintf(stderr, "%s\n", o->host_fn ? "a host function" : "a kernel or a copy");
}

static void *watchdog(void *arg)
{
    const char *v = getenv("CUDAMOCK_STALL_S");
    double limit = v && *v ? atof(v) : 20.0;

    (void)arg;
    for (;;) {
        struct timespec ts = {1, 0};
        double at;
        nanosleep(&ts, NULL);
        at = cudamock_now();
        pthread_mutex_lock(&cudamock_lock);
        for (struct CUstream_st *t = streams; t; t = t->next_stream)
            if (t->since > 0 && at - t->since > limit && t->reported != t->done + 1) {
                t->reported = t->done + 1;
                fprintf(stderr, "cudamock: pid %d: stream %d stalled; every stream:\n",
                        (int)getpid(), t->id);
                for (struct CUstream_st *u = streams; u; u = u->next_stream)
                    describe(u, at);
            }
        pthread_mutex_unlock(&cudamock_lock);
    }
    return NULL;
}

static pthread_once_t legacy_once = PTHREAD_ONCE_INIT;

static void legacy_make(void)
{
    pthread_t w;

    if (pthread_create(&w, NULL, watchdog, NULL) != 0) {
        fprintf(stderr, "cudamock: cannot start the stall watchdog\n");
        abort();
    }
    pthread_detach(w);
}

/* The current device's legacy default stream, made on first use. */
static struct CUstream_st *legacy_stream(void)
{
    static pthread_mutex_t make = PTHREAD_MUTEX_INITIALIZER;
    int d = cudamock_current_device();
    struct CUstream_st *s;

    pthread_once(&legacy_once, legacy_make);
    pthread_mutex_lock(&make);
    if (!legacy_streams[d])
        legacy_streams[d] = stream_new(1, 1);
    s = legacy_streams[d];
    pthread_mutex_unlock(&make);
    if (!s) {
        fprintf(stderr, "cudamock: cannot start the default stream's thread\n");
        abort();
    }
    return s;
}

/* A handle as a stream: NULL, cudaStreamLegacy and cudaStreamPerThread are the current
 * device's default one. */
struct CUstream_st *cudamock_stream(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread)
        return legacy_stream();
    return h;
}

/* Append o to s (lock held); its sequence number is s->queued afterwards. */
static void push(struct CUstream_st *s, struct op *o)
{
    o->seq = ++s->queued;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
}

static int push_wait_stream(struct CUstream_st *s, struct CUstream_st *other, uint64_t until)
{
    struct op *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    *w = (struct op){.run = cudamock_run_wait_stream, .other = other, .until = until};
    push(s, w);
    return 0;
}

/*
 * Queue o on s (lock held), with the legacy default stream's ordering: work on it waits for
 * everything queued so far on blocking streams, and work on a blocking stream waits for
 * everything queued so far on it.
 */
cudaError_t cudamock_enqueue_locked(struct CUstream_st *s, struct op *o)
{
    if (s->destroyed) {
        fprintf(stderr, "cudamock: work queued on a destroyed stream\n");
        free(o);
        return cudaErrorInvalidResourceHandle;
    }
    if (s->capturing) {
        fprintf(stderr, "cudamock: work queued on a stream being captured into a graph "
                        "(not modelled: tutti must refuse such calls before queueing)\n");
        free(o);
        return cudaErrorStreamCaptureUnsupported;
    }
    struct CUstream_st *legacy = legacy_streams[s->device];
    if (s->legacy) {
        for (struct CUstream_st *t = streams; t; t = t->next_stream)
            if (t != s && t->blocking && t->device == s->device && t->done < t->queued &&
                push_wait_stream(s, t, t->queued))
                goto oom;
    } else if (s->blocking && legacy && legacy->done < legacy->queued) {
        if (push_wait_stream(s, legacy, legacy->queued))
            goto oom;
    }
    push(s, o);
    pthread_cond_signal(&s->work);
    return cudaSuccess;
oom:
    free(o);
    return cudaErrorMemoryAllocation;
}

cudaError_t cudamock_enqueue(struct CUstream_st *s, struct op *o, uint64_t *seq)
{
    cudaError_t e;

    pthread_mutex_lock(&cudamock_lock);
    e = cudamock_enqueue_locked(s, o);
    if (seq)
        *seq = s->queued;
    pthread_mutex_unlock(&cudamock_lock);
    return e;
}

/* Queue fn on h: a host function (fn(arg)), or a kernel or copy (fn on a copy of the `size`
 * bytes at arg, freed once it has run). */
cudaError_t cudamock_queue_fn(cudaStream_t h, void (*fn)(void *), void *arg, int host_fn,
                              size_t size, uint64_t *seq)
{
    struct op *o = calloc(1, sizeof(*o));
    void *copy = host_fn ? arg : malloc(size);

    if (!o || !copy) {
        free(o);
        if (!host_fn)
            free(copy);
        return cudaErrorMemoryAllocation;
    }
    if (!host_fn)
        memcpy(copy, arg, size);
    *o = (struct op){.run = run_fn, .fn = fn, .arg = copy, .host_fn = host_fn};
    return cudamock_enqueue(cudamock_stream(h), o, seq);
}

void cudamock_wait_for(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&cudamock_lock);
    while (s->done < seq)
        pthread_cond_wait(&cudamock_moved, &cudamock_lock);
    pthread_mutex_unlock(&cudamock_lock);
}

/* Everything queued on every stream so far has run (cudaFree's and cudaDeviceSynchronize's
 * wait). */
void cudamock_device_wait(void)
{
    pthread_mutex_lock(&cudamock_lock);
    for (struct CUstream_st *t = streams; t; t = t->next_stream) {
        uint64_t until = t->queued;
        while (t->done < until)
            pthread_cond_wait(&cudamock_moved, &cudamock_lock);
    }
    pthread_mutex_unlock(&cudamock_lock);
}

static _Atomic int failing_launches;

void cudamock_fail_launches(int n)
{
    atomic_store(&failing_launches, n);
}

int cudamock_launch(void *stream, void (*fn)(void *), const void *args, size_t size)
{
    if (cudamock_refused_in_host_fn("a kernel launch"))
        return cudaErrorNotPermitted;
    if (atomic_load(&failing_launches) > 0 && atomic_fetch_sub(&failing_launches, 1) > 0) {
        fprintf(stderr, "cudamock: pid %d: a kernel launch fails, as asked\n", (int)getpid());
        return cudamock_ret(cudaErrorLaunchFailure);
    }
    return cudamock_ret(cudamock_queue_fn(stream, fn, (void *)args, 0, size, NULL));
}

cudaError_t cudamock_queue(cudaStream_t h, void (*fn)(void *), const void *args, size_t size)
{
    return cudamock_queue_fn(h, fn, (void *)args, 0, size, NULL);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    GUARD();
    if (!s)
        return cudamock_ret(cudaErrorInvalidValue);
    pthread_once(&legacy_once, legacy_make);
    *s = stream_new(!(flags & cudaStreamNonBlocking), 0);
    return *s ? cudaSuccess : cudamock_ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    GUARD();
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

/* As in CUDA, the call returns at once and the stream's work still runs; the stream itself
 * is kept (an event may still name it). */
cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    struct CUstream_st *s = h;

    GUARD();
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&cudamock_lock);
    s->destroyed = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&cudamock_lock);
    return cudaSuccess;
}

/* Streams are never freed here, so their ids (the order they were made in) are unique. */
cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long *id)
{
    GUARD();
    if (!id)
        return cudamock_ret(cudaErrorInvalidValue);
    *id = h && h != cudaStreamLegacy && h != cudaStreamPerThread
              ? (unsigned long long)((struct CUstream_st *)h)->id
              : 0;
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
    struct CUstream_st *s = cudamock_stream(h);
    int idle;

    GUARD();
    if (s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&cudamock_lock);
    idle = s->done == s->queued;
    pthread_mutex_unlock(&cudamock_lock);
    return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    struct CUstream_st *s = cudamock_stream(h);
    uint64_t until;

    GUARD();
    if (s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&cudamock_lock);
    until = s->queued;
    pthread_mutex_unlock(&cudamock_lock);
    cudamock_wait_for(s, until);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    GUARD();
    cudamock_device_wait();
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *data)
{
    GUARD();
    return cudamock_ret(cudamock_queue_fn(h, fn, data, 1, 0, NULL));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
    struct CUstream_st *s = cudamock_stream(h);

    GUARD();
    (void)mode;
    if (s->legacy || s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    s->capturing = 1;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *graph)
{
    struct CUstream_st *s = cudamock_stream(h);

    GUARD();
    if (!s->capturing || !graph)
        return cudamock_ret(cudaErrorInvalidValue);
    s->capturing = 0;
    *graph = calloc(1, sizeof(**graph));
    return *graph ? cudaSuccess : cudamock_ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *status)
{
    GUARD();
    if (!status)
        return cudamock_ret(cudaErrorInvalidValue);
    *status =
        cudamock_stream(h)->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    GUARD();
    free(g);
    return cudaSuccess;
}
