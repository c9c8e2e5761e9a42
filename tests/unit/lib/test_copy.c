/*
 * test_copy.c -- tt_copy (lib/kern/copy.h) moves the same bytes as a byte-by-byte reference at
 * every destination offset around a page, at the sizes on both sides of its own loop's range,
 * and for overlapping ranges (which must keep memmove's meaning); tt_copy_nt (streaming
 * stores) at every destination alignment, around its 64-byte loop's edges, not writing a byte
 * outside its range.
 */
#include "../../../lib/kern/copy.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define ROOM ((2 << 20) + 4 * 4096) /* room for two 1 MiB ranges a page apart */

static unsigned char *arena, *want;

static void setup(void)
{
    arena = aligned_alloc(4096, ROOM);
    want = aligned_alloc(4096, ROOM);
    cr_assert(arena && want);
    for (size_t i = 0; i < ROOM; i++)
        arena[i] = (unsigned char)(i * 131 + (i >> 9) * 7 + 1);
}

static void teardown(void)
{
    free(arena);
    free(want);
}

/* The reference: memmove's meaning, one byte at a time, on a copy of the arena. */
static void reference(size_t dst, size_t src, size_t n)
{
    memcpy(want, arena, ROOM);
    if (dst < src)
        for (size_t i = 0; i < n; i++)
            want[dst + i] = want[src + i];
    else
        for (size_t i = n; i-- > 0;)
            want[dst + i] = want[src + i];
}

static void check(size_t dst, size_t src, size_t n)
{
    reference(dst, src, n);
    tt_copy(arena + dst, arena + src, n);
    cr_assert(memcmp(arena, want, ROOM) == 0, "tt_copy(dst %zu, src %zu, %zu bytes) differs", dst,
              src, n);
}

Test(copy, every_offset_near_a_page, .init = setup, .fini = teardown)
{
    static const size_t sizes[] = {1, 63, 64, 65, 2047, 2048, 2049, 4096, 4097, 65536 + 7};
    size_t src = 4096, far = 2 * 4096 + 65536 + 8192;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t off = 0; off < 80; off++)
            check(far + off, src, sizes[k]); /* dst ahead by off mod 4096: the trap's band */
    for (size_t off = 4000; off < 4096; off += 13)
        check(far + off, src, 8192 + 5);
}

Test(copy, both_ends_of_the_loop_range, .init = setup, .fini = teardown)
{
    /* dst 16 past src mod 4096, the case the loop takes, from below its range to above it */
    check(4096 + (1 << 20) + 16, 0, TT_COPY_LOOP_MIN - 1);
    check(4096 + (1 << 20) + 16, 0, TT_COPY_LOOP_MIN);
    check(4096 + (1 << 20) + 16, 0, TT_COPY_LOOP_MAX - 1);
    check(4096 + (1 << 20) + 16, 0, TT_COPY_LOOP_MAX);
}

Test(copy, overlapping_ranges_keep_memmove_meaning, .init = setup, .fini = teardown)
{
    /* 16 bytes apart: in the trap's band, but the ranges overlap, so memmove must do it */
    check(4096 + 16, 4096, 65536);
    check(4096, 4096 + 16, 65536);
    check(4096 + 4096 + 8, 4096, 8192); /* overlapping by all but 4104 bytes */
}

Test(copy, the_band_is_what_copy_h_says)
{
    char *p = (char *)(uintptr_t)0x100000;

    cr_assert(tt_copy_aliased(p + 4096 + 1, p, 4096));
    cr_assert(tt_copy_aliased(p + 4096 + 63, p, 4096));
    cr_assert(!tt_copy_aliased(p + 4096, p, 4096));      /* same page offset */
    cr_assert(!tt_copy_aliased(p + 4096 + 64, p, 4096)); /* far enough past */
    cr_assert(!tt_copy_aliased(p, p + 4096 + 16, 4096)); /* behind, not ahead */
    cr_assert(!tt_copy_aliased(p + 4096 + 16, p, 2047)); /* too small for rep movsb */
    cr_assert(!tt_copy_aliased(p + 16, p, 4096));        /* overlapping */
}

/* tt_copy_nt(arena + dst, arena + src, n) against the bytes src held; a guard band on
 * either side of dst must keep its bytes. Ranges do not overlap (tt_copy_nt's contract). */
static void check_stream(size_t dst, size_t src, size_t n)
{
    const size_t guard = 80;

    memcpy(want + dst - guard, arena + dst - guard, n + 2 * guard);
    for (size_t i = 0; i < n; i++)
        want[dst + i] = arena[src + i];
    tt_copy_nt(arena + dst, arena + src, n);
    for (size_t i = dst - guard; i < dst + n + guard; i++)
        cr_assert(arena[i] == want[i],
                  "tt_copy_nt(dst %zu, src %zu, %zu bytes): byte %td from dst is %u, not %u", dst,
                  src, n, (ptrdiff_t)(i - dst), arena[i], want[i]);
}

Test(copy, stream_every_alignment_and_edge, .init = setup, .fini = teardown)
{
    static const size_t sizes[] = {0,  1,   15,  16,  63,         64,       65,    79,        80,
                                   81, 127, 128, 129, 64 * 7 + 1, 4096 + 3, 65536, 65536 + 17};
    size_t dst = 2 * 4096 + 65536 + 8192;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t off = 0; off < 80; off++)
            for (size_t soff = 0; soff < 24; soff += 7)
                check_stream(dst + off, 4096 + soff, sizes[k]);
}

Test(copy, stream_large_and_unaligned, .init = setup, .fini = teardown)
{
    check_stream(4096 + (1 << 20) + 16, 4096, 1 << 20);      /* 1 MiB, page + 16 */
    check_stream(4096 + (1 << 20) + 4093, 4099, 777777);     /* odd everything */
    check_stream(2 * 4096 + (1 << 20), 4096, (1 << 20) - 1); /* aligned start, odd end */
}
