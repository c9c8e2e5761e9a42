/*
 * tune.h -- picks the algorithm and channel count for each call.
 *
 * For now a rule per collective (see tune.c) with TUTTI_ALGO overriding it; the cost-model
 * tuner of the multi-node work replaces the rules behind the same two calls.
 */
#ifndef TT_TUNE_H
#define TT_TUNE_H

#include "../algorithms/algorithms.h"

#include "tutti.h"

struct tt_tuner {
    const struct tt_algo *forced[TT_NUM_COLLS]; /* from TUTTI_ALGO, NULL: rule */
    int nranks;
    int max_channels;
};

/* Read TUTTI_ALGO ("all_reduce:ring;all_gather:ring"); errors name the bad entry. */
tutti_result_t tt_tune_init(struct tt_tuner *t, int nranks, int max_channels);

/* Algorithm and channels for a call moving `bytes` (the whole array). */
const struct tt_algo *tt_tune_pick(const struct tt_tuner *t, enum tt_coll coll, size_t bytes,
                                   int *nchannels);

#endif
