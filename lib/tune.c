/*
 * tune.c -- algorithm choice; see tune.h.
 *
 * Rules (measured with tutti-perf on the reference 2-core machine, BENCHMARKS.md):
 *   all-reduce: on 2 ranks, recursive doubling (a single exchange) at every size: each rank
 *   has one dependency per chunk instead of the ring's three, and measured twice the ring's
 *   bandwidth. On more ranks, recursive doubling while the array is at most TT_RD_MAX_BYTES
 *   and the rank count is a power of two (log2(n) hops against the ring's 2(n-1)), else the
 *   ring (bandwidth-optimal).
 *   all-gather: recursive doubling up to TT_RD_MAX_BYTES on a power-of-two count above 2,
 *   else the ring. broadcast: binomial tree up to TT_TREE_MAX_BYTES above 2 ranks, else the
 *   pipelined chain. Others: their only algorithm.
 * Channels: one per TT_MIN_CHANNEL_BYTES of data, up to TUTTI_NCHANNELS.
 */
#include "tune.h"
#include "config.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

#define TT_RD_MAX_BYTES (16 * 1024)
#define TT_TREE_MAX_BYTES (16 * 1024)
#define TT_MIN_CHANNEL_BYTES (64 * 1024)

static int coll_by_name(const char *s, size_t len)
{
    for (int c = 0; c < TT_NUM_COLLS; c++) {
        const char *name = tt_coll_name((enum tt_coll)c);
        char squeezed[32];
        size_t k = 0;

        for (const char *q = name; *q && k < sizeof(squeezed) - 1; q++)
            if (*q != '_')
                squeezed[k++] = *q;
        squeezed[k] = '\0';
        if ((strlen(name) == len && strncmp(s, name, len) == 0) ||
            (k == len && strncmp(s, squeezed, len) == 0))
            return c;
    }
    return -1;
}

tutti_result_t tt_tune_init(struct tt_tuner *t, int nranks, int max_channels)
{
    const char *spec = tt_env_str("TUTTI_ALGO");
    char buf[256];

    memset(t, 0, sizeof(*t));
    t->nranks = nranks;
    t->max_channels = max_channels;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *e = strtok_r(buf, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(e, ':');
        int c = colon ? coll_by_name(e, (size_t)(colon - e)) : -1;
        const struct tt_algo *a;

        if (c < 0)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "TUTTI_ALGO entry '%s' is not COLLECTIVE:ALGORITHM with a known "
                           "collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce)",
                           e);
        a = tt_algo_find((enum tt_coll)c, colon + 1, nranks);
        if (!a) {
            if (tt_algo_find((enum tt_coll)c, colon + 1, 1 << 20))
                return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                               "TUTTI_ALGO: %s cannot run %s on %d ranks", colon + 1,
                               tt_coll_name((enum tt_coll)c), nranks);
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "TUTTI_ALGO: %s has no algorithm '%s'",
                           tt_coll_name((enum tt_coll)c), colon + 1);
        }
        t->forced[c] = a;
    }
    return TUTTI_SUCCESS;
}

const struct tt_algo *tt_tune_pick(const struct tt_tuner *t, enum tt_coll coll, size_t bytes,
                                   int *nchannels)
{
    const struct tt_algo *a = t->forced[coll];
    size_t ch = bytes / TT_MIN_CHANNEL_BYTES;

    if (!a && coll == TT_COLL_ALL_REDUCE && (t->nranks == 2 || bytes <= TT_RD_MAX_BYTES))
        a = tt_algo_find(coll, "rd", t->nranks);
    if (!a && coll == TT_COLL_ALL_GATHER && t->nranks > 2 && bytes <= TT_RD_MAX_BYTES)
        a = tt_algo_find(coll, "rd", t->nranks);
    if (!a && coll == TT_COLL_BROADCAST && t->nranks > 2 && bytes <= TT_TREE_MAX_BYTES)
        a = tt_algo_find(coll, "tree", t->nranks);
    if (!a)
        a = tt_algo_find(coll,
                         coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE ? "chain" : "ring",
                         t->nranks);
    *nchannels = ch < 1 ? 1 : ch > (size_t)t->max_channels ? t->max_channels : (int)ch;
    TT_TRACE(TT_SUB_TUNE, "%s of %zu bytes: %s, %d channel(s)", tt_coll_name(coll), bytes, a->name,
             *nchannels);
    return a;
}
