/*
 * cuda_ipc.c -- CUDA peer transport between processes of one host: device buffers move GPU to GPU
 * (the copy engine or a reduction kernel writes straight into the receiver's device memory),
 * never through the host.
 *
 * The receiver allocates its slots in device memory (cudaMalloc, on its current device) and
 * exports them with a CUDA IPC handle; the sender opens the handle and so sees the slots as
 * device pointers of its own. Several ranks may share one GPU (IPC within a device works the
 * same way). The control words -- how many slots the sender has filled (`tail`, with each
 * slot's byte count) and how many the receiver has freed (`head`) -- live in a small POSIX
 * shared-memory segment, named and unlinked as in shm.c.
 *
 * Every copy and kernel of a communicator's device path is queued on one CUDA stream (the
 * transport context's cuda_stream), in the executor's order. A commit therefore cannot be
 * published when it is made: the queue protocol is dfifo.h's, with a CUDA event recorded
 * behind the work that filled (sender) or used (receiver) a slot as its mark; a slot is
 * published once its event has completed. progress() and flush() publish whatever has completed;
 * flush() reports TUTTI_IN_PROGRESS while anything is unpublished, on both sides, so the
 * executor keeps such connections in its flush list (exec.c, device movers) and an operation
 * ends only once its peers can see all of it.
 */
#include "transport/dfifo.h"
#include "transport/transport.h"

#include "lib/base/error.h"
#include "lib/base/log.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct p2p_blob {
    char name[96];
    cudaIpcMemHandle_t mem;
    uint64_t raw; /* the slots' address, for a sender in the same process (no IPC there) */
    uint32_t nslots;
    uint64_t slot_bytes;
};

struct p2p_conn {
    struct tt_conn base;
    struct tt_dfifo f; /* slots: device memory, ours (receiver) or the mapped peer's */
    struct tt_dfifo_ctrl *ctrl;
    char *slots;
    int owner;  /* the receiver */
    int mapped; /* sender: slots opened through CUDA IPC (closed at the end) */
    int32_t peer_pid;
    uint32_t nslots;
    cudaStream_t stream;
    cudaEvent_t ev[TT_MAX_SLOTS]; /* one per slot: its fill (sender) or its use (receiver) */
    cudaError_t err;              /* the CUDA error behind a failed mark or poll */
    char name[96];
};

/* dfifo marks: a CUDA event behind the work queued so far on the stream. */
static int ev_mark(void *arg, uint32_t k)
{
    struct p2p_conn *c = arg;
    c->err = cudaEventRecord(c->ev[k], c->stream);
    return c->err == cudaSuccess ? 0 : -1;
}

static int ev_passed(void *arg, uint32_t k)
{
    struct p2p_conn *c = arg;
    cudaError_t e = cudaEventQuery(c->ev[k]);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    c->err = e;
    return e == cudaSuccess ? 1 : -1;
}

/* The dfifo view, once ctrl and slots are known. */
static void attach(struct p2p_conn *c)
{
    tt_dfifo_view(&c->f, c->ctrl, c->slots, c->owner);
    c->f.mark = ev_mark;
    c->f.passed = ev_passed;
    c->f.arg = c;
}

static tutti_result_t gave_up(struct p2p_conn *c)
{
    return tt_fail(NULL, TUTTI_ERR_REMOTE,
                   "p2p: rank %d gave up on the connection (it failed or was aborted)",
                   c->base.peer);
}

static tutti_result_t cuda_fail(struct p2p_conn *c, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return tt_fail(NULL, TUTTI_ERR_SYSTEM, "p2p: %s (rank %d, channel %d): %s", what, c->base.peer,
                   c->base.channel, cudaGetErrorString(e));
}

static struct p2p_conn *conn_new(const struct tt_transport_ctx *ctx, int peer, int channel,
                                 uint32_t nslots, size_t slot_bytes)
{
    struct p2p_conn *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->base.tp = &tt_transport_p2p;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = slot_bytes;
    c->nslots = nslots;
    c->stream = (cudaStream_t)ctx->cuda_stream;
    c->peer_pid = ctx->pids ? ctx->pids[peer] : 0;
    for (uint32_t i = 0; i < nslots; i++)
        if (cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming) != cudaSuccess) {
            for (uint32_t j = 0; j < i; j++)
                cudaEventDestroy(c->ev[j]);
            (void)cudaGetLastError();
            free(c);
            return NULL;
        }
    return c;
}

static void conn_free(struct p2p_conn *c)
{
    for (uint32_t i = 0; i < c->nslots; i++)
        cudaEventDestroy(c->ev[i]);
    if (c->ctrl)
        munmap(c->ctrl, sizeof(*c->ctrl));
    free(c);
}

static tutti_result_t p2p_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                     void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct p2p_blob b;
    struct p2p_conn *c;
    cudaError_t e;
    tutti_result_t rc;
    void *map;

    memset(&b, 0, sizeof(b));
    snprintf(b.name, sizeof(b.name), "/tutti-%s-%d-%d-%dg", ctx->job_tag, ctx->rank, peer, channel);
    b.nslots = (uint32_t)ctx->nslots;
    b.slot_bytes = ctx->slot_bytes;
    c = conn_new(ctx, peer, channel, b.nslots, b.slot_bytes);
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "p2p: out of memory or CUDA events for rank %d",
                       peer);
    rc = tt_shm_map(b.name, 1, sizeof(struct tt_dfifo_ctrl), &map);
    if (rc != TUTTI_SUCCESS) {
        conn_free(c);
        return rc;
    }
    c->ctrl = map;
    tt_dfifo_format(c->ctrl, b.nslots, b.slot_bytes);
    c->owner = 1;
    memcpy(c->name, b.name, sizeof(c->name));
    e = cudaMalloc((void **)&c->slots, (size_t)b.nslots * b.slot_bytes);
    if (e == cudaSuccess)
        e = cudaIpcGetMemHandle(&b.mem, c->slots);
    if (e != cudaSuccess) {
        rc = cuda_fail(c, "allocating and exporting the receive slots", e);
        if (c->slots)
            cudaFree(c->slots);
        tt_shm_unlink(c->name);
        conn_free(c);
        return rc;
    }
    attach(c);
    b.raw = (uint64_t)(uintptr_t)c->slots;
    memcpy(blob, &b, sizeof(b));
    *blob_len = sizeof(b);
    *conn = &c->base;
    TT_TRACE(TT_SUB_SHM, "p2p: %u x %zu bytes of device memory to receive from rank %d", b.nslots,
             (size_t)b.slot_bytes, peer);
    return TUTTI_SUCCESS;
}

/* Slots of a rank of this process on another device: enable peer access to that device. */
static cudaError_t same_process_access(const void *slots)
{
    struct cudaPointerAttributes a;
    int mine;
    cudaError_t e = cudaPointerGetAttributes(&a, slots);

    if (e == cudaSuccess)
        e = cudaGetDevice(&mine);
    if (e != cudaSuccess || a.device == mine)
        return e;
    e = cudaDeviceEnablePeerAccess(a.device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        e = cudaSuccess;
    }
    return e;
}

static tutti_result_t p2p_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                       const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct p2p_blob b;
    struct p2p_conn *c;
    cudaError_t e;
    tutti_result_t rc;
    void *map;

    if (blob_len != sizeof(b))
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "p2p: connection blob from rank %d has %zu bytes",
                       peer, blob_len);
    memcpy(&b, blob, sizeof(b));
    b.name[sizeof(b.name) - 1] = '\0';
    if (b.nslots == 0 || b.nslots > TT_MAX_SLOTS || b.slot_bytes == 0)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "p2p: bad slot shape from rank %d", peer);
    c = conn_new(ctx, peer, channel, b.nslots, b.slot_bytes);
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "p2p: out of memory or CUDA events for rank %d",
                       peer);
    rc = tt_shm_map(b.name, 0, sizeof(struct tt_dfifo_ctrl), &map);
    if (rc != TUTTI_SUCCESS) {
        conn_free(c);
        return rc;
    }
    tt_shm_unlink(b.name);
    c->ctrl = map;
    if (c->ctrl->magic != TT_DFIFO_MAGIC || c->ctrl->nslots != b.nslots) {
        conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "p2p: segment %s from rank %d is not ours", b.name,
                       peer);
    }
    if (peer == ctx->rank || c->peer_pid == (int32_t)getpid()) {
        /* ourselves, or a rank of this process: CUDA IPC opens no handle of its own process,
         * and one context addresses the slots directly (another device's through peer
         * access) */
        c->slots = (char *)(uintptr_t)b.raw;
        e = same_process_access(c->slots);
    } else {
        e = cudaIpcOpenMemHandle((void **)&c->slots, b.mem, cudaIpcMemLazyEnablePeerAccess);
        c->mapped = e == cudaSuccess;
    }
    if (e != cudaSuccess) {
        rc = cuda_fail(c,
                       "opening the receiver's device memory (cudaIpcOpenMemHandle; "
                       "TUTTI_CUDA_P2P=0 stages device buffers through the host instead)",
                       e);
        conn_free(c);
        return rc;
    }
    attach(c);
    atomic_store(&c->ctrl->attached, 1);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

static tutti_result_t dfifo_fail(struct p2p_conn *c)
{
    return cuda_fail(c, c->owner ? "the use of a received slot" : "filling a slot", c->err);
}

static tutti_result_t p2p_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    (void)bytes;
    *slot = tt_dfifo_send_slot(&c->f);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_dfifo_failed(&c->f) ? gave_up(c) : TUTTI_IN_PROGRESS;
}

static tutti_result_t p2p_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    return tt_dfifo_send_commit(&c->f, bytes, tag) == 0 ? TUTTI_SUCCESS : dfifo_fail(c);
}

static tutti_result_t p2p_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                    uint32_t *tag)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    *slot = tt_dfifo_recv_peek(&c->f, bytes, tag);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_dfifo_failed(&c->f) ? gave_up(c) : TUTTI_IN_PROGRESS;
}

static tutti_result_t p2p_recv_release(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    return tt_dfifo_recv_release(&c->f) == 0 ? TUTTI_SUCCESS : dfifo_fail(c);
}

static tutti_result_t p2p_progress(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    return tt_dfifo_publish(&c->f) == 0 ? TUTTI_SUCCESS : dfifo_fail(c);
}

static tutti_result_t p2p_flush(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    if (tt_dfifo_publish(&c->f) != 0)
        return dfifo_fail(c);
    return tt_dfifo_pending(&c->f) ? TUTTI_IN_PROGRESS : TUTTI_SUCCESS;
}

/* The GPU, not a peer, is usually what we wait for: a short sleep, never a long one. */
static void p2p_wait(struct tt_conn *conn, long ns)
{
    tt_transport_sleep(conn, ns < 20000 ? ns : 20000);
}

static tutti_result_t p2p_alive(struct tt_conn *conn)
{
    return tt_transport_pid_alive(conn, ((struct p2p_conn *)conn)->peer_pid);
}

static void p2p_fail(struct tt_conn *conn)
{
    tt_dfifo_fail(&((struct p2p_conn *)conn)->f);
}

static void p2p_close(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    if (!c)
        return;
    if (c->owner) {
        if (!atomic_load(&c->ctrl->attached))
            tt_shm_unlink(c->name);
        cudaFree(c->slots);
    } else if (c->mapped) {
        cudaIpcCloseMemHandle(c->slots);
    }
    (void)cudaGetLastError();
    conn_free(c);
}

const struct tt_transport tt_transport_p2p = {
    .size = sizeof(struct tt_transport),
    .name = "p2p",
    .recv_setup = p2p_recv_setup,
    .send_connect = p2p_send_connect,
    .finish = tt_transport_no_finish,
    .send_slot = p2p_send_slot,
    .send_commit = p2p_send_commit,
    .flush = p2p_flush,
    .recv_peek = p2p_recv_peek,
    .recv_release = p2p_recv_release,
    .progress = p2p_progress,
    .wait = p2p_wait,
    .alive = p2p_alive,
    .fail = p2p_fail,
    .close = p2p_close,
};
