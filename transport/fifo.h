/*
 * fifo.h -- single-producer single-consumer ring of slots, the core of the shm and mem
 * transports.
 *
 * Layout (one allocation or shared segment): a control block with one 64-byte cell per slot,
 * then nslots slots of slot_bytes each. A cell holds the slot's sequence number, its byte
 * count and, for payloads of up to TT_FIFO_INLINE bytes, the payload itself: the receiver
 * polls the cell it expects next, so a small message costs one cache-line transfer. The
 * sender writes the payload, then the cell's sequence number with release; the receiver
 * reads the sequence number with acquire. The receiver owns `tail` (slots released), which
 * the sender rereads only when its cached copy says the ring is full.
 */
#ifndef TT_FIFO_H
#define TT_FIFO_H

#include "transport.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TT_FIFO_MAGIC 0x74746666u /* "ttff" */
#define TT_FIFO_MAX_SLOTS TT_MAX_SLOTS
#define TT_FIFO_INLINE 48

struct tt_fifo_cell {
    _Atomic uint64_t seq; /* position + 1 once the slot is committed */
    uint64_t bytes;
    unsigned char data[TT_FIFO_INLINE];
};

struct tt_fifo_ctrl {
    _Alignas(64) _Atomic uint64_t tail; /* slots released by the receiver */
    _Alignas(64) uint32_t magic;
    uint32_t nslots;
    uint64_t slot_bytes;
    _Atomic uint32_t sender_attached;
    _Alignas(64) struct tt_fifo_cell cells[TT_FIFO_MAX_SLOTS];
};

#define TT_FIFO_DATA_OFFSET 8192
_Static_assert(sizeof(struct tt_fifo_cell) == 64, "a cell is one cache line");
_Static_assert(sizeof(struct tt_fifo_ctrl) <= TT_FIFO_DATA_OFFSET, "fifo control block too big");

/* One side's view. */
struct tt_fifo {
    struct tt_fifo_ctrl *ctrl;
    char *data;
    uint32_t nslots;
    size_t slot_bytes;
    uint64_t pos;    /* slots committed (sender) or released (receiver) */
    uint64_t cached; /* sender: last value read of tail */
};

static inline size_t tt_fifo_bytes(uint32_t nslots, size_t slot_bytes)
{
    return TT_FIFO_DATA_OFFSET + (size_t)nslots * slot_bytes;
}

/* Initialise a fresh region (receiver side). */
static inline void tt_fifo_format(void *region, uint32_t nslots, size_t slot_bytes)
{
    struct tt_fifo_ctrl *c = region;

    atomic_init(&c->tail, 0);
    atomic_init(&c->sender_attached, 0);
    for (uint32_t i = 0; i < TT_FIFO_MAX_SLOTS; i++)
        atomic_init(&c->cells[i].seq, 0);
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

/* Where the next `bytes` go, or NULL while the ring is full. */
static inline void *tt_fifo_send_slot(struct tt_fifo *f, size_t bytes)
{
    uint32_t idx = (uint32_t)(f->pos % f->nslots);

    if (f->pos - f->cached >= f->nslots) {
        f->cached = atomic_load_explicit(&f->ctrl->tail, memory_order_acquire);
        if (f->pos - f->cached >= f->nslots)
            return NULL;
    }
    if (bytes <= TT_FIFO_INLINE)
        return f->ctrl->cells[idx].data;
    return f->data + (size_t)idx * f->slot_bytes;
}

static inline void tt_fifo_send_commit(struct tt_fifo *f, size_t bytes)
{
    struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % f->nslots];

    c->bytes = bytes;
    f->pos++;
    atomic_store_explicit(&c->seq, f->pos, memory_order_release);
}

static inline const void *tt_fifo_recv_peek(struct tt_fifo *f, size_t *bytes)
{
    uint32_t idx = (uint32_t)(f->pos % f->nslots);
    struct tt_fifo_cell *c = &f->ctrl->cells[idx];

    if (atomic_load_explicit(&c->seq, memory_order_acquire) != f->pos + 1)
        return NULL;
    *bytes = c->bytes;
    if (c->bytes <= TT_FIFO_INLINE)
        return c->data;
    return f->data + (size_t)idx * f->slot_bytes;
}

static inline void tt_fifo_recv_release(struct tt_fifo *f)
{
    f->pos++;
    atomic_store_explicit(&f->ctrl->tail, f->pos, memory_order_release);
}

#endif
