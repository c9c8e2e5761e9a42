/*
 * dfifo.h -- a deferred single-producer single-consumer queue of slots: the core of the p2p
 * transport (cuda_ipc.c), kept apart from CUDA so the schedule simulator runs the same protocol
 * on the CPU (tests/unit/algorithms/sim.c).
 *
 * The slots belong to the receiver. Whatever fills a slot (sender) or uses one (receiver) is
 * work queued on some device, finished later: so a commit or a release does not publish at
 * once. Each side marks the slot's place in its queue of work (`mark`, e.g. a CUDA event
 * recorded behind the copy) and publishes it, in order, once that mark has been passed
 * (`passed`): the sender advances `tail` (with the slot's byte count), the receiver `head`.
 * Both sides hand out slots from their local count `pos`, ahead of what they have published
 * (`pub`); the sender reuses a slot only once `head` says the receiver's use of it is done.
 */
#ifndef TT_DFIFO_H
#define TT_DFIFO_H

#include "transport/transport.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TT_DFIFO_MAGIC 0x74746466u /* "ttdf" */

/* Shared by both sides (host memory both can reach). */
struct tt_dfifo_ctrl {
    _Alignas(64) _Atomic uint64_t tail; /* slots filled and published by the sender */
    uint64_t bytes[TT_MAX_SLOTS];       /* byte count of each slot's message */
    uint32_t tags[TT_MAX_SLOTS];        /* and its tag (transport.h) */
    _Alignas(64) _Atomic uint64_t head; /* slots freed by the receiver */
    _Alignas(64) _Atomic uint32_t failed;
    _Atomic uint32_t attached;
    uint32_t magic;
    uint32_t nslots;
    uint64_t slot_bytes;
};

/* One side's view. mark(arg, k) marks the work queued so far for slot k (0 or an error
 * code); passed(arg, k) says whether it has finished (1), not yet (0) or failed (< 0). */
struct tt_dfifo {
    struct tt_dfifo_ctrl *ctrl;
    char *slots;
    size_t slot_bytes;
    uint32_t nslots;
    int owner;       /* the receiver */
    uint64_t pos;    /* slots committed (sender) or released (receiver) here */
    uint64_t pub;    /* of those, published to the other side */
    uint64_t cached; /* sender: last value read of head */
    size_t pend_bytes[TT_MAX_SLOTS];
    uint32_t pend_tags[TT_MAX_SLOTS];
    int (*mark)(void *arg, uint32_t k);
    int (*passed)(void *arg, uint32_t k);
    void *arg;
};

static inline void tt_dfifo_format(struct tt_dfifo_ctrl *c, uint32_t nslots, size_t slot_bytes)
{
    atomic_init(&c->tail, 0);
    atomic_init(&c->head, 0);
    atomic_init(&c->failed, 0);
    atomic_init(&c->attached, 0);
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->magic = TT_DFIFO_MAGIC;
}

static inline void tt_dfifo_view(struct tt_dfifo *f, struct tt_dfifo_ctrl *c, void *slots,
                                 int owner)
{
    f->ctrl = c;
    f->slots = slots;
    f->slot_bytes = c->slot_bytes;
    f->nslots = c->nslots;
    f->owner = owner;
    f->pos = f->pub = f->cached = 0;
}

/* Publish, in order, what has passed its mark. 0, or the error passed() gave. */
static inline int tt_dfifo_publish(struct tt_dfifo *f)
{
    while (f->pub < f->pos) {
        uint32_t k = (uint32_t)(f->pub % f->nslots);
        int p = f->passed(f->arg, k);
        if (p <= 0)
            return p;
        f->pub++;
        if (f->owner) {
            atomic_store_explicit(&f->ctrl->head, f->pub, memory_order_release);
        } else {
            f->ctrl->bytes[k] = f->pend_bytes[k];
            f->ctrl->tags[k] = f->pend_tags[k];
            atomic_store_explicit(&f->ctrl->tail, f->pub, memory_order_release);
        }
    }
    return 0;
}

/* Sender: the next slot to fill, or NULL while the receiver still uses every slot. */
static inline void *tt_dfifo_send_slot(struct tt_dfifo *f)
{
    if (f->pos - f->cached >= f->nslots) {
        f->cached = atomic_load_explicit(&f->ctrl->head, memory_order_acquire);
        if (f->pos - f->cached >= f->nslots)
            return NULL;
    }
    return f->slots + (size_t)(f->pos % f->nslots) * f->slot_bytes;
}

/* Sender: the slot from send_slot holds `bytes` (labelled `tag`) once the work queued so far
 * is done. */
static inline int tt_dfifo_send_commit(struct tt_dfifo *f, size_t bytes, uint32_t tag)
{
    uint32_t k = (uint32_t)(f->pos % f->nslots);
    int e = f->mark(f->arg, k);

    if (e != 0)
        return e;
    f->pend_bytes[k] = bytes;
    f->pend_tags[k] = tag;
    f->pos++;
    return tt_dfifo_publish(f);
}

/* Receiver: the oldest published slot not yet released, or NULL. */
static inline const void *tt_dfifo_recv_peek(struct tt_dfifo *f, size_t *bytes, uint32_t *tag)
{
    if (atomic_load_explicit(&f->ctrl->tail, memory_order_acquire) <= f->pos)
        return NULL;
    *bytes = f->ctrl->bytes[f->pos % f->nslots];
    *tag = f->ctrl->tags[f->pos % f->nslots];
    return f->slots + (size_t)(f->pos % f->nslots) * f->slot_bytes;
}

/* Receiver: done with the peeked slot once the work queued so far is done. */
static inline int tt_dfifo_recv_release(struct tt_dfifo *f)
{
    int e = f->mark(f->arg, (uint32_t)(f->pos % f->nslots));

    if (e != 0)
        return e;
    f->pos++;
    return tt_dfifo_publish(f);
}

/* Anything committed or released here that the other side cannot see yet? */
static inline int tt_dfifo_pending(const struct tt_dfifo *f)
{
    return f->pub != f->pos;
}

static inline void tt_dfifo_fail(struct tt_dfifo *f)
{
    atomic_store_explicit(&f->ctrl->failed, 1, memory_order_release);
}

static inline int tt_dfifo_failed(const struct tt_dfifo *f)
{
    return atomic_load_explicit(&f->ctrl->failed, memory_order_acquire) != 0;
}

#endif
