/*
 * copy.h -- tt_copy: memmove for payload bytes on host memory, minus one trap; and
 * tt_copy_nt, the same with streaming stores, for FIFO slots a far core reads (below).
 *
 * glibc (2.36, Debian 12) copies 2 KiB..~512 KiB with `rep movsb` where the CPU has FSRM, and
 * on AMD Zen that instruction runs some twenty times slower when the destination lies 1..31
 * bytes past the source modulo 4 KiB (glibc bug 30994). A FIFO slot is page-aligned and a
 * malloc'd user buffer starts 16 bytes into a page, so a receiver copying a slot out into the
 * user's buffer hit it on every chunk: on this machine's AMD EPYC, 64 KiB copies at that
 * offset moved 1.7 GB/s against 32-40 GB/s elsewhere, and a 2-rank 8 MiB broadcast ran at
 * 1.9 GB/s (bench/memcpy-alias measures it). Those copies take a loop of 16-byte moves
 * instead, which runs at full speed at every offset; every other copy is memmove's.
 */
#ifndef TT_COPY_H
#define TT_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define TT_COPY_LOOP_MIN 2048              /* below: glibc does not use rep movsb */
#define TT_COPY_LOOP_MAX ((size_t)1 << 20) /* from here glibc's own loops are as fast */

/* Would memmove hit the trap (and may the bytes go front to back)? */
static inline int tt_copy_aliased(void *dst, const void *src, size_t bytes)
{
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

    return bytes >= TT_COPY_LOOP_MIN && bytes < TT_COPY_LOOP_MAX && ((d - s) & 4095) - 1 < 63 &&
           (d >= s + bytes || s >= d + bytes);
}

/* Front to back in 64-byte blocks; fixed-size memcpy compiles to vector moves. */
static inline void tt_copy_loop(void *dst, const void *src, size_t bytes)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t i = 0;

    for (; i + 64 <= bytes; i += 64) {
        __builtin_memcpy(d + i, s + i, 64);
        __asm__("" : "+r"(d)); /* keeps the compiler from turning the loop into a memcpy call */
    }
    memcpy(d + i, s + i, bytes - i);
}

static inline void tt_copy(void *dst, const void *src, size_t bytes)
{
    if (tt_copy_aliased(dst, src, bytes))
        tt_copy_loop(dst, src, bytes);
    else
        memmove(dst, src, bytes);
}

/*
 * tt_copy_large: tt_copy for copies of TT_COPY_LARGE bytes and more, whose source or
 * destination is far larger than the caches: `rep movsb` on x86-64, which on this machine's
 * AMD EPYC moves them without reading the destination first. 2 ranks' broadcast on symmetric
 * memory (the non-root copying the root's buffer), 2026-12-04, GB/s out of place / in place,
 * 3 rounds: 32 MiB 19.3-20.6 / 17.5-18.4 against glibc's memmove 11.6-12.2 / 14.1-17.0;
 * 128 MiB 16.6-16.9 / 15.7-19.7 against 8.7-8.8 / 12.7-13.7; from 2 to 8 MiB the same as
 * memmove. dst and src must not overlap.
 */
#define TT_COPY_LARGE ((size_t)4 << 20)
static inline void tt_copy_large(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
    if (bytes >= TT_COPY_LARGE) {
        __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(bytes) : : "memory");
        return;
    }
#endif
    tt_copy(dst, src, bytes);
}

/*
 * tt_copy_nt: the same bytes as tt_copy (dst and src must not overlap), written with
 * streaming (non-temporal) stores where the CPU has them: the lines go to memory instead of
 * into this core's cache, without first being read for ownership. For a FIFO slot that a
 * reader on a far core (one that shares no cache with this one) reads next, that is about
 * twice as fast for both ends: the writer does not wait for the reader's core to give up
 * each line, and the reader fetches from memory rather than from the writer's cache. Next
 * to a core that shares a cache it is slower (the bytes take the trip through memory), so
 * the executor uses it only where lib/topo/copy_pick.c measured that it pays. The stores are
 * fenced before returning, so a release store after it publishes them.
 */
static inline void tt_copy_nt(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 15), i;

    if (bytes < head + 64) {
        tt_copy(dst, src, bytes);
        return;
    }
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (i = 0; i + 64 <= bytes; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    _mm_sfence();
    memcpy(d + i, s + i, bytes - i);
#else
    tt_copy(dst, src, bytes);
#endif
}

#endif
