/*
 * cuda_async.c -- device-path collectives and point-to-point batches on a wrapped CUDA stream
 * (tt_cuda_dev_on_stream).
 *
 * The device path is driven from the host: the executor hands out slots, queues copies and
 * kernels on the communicator's CUDA stream and publishes commits once CUDA events say they
 * ran. So a call on the user's CUDA stream needs a host thread to drive it once the stream
 * gets there, and the stream must not go on before it is done. Two ways:
 *
 * Returning at once (TUTTI_CUDA_ASYNC=1, the default where the driver has stream memory
 * operations): the call records an event on the user's stream, puts the collective on the
 * communicator's runner (a host stream: one worker thread, call order) and queues on the
 * user's stream a GPU-side wait (cuStreamWaitValue32) for a 32-bit counter in pinned host
 * memory to reach the call's number. The runner waits for the event (the work queued before
 * the call is done), runs the collective on the device path, then writes the call's number
 * into the counter from the host: the user's stream goes on. The counter is written whether
 * the collective succeeded or not (a failure is kept by the wrapper for tutti_stream_sync and
 * puts the communicator in its error state), so a failed collective never leaves the user's
 * stream waiting for ever. No host function holds the user's stream: that design deadlocked
 * on an H200 (CUDA forbids a host function to wait for CUDA work not ordered before it; the
 * driver runs host functions on its own thread, which may hold locks that the thread running
 * the collective needs for its next CUDA call). And the runner waits for the event on the
 * host before it queues anything behind it, so the device stream never waits on the GPU for
 * a user's stream that a staged call's host function may still hold.
 * The counter is cyclic (the wait compares (int32_t)(counter - n) >= 0), so numbers wrap.
 *
 * Returning once done (TUTTI_CUDA_ASYNC=0, or no stream memory operations): the collective
 * runs on the calling thread after the event, and the call returns when the device stream
 * has finished.
 *
 * Stream memory operations are not visible to CUDA's scheduler: if the user's stream and the
 * communicator's stream shared a hardware queue, the device path's copies would queue behind
 * the wait. The runner then makes no progress and fails after TUTTI_TIMEOUT, and the counter
 * is written all the same, so even then nothing waits for ever.
 */
#include "lib/cuda/cuda.h"

#include "lib/core/comm.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* driver API types only: cuStreamWaitValue32 comes through the runtime */
#include <cuda_runtime_api.h>

typedef CUresult (*wait_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

static wait_value_fn wait_value;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER; /* a call's number and place */

static void resolve(void)
{
    void *f = NULL;
    enum cudaDriverEntryPointQueryResult q;

    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &f, 12000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        memcpy(&wait_value, &f, sizeof(f));
    (void)cudaGetLastError();
}

/* Queue on `stream` a wait for the counter to reach n (cyclic >=). 0 or a CUresult. */
static int queue_wait(struct tutti_comm *c, void *stream, uint32_t n)
{
    return (int)wait_value((CUstream)stream, (CUdeviceptr)(uintptr_t)c->cuda.flag_dev, n,
                           CU_STREAM_WAIT_VALUE_GEQ);
}

/*
 * At init, on the device (current): can the user's streams wait on the counter? Tried on the
 * communicator's stream with the counter already there, bounded: a driver without stream
 * memory operations refuses at once.
 */
static const char *async_probe(struct tutti_comm *c)
{
    void *flag = NULL;
    double t0;
    cudaError_t e;

    pthread_once(&resolve_once, resolve);
    if (!wait_value)
        return "the driver has no cuStreamWaitValue32";
    if (cudaHostAlloc(&flag, 64, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return "cannot allocate mapped pinned memory";
    }
    c->cuda.flag = flag;
    if (cudaHostGetDevicePointer(&c->cuda.flag_dev, flag, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        return "no device address for mapped pinned memory";
    }
    *c->cuda.flag = 1;
    if (queue_wait(c, c->cuda.stream, 1) != 0)
        return "cuStreamWaitValue32 refused (stream memory operations not supported)";
    t0 = tt_now();
    while ((e = cudaStreamQuery((cudaStream_t)c->cuda.stream)) == cudaErrorNotReady &&
           tt_now() - t0 < 2.0)
        sched_yield();
    if (e != cudaSuccess) /* not passed in 2 s: the stream stays stuck, so the path fails */
        return NULL;
    *c->cuda.flag = 0;
    return "";
}

tutti_result_t tt_cuda_async_prepare(struct tutti_comm *c)
{
    const char *why;

    c->cuda.async = 0;
    if (!tt_env_flag("TUTTI_CUDA_ASYNC")) {
        why = "TUTTI_CUDA_ASYNC=0";
    } else if (!(why = async_probe(c))) {
        (void)cudaGetLastError();
        return tt_fail(c, TUTTI_ERR_SYSTEM,
                       "device path: a GPU-side wait on pinned memory did not pass within 2 s "
                       "(TUTTI_CUDA_ASYNC=0 makes wrapped CUDA streams wait on the host)");
    } else if (!*why) {
        if (tutti_stream_create(&c->cuda.runner) != TUTTI_SUCCESS)
            return tt_fail(c, TUTTI_ERR_SYSTEM, "device path: %s", tt_thread_error());
        c->cuda.async = 1;
    }
    if (c->rank == 0)
        TT_INFO(TT_SUB_INIT, "%s: calls on wrapped CUDA streams %s%s%s",
                c->cuda.dev_path ? "device path" : "staged calls",
                c->cuda.async ? "return at once (the stream waits on the GPU)" : "return once done",
                c->cuda.async ? "" : ": ", c->cuda.async ? "" : why);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_runner_prepare(struct tutti_comm *c)
{
    cudaStream_t s;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tt_fail(c, TUTTI_ERR_SYSTEM, "staged calls: creating a CUDA stream: %s",
                       cudaGetErrorString(e));
    }
    c->cuda.stream = s;
    return tt_cuda_async_prepare(c);
}

void tt_cuda_async_free(struct tutti_comm *c)
{
    if (c->cuda.runner)
        tutti_stream_destroy(c->cuda.runner); /* idle: comm destroy waited for its work */
    c->cuda.runner = NULL;
    if (c->cuda.flag)
        cudaFreeHost((void *)c->cuda.flag);
    c->cuda.flag = NULL;
    c->cuda.async = 0;
}

/* One call on the runner: a collective, or a point-to-point batch (its ops are ours). */
struct item {
    struct tt_work w; /* w.call.after: the event on the user's stream, ours too */
    tutti_stream_t s;
    uint32_t n;
};

static const char *work_name(const struct tt_work *w)
{
    return w->kind == TT_WORK_COLL ? w->call.fn : "point-to-point";
}

/* Until the work queued on the user's stream before the call is done (or comm gives up). */
static tutti_result_t wait_event(struct tutti_comm *c, const struct tt_work *w)
{
    struct tt_backoff b;
    cudaError_t e;

    tt_backoff_init(&b, 0, 1e-3);
    while ((e = cudaEventQuery((cudaEvent_t)w->call.after)) == cudaErrorNotReady) {
        if (c->abort_flag)
            return tt_fail(c, TUTTI_ERR_ABORTED, "%s: aborted (tutti_comm_abort)", work_name(w));
        tt_backoff_wait(&b);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tt_fail(c, TUTTI_ERR_SYSTEM, "%s: waiting for its CUDA stream: %s", work_name(w),
                       cudaGetErrorString(e));
    }
    return TUTTI_SUCCESS;
}

/* Free what an item's work owns: its operations and the event. */
static void work_drop(struct tt_work *w)
{
    cudaEventDestroy((cudaEvent_t)w->call.after);
    tt_work_release(w);
}

static tutti_result_t run_item(void *arg)
{
    struct item *it = arg;
    struct tutti_comm *comm = it->w.comm;
    tutti_result_t rc = wait_event(comm, &it->w);

    if (rc == TUTTI_SUCCESS && tt_stream_failed(it->s))
        rc = tt_fail(comm, TUTTI_ERR_ABORTED,
                     "%s: not run: an earlier operation on its CUDA stream failed",
                     work_name(&it->w));
    if (rc == TUTTI_SUCCESS)
        rc = it->w.how->run(&it->w);
    else
        tt_comm_set_error(comm, rc);
    if (rc != TUTTI_SUCCESS)
        tt_stream_record_failure(it->s, rc, tt_thread_error());
    work_drop(&it->w);
    /* Last: the user's stream goes on (and may be destroyed) once it sees the number. */
    __atomic_store_n(comm->cuda.flag, it->n, __ATOMIC_RELEASE);
    free(it);
    return TUTTI_SUCCESS; /* the runner itself never fails: later calls must still run */
}

/* Queue w on the runner (which then owns it) and make s wait for it on the GPU. */
static tutti_result_t enqueue(struct tutti_comm *comm, struct tt_work *w, tutti_stream_t s)
{
    struct item *it = calloc(1, sizeof(*it));
    /* (counted as comm's work: tutti_comm_destroy waits for it) */
    struct tt_work host = {
        .kind = TT_WORK_HOST, .how = w->how, .comm = comm, .fn = run_item, .arg = it};
    tutti_result_t rc;
    uint32_t n; /* the call's number: once pushed, the runner may run and free it at once */
    int e;

    if (!it) {
        work_drop(w);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", work_name(w));
    }
    *it = (struct item){.w = *w, .s = s};
    pthread_mutex_lock(&queue_lock);
    n = it->n = ++comm->cuda.seq;
    rc = tt_stream_push(comm->cuda.runner, &host);
    if (rc != TUTTI_SUCCESS)
        comm->cuda.seq--;
    pthread_mutex_unlock(&queue_lock);
    if (rc != TUTTI_SUCCESS) {
        work_drop(w);
        free(it);
        return rc;
    }
    /* The runner may have run it already (and freed it): then the wait passes at once. */
    e = queue_wait(comm, tt_stream_cuda_handle(s), n);
    if (e != 0) /* the call still runs, but s would not wait for it */
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: queueing the wait on the CUDA stream failed "
                                               "(CUresult %d)",
                                               work_name(w), e));
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_dev_on_stream(struct tutti_comm *comm, struct tt_work *w, tutti_stream_t s)
{
    cudaEvent_t ev = NULL; /* the call's own: the runner may still hold an earlier one */
    cudaError_t e;
    tutti_result_t rc;

    if (tt_stream_failed(s)) {
        tt_work_release(w);
        return tt_fail(comm, TUTTI_ERR_ABORTED,
                       "%s: not run: an earlier operation on its CUDA stream failed", work_name(w));
    }
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(ev, (cudaStream_t)tt_stream_cuda_handle(s));
    if (e != cudaSuccess) {
        if (ev)
            cudaEventDestroy(ev);
        (void)cudaGetLastError();
        tt_work_release(w);
        return tt_comm_set_error(comm, tt_fail(comm, TUTTI_ERR_SYSTEM,
                                               "%s: recording an event on the CUDA stream: %s",
                                               work_name(w), cudaGetErrorString(e)));
    }
    w->call.after = ev;
    if (comm->cuda.async)
        return enqueue(comm, w, s);
    rc = w->how->run_now(w);
    work_drop(w);
    return rc;
}
