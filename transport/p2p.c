/*
 * p2p.c -- CUDA peer transport between processes of one host: device buffers move GPU to GPU
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
 * published when it is made: send_commit records a CUDA event behind the copy that filled
 * the slot, and the slot is published (tail advanced) once the event has completed; likewise
 * recv_release records an event behind the kernel or copy that read the slot, and `head`
 * advances once it has completed. progress() and flush() publish whatever has completed;
 * flush() reports TUTTI_IN_PROGRESS while anything is unpublished, on both sides, so the
 * executor keeps such connections in its flush list (exec.c, device movers) and an operation
 * ends only once its peers can see all of it.
 */
#include "transport.h"

#include "../lib/error.h"
#include "../lib/log.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define P2P_MAGIC 0x74747032u /* "ttp2" */

struct p2p_ctrl {
    _Alignas(64) _Atomic uint64_t tail; /* slots filled and published by the sender */
    uint64_t bytes[TT_MAX_SLOTS];       /* byte count of each slot's message */
    _Alignas(64) _Atomic uint64_t head; /* slots freed by the receiver */
    _Alignas(64) _Atomic uint32_t failed;
    _Atomic uint32_t attached;
    uint32_t magic;
    uint32_t nslots;
    uint64_t slot_bytes;
};

struct p2p_blob {
    char name[96];
    cudaIpcMemHandle_t mem;
    uint64_t raw; /* the slots' address, for a sender in the same process (no IPC there) */
    uint32_t nslots;
    uint64_t slot_bytes;
};

struct p2p_conn {
    struct tt_conn base;
    struct p2p_ctrl *ctrl;
    char *slots; /* device memory: our allocation (receiver) or the mapped peer's (sender) */
    int owner;   /* the receiver */
    int mapped;  /* sender: slots opened through CUDA IPC (closed at the end) */
    int32_t peer_pid;
    uint32_t nslots;
    cudaStream_t stream;
    cudaEvent_t ev[TT_MAX_SLOTS]; /* one per slot: its fill (sender) or its use (receiver) */
    size_t pend_bytes[TT_MAX_SLOTS];
    uint64_t pos;    /* slots committed (sender) or released (receiver) here */
    uint64_t pub;    /* of those, published to the peer */
    uint64_t cached; /* sender: last value read of head */
    char name[96];
};

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
    rc = tt_shm_map(b.name, 1, sizeof(struct p2p_ctrl), &map);
    if (rc != TUTTI_SUCCESS) {
        conn_free(c);
        return rc;
    }
    c->ctrl = map;
    memset(c->ctrl, 0, sizeof(*c->ctrl));
    c->ctrl->nslots = b.nslots;
    c->ctrl->slot_bytes = b.slot_bytes;
    c->ctrl->magic = P2P_MAGIC;
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
    b.raw = (uint64_t)(uintptr_t)c->slots;
    memcpy(blob, &b, sizeof(b));
    *blob_len = sizeof(b);
    *conn = &c->base;
    TT_TRACE(TT_SUB_SHM, "p2p: %u x %zu bytes of device memory to receive from rank %d", b.nslots,
             (size_t)b.slot_bytes, peer);
    return TUTTI_SUCCESS;
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
    rc = tt_shm_map(b.name, 0, sizeof(struct p2p_ctrl), &map);
    if (rc != TUTTI_SUCCESS) {
        conn_free(c);
        return rc;
    }
    tt_shm_unlink(b.name);
    c->ctrl = map;
    if (c->ctrl->magic != P2P_MAGIC || c->ctrl->nslots != b.nslots) {
        conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "p2p: segment %s from rank %d is not ours", b.name,
                       peer);
    }
    if (peer == ctx->rank) { /* ourselves: CUDA IPC opens no handle of its own process */
        c->slots = (char *)(uintptr_t)b.raw;
        e = cudaSuccess;
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
    atomic_store(&c->ctrl->attached, 1);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

/* Publish, in order, what the stream has finished: filled slots (sender), freed ones
 * (receiver). */
static tutti_result_t publish(struct p2p_conn *c)
{
    while (c->pub < c->pos) {
        uint32_t k = (uint32_t)(c->pub % c->nslots);
        cudaError_t e = cudaEventQuery(c->ev[k]);
        if (e == cudaErrorNotReady) {
            (void)cudaGetLastError();
            break;
        }
        if (e != cudaSuccess)
            return cuda_fail(c, c->owner ? "the use of a received slot" : "filling a slot", e);
        c->pub++;
        if (c->owner) {
            atomic_store_explicit(&c->ctrl->head, c->pub, memory_order_release);
        } else {
            c->ctrl->bytes[k] = c->pend_bytes[k];
            atomic_store_explicit(&c->ctrl->tail, c->pub, memory_order_release);
        }
    }
    return TUTTI_SUCCESS;
}

static tutti_result_t p2p_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    (void)bytes;
    if (c->pos - c->cached >= c->nslots) {
        c->cached = atomic_load_explicit(&c->ctrl->head, memory_order_acquire);
        if (c->pos - c->cached >= c->nslots) {
            if (atomic_load_explicit(&c->ctrl->failed, memory_order_acquire))
                return gave_up(c);
            return TUTTI_IN_PROGRESS;
        }
    }
    *slot = c->slots + (size_t)(c->pos % c->nslots) * c->base.slot_bytes;
    return TUTTI_SUCCESS;
}

static tutti_result_t p2p_send_commit(struct tt_conn *conn, size_t bytes)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    uint32_t k = (uint32_t)(c->pos % c->nslots);
    cudaError_t e = cudaEventRecord(c->ev[k], c->stream);

    if (e != cudaSuccess)
        return cuda_fail(c, "cudaEventRecord after filling a slot", e);
    c->pend_bytes[k] = bytes;
    c->pos++;
    return publish(c);
}

static tutti_result_t p2p_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    if (atomic_load_explicit(&c->ctrl->tail, memory_order_acquire) <= c->pos) {
        if (atomic_load_explicit(&c->ctrl->failed, memory_order_acquire))
            return gave_up(c);
        return TUTTI_IN_PROGRESS;
    }
    *bytes = c->ctrl->bytes[c->pos % c->nslots];
    *slot = c->slots + (size_t)(c->pos % c->nslots) * c->base.slot_bytes;
    return TUTTI_SUCCESS;
}

static tutti_result_t p2p_recv_release(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    cudaError_t e = cudaEventRecord(c->ev[c->pos % c->nslots], c->stream);

    if (e != cudaSuccess)
        return cuda_fail(c, "cudaEventRecord after using a slot", e);
    c->pos++;
    return publish(c);
}

static tutti_result_t p2p_progress(struct tt_conn *conn)
{
    return publish((struct p2p_conn *)conn);
}

static tutti_result_t p2p_flush(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;
    tutti_result_t rc = publish(c);

    if (rc != TUTTI_SUCCESS)
        return rc;
    return c->pub == c->pos ? TUTTI_SUCCESS : TUTTI_IN_PROGRESS;
}

/* The GPU, not a peer, is usually what we wait for: a short sleep, never a long one. */
static void p2p_wait(struct tt_conn *conn, long ns)
{
    tt_transport_sleep(conn, ns < 20000 ? ns : 20000);
}

static tutti_result_t p2p_alive(struct tt_conn *conn)
{
    struct p2p_conn *c = (struct p2p_conn *)conn;

    if (c->peer_pid > 0 && kill(c->peer_pid, 0) != 0 && errno == ESRCH)
        return tt_fail(NULL, TUTTI_ERR_REMOTE, "p2p: rank %d (pid %d) has died", c->base.peer,
                       (int)c->peer_pid);
    return TUTTI_SUCCESS;
}

static void p2p_fail(struct tt_conn *conn)
{
    atomic_store_explicit(&((struct p2p_conn *)conn)->ctrl->failed, 1, memory_order_release);
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
