/*
 * copy.h -- tt_copy: memmove for payload bytes on host memory, minus one trap.
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

#endif
