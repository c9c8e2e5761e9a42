/*
 * stream.c -- cudamock's streams (see cudamock.c for what the mock models): each stream is a
 * thread that runs its operations in order; the legacy default stream orders against every
 * blocking stream both ways; events, GPU-side waits on host memory, copies and memsets,
 * kernels (cudamock_launch), host functions, capture, and the report of a stalled stream.
 */
#include "mock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- streams ---- */

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

/* One lock for every stream, event and wait of the process, and one condition for every
 * wait on another stream's progress; a stream's thread waits for work on its own condition,
 * so an idle stream sleeps through the others' operations. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t moved = PTHREAD_COND_INITIALIZER;
static struct CUstream_st *streams, *legacy_streams[64]; /* one legacy stream per device */
static int nstreams;

static void event_unref(struct CUevent_st *e)
{
    if (--e->refs == 0)
        free(e);
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;

    pthread_mutex_lock(&lock);
    for (;;) {
        struct op *o;
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->work, &lock);
        if (!(o = s->head))
            break;
        s->since = cudamock_now();
        o->run(s, o);
        s->since = 0;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        pthread_cond_broadcast(&moved);
        free(o);
    }
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_unlock(&lock);
    if (o->host_fn)
        pthread_mutex_lock(&host_fn_thread);
    cudamock_in_host_fn = o->host_fn;
    o->fn(o->arg);
    cudamock_in_host_fn = 0;
    if (o->host_fn)
        pthread_mutex_unlock(&host_fn_thread);
    if (!o->host_fn)
        free(o->arg);
    pthread_mutex_lock(&lock);
}

static void run_wait_stream(struct CUstream_st *s, struct op *o)
{
    (void)s;
    while (o->other->done < o->until)
        pthread_cond_wait(&moved, &lock);
}

static void run_wait_value(struct CUstream_st *s, struct op *o)
{
    long ns = 10000;

    (void)s;
    pthread_mutex_unlock(&lock);
    while ((int32_t)(__atomic_load_n(o->addr, __ATOMIC_ACQUIRE) - o->value) < 0) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns < 500000 ? 2 * ns : ns;
    }
    pthread_mutex_lock(&lock);
}

static void run_record(struct CUstream_st *s, struct op *o)
{
    if (o->ev->stream == s && o->ev->seq == o->seq)
        o->ev->at = cudamock_now();
    event_unref(o->ev);
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
    pthread_mutex_lock(&lock);
    s->id = nstreams++;
    s->next_stream = streams;
    streams = s;
    pthread_mutex_unlock(&lock);
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
        pthread_mutex_lock(&lock);
        for (struct CUstream_st *t = streams; t; t = t->next_stream)
            if (t->since > 0 && at - t->since > limit && t->reported != t->done + 1) {
                t->reported = t->done + 1;
                fprintf(stderr, "cudamock: pid %d: stream %d stalled; every stream:\n",
                        (int)getpid(), t->id);
                for (struct CUstream_st *u = streams; u; u = u->next_stream)
                    describe(u, at);
            }
        pthread_mutex_unlock(&lock);
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
static struct CUstream_st *S(cudaStream_t h)
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
    *w = (struct op){.run = run_wait_stream, .other = other, .until = until};
    push(s, w);
    return 0;
}

/*
 * Queue o on s (lock held), with the legacy default stream's ordering: work on it waits for
 * everything queued so far on blocking streams, and work on a blocking stream waits for
 * everything queued so far on it.
 */
static cudaError_t enqueue_locked(struct CUstream_st *s, struct op *o)
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

static cudaError_t enqueue(struct CUstream_st *s, struct op *o, uint64_t *seq)
{
    cudaError_t e;

    pthread_mutex_lock(&lock);
    e = enqueue_locked(s, o);
    if (seq)
        *seq = s->queued;
    pthread_mutex_unlock(&lock);
    return e;
}

/* Queue fn on h: a host function (fn(arg)), or a kernel or copy (fn on a copy of the `size`
 * bytes at arg, freed once it has run). */
static cudaError_t queue_fn(cudaStream_t h, void (*fn)(void *), void *arg, int host_fn, size_t size,
                            uint64_t *seq)
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
    return enqueue(S(h), o, seq);
}

static void wait_for(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&lock);
    while (s->done < seq)
        pthread_cond_wait(&moved, &lock);
    pthread_mutex_unlock(&lock);
}

/* Everything queued on every stream so far has run (cudaFree's and cudaDeviceSynchronize's
 * wait). */
void cudamock_device_wait(void)
{
    pthread_mutex_lock(&lock);
    for (struct CUstream_st *t = streams; t; t = t->next_stream) {
        uint64_t until = t->queued;
        while (t->done < until)
            pthread_cond_wait(&moved, &lock);
    }
    pthread_mutex_unlock(&lock);
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
    return cudamock_ret(queue_fn(stream, fn, (void *)args, 0, size, NULL));
}

cudaError_t cudamock_queue(cudaStream_t h, void (*fn)(void *), const void *args, size_t size)
{
    return queue_fn(h, fn, (void *)args, 0, size, NULL);
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
    pthread_mutex_lock(&lock);
    s->destroyed = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&lock);
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
    struct CUstream_st *s = S(h);
    int idle;

    GUARD();
    if (s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&lock);
    idle = s->done == s->queued;
    pthread_mutex_unlock(&lock);
    return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    struct CUstream_st *s = S(h);
    uint64_t until;

    GUARD();
    if (s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&lock);
    until = s->queued;
    pthread_mutex_unlock(&lock);
    wait_for(s, until);
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
    return cudamock_ret(queue_fn(h, fn, data, 1, 0, NULL));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
    struct CUstream_st *s = S(h);

    GUARD();
    (void)mode;
    if (s->legacy || s->capturing)
        return cudamock_ret(cudaErrorStreamCaptureUnsupported);
    s->capturing = 1;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *graph)
{
    struct CUstream_st *s = S(h);

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
    *status = S(h)->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    GUARD();
    free(g);
    return cudaSuccess;
}

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
    pthread_mutex_lock(&lock);
    event_unref(e);
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
    struct CUstream_st *s = S(h);
    struct op *o = calloc(1, sizeof(*o));
    cudaError_t r;

    GUARD();
    if (!e || !o) {
        free(o);
        return cudamock_ret(e ? cudaErrorMemoryAllocation : cudaErrorInvalidResourceHandle);
    }
    *o = (struct op){.run = run_record, .ev = e};
    pthread_mutex_lock(&lock);
    e->refs++;
    r = enqueue_locked(s, o);
    if (r == cudaSuccess) {
        e->stream = s;
        e->seq = s->queued;
    } else {
        e->refs--;
    }
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    done = event_done_locked(e);
    pthread_mutex_unlock(&lock);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    GUARD();
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    while (!event_done_locked(e))
        pthread_cond_wait(&moved, &lock);
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t r = cudaSuccess;

    GUARD();
    if (!ms || !a || !b)
        return cudamock_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&lock);
    if (!a->stream || !b->stream)
        r = cudaErrorInvalidResourceHandle;
    else if (!event_done_locked(a) || !event_done_locked(b))
        r = cudaErrorNotReady;
    else
        *ms = (float)((b->at - a->at) * 1e3);
    pthread_mutex_unlock(&lock);
    return cudamock_ret(r);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
    struct CUstream_st *s = S(h);
    cudaError_t r = cudaSuccess;

    GUARD();
    (void)flags;
    if (!e)
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    if (!event_done_locked(e)) {
        struct op *w = calloc(1, sizeof(*w));
        if (!w) {
            r = cudaErrorMemoryAllocation;
        } else {
            *w = (struct op){.run = run_wait_stream, .other = e->stream, .until = e->seq};
            r = enqueue_locked(s, w);
        }
    }
    pthread_mutex_unlock(&lock);
    return cudamock_ret(r);
}

/* ---- copies ---- */

struct copy {
    void *dst;
    const void *src;
    size_t bytes;
    int value; /* memset: the byte; copy: -1 */
};

static void do_copy(void *arg)
{
    struct copy *c = arg;
    if (c->value < 0)
        memmove(c->dst, c->src, c->bytes);
    else
        memset(c->dst, c->value, c->bytes);
}

static cudaError_t copy_async(void *dst, const void *src, size_t bytes, int value, cudaStream_t h,
                              uint64_t *seq)
{
    struct copy c = {dst, src, bytes, value};
    return cudamock_ret(queue_fn(h, do_copy, &c, 0, sizeof(c), seq));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t h)
{
    GUARD();
    (void)kind;
    return copy_async(dst, src, bytes, -1, h, NULL);
}

/* The blocking calls run on the legacy default stream and return once done. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    uint64_t seq;
    cudaError_t e;

    GUARD();
    (void)kind;
    e = copy_async(dst, src, bytes, -1, NULL, &seq);
    if (e == cudaSuccess)
        wait_for(S(NULL), seq);
    return e;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t h)
{
    GUARD();
    if (!cudamock_device_range(dst, bytes, "cudaMemsetAsync"))
        return cudamock_ret(cudaErrorInvalidValue);
    return copy_async(dst, NULL, bytes, value & 0xff, h, NULL);
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes)
{
    uint64_t seq;
    cudaError_t e;

    GUARD();
    if (!cudamock_device_range(dst, bytes, "cudaMemset"))
        return cudamock_ret(cudaErrorInvalidValue);
    e = copy_async(dst, NULL, bytes, value & 0xff, NULL, &seq);
    if (e == cudaSuccess)
        wait_for(S(NULL), seq);
    return e;
}

/* ---- cuStreamWaitValue32, through cudaGetDriverEntryPointByVersion ---- */

CUresult cudamock_wait_value32(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    struct op *o;

    GUARD_CU();
    if (flags != CU_STREAM_WAIT_VALUE_GEQ)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!cudamock_device_range((const void *)(uintptr_t)addr, 4, "cuStreamWaitValue32"))
        return CUDA_ERROR_INVALID_VALUE;
    o = calloc(1, sizeof(*o));
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *o = (struct op){
        .run = run_wait_value, .addr = (const volatile uint32_t *)(uintptr_t)addr, .value = value};
    return enqueue(S(h), o, NULL) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
