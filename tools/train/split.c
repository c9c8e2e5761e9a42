/*
 * split.c -- how tutti-train divides a batch among its ranks (split.h).
 */
#include "split.h"

#include <stdio.h>
#include <stdlib.h>

int split_parse(struct split_plan *p, const char *s, int n, int batch, char *err, int errlen)
{
    const char *at = s;
    long long sum = 0;

    p->n = n;
    if (n > SPLIT_MAX_RANKS)
        return snprintf(err, (size_t)errlen, "--split: at most %d ranks", SPLIT_MAX_RANKS), -1;
    p->want = calloc((size_t)n, sizeof(int));
    if (!p->want)
        return snprintf(err, (size_t)errlen, "out of memory"), -1;
    for (int r = 0; r < n; r++) {
        char *end;
        long v = strtol(at, &end, 10);
        if (end == at || v < 1 || v > 1 << 24 || (r < n - 1 ? *end != ',' : *end != '\0'))
            return snprintf(err, (size_t)errlen,
                            "--split '%s': want %d local batches (each >= 1), comma-separated", s,
                            n),
                   -1;
        p->want[r] = (int)v;
        sum += v;
        at = end + 1;
    }
    if (sum != batch)
        return snprintf(err, (size_t)errlen, "--split '%s' sums to %lld, not --batch %d", s, sum,
                        batch),
               -1;
    return 0;
}

void split_part(const struct split_plan *p, int B, int r, int *first, int *count)
{
    long long total = 0, given = 0, at = 0;
    int n = p->n;

    if (!p->want) {
        int base = B / n, rem = B % n;
        *count = base + (r < rem);
        *first = r * base + (r < rem ? r : rem);
        return;
    }
    for (int k = 0; k < n; k++)
        total += p->want[k];
    /* floor shares, then one more to the largest remainders (ties: the lower rank) */
    long long share[SPLIT_MAX_RANKS], rest[SPLIT_MAX_RANKS];
    for (int k = 0; k < n; k++) {
        share[k] = (long long)p->want[k] * B / total;
        rest[k] = (long long)p->want[k] * B % total;
        given += share[k];
    }
    for (long long left = B - given; left > 0; left--) {
        int best = 0;
        for (int k = 1; k < n; k++)
            if (rest[k] > rest[best])
                best = k;
        share[best]++;
        rest[best] = -1;
    }
    for (int k = 0; k < r; k++)
        at += share[k];
    *first = (int)at;
    *count = (int)share[r];
}

int split_rebalance(struct split_plan *p, int batch, const double *sec_per_sample)
{
    double speed[SPLIT_MAX_RANKS], total = 0, rest[SPLIT_MAX_RANKS];
    int n = p->n, given = 0;

    if (n > SPLIT_MAX_RANKS || batch < n)
        return -1;
    if (!p->want && !(p->want = calloc((size_t)n, sizeof(int))))
        return -1;
    for (int r = 0; r < n; r++)
        total += speed[r] = 1.0 / sec_per_sample[r];
    /* one sample each first, the rest in proportion */
    for (int r = 0; r < n; r++) {
        double share = (double)(batch - n) * speed[r] / total;
        p->want[r] = 1 + (int)share;
        rest[r] = share - (int)share;
        given += p->want[r];
    }
    for (; given < batch; given++) {
        int best = 0;
        for (int r = 1; r < n; r++)
            if (rest[r] > rest[best])
                best = r;
        p->want[best]++;
        rest[best] = -1;
    }
    return 0;
}
