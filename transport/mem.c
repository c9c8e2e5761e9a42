/*
 * mem.c -- in-process transport: the FIFO lives in ordinary memory and the blob carries its
 * address. Used by the schedule simulator, which runs every rank's plan in one process.
 * The receiver's connection owns the memory; close the sender's side first.
 */
#include "transport/fifo.h"
#include "transport/transport.h"

#include "lib/base/error.h"

#include <stdlib.h>
#include <string.h>

struct mem_conn {
    struct tt_conn base;
    struct tt_fifo fifo;
    void *region;         /* owned by the receiver's side */
    uint64_t last_remote; /* sender: ticket of the last message sent by address */
};

static struct mem_conn *mem_new(int peer, int channel, size_t slot_bytes)
{
    struct mem_conn *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->base.tp = &tt_transport_mem;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = slot_bytes;
    return c;
}

static tutti_result_t mem_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                     void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct mem_conn *c = mem_new(peer, channel, ctx->slot_bytes);

    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "mem: out of memory");
    c->region = aligned_alloc(64, tt_fifo_bytes((uint32_t)ctx->nslots, ctx->slot_bytes));
    if (!c->region) {
        free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "mem: out of memory");
    }
    memset(c->region, 0, tt_fifo_bytes((uint32_t)ctx->nslots, ctx->slot_bytes));
    tt_fifo_format(c->region, (uint32_t)ctx->nslots, ctx->slot_bytes, ctx->sleepy);
    tt_fifo_view(&c->fifo, c->region);
    memcpy(blob, &c->region, sizeof(c->region));
    *blob_len = sizeof(c->region);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

static tutti_result_t mem_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                       const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct mem_conn *c = mem_new(peer, channel, ctx->slot_bytes);
    void *region;

    if (!c || blob_len != sizeof(region)) {
        free(c);
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "mem: bad connection blob");
    }
    memcpy(&region, blob, sizeof(region));
    tt_fifo_view(&c->fifo, region);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

static tutti_result_t mem_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct tt_fifo *f = &((struct mem_conn *)conn)->fifo;

    *slot = tt_fifo_send_slot(f, bytes);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_fifo_failed(f) ? tt_fail(NULL, TUTTI_ERR_REMOTE, "mem: the peer gave up")
                             : TUTTI_IN_PROGRESS;
}

static tutti_result_t mem_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    tt_fifo_send_commit(&((struct mem_conn *)conn)->fifo, bytes, tag);
    return TUTTI_SUCCESS;
}

static tutti_result_t mem_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                    uint32_t *tag)
{
    struct tt_fifo *f = &((struct mem_conn *)conn)->fifo;

    *slot = tt_fifo_recv_peek(f, bytes, tag);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_fifo_failed(f) ? tt_fail(NULL, TUTTI_ERR_REMOTE, "mem: the peer gave up")
                             : TUTTI_IN_PROGRESS;
}

static tutti_result_t mem_recv_release(struct tt_conn *conn)
{
    tt_fifo_recv_release(&((struct mem_conn *)conn)->fifo);
    return TUTTI_SUCCESS;
}

/* Single copy (transport.h): within one process the receiver reads the sender's bytes where
 * they lie. Messages that take a data slot go by address (at any size, so the schedule
 * simulator runs the executor's single-copy walk at its small sizes). */
static tutti_result_t mem_send_commit_from(struct tt_conn *conn, const void *src, size_t bytes,
                                           uint32_t tag, struct tt_memreg *reg, uint64_t *ticket)
{
    struct tt_fifo *f = &((struct mem_conn *)conn)->fifo;

    (void)reg;
    /* Every third message is refused, as shm refuses before its probe: the simulator then
     * runs mixes of whole sends and chunks. */
    if (f->pos % 3 == 2 || !tt_fifo_remote_fits(f, bytes))
        return TUTTI_ERR_UNSUPPORTED;
    *ticket = ((struct mem_conn *)conn)->last_remote =
        tt_fifo_send_commit_remote(f, src, bytes, tag);
    return TUTTI_SUCCESS;
}

static int mem_sent(struct tt_conn *conn, uint64_t ticket)
{
    struct tt_fifo *f = &((struct mem_conn *)conn)->fifo;

    return atomic_load_explicit(&f->ctrl->tail, memory_order_acquire) >= ticket;
}

/* Sender: done once the receiver has copied every message sent by address. */
static tutti_result_t mem_flush(struct tt_conn *conn)
{
    struct mem_conn *c = (struct mem_conn *)conn;

    if (mem_sent(conn, c->last_remote))
        return TUTTI_SUCCESS;
    return tt_fifo_failed(&c->fifo) ? tt_fail(NULL, TUTTI_ERR_REMOTE, "mem: the peer gave up")
                                    : TUTTI_IN_PROGRESS;
}

static int mem_recv_remote(struct tt_conn *conn)
{
    return tt_fifo_recv_remote(&((struct mem_conn *)conn)->fifo) != 0;
}

static tutti_result_t mem_recv_pull(struct tt_conn *conn, void *dst, size_t bytes)
{
    struct tt_fifo *f = &((struct mem_conn *)conn)->fifo;

    /* A sender that gave up may have freed its buffer: not even a copy of it (in-process). */
    if (!tt_fifo_failed(f)) {
        memcpy(dst, (const void *)(uintptr_t)tt_fifo_recv_remote(f), bytes);
        if (tt_fifo_pulled(f))
            return TUTTI_SUCCESS;
    }
    return tt_fail(NULL, TUTTI_ERR_REMOTE, "mem: the peer gave up");
}

static void mem_fail(struct tt_conn *conn)
{
    tt_fifo_fail(&((struct mem_conn *)conn)->fifo);
}

static void mem_close(struct tt_conn *conn)
{
    struct mem_conn *c = (struct mem_conn *)conn;

    if (!c)
        return;
    free(c->region);
    free(c);
}

const struct tt_transport tt_transport_mem = {
    .size = sizeof(struct tt_transport),
    .name = "mem",
    .recv_setup = mem_recv_setup,
    .send_connect = mem_send_connect,
    .finish = tt_transport_no_finish,
    .send_slot = mem_send_slot,
    .send_commit = mem_send_commit,
    .flush = mem_flush,
    .recv_peek = mem_recv_peek,
    .recv_release = mem_recv_release,
    .progress = tt_transport_no_progress,
    .wait = tt_transport_sleep,
    .alive = tt_transport_no_alive,
    .fail = mem_fail,
    .close = mem_close,
    .send_commit_from = mem_send_commit_from,
    .sent = mem_sent,
    .recv_remote = mem_recv_remote,
    .recv_pull = mem_recv_pull,
    .by_address = 1,
};
