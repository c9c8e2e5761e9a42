/*
 * cuda_dev.c -- the device path: collectives on device buffers that stay on the GPU.
 *
 * When every rank is on one host and each rank's GPU can reach every other rank's (the same
 * GPU, or peer access over NVLink/PCIe), a collective on device buffers runs the same plan as
 * on the host, with two differences: its connections are p2p ones (transport/cuda_ipc.c: slots in
 * the receiver's device memory, written by the sender through CUDA IPC), and the executor's
 * byte moves are a mover (exec.h) that queues cudaMemcpyAsync and the reduction kernels of
 * cuda/kernels.cu on the communicator's own CUDA stream. Nothing is staged through the host.
 *
 * Whether a communicator has the device path is decided at init, identically everywhere:
 * each rank publishes its current device's PCI bus id with its record (tt_cuda_self); if
 * every rank published one and all are on one host, each says whether it can reach every
 * other rank's device, and one more bootstrap all-gather makes that unanimous. A rank with
 * TUTTI_CUDA_P2P=0 publishes no device, which turns the path off for all. Deciding per call
 * would let ranks disagree (one staged, one not) and wait on different connections forever.
 *
 * Ordering: on a NULL or host stream the device stream first waits for CUDA's legacy default
 * stream (an event recorded there), as the staged path's cudaMemcpy did, and the call returns
 * once the device stream has finished. On a wrapped cudaStream_t the call returns at once and
 * the user's stream waits on the GPU for it (cuda_async.c).
 */
#include "lib/cuda/cuda.h"

#include "lib/core/comm.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cuda/kernels.h"

#include <cuda_runtime_api.h>

static tutti_result_t dev_fail(struct tutti_comm *c, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return tt_fail(c, TUTTI_ERR_SYSTEM, "device path: %s: %s", what, cudaGetErrorString(e));
}

void tt_cuda_self(struct tutti_comm *c, struct tt_rank_info *me)
{
    int dev = 0;

    me->cuda_bus[0] = '\0';
    c->cuda.dev = -1;
    if (!tt_env_flag("TUTTI_CUDA_P2P") || !tt_cuda_ready())
        return;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(me->cuda_bus, (int)sizeof(me->cuda_bus), dev) != cudaSuccess) {
        (void)cudaGetLastError();
        me->cuda_bus[0] = '\0';
        return;
    }
    c->cuda.dev = dev;
}

/* Can this rank's device reach the device with PCI bus id `bus`? */
static int reaches(int dev, const char *bus, const char *mine)
{
    int other, can = 0;

    if (strcmp(bus, mine) == 0)
        return 1;
    if (cudaDeviceGetByPCIBusId(&other, bus) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&can, dev, other) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return can;
}

tutti_result_t tt_cuda_dev_setup(struct tutti_comm *c)
{
    const char *mine = c->peers[c->rank].cuda_bus;
    unsigned char *ok;
    int all = c->topo.nnodes == 1, agree = 1, shared = 0;

    c->cuda.dev_path = 0;
    for (int r = 0; r < c->nranks && all; r++)
        all = c->peers[r].cuda_bus[0] != '\0';
    if (!all) /* the same answer on every rank: no more to say */
        return TUTTI_SUCCESS;
    ok = calloc((size_t)c->nranks, 1);
    if (!ok)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for a communicator");
    ok[c->rank] = 1;
    for (int r = 0; r < c->nranks; r++)
        if (!reaches(c->cuda.dev, c->peers[r].cuda_bus, mine)) {
            ok[c->rank] = 0;
            TT_INFO(TT_SUB_INIT,
                    "rank %d: device %s cannot reach rank %d's device %s: device buffers are "
                    "staged through the host",
                    c->rank, mine, r, c->peers[r].cuda_bus);
            break;
        }
    tutti_result_t rc = tt_boot_allgather(c->boot, ok, 1);
    for (int r = 0; r < c->nranks && rc == TUTTI_SUCCESS; r++)
        agree &= ok[r];
    free(ok);
    if (rc != TUTTI_SUCCESS)
        return rc;
    c->cuda.dev_path = agree;
    /* TUTTI_CUDA_P2P_MIN=auto: see tt_cuda_read_config. */
    for (int r = 0; r < c->nranks && !shared; r++)
        for (int q = r + 1; q < c->nranks && !shared; q++)
            shared = strcmp(c->peers[r].cuda_bus, c->peers[q].cuda_bus) == 0;
    if (c->cuda.min_auto)
        c->cuda.min_bytes = shared ? (size_t)4 << 20 : 0;
    return TUTTI_SUCCESS;
}

/* Is p on the communicator's device (managed memory goes anywhere)? */
static tutti_result_t on_our_device(struct tutti_comm *c, const char *fn, const void *p,
                                    const char *arg)
{
    struct cudaPointerAttributes a;

    if (!p)
        return TUTTI_SUCCESS;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return TUTTI_SUCCESS;
    }
    if (a.type == cudaMemoryTypeDevice && a.device != c->cuda.dev)
        return tt_fail(c, TUTTI_ERR_INVALID_ARG,
                       "%s: %s is on CUDA device %d, but this rank's communicator was created "
                       "with device %d current: pass buffers on that device",
                       fn, arg, a.device, c->cuda.dev);
    return TUTTI_SUCCESS;
}

int tt_cuda_dev_use(const struct tutti_comm *c, const struct tt_call *call)
{
    size_t bytes = call->count * tutti_dtype_size(call->dtype);

    if (call->coll == TT_COLL_ALL_GATHER || call->coll == TT_COLL_REDUCE_SCATTER)
        bytes *= (size_t)c->nranks;
    return c->cuda.dev_path && call->device && bytes >= c->cuda.min_bytes;
}

tutti_result_t tt_cuda_dev_check(struct tutti_comm *c, const struct tt_call *call)
{
    if (!tt_cuda_dev_use(c, call))
        return TUTTI_SUCCESS;
    TT_CHECK(on_our_device(c, call->fn, call->sendbuf, "sendbuf"));
    return on_our_device(c, call->fn, call->recvbuf, "recvbuf");
}

/* Point-to-point: a message on device memory to another rank, of at least
 * TUTTI_CUDA_P2P_MIN bytes (both ends count the same bytes, so both decide alike when both
 * pass device memory). */
int tt_cuda_dev_p2p(const struct tutti_comm *c, const struct tt_p2p_op *op)
{
    return c->cuda.dev_path && op->device && op->bytes > 0 && op->peer != c->rank &&
           op->bytes >= c->cuda.min_bytes;
}

tutti_result_t tt_cuda_dev_check_p2p(struct tutti_comm *c, const char *fn,
                                     const struct tt_p2p_op *op)
{
    if (!tt_cuda_dev_p2p(c, op))
        return TUTTI_SUCCESS;
    return on_our_device(c, fn, op->buf, op->is_send ? "sendbuf" : "recvbuf");
}

static tutti_result_t dev_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    struct tutti_comm *c = ctx;
    cudaError_t e =
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)c->cuda.stream);
    return e == cudaSuccess ? TUTTI_SUCCESS : dev_fail(c, "cudaMemcpyAsync", e);
}

static tutti_result_t dev_reduce(void *ctx, void *dst, void *dst2, const void *a, const void *b,
                                 size_t n, tutti_dtype_t dtype, tutti_op_t op, int divisor)
{
    struct tutti_comm *c = ctx;
    int e = tt_cuda_reduce_copy(dst, dst2, a, b, n, dtype, op, divisor, c->cuda.stream);
    return e == 0 ? TUTTI_SUCCESS : dev_fail(c, "launching a reduction kernel", (cudaError_t)e);
}

static tutti_result_t dev_divide(void *ctx, void *buf, size_t n, tutti_dtype_t dtype, int divisor)
{
    struct tutti_comm *c = ctx;
    int e = tt_cuda_divide(buf, n, dtype, divisor, c->cuda.stream);
    return e == 0 ? TUTTI_SUCCESS : dev_fail(c, "launching the division kernel", (cudaError_t)e);
}

static tutti_result_t dev_scale(void *ctx, void *dst, const void *src, size_t n,
                                tutti_dtype_t dtype, const void *value, const void *dev)
{
    struct tutti_comm *c = ctx;
    int e = tt_cuda_premul(dst, src, n, dtype, value, dev, c->cuda.stream);
    return e == 0 ? TUTTI_SUCCESS : dev_fail(c, "launching the premul-sum kernel", (cudaError_t)e);
}

/*
 * At init: the stream, an event, every kernel loaded, and the runner of wrapped-stream calls
 * (cuda_async.c). CUDA loads kernels lazily, at their first launch, and loading waits for the
 * whole context: a first launch from a collective that a user's stream is held for would
 * wait for itself (seen on an H200, when a host function held the stream: two ranks stuck in
 * their first reduction; a GPU-side wait holds it the same way). So each kernel runs once
 * here, on one element of scratch memory.
 */
tutti_result_t tt_cuda_dev_prepare(struct tutti_comm *c)
{
    cudaStream_t s;
    cudaEvent_t ev;
    void *scratch = NULL;
    static const unsigned char zero[8];
    cudaError_t e = cudaSetDevice(c->cuda.dev);

    if (e != cudaSuccess)
        return dev_fail(c, "selecting the device", e);
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return dev_fail(c, "creating the communicator's CUDA stream", e);
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        cudaStreamDestroy(s);
        return dev_fail(c, "creating a CUDA event", e);
    }
    c->cuda.stream = s;
    c->cuda.event = ev;
    c->cuda.mover = (struct tt_mover){
        .copy = dev_copy, .reduce = dev_reduce, .divide = dev_divide, .scale = dev_scale, .ctx = c};
    e = cudaMalloc(&scratch, 64);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(scratch, 0, 64, s);
    for (int t = 0; t < TUTTI_NUM_DTYPES && e == cudaSuccess; t++) {
        for (int op = 0; op < TUTTI_NUM_OPS && e == cudaSuccess; op++)
            e = (cudaError_t)tt_cuda_reduce_copy(scratch, NULL, scratch, scratch, 1,
                                                 (tutti_dtype_t)t, (tutti_op_t)op, 0, s);
        if (e == cudaSuccess)
            e = (cudaError_t)tt_cuda_divide(scratch, 1, (tutti_dtype_t)t, 1, s);
        if (e == cudaSuccess) /* both forms of the scalar: by value, by address */
            e = (cudaError_t)tt_cuda_premul(scratch, scratch, 1, (tutti_dtype_t)t, zero, NULL, s);
        if (e == cudaSuccess)
            e = (cudaError_t)tt_cuda_premul(scratch, scratch, 1, (tutti_dtype_t)t, NULL, scratch,
                                            s);
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    if (scratch)
        cudaFree(scratch);
    if (e != cudaSuccess)
        return dev_fail(c, "loading the reduction kernels", e);
    TT_CHECK(tt_cuda_async_prepare(c));
    if (c->rank == 0) /* the p2p connections follow (comm_init.c); init fails if they cannot */
        TT_INFO(TT_SUB_INIT,
                "device path: %d rank(s) on one host, device buffers move GPU to GPU over p2p "
                "(CUDA IPC) from %zu bytes, %d x %zu-byte device slots per connection",
                c->nranks, c->cuda.min_bytes, c->nslots, c->cuda.slot_bytes);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_cuda_dev_begin(struct tutti_comm *c, void *after, int *prev_dev)
{
    cudaError_t e = cudaGetDevice(prev_dev);

    if (e == cudaSuccess && *prev_dev != c->cuda.dev)
        e = cudaSetDevice(c->cuda.dev);
    if (e != cudaSuccess)
        return dev_fail(c, "selecting the communicator's device", e);
    /* What the caller queued before the call comes first: on its CUDA stream (an event
     * recorded there when the call was made), or on the default stream. */
    if (!after) {
        after = c->cuda.event;
        e = cudaEventRecord((cudaEvent_t)after, cudaStreamLegacy);
    }
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent((cudaStream_t)c->cuda.stream, (cudaEvent_t)after, 0);
    return e == cudaSuccess ? TUTTI_SUCCESS : dev_fail(c, "ordering after the caller's stream", e);
}

tutti_result_t tt_cuda_dev_end(struct tutti_comm *c, int prev_dev)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->cuda.stream);

    if (prev_dev != c->cuda.dev)
        cudaSetDevice(prev_dev);
    return e == cudaSuccess ? TUTTI_SUCCESS : dev_fail(c, "waiting for the device", e);
}

void tt_cuda_dev_free(struct tutti_comm *c)
{
    tt_cuda_async_free(c);
    if (c->cuda.event)
        cudaEventDestroy((cudaEvent_t)c->cuda.event);
    if (c->cuda.stream)
        cudaStreamDestroy((cudaStream_t)c->cuda.stream);
    c->cuda.event = c->cuda.stream = NULL;
    (void)cudaGetLastError();
}
