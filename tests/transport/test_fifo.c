/*
 * test_fifo.c -- transport/fifo.h's limits, one process, sender and receiver views of one
 * region: up to TT_FIFO_CELLS messages in flight in queue cells, up to TT_FIFO_SIDES in side
 * areas (however many cells are free), nslots in data slots; every payload read back intact
 * after the areas have wrapped around several times.
 */
#include "transport/fifo.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

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
    tt_fifo_send_commit(&p->tx, bytes);
    return 1;
}

static void recv_check(struct pair *p, size_t bytes, unsigned k)
{
    static unsigned char want[SLOT];
    size_t got = 0;
    const void *slot = tt_fifo_recv_peek(&p->rx, &got);

    cr_assert_not_null(slot, "message %u is not there", k);
    cr_assert_eq(got, bytes, "message %u: %zu bytes, want %zu", k, got, bytes);
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
            cr_assert_null(tt_fifo_recv_peek(&p.rx, &(size_t){0}));
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
