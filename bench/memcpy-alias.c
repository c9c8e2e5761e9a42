/*
 * memcpy-alias.c -- memmove against tt_copy (lib/kern/copy.h) at the destination offsets a
 * transport meets: a page-aligned FIFO slot copied into a buffer that starts `off` bytes into
 * a page, and back. Prints GB/s, best of 3, per size and offset; the rows where memmove falls
 * far below tt_copy are the trap copy.h steps around.
 *
 *   build/bench/memcpy-alias [SIZE ...]   (default 4K 64K 256K 1M)
 */
#include "../lib/kern/copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double rate(int ours, char *dst, const char *src, size_t n)
{
    double best = 0;
    long iters = (long)(200000000 / n) + 1;

    for (int r = 0; r < 3; r++) {
        double t = now();
        for (long i = 0; i < iters; i++) {
            if (ours)
                tt_copy(dst, src, n);
            else
                memmove(dst, src, n);
            __asm__ volatile("" ::"r"(dst) : "memory");
        }
        t = (double)n * (double)iters / (now() - t) / 1e9;
        best = t > best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    static const size_t dflt[] = {4096, 65536, 262144, 1 << 20};
    static const int offs[] = {0, 8, 16, 48, 2056};
    int nsizes = argc > 1 ? argc - 1 : 4;

    printf("# %8s %6s %14s %14s\n", "bytes", "dst+", "memmove GB/s", "tt_copy GB/s");
    for (int k = 0; k < nsizes; k++) {
        size_t n = argc > 1 ? strtoul(argv[k + 1], NULL, 0) : dflt[k];
        char *src = aligned_alloc(4096, n + 8192), *dst = aligned_alloc(4096, n + 8192);
        if (!n || !src || !dst) {
            fprintf(stderr, "memcpy-alias: bad size or out of memory\n");
            return 2;
        }
        memset(src, 1, n + 8192);
        memset(dst, 2, n + 8192);
        for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
            printf("  %8zu %6d %14.1f %14.1f\n", n, offs[i], rate(0, dst + offs[i], src, n),
                   rate(1, dst + offs[i], src, n));
        free(src);
        free(dst);
    }
    return 0;
}
