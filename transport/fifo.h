/*
 * fifo.h -- single-producer single-consumer ring of slots, the core of the shm and mem
 * transports.
 *
 * Layout (one allocation or shared segment): a control block, then nslots slots of
 * slot_bytes each. The sender owns `head` and `sizes`, the receiver owns `tail`; each side
 * reads the other's counter with acquire and writes its own with release, so a slot's
 * bytes are visible before its count. Each side keeps a cached copy of the other's counter
 * and only rereads it when the cached value says "full" or "empty".
 */
#ifndef TT_FIFO_H
#define TT_FIFO_H

#include "transport.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TT_FIFO_MAGIC 0x74746666u /* "ttff" */
#define TT_FIFO_MAX_SLOTS TT_MAX_SLOTS
#define TT_FIFO_DATA_OFFSET 4096

struct tt_fifo_ctrl {
    _Alignas(64) _Atomic uint64_t head; /* slots committed by the sender */
    _Alignas(64) _Atomic uint64_t tail; /* slots released by the receiver */
    _Alignas(64) uint32_t magic;
    uint32_t nslots;
    uint64_t slot_bytes;
    _Atomic uint32_t sender_attached;
    uint64_t sizes[TT_FIFO_MAX_SLOTS];
};

_Static_assert(sizeof(struct tt_fifo_ctrl) <= TT_FIFO_DATA_OFFSET, "fifo control block too big");

/* One side's view. */
struct tt_fifo {
    struct tt_fifo_ctrl *ctrl;
    char *data;
    uint32_t nslots;
    size_t slot_bytes;
    uint64_t pos;    /* own counter: head for the sender, tail for the receiver */
    uint64_t cached; /* last value read of the other side's counter */
};

static inline size_t tt_fifo_bytes(uint32_t nslots, size_t slot_bytes)
{
    return TT_FIFO_DATA_OFFSET + (size_t)nslots * slot_bytes;
}

/* Initialise a fresh region (receiver side). */
static inline void tt_fifo_format(void *region, uint32_t nslots, size_t slot_bytes)
{
    struct tt_fifo_ctrl *c = region;

    atomic_init(&c->head, 0);
    atomic_init(&c->tail, 0);
    atomic_init(&c->sender_attached, 0);
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->magic = TT_FIFO_MAGIC;
}

static inline void tt_fifo_view(struct tt_fifo *f, void *region)
{
    f->ctrl = region;
    f->data = (char *)region + TT_FIFO_DATA_OFFSET;
    f->nslots = f->ctrl->nslots;
    f->slot_bytes = f->ctrl->slot_bytes;
    f->pos = 0;
    f->cached = 0;
}

static inline void *tt_fifo_send_slot(struct tt_fifo *f)
{
    if (f->pos - f->cached >= f->nslots) {
        f->cached = atomic_load_explicit(&f->ctrl->tail, memory_order_acquire);
        if (f->pos - f->cached >= f->nslots)
            return NULL;
    }
    return f->data + (f->pos % f->nslots) * f->slot_bytes;
}

static inline void tt_fifo_send_commit(struct tt_fifo *f, size_t bytes)
{
    f->ctrl->sizes[f->pos % f->nslots] = bytes;
    f->pos++;
    atomic_store_explicit(&f->ctrl->head, f->pos, memory_order_release);
}

static inline const void *tt_fifo_recv_peek(struct tt_fifo *f, size_t *bytes)
{
    if (f->pos == f->cached) {
        f->cached = atomic_load_explicit(&f->ctrl->head, memory_order_acquire);
        if (f->pos == f->cached)
            return NULL;
    }
    *bytes = f->ctrl->sizes[f->pos % f->nslots];
    return f->data + (f->pos % f->nslots) * f->slot_bytes;
}

static inline void tt_fifo_recv_release(struct tt_fifo *f)
{
    f->pos++;
    atomic_store_explicit(&f->ctrl->tail, f->pos, memory_order_release);
}

#endif
