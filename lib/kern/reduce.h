/*
 * reduce.h -- host reduction kernels for every dtype x op.
 *
 * A kernel computes d0[i] = a[i] OP b[i] (and d1[i] the same when d1 != NULL) for i < n.
 * d0 may be the same array as a or b (same index only); d1 does not overlap anything.
 * AVG reduces as SUM; tt_postop_avg() divides by the rank count once at the end.
 */
#ifndef TT_REDUCE_H
#define TT_REDUCE_H

#include "tutti.h"

#include <stddef.h>

typedef void (*tt_reduce_fn)(void *d0, void *d1, const void *a, const void *b, size_t n);

/* Kernel for (dtype, op); op AVG gives the SUM kernel. NULL for invalid values. On x86-64 the
 * 16- and 8-bit floats take the CPU's conversion instructions where it has them (F16C, AVX2,
 * AVX512_BF16: reduce_x86.c); tt_reduce_kernel_portable gives the kernels without them (tests,
 * benchmarks, and those kernels' tails). */
tt_reduce_fn tt_reduce_kernel(tutti_dtype_t dtype, tutti_op_t op);
tt_reduce_fn tt_reduce_kernel_portable(tutti_dtype_t dtype, tutti_op_t op);

/* d[i] /= divisor (integers truncate toward zero; halves compute in float and round). Here and
 * below, *_portable: the same without reduce_x86.c's kernels, bit for bit (a NaN's sign aside;
 * tests, benchmarks, and those kernels' tails). */
void tt_postop_avg(tutti_dtype_t dtype, void *d, size_t n, int divisor);
void tt_postop_avg_portable(tutti_dtype_t dtype, void *d, size_t n, int divisor);
typedef void (*tt_avg_fn)(void *d, size_t n, int divisor);

/* d[i] = s[i] * *scalar (of dtype) for i < n: PROD's arithmetic (integers wrap; halves and
 * FP8 compute in float and round). d may be s. The pre-pass of premul-sum operators. */
void tt_premul(tutti_dtype_t dtype, void *d, const void *s, size_t n, const void *scalar);
void tt_premul_portable(tutti_dtype_t dtype, void *d, const void *s, size_t n, const void *scalar);
typedef void (*tt_scale_fn)(void *d, const void *s, size_t n, const void *scalar);

/* The premul-sum steps of a call out of place on the host, which scale the caller's input as
 * they read it: d0[i] = a[i] + b[i] * *k (d1[i] the same when d1 != NULL), the product
 * rounded to the dtype first, exactly tt_premul then the SUM kernel. NULL for a bad dtype. */
typedef void (*tt_premul_fn)(void *d0, void *d1, const void *a, const void *b, size_t n,
                             const void *k);
tt_premul_fn tt_premul_sum_kernel(tutti_dtype_t dtype);
tt_premul_fn tt_premul_sum_kernel_portable(tutti_dtype_t dtype);

/* The kernels with this CPU's conversion instructions for a dtype (reduce_x86.c): NULL where
 * it has none for it (on other CPUs always), else tt_reduce_kernel's (SUM to MAX), tt_premul's,
 * tt_premul_sum_kernel's and tt_postop_avg's (divisor > 1) first choice. */
struct tt_cpu_kernels {
    const tt_reduce_fn *reduce; /* SUM, PROD, MIN, MAX */
    tt_scale_fn premul;
    tt_premul_fn pmsum;
    tt_avg_fn avg;
};
const struct tt_cpu_kernels *tt_cpu_kernels(tutti_dtype_t dtype);

#endif
