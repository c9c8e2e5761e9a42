/*
 * fifo.h -- single-producer single-consumer queue of messages, the core of the shm and mem
 * transports.
 *
 * Layout (one allocation or shared segment): a control block with TT_FIFO_CELLS cells of 64
 * bytes, then (where slots hold at least 8 KiB) TT_FIFO_SIDES side areas of TT_FIFO_SIDE
 * bytes, then nslots data slots of slot_bytes each. Every message takes the next cell; a cell
 * holds the message's sequence number, its byte count and, up to TT_FIFO_INLINE bytes, the
 * payload itself, so a small message costs one cache-line transfer and up to TT_FIFO_CELLS
 * (256) small messages can be in flight (a sender runs that far ahead). A medium message (up
 * to TT_FIFO_SIDE bytes) goes in side area pos % TT_FIFO_SIDES, free once the cell
 * TT_FIFO_SIDES before it is released: 64 in flight. A larger message also takes the next
 * data slot, in order, so at most nslots large messages are in flight. The cell also carries
 * the message's tag (transport.h), written with the payload, before the sequence number. Why
 * so many: where
 * ranks outnumber cores, every time a sender fills the queue or a receiver drains it, it
 * yields its core, and those context switches were most of a small broadcast's cost (4 ranks
 * on 2 cores, 8 bytes: about one switch per 14 calls with 64 cells; with only nslots in
 * flight a 128-byte broadcast took 1.8 us against 0.55 us at 32 bytes).
 * The sender writes the payload, then the cell's sequence number with release; the receiver
 * polls the cell it expects with acquire. The receiver owns `tail` (cells released) and
 * `data_tail` (data slots released), which the sender rereads only when its cached copies
 * say the queue is full.
 *
 * Two things keep the cache lines from bouncing between the two cores on every message (2
 * ranks, back-to-back 8-byte calls: a sender stalled on each cell's line ran at half the
 * speed of one that was not). The receiver stores `tail` once per TT_FIFO_SHOW cells and
 * whenever it finds nothing to read, so a sender polling a full queue and the receiver do
 * not trade that line per message; at most TT_FIFO_SHOW - 1 released cells go unseen, so a
 * sender never waits on a queue its receiver has drained (the queue holds at least
 * TT_FIFO_CELLS - TT_FIFO_SHOW + 1 messages, the side areas TT_FIFO_SIDES - TT_FIFO_SHOW
 * + 1). And after each commit the sender asks for the cell and the side area 8 ahead in
 * exclusive state (prefetchw, TT_FIFO_AHEAD), so its stores there do not wait for lines the
 * receiver read last time round.
 *
 * A "sleepy" receiver (ranks outnumber cores: the sender may need our core) may block in the
 * kernel instead of polling: it raises `sleeping`, checks the cell once more, and waits on the
 * futex word `wake`; a sender that sees `sleeping` after a commit bumps `wake` and wakes it.
 * The fences on both sides order "publish, then look at the other's flag" (Dekker), so a
 * commit is never missed; the wait also has a timeout, so a lost wake-up costs at most that.
 * A sleepy sender waiting for room (or for its messages by address to be read) blocks the same
 * way on `send_wake`, raised by `send_sleeping`, and the receiver wakes it whenever it stores
 * tail or data_tail.
 */
#ifndef TT_FIFO_H
#define TT_FIFO_H

#include "lib/base/wait.h"
#include "transport/transport.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TT_FIFO_MAGIC 0x74746667u /* "ttfg" */
#define TT_FIFO_CELLS 256
#define TT_FIFO_INLINE 48
#define TT_FIFO_SIDES 64
#define TT_FIFO_SIDE 1024
#define TT_FIFO_SHOW 16 /* the receiver stores tail once per this many cells */
#define TT_FIFO_AHEAD 8 /* the sender prefetches the cell this many messages ahead */

struct tt_fifo_cell {
    _Atomic uint32_t seq; /* message number + 1 (mod 2^32) once committed */
    uint32_t tag;         /* the sender's label of the operation (transport.h) */
    uint64_t bytes;       /* | TT_FIFO_REMOTE: the payload is still in the sender's memory */
    unsigned char data[TT_FIFO_INLINE];
};

/* A message committed by address (tt_fifo_send_commit_remote): its cell holds where the
 * payload lies in the sender's address space; its data slot is taken but not filled. */
#define TT_FIFO_REMOTE ((uint64_t)1 << 63)

struct tt_fifo_ctrl {
    _Alignas(64) _Atomic uint64_t tail;          /* cells released by the receiver */
    _Atomic uint64_t data_tail;                  /* data slots released by the receiver */
    _Alignas(64) _Atomic uint32_t failed;        /* either side gave up (transport.h fail) */
    _Alignas(64) _Atomic uint32_t sleeping;      /* receiver is (about to be) blocked on wake */
    _Atomic uint32_t wake;                       /* futex word bumped by the sender */
    _Alignas(64) _Atomic uint32_t send_sleeping; /* sender is (about to be) blocked */
    _Atomic uint32_t send_wake;                  /* futex word bumped by the receiver */
    _Alignas(64) uint32_t magic;
    uint32_t nslots;
    uint64_t slot_bytes;
    uint32_t sleepy; /* the receiver may block: senders must check `sleeping` */
    _Atomic uint32_t sender_attached;
    uint64_t sender_view;       /* where the sender mapped this control block (its address space) */
    _Atomic uint32_t remote_ok; /* the receiver can read the sender's memory: 0 not tried yet,
                                   1 yes, 2 no (shm.c) */
    _Alignas(64) struct tt_fifo_cell cells[TT_FIFO_CELLS];
};

#define TT_FIFO_SIDE_OFFSET (20 * 1024)
_Static_assert(sizeof(struct tt_fifo_cell) == 64, "a cell is one cache line");
_Static_assert(sizeof(struct tt_fifo_ctrl) <= TT_FIFO_SIDE_OFFSET, "fifo control block too big");
_Static_assert((TT_FIFO_SIDES * TT_FIFO_SIDE) % 4096 == 0, "data slots start on a page");
_Static_assert(TT_FIFO_CELLS % TT_FIFO_SIDES == 0 && TT_FIFO_SIDES <= TT_FIFO_CELLS,
               "side areas are used in cell order");

/* Side areas where slots are at least 8 of them (a FIFO of small slots has none). */
static inline size_t tt_fifo_side_bytes(size_t slot_bytes)
{
    return slot_bytes >= 8 * (size_t)TT_FIFO_SIDE ? TT_FIFO_SIDE : 0;
}

static inline size_t tt_fifo_data_offset(size_t slot_bytes)
{
    return TT_FIFO_SIDE_OFFSET + TT_FIFO_SIDES * tt_fifo_side_bytes(slot_bytes);
}

/* One side's view. */
struct tt_fifo {
    struct tt_fifo_ctrl *ctrl;
    char *side;        /* the cells' side areas */
    size_t side_bytes; /* each (0: none) */
    char *data;
    uint32_t nslots;
    size_t slot_bytes;
    uint64_t pos;         /* messages committed (sender) or released (receiver) */
    uint64_t data_pos;    /* data slots used (sender) or released (receiver) */
    uint64_t cached;      /* sender: last value read of tail */
    uint64_t data_cached; /* sender: last value read of data_tail */
    uint64_t shown;       /* receiver: the value of tail last stored */
    uint32_t sleepy;      /* copy of ctrl->sleepy */
};

/* Where the payload of the message in cell pos % TT_FIFO_CELLS goes if it is `bytes` long:
 * the cell, side area pos % TT_FIFO_SIDES, or (NULL) a data slot. */
static inline void *tt_fifo_cell_payload(const struct tt_fifo *f, uint64_t pos, size_t bytes)
{
    if (bytes <= TT_FIFO_INLINE)
        return f->ctrl->cells[pos % TT_FIFO_CELLS].data;
    if (bytes <= f->side_bytes)
        return f->side + (size_t)(pos % TT_FIFO_SIDES) * f->side_bytes;
    return NULL;
}

static inline size_t tt_fifo_bytes(uint32_t nslots, size_t slot_bytes)
{
    return tt_fifo_data_offset(slot_bytes) + (size_t)nslots * slot_bytes;
}

/* Initialise a fresh region (receiver side). */
static inline void tt_fifo_format(void *region, uint32_t nslots, size_t slot_bytes, int sleepy)
{
    struct tt_fifo_ctrl *c = region;

    atomic_init(&c->failed, 0);
    atomic_init(&c->sleeping, 0);
    atomic_init(&c->wake, 0);
    atomic_init(&c->send_sleeping, 0);
    atomic_init(&c->send_wake, 0);
    c->sleepy = sleepy ? 1 : 0;
    atomic_init(&c->tail, 0);
    atomic_init(&c->data_tail, 0);
    atomic_init(&c->sender_attached, 0);
    atomic_init(&c->remote_ok, 0);
    c->sender_view = 0;
    for (uint32_t i = 0; i < TT_FIFO_CELLS; i++)
        atomic_init(&c->cells[i].seq, 0);
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->magic = TT_FIFO_MAGIC;
}

static inline void tt_fifo_view(struct tt_fifo *f, void *region)
{
    f->ctrl = region;
    f->side = (char *)region + TT_FIFO_SIDE_OFFSET;
    f->side_bytes = tt_fifo_side_bytes(f->ctrl->slot_bytes);
    f->data = (char *)region + tt_fifo_data_offset(f->ctrl->slot_bytes);
    f->nslots = f->ctrl->nslots;
    f->slot_bytes = f->ctrl->slot_bytes;
    f->pos = f->data_pos = 0;
    f->cached = f->data_cached = f->shown = 0;
    f->sleepy = f->ctrl->sleepy;
}

/* Sender: are fewer than `limit` messages unreleased? Rereads tail only when the cached
 * copy says no. */
static inline int tt_fifo_below(struct tt_fifo *f, uint64_t limit)
{
    if (f->pos - f->cached < limit)
        return 1;
    f->cached = atomic_load_explicit(&f->ctrl->tail, memory_order_acquire);
    return f->pos - f->cached < limit;
}

/* Where the next message of `bytes` goes, or NULL while the queue is full. */
static inline void *tt_fifo_send_slot(struct tt_fifo *f, size_t bytes)
{
    void *p;

    if (!tt_fifo_below(f, TT_FIFO_CELLS))
        return NULL;
    /* side area pos % SIDES is free once cell pos - SIDES is released (cells go in order) */
    if (bytes > TT_FIFO_INLINE && bytes <= f->side_bytes && !tt_fifo_below(f, TT_FIFO_SIDES))
        return NULL;
    if ((p = tt_fifo_cell_payload(f, f->pos, bytes)))
        return p;
    if (f->data_pos - f->data_cached >= f->nslots) {
        f->data_cached = atomic_load_explicit(&f->ctrl->data_tail, memory_order_acquire);
        if (f->data_pos - f->data_cached >= f->nslots)
            return NULL;
    }
    return f->data + (size_t)(f->data_pos % f->nslots) * f->slot_bytes;
}

/* Bump futex word `word` and wake the side that sleeps on it. */
static inline void tt_fifo_bump(_Atomic uint32_t *word)
{
    atomic_fetch_add_explicit(word, 1, memory_order_release);
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Sleepy FIFO, after publishing: wake the other side if its `sleeping` flag says it is (about
 * to be) blocked on `word` (Dekker: publish, fence, look; the sleeper raises, fences, looks). */
static inline void tt_fifo_wake(_Atomic uint32_t *sleeping, _Atomic uint32_t *word)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(sleeping, memory_order_relaxed)) {
        atomic_store_explicit(sleeping, 0, memory_order_relaxed);
        tt_fifo_bump(word);
    }
}

static inline void tt_fifo_commit(struct tt_fifo *f, size_t bytes, uint64_t flags, uint32_t tag)
{
    struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % TT_FIFO_CELLS];

    c->bytes = bytes | flags;
    c->tag = tag;
    if (!tt_fifo_cell_payload(f, f->pos, bytes))
        f->data_pos++;
    f->pos++;
    atomic_store_explicit(&c->seq, (uint32_t)f->pos, memory_order_release);
    tt_prefetch_write(&f->ctrl->cells[(f->pos + TT_FIFO_AHEAD) % TT_FIFO_CELLS]);
    if (f->side_bytes) /* its first line: where a message of 49-64 bytes goes */
        tt_prefetch_write(f->side +
                          (size_t)((f->pos + TT_FIFO_AHEAD) % TT_FIFO_SIDES) * f->side_bytes);
    if (f->sleepy)
        tt_fifo_wake(&f->ctrl->sleeping, &f->ctrl->wake);
}

static inline void tt_fifo_send_commit(struct tt_fifo *f, size_t bytes, uint32_t tag)
{
    tt_fifo_commit(f, bytes, 0, tag);
}

/* May a message of `bytes` go by address now? Only one that takes a data slot (which it
 * reserves unfilled, so both sides count slots alike), when one is free. */
static inline int tt_fifo_remote_fits(struct tt_fifo *f, size_t bytes)
{
    return !tt_fifo_cell_payload(f, f->pos, bytes) && tt_fifo_send_slot(f, bytes) != NULL;
}

/* Commit the message of `bytes` by address (tt_fifo_remote_fits said yes): the receiver
 * copies it from src in the sender's memory. Returns its ticket: the message is read once
 * tail reaches it. */
static inline uint64_t tt_fifo_send_commit_remote(struct tt_fifo *f, const void *src, size_t bytes,
                                                  uint32_t tag)
{
    uint64_t addr = (uint64_t)(uintptr_t)src;

    memcpy(f->ctrl->cells[f->pos % TT_FIFO_CELLS].data, &addr, sizeof(addr));
    tt_fifo_commit(f, bytes, TT_FIFO_REMOTE, tag);
    return f->pos;
}

/* Receiver: store tail (the cells released so far); a sender blocked for room wakes. */
static inline void tt_fifo_show_tail(struct tt_fifo *f)
{
    f->shown = f->pos;
    atomic_store_explicit(&f->ctrl->tail, f->pos, memory_order_release);
    if (f->sleepy)
        tt_fifo_wake(&f->ctrl->send_sleeping, &f->ctrl->send_wake);
}

static inline const void *tt_fifo_recv_peek(struct tt_fifo *f, size_t *bytes, uint32_t *tag)
{
    struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % TT_FIFO_CELLS];
    const void *p;

    if (atomic_load_explicit(&c->seq, memory_order_acquire) != (uint32_t)(f->pos + 1)) {
        if (f->shown != f->pos) /* nothing to read: a waiting sender gets every cell */
            tt_fifo_show_tail(f);
        return NULL;
    }
    *bytes = c->bytes & ~TT_FIFO_REMOTE;
    *tag = c->tag;
    if ((p = tt_fifo_cell_payload(f, f->pos, *bytes)))
        return p;
    return f->data + (size_t)(f->data_pos % f->nslots) * f->slot_bytes;
}

/* Either side: give up; wake a sleeping receiver or sender so it sees it. The fence orders
 * the flag before anything this rank writes after it (a sender's buffer, once its call has
 * failed and returned): a receiver that copies by address and then sees no flag (its fence,
 * tt_fifo_pulled) copied the message the sender meant. */
static inline void tt_fifo_fail(struct tt_fifo *f)
{
    atomic_store_explicit(&f->ctrl->failed, 1, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    tt_fifo_bump(&f->ctrl->wake);
    tt_fifo_bump(&f->ctrl->send_wake);
}

static inline int tt_fifo_failed(const struct tt_fifo *f)
{
    return atomic_load_explicit(&f->ctrl->failed, memory_order_acquire) != 0;
}

/* Receiver, after copying a message out of the sender's memory (by address): was that its
 * message? Only while the sender waits for the copy (its flush): a sender that gave up has
 * returned from its call, and its buffer may have been freed or written again while this rank
 * copied (stopped, or slow past TUTTI_TIMEOUT). */
static inline int tt_fifo_pulled(const struct tt_fifo *f)
{
    atomic_thread_fence(memory_order_seq_cst);
    return !tt_fifo_failed(f);
}

/* Receiver: block until the next message may be there, at most `ns` nanoseconds. */
static inline void tt_fifo_recv_wait(struct tt_fifo *f, long ns)
{
    struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % TT_FIFO_CELLS];
    uint32_t w = atomic_load_explicit(&f->ctrl->wake, memory_order_acquire);
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

    atomic_store_explicit(&f->ctrl->sleeping, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&c->seq, memory_order_acquire) == (uint32_t)(f->pos + 1)) {
        atomic_store_explicit(&f->ctrl->sleeping, 0, memory_order_relaxed);
        return;
    }
    syscall(SYS_futex, &f->ctrl->wake, FUTEX_WAIT, w, &ts, NULL, 0);
    atomic_store_explicit(&f->ctrl->sleeping, 0, memory_order_relaxed);
}

/*
 * Sender: block until the receiver releases something, at most `ns` nanoseconds. Whatever the
 * sender waits for (a cell, a data slot, its messages by address read) needs tail or data_tail
 * to move past what it last read of them (f->cached, f->data_cached; a newer reading is as
 * good), and the receiver wakes us whenever it stores either.
 */
static inline void tt_fifo_send_wait(struct tt_fifo *f, long ns)
{
    uint32_t w = atomic_load_explicit(&f->ctrl->send_wake, memory_order_acquire);
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    uint64_t t, d;

    atomic_store_explicit(&f->ctrl->send_sleeping, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    t = atomic_load_explicit(&f->ctrl->tail, memory_order_acquire);
    d = atomic_load_explicit(&f->ctrl->data_tail, memory_order_acquire);
    if (t == f->cached && d == f->data_cached && !tt_fifo_failed(f))
        syscall(SYS_futex, &f->ctrl->send_wake, FUTEX_WAIT, w, &ts, NULL, 0);
    f->cached = t;
    f->data_cached = d;
    atomic_store_explicit(&f->ctrl->send_sleeping, 0, memory_order_relaxed);
}

/* Receiver: where the peeked message's payload lies in the sender's memory, 0 if it is here. */
static inline uint64_t tt_fifo_recv_remote(const struct tt_fifo *f)
{
    const struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % TT_FIFO_CELLS];
    uint64_t addr;

    if (!(c->bytes & TT_FIFO_REMOTE))
        return 0;
    memcpy(&addr, c->data, sizeof(addr));
    return addr;
}

static inline void tt_fifo_recv_release(struct tt_fifo *f)
{
    struct tt_fifo_cell *c = &f->ctrl->cells[f->pos % TT_FIFO_CELLS];

    uint64_t remote = c->bytes & TT_FIFO_REMOTE;

    int slot = !tt_fifo_cell_payload(f, f->pos, c->bytes & ~TT_FIFO_REMOTE);

    if (slot) {
        f->data_pos++;
        atomic_store_explicit(&f->ctrl->data_tail, f->data_pos, memory_order_release);
    }
    f->pos++;
    /* a message read from the sender's memory: the sender waits for tail to pass it (shm
     * flush) before its operation may end, so it must see it now */
    if (remote || f->pos - f->shown >= TT_FIFO_SHOW)
        tt_fifo_show_tail(f);
    else if (slot && f->sleepy)
        tt_fifo_wake(&f->ctrl->send_sleeping, &f->ctrl->send_wake);
}

#endif
