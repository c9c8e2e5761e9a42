/*
 * size_arg.h -- a byte count on a command line: digits with an optional K, M or G (binary)
 * suffix and an optional B, as nccl-tests takes -b and -e. For tutti-perf and tutti-topo.
 */
#ifndef TT_TOOLS_SIZE_ARG_H
#define TT_TOOLS_SIZE_ARG_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* 0 and *out set, or -1 (not a size, or too large). */
static inline int tt_size_arg(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    int shift = 0;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    switch (*end) {
    case 'K':
    case 'k': shift = 10; break;
    case 'M':
    case 'm': shift = 20; break;
    case 'G':
    case 'g': shift = 30; break;
    default: break;
    }
    if (shift)
        end++;
    if (*end == 'B') /* 64M or 64MB */
        end++;
    if (*end || v > (~0ull >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

#endif
