/*
 * cudamock.c -- the CUDA runtime calls libtutti and the gpu suite make, on the host, so that
 * the device path's control logic (stream order, events, the runner and its GPU-side waits,
 * p2p connections over IPC handles, staging) runs where no GPU is: in CI. It stands in for
 * libcudart_static in the `gpu-mock` build of gpu_check; libtutti itself never links it.
 *
 * What it models:
 * - one device (0), whose memory is host memory: cudaMalloc maps a memfd, and an IPC handle
 *   names the owner's pid and descriptor, which another process opens through
 *   /proc/PID/fd/N and maps (so a sender's copies land in the receiver's allocation, as over
 *   CUDA IPC). Opening a handle in the process that made it fails, as in CUDA;
 * - streams as threads: each stream runs its operations (copies, memsets, kernels, host
 *   functions, event records, waits) one after another on a thread of its own. The legacy
 *   default stream (NULL) orders against every blocking stream both ways, as CUDA's does;
 *   streams made with cudaStreamNonBlocking do not wait for it;
 * - events (record, query, synchronize, wait, elapsed time), cuStreamWaitValue32 (GEQ) on
 *   mapped pinned memory, stream capture (a stream being captured takes no work: anything
 *   queued on it is refused loudly, since tutti must refuse such calls before queueing);
 * - cudaFree and cudaFreeHost wait for the whole device first, as CUDA's do;
 * - a host function (cudaLaunchHostFunc) that makes a CUDA call is refused loudly
 *   (cudaErrorNotPermitted), as CUDA may refuse it, or deadlock;
 * - kernels (cudamock_launch) check that their pointers are device or mapped memory, where a
 *   GPU would fault; cudamock_fail_launches(n) makes the next n launches fail, so that tests
 *   can see what a failing kernel does to a collective.
 * What it does not: time-slicing between processes, copy engines, performance of any kind,
 * several devices, managed memory, graphs (a captured graph is empty).
 */
#include "cudamock.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ---- */

static __thread cudaError_t last_error;

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (cudamock)";
    case cudaErrorMemoryAllocation: return "out of memory (cudamock)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (cudamock)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (cudamock)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (cudamock)";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered (cudamock)";
    case cudaErrorLaunchFailure: return "unspecified launch failure (cudamock)";
    case cudaErrorNotPermitted: return "operation not permitted (cudamock)";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing (cudamock)";
    default: return "unknown error (cudamock)";
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A host function (cudaLaunchHostFunc) must make no CUDA call: CUDA may answer
 * cudaErrorNotPermitted, or deadlock (the driver runs host functions on its own thread). */
static __thread int in_host_fn;

static int refused_in_host_fn(const char *fn)
{
    if (!in_host_fn)
        return 0;
    fprintf(stderr,
            "cudamock: %s called from a host function (cudaLaunchHostFunc): CUDA forbids "
            "it\n",
            fn);
    last_error = cudaErrorNotPermitted;
    return 1;
}

#define GUARD()                                                                                    \
    do {                                                                                           \
        if (refused_in_host_fn(__func__))                                                          \
            return cudaErrorNotPermitted;                                                          \
    } while (0)
#define GUARD_CU()                                                                                 \
    do {                                                                                           \
        if (refused_in_host_fn(__func__))                                                          \
            return CUDA_ERROR_NOT_PERMITTED;                                                       \
    } while (0)

/* ---- memory: a table of what was allocated or opened ---- */

enum kind { DEVICE = 1, PINNED };

struct region {
    char *base;
    size_t size;
    enum kind kind;
    int fd;          /* device memory made here: the memfd an IPC handle names; else -1 */
    int opened;      /* device memory opened from another process's handle */
    unsigned mapped; /* pinned: cudaHostAllocMapped */
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static size_t nregions, cap_regions;

static int add_region(struct region r)
{
    pthread_mutex_lock(&mem_lock);
    if (nregions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 64;
        struct region *g = realloc(regions, cap * sizeof(*g));
        if (!g) {
            pthread_mutex_unlock(&mem_lock);
            return -1;
        }
        regions = g, cap_regions = cap;
    }
    regions[nregions++] = r;
    pthread_mutex_unlock(&mem_lock);
    return 0;
}

/* The region holding p (copied out), or 0 when none does. */
static int find_region(const void *p, struct region *out)
{
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions && !found; i++)
        if ((const char *)p >= regions[i].base &&
            (const char *)p < regions[i].base + regions[i].size) {
            *out = regions[i];
            found = 1;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

/* Remove the region that starts at p and is of kind k (copied out); 0 when there is none. */
static int take_region(const void *p, enum kind k, struct region *out)
{
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].base == p && regions[i].kind == k) {
            *out = regions[i];
            regions[i] = regions[--nregions];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

int cudamock_device_range(const void *p, size_t bytes, const char *what)
{
    struct region r;

    if (bytes == 0)
        return 1;
    if (find_region(p, &r) && (r.kind == DEVICE || r.mapped) &&
        (const char *)p + bytes <= r.base + r.size)
        return 1;
    fprintf(stderr,
            "cudamock: %s: %zu bytes at %p are not device memory (a GPU would fault here)\n", what,
            bytes, p);
    return 0;
}

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
    int capturing;
    int destroyed;
    int id;            /* in the order streams were made: 0 is the legacy default stream */
    double since;      /* when the running operation started; 0: none runs */
    uint64_t reported; /* the operation last reported as stalled (its number) */
    pthread_t thread;
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

/* One lock and one condition for every stream, event and wait of the process. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t moved = PTHREAD_COND_INITIALIZER;
static struct CUstream_st *streams, *legacy_stream;
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
            pthread_cond_wait(&moved, &lock);
        if (!(o = s->head))
            break;
        s->since = now();
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

/* Operation bodies: called on the stream's thread with the lock held. */
static void run_fn(struct CUstream_st *s, struct op *o)
{
    (void)s;
    pthread_mutex_unlock(&lock);
    in_host_fn = o->host_fn;
    o->fn(o->arg);
    in_host_fn = 0;
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
        o->ev->at = now();
    event_unref(o->ev);
}

static struct CUstream_st *stream_new(int blocking, int legacy)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->blocking = blocking;
    s->legacy = legacy;
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
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
        at = now();
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

    legacy_stream = stream_new(1, 1);
    if (!legacy_stream || pthread_create(&w, NULL, watchdog, NULL) != 0) {
        fprintf(stderr, "cudamock: cannot start the default stream's thread\n");
        abort();
    }
    pthread_detach(w);
}

/* A handle as a stream: NULL, cudaStreamLegacy and cudaStreamPerThread are the default one. */
static struct CUstream_st *S(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        pthread_once(&legacy_once, legacy_make);
        return legacy_stream;
    }
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
    if (s->legacy) {
        for (struct CUstream_st *t = streams; t; t = t->next_stream)
            if (t != s && t->blocking && t->done < t->queued && push_wait_stream(s, t, t->queued))
                goto oom;
    } else if (s->blocking && legacy_stream && legacy_stream->done < legacy_stream->queued) {
        if (push_wait_stream(s, legacy_stream, legacy_stream->queued))
            goto oom;
    }
    push(s, o);
    pthread_cond_broadcast(&moved);
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
static void device_wait(void)
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
    if (refused_in_host_fn("a kernel launch"))
        return cudaErrorNotPermitted;
    if (atomic_load(&failing_launches) > 0 && atomic_fetch_sub(&failing_launches, 1) > 0) {
        fprintf(stderr, "cudamock: pid %d: a kernel launch fails, as asked\n", (int)getpid());
        return ret(cudaErrorLaunchFailure);
    }
    return ret(queue_fn(stream, fn, (void *)args, 0, size, NULL));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    GUARD();
    if (!s)
        return ret(cudaErrorInvalidValue);
    pthread_once(&legacy_once, legacy_make);
    *s = stream_new(!(flags & cudaStreamNonBlocking), 0);
    return *s ? cudaSuccess : ret(cudaErrorMemoryAllocation);
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
        return ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    s->destroyed = 1;
    pthread_cond_broadcast(&moved);
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
    struct CUstream_st *s = S(h);
    int idle;

    GUARD();
    if (s->capturing)
        return ret(cudaErrorStreamCaptureUnsupported);
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
        return ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&lock);
    until = s->queued;
    pthread_mutex_unlock(&lock);
    wait_for(s, until);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    GUARD();
    device_wait();
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *data)
{
    GUARD();
    return ret(queue_fn(h, fn, data, 1, 0, NULL));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
    struct CUstream_st *s = S(h);

    GUARD();
    (void)mode;
    if (s->legacy || s->capturing)
        return ret(cudaErrorStreamCaptureUnsupported);
    s->capturing = 1;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *graph)
{
    struct CUstream_st *s = S(h);

    GUARD();
    if (!s->capturing || !graph)
        return ret(cudaErrorInvalidValue);
    s->capturing = 0;
    *graph = calloc(1, sizeof(**graph));
    return *graph ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *status)
{
    GUARD();
    if (!status)
        return ret(cudaErrorInvalidValue);
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
        return ret(cudaErrorInvalidValue);
    *e = calloc(1, sizeof(**e));
    if (!*e)
        return ret(cudaErrorMemoryAllocation);
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
        return ret(cudaErrorInvalidResourceHandle);
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
        return ret(e ? cudaErrorMemoryAllocation : cudaErrorInvalidResourceHandle);
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
    return ret(r);
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
        return ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    done = event_done_locked(e);
    pthread_mutex_unlock(&lock);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    GUARD();
    if (!e)
        return ret(cudaErrorInvalidResourceHandle);
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
        return ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&lock);
    if (!a->stream || !b->stream)
        r = cudaErrorInvalidResourceHandle;
    else if (!event_done_locked(a) || !event_done_locked(b))
        r = cudaErrorNotReady;
    else
        *ms = (float)((b->at - a->at) * 1e3);
    pthread_mutex_unlock(&lock);
    return ret(r);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
    struct CUstream_st *s = S(h);
    cudaError_t r = cudaSuccess;

    GUARD();
    (void)flags;
    if (!e)
        return ret(cudaErrorInvalidResourceHandle);
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
    return ret(r);
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
    return ret(queue_fn(h, do_copy, &c, 0, sizeof(c), seq));
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
        return ret(cudaErrorInvalidValue);
    return copy_async(dst, NULL, bytes, value & 0xff, h, NULL);
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes)
{
    uint64_t seq;
    cudaError_t e;

    GUARD();
    if (!cudamock_device_range(dst, bytes, "cudaMemset"))
        return ret(cudaErrorInvalidValue);
    e = copy_async(dst, NULL, bytes, value & 0xff, NULL, &seq);
    if (e == cudaSuccess)
        wait_for(S(NULL), seq);
    return e;
}

/* ---- device memory and IPC ---- */

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return n ? (n + page - 1) / page * page : page;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    size_t size = page_round(bytes);
    int fd;
    void *m;

    GUARD();
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    fd = memfd_create("cudamock", MFD_CLOEXEC);
    if (fd < 0)
        return ret(cudaErrorMemoryAllocation);
    if (ftruncate(fd, (off_t)size) != 0 ||
        (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        close(fd);
        return ret(cudaErrorMemoryAllocation);
    }
    if (add_region((struct region){.base = m, .size = size, .kind = DEVICE, .fd = fd}) != 0) {
        munmap(m, size);
        close(fd);
        return ret(cudaErrorMemoryAllocation);
    }
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    struct region r;

    GUARD();
    if (!p)
        return cudaSuccess;
    device_wait();
    if (!take_region(p, DEVICE, &r)) {
        fprintf(stderr, "cudamock: cudaFree(%p): not an allocation of cudaMalloc\n", p);
        return ret(cudaErrorInvalidValue);
    }
    if (r.opened) {
        add_region(r);
        fprintf(stderr, "cudamock: cudaFree(%p): opened from an IPC handle\n", p);
        return ret(cudaErrorInvalidValue);
    }
    munmap(r.base, r.size);
    close(r.fd);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    size_t size = page_round(bytes);

    GUARD();
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    if (posix_memalign(p, (size_t)sysconf(_SC_PAGESIZE), size) != 0)
        return ret(cudaErrorMemoryAllocation);
    if (add_region((struct region){.base = *p,
                                   .size = size,
                                   .kind = PINNED,
                                   .fd = -1,
                                   .mapped = flags & cudaHostAllocMapped}) != 0) {
        free(*p);
        *p = NULL;
        return ret(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    struct region r;

    GUARD();
    if (!p)
        return cudaSuccess;
    device_wait();
    if (!take_region(p, PINNED, &r)) {
        fprintf(stderr, "cudamock: cudaFreeHost(%p): not an allocation of cudaHostAlloc\n", p);
        return ret(cudaErrorInvalidValue);
    }
    free(r.base);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **d, void *p, unsigned int flags)
{
    struct region r;

    GUARD();
    (void)flags;
    if (!d || !find_region(p, &r) || r.kind != PINNED || !r.mapped)
        return ret(cudaErrorInvalidValue);
    *d = p;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    struct region r;

    GUARD();
    if (!a)
        return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof(*a));
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    if (!find_region(p, &r))
        return cudaSuccess;
    a->device = 0;
    if (r.kind == DEVICE) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeHost;
        a->hostPointer = (void *)p;
        a->devicePointer = r.mapped ? (void *)p : NULL;
    }
    return cudaSuccess;
}

struct ipc {
    char magic[8];
    int32_t pid, fd;
    uint64_t size;
};

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    struct region r;
    struct ipc i = {"cudamock", 0, 0, 0};

    GUARD();
    if (!h || !find_region(p, &r) || r.kind != DEVICE || r.opened || r.base != p)
        return ret(cudaErrorInvalidValue);
    i.pid = (int32_t)getpid(), i.fd = r.fd, i.size = r.size;
    memset(h, 0, sizeof(*h));
    memcpy(h, &i, sizeof(i));
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags)
{
    struct ipc i;
    char path[64];
    void *m;
    int fd;

    GUARD();
    (void)flags;
    memcpy(&i, &h, sizeof(i));
    if (!p || memcmp(i.magic, "cudamock", 8) != 0)
        return ret(cudaErrorInvalidValue);
    if (i.pid == (int32_t)getpid()) /* CUDA opens no handle of the process that made it */
        return ret(cudaErrorInvalidResourceHandle);
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)i.pid, (int)i.fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "cudamock: cudaIpcOpenMemHandle: %s: %s\n", path, strerror(errno));
        return ret(cudaErrorInvalidResourceHandle);
    }
    m = mmap(NULL, (size_t)i.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return ret(cudaErrorMemoryAllocation);
    if (add_region((struct region){
            .base = m, .size = (size_t)i.size, .kind = DEVICE, .fd = -1, .opened = 1}) != 0) {
        munmap(m, (size_t)i.size);
        return ret(cudaErrorMemoryAllocation);
    }
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    struct region r;

    GUARD();
    if (!take_region(p, DEVICE, &r))
        return ret(cudaErrorInvalidValue);
    if (!r.opened) {
        add_region(r);
        return ret(cudaErrorInvalidValue);
    }
    munmap(r.base, r.size);
    return cudaSuccess;
}

/* ---- the device ---- */

static __thread int current_device;

cudaError_t cudaGetDeviceCount(int *n)
{
    GUARD();
    if (!n)
        return ret(cudaErrorInvalidValue);
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    GUARD();
    if (d != 0)
        return ret(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    GUARD();
    if (!d)
        return ret(cudaErrorInvalidValue);
    *d = current_device;
    return cudaSuccess;
}

static const char bus_id[] = "0000:0A:00.0";

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
    GUARD();
    if (!bus || len < (int)sizeof(bus_id) || d != 0)
        return ret(cudaErrorInvalidValue);
    memcpy(bus, bus_id, sizeof(bus_id));
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *bus)
{
    GUARD();
    if (!d || !bus || strcasecmp(bus, bus_id) != 0)
        return ret(cudaErrorInvalidDevice);
    *d = 0;
    return cudaSuccess;
}

/* One device: it has no peer (CUDA answers 0 for a device and itself). */
cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    GUARD();
    if (!can || d != 0 || peer != 0)
        return ret(cudaErrorInvalidDevice);
    *can = 0;
    return cudaSuccess;
}

/* ---- driver entry points ---- */

static CUresult mock_wait_value32(CUstream h, CUdeviceptr addr, cuuint32_t value,
                                  unsigned int flags)
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

static CUresult mock_get_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    struct region r;

    GUARD_CU();
    if (!find_region((const void *)(uintptr_t)p, &r) || r.kind != DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (base)
        *base = (CUdeviceptr)(uintptr_t)r.base;
    if (size)
        *size = r.size;
    return CUDA_SUCCESS;
}

/* No dma-buf export: the GPUDirect RDMA path reports it unavailable. */
static CUresult mock_no_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
                               unsigned long long flags)
{
    GUARD_CU();
    (void)handle, (void)p, (void)size, (void)type, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    void *f = NULL;
    CUresult (*wait)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = mock_wait_value32;
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = mock_get_range;
    CUresult (*dmabuf)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) =
        mock_no_dmabuf;

    GUARD();
    (void)version, (void)flags;
    if (!symbol || !fn)
        return ret(cudaErrorInvalidValue);
    if (!strcmp(symbol, "cuStreamWaitValue32"))
        memcpy(&f, &wait, sizeof(f));
    else if (!strcmp(symbol, "cuMemGetAddressRange"))
        memcpy(&f, &range, sizeof(f));
    else if (!strcmp(symbol, "cuMemGetHandleForAddressRange"))
        memcpy(&f, &dmabuf, sizeof(f));
    *fn = f;
    if (status)
        *status = f ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
