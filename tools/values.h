/*
 * values.h -- inputs and expected results for checking collectives, computed without tutti.
 *
 * Rank r's element i is a small integer from (op, r, i), periodic in i (period 9 for sums and
 * averages, 3 for products, 37 otherwise), so sums and products over up to 64 ranks are exact
 * in every dtype (FP8: ranks from 8 on add 0 and multiply by 1; values.c says why), and the
 * expected value of an element is computed once per residue. Values are encoded into dtypes
 * by C casts, GCC's _Float16 and frexp/nearbyint for bfloat16 and FP8: none of tutti's
 * conversion code. Used by tutti-perf (-c 1) and the coll_check tests.
 */
#ifndef TT_VALUES_H
#define TT_VALUES_H

#include "tutti.h"

#include <stddef.h>
#include <stdint.h>

/* op < 0: data that is not reduced (all-gather, broadcast, send/recv). */
#define VAL_NO_OP (-1)
/* A premul-sum operator (tutti_op_create_premul_sum) with val_premul_scalar's scalars: SUM's
 * inputs, each rank's multiplied by its own scalar. */
#define VAL_PREMUL TUTTI_NUM_OPS
#define VAL_MAX_PERIOD 37

int val_period(int op);

/* Input of rank r at index i. */
int64_t val_gen(tutti_dtype_t t, int op, int r, size_t i);

/* Encode an integer / real into dtype t at p; integers wrap modulo their width. */
void val_encode(tutti_dtype_t t, int64_t iv, double fv, void *p);

/* Rank r's scalar for VAL_PREMUL, as an integer (2 on rank 0, 1 elsewhere: a scalar applied
 * to the wrong input, twice or to the result gives another sum) and encoded in dtype t at p. */
int val_premul_scalar(tutti_dtype_t t, int r, void *p);

/* Fill n elements at p with rank r's inputs for indices first, first+1, ... */
void val_fill(tutti_dtype_t t, int op, int r, void *p, size_t n, size_t first);

/* table[k] (k < val_period(op)) = expected reduction over nranks ranks at index k. */
void val_expect_reduce(tutti_dtype_t t, int op, int nranks, unsigned char *table);

/* table[k] = rank r's input at index k (for gathered / broadcast data). */
void val_expect_input(tutti_dtype_t t, int op, int r, unsigned char *table);

/* Elements of out (logical indices first...) that differ from table[(first + k) % period]. */
size_t val_count_wrong(tutti_dtype_t t, int op, const void *out, size_t n, size_t first,
                       const unsigned char *table, size_t *first_bad);

#endif
