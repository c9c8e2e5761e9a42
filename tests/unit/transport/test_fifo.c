/*
 * test_fifo.c -- transport/fifo.h's limits, one process, sender and receiver views of one
 * region: up to TT_FIFO_CELLS messages in flight in queue cells, up to TT_FIFO_SIDES in side
 * areas (however many cells are free), nslots in data slots; every payload read back intact
 * after the areas have wrapped around several times. And on sleepy FIFOs, two threads: a
 * blocked sender or receiver is woken by the other side, never left to its timeout.
 */
#include "../../../transport/fifo.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT 8192
#define NSLOTS 3

struct pair {
    void *region;
    struct tt_fifo tx, rx;
};

static void pair_open(struct pair *p)
{
    p->region = aligned_alloc(4096, tt_fifo_bytes(NSLOTS, SLOT));
    cr_assert_not_null(p->region);
    tt_fifo_format(p->region, NSLOTS, SLOT, 0);
    tt_fifo_view(&p->tx, p->region);
    tt_fifo_view(&p->rx, p->region);
}

/* Message number k of `bytes`: bytes derived from k, so a mix-up of two messages shows. */
static void fill(unsigned char *dst, size_t bytes, unsigned k)
{
    for (size_t i = 0; i < bytes; i++)
        dst[i] = (unsigned char)(k * 131u + i * 7u + 1u);
}

static int try_send(struct pair *p, size_t bytes, unsigned k)
{
    void *slot = tt_fifo_send_slot(&p->tx, bytes);
    if (!slot)
        return 0;
    fill(slot, bytes, k);
    tt_fifo_send_commit(&p->tx, bytes, k * 2654435761u);
    return 1;
}

static void recv_check(struct pair *p, size_t bytes, unsigned k)
{
    static unsigned char want[SLOT];
    size_t got = 0;
    uint32_t tag = 0;
    const void *slot = tt_fifo_recv_peek(&p->rx, &got, &tag);

    cr_assert_not_null(slot, "message %u is not there", k);
    cr_assert_eq(got, bytes, "message %u: %zu bytes, want %zu", k, got, bytes);
    cr_assert_eq(tag, k * 2654435761u, "message %u: tag %#x, want %#x", k, tag, k * 2654435761u);
    fill(want, bytes, k);
    cr_assert(memcmp(slot, want, bytes) == 0, "message %u (%zu bytes) corrupted", k, bytes);
    tt_fifo_recv_release(&p->rx);
}

/* Fill with messages of `bytes` until the sender is refused; returns how many went in. */
static unsigned fill_up(struct pair *p, size_t bytes, unsigned k0)
{
    unsigned n = 0;
    while (n < 10 * TT_FIFO_CELLS && try_send(p, bytes, k0 + n))
        n++;
    return n;
}

Test(fifo, in_flight_limits_per_kind)
{
    struct pair p;
    static const struct {
        size_t bytes;
        unsigned limit;
    } kinds[] = {{8, TT_FIFO_CELLS},
                 {TT_FIFO_INLINE, TT_FIFO_CELLS},
                 {TT_FIFO_INLINE + 1, TT_FIFO_SIDES},
                 {TT_FIFO_SIDE, TT_FIFO_SIDES},
                 {TT_FIFO_SIDE + 1, NSLOTS},
                 {SLOT, NSLOTS}};
    unsigned k = 0;

    pair_open(&p);
    /* Three rounds of each kind: every area wraps around, at a different offset each time. */
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
            unsigned n = fill_up(&p, kinds[i].bytes, k);
            cr_assert_eq(n, kinds[i].limit, "%zu-byte messages: %u in flight, want %u",
                         kinds[i].bytes, n, kinds[i].limit);
            /* Released cells show in batches of TT_FIFO_SHOW (data slots one by one): one
             * fewer released and none fits; that many released and exactly that many fit. */
            unsigned step = kinds[i].limit == NSLOTS ? 1 : TT_FIFO_SHOW;
            for (unsigned j = 0; j < step - 1; j++)
                recv_check(&p, kinds[i].bytes, k + j);
            cr_assert(!try_send(&p, kinds[i].bytes, k + n), "%zu-byte messages: %u released",
                      kinds[i].bytes, step - 1);
            recv_check(&p, kinds[i].bytes, k + step - 1);
            cr_assert_eq(fill_up(&p, kinds[i].bytes, k + n), step);
            for (unsigned j = step; j < n + step; j++)
                recv_check(&p, kinds[i].bytes, k + j);
            /* found empty: every release shows, so the next round fills to the limit */
            cr_assert_null(tt_fifo_recv_peek(&p.rx, &(size_t){0}, &(uint32_t){0}));
            k += n + step;
        }
    free(p.region);
}

/* A side area is reused by the message TT_FIFO_SIDES cells later, whatever kind the ones
 * between were: a side-area message waits until fewer than TT_FIFO_SIDES messages of any
 * kind are in flight, while small ones still fill every cell. */
Test(fifo, side_areas_wait_for_the_cells_before_them)
{
    struct pair p;
    unsigned k = 0, side = TT_FIFO_INLINE + 40, r = 0;

    pair_open(&p);
    cr_assert_eq(fill_up(&p, side, k), TT_FIFO_SIDES);
    k += TT_FIFO_SIDES;
    cr_assert_eq(fill_up(&p, 16, k), TT_FIFO_CELLS - TT_FIFO_SIDES);
    k += TT_FIFO_CELLS - TT_FIFO_SIDES;
    for (; r < TT_FIFO_SIDES; r++)
        recv_check(&p, side, r);
    /* TT_FIFO_CELLS - TT_FIFO_SIDES small ones in flight: cells free, side areas not. Releases
     * show every TT_FIFO_SHOW cells, so the side area comes free once between
     * TT_FIFO_SIDES - TT_FIFO_SHOW and TT_FIFO_SIDES - 1 messages are unread, never sooner. */
    while (!try_send(&p, side, k)) {
        cr_assert(k - r > TT_FIFO_SIDES - TT_FIFO_SHOW, "side area refused, %u in flight", k - r);
        recv_check(&p, 16, r++);
    }
    cr_assert(k - r < TT_FIFO_SIDES, "side area given with %u in flight", k - r);
    cr_assert(try_send(&p, 16, k + 1));
    for (; r < k; r++)
        recv_check(&p, 16, r);
    recv_check(&p, side, k);
    recv_check(&p, 16, k + 1);
    free(p.region);
}

/*
 * Sleepy FIFOs (ranks outnumber cores): a waiting sender or receiver blocks in the kernel for
 * as long as its timeout says, here a minute, and must be woken by the other side's release or
 * commit, never left to its timeout. A lost wake-up makes these tests outlast their
 * Criterion timeout.
 */
#define SLEEPY_MSGS 200
#define SLEEPY_WAIT_NS (60L * 1000000000L)

struct sleepy {
    struct pair p;
    unsigned waits; /* the blocked side's waits */
    int corrupt;
};

static void sleepy_open(struct sleepy *s)
{
    memset(s, 0, sizeof(*s));
    s->p.region = aligned_alloc(4096, tt_fifo_bytes(NSLOTS, SLOT));
    cr_assert_not_null(s->p.region);
    tt_fifo_format(s->p.region, NSLOTS, SLOT, 1);
    tt_fifo_view(&s->p.tx, s->p.region);
    tt_fifo_view(&s->p.rx, s->p.region);
}

/* Sends SLEEPY_MSGS data-slot messages, blocking whenever the slots are full. */
static void *fast_sender(void *arg)
{
    struct sleepy *s = arg;

    for (unsigned k = 0; k < SLEEPY_MSGS;) {
        if (try_send(&s->p, SLOT, k))
            k++;
        else if (tt_fifo_failed(&s->p.tx))
            break;
        else
            s->waits++, tt_fifo_send_wait(&s->p.tx, SLEEPY_WAIT_NS);
    }
    return NULL;
}

/* Open a sleepy pair, run `thread` on a thread of its own and `here` on this one, join. */
static void both_sides(struct sleepy *s, void *(*thread)(void *), void (*here)(struct sleepy *))
{
    pthread_t t;

    sleepy_open(s);
    cr_assert_eq(pthread_create(&t, NULL, thread, s), 0);
    here(s);
    pthread_join(t, NULL);
}

/* Takes SLEEPY_MSGS messages, each a little after it came: the sender fills up and blocks. */
static void slow_receiver(struct sleepy *s)
{
    for (unsigned k = 0; k < SLEEPY_MSGS; k++) {
        while (!tt_fifo_recv_peek(&s->p.rx, &(size_t){0}, &(uint32_t){0}))
            tt_fifo_recv_wait(&s->p.rx, 1000000); /* the sender is never slow here */
        usleep(200); /* long enough for the sender to fill the slots and block */
        recv_check(&s->p, SLOT, k);
    }
}

Test(fifo, sleepy_sender_is_woken_by_releases, .timeout = 30)
{
    struct sleepy s;

    both_sides(&s, fast_sender, slow_receiver);
    cr_assert_gt(s.waits, 0, "the sender never had to wait: the test proves nothing");
    free(s.p.region);
}

/* Receives SLEEPY_MSGS messages, blocking whenever none is there. */
static void *waiting_receiver(void *arg)
{
    struct sleepy *s = arg;
    unsigned char want[SLOT];

    for (unsigned k = 0; k < SLEEPY_MSGS; k++) {
        const void *slot;
        size_t got = 0;
        while (!(slot = tt_fifo_recv_peek(&s->p.rx, &got, &(uint32_t){0})))
            s->waits++, tt_fifo_recv_wait(&s->p.rx, SLEEPY_WAIT_NS);
        fill(want, SLOT, k);
        if (got != SLOT || memcmp(slot, want, SLOT) != 0)
            s->corrupt = 1;
        tt_fifo_recv_release(&s->p.rx);
    }
    return NULL;
}

/* Sends SLEEPY_MSGS messages, each a little later: the receiver blocks meanwhile. */
static void slow_sender(struct sleepy *s)
{
    for (unsigned k = 0; k < SLEEPY_MSGS; k++) {
        usleep(200);
        while (!try_send(&s->p, SLOT, k))
            tt_fifo_send_wait(&s->p.tx, 1000000);
    }
}

Test(fifo, sleepy_receiver_is_woken_by_commits, .timeout = 30)
{
    struct sleepy s;

    both_sides(&s, waiting_receiver, slow_sender);
    cr_assert(!s.corrupt, "a message arrived corrupted");
    cr_assert_gt(s.waits, 0, "the receiver never had to wait: the test proves nothing");
    free(s.p.region);
}

/* A sender blocked on a full FIFO sees the receiver give up. */
/* Waits until every data slot is taken (the last one's cell committed), lets the sender
 * block, and gives up. */
static void failing_receiver(struct sleepy *s)
{
    while (atomic_load(&s->p.rx.ctrl->cells[NSLOTS - 1].seq) != NSLOTS)
        usleep(1000);
    usleep(20000);
    tt_fifo_fail(&s->p.rx);
}

Test(fifo, sleepy_sender_is_woken_by_failure, .timeout = 30)
{
    struct sleepy s;

    both_sides(&s, fast_sender, failing_receiver);
    cr_assert(tt_fifo_failed(&s.p.tx));
    free(s.p.region);
}
