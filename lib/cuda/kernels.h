/*
 * kernels.h -- the CUDA reduction kernels (kernels.cu), callable from C. `stream` is a
 * cudaStream_t; each call queues one kernel and returns the cudaError_t of the launch (0 on
 * success). Semantics are lib/kern/reduce.c's: see kernels.cu.
 */
#ifndef TT_CUDA_KERNELS_H
#define TT_CUDA_KERNELS_H

#include "tutti.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = a[i] op b[i] for i < count (AVG combines as SUM); dst may be a or b. */
int tt_cuda_reduce(void *dst, const void *a, const void *b, size_t count, tutti_dtype_t dtype,
                   tutti_op_t op, void *stream);

/* The fused reduce-copy: the same, written to dst and, when dst2 is not NULL, to dst2 in the
 * same pass (dst2 must not overlap a, b or dst); with divisor > 1, each result divided by it
 * first, as tt_cuda_divide would (the step that ends an AVG, in one pass). */
int tt_cuda_reduce_copy(void *dst, void *dst2, const void *a, const void *b, size_t count,
                        tutti_dtype_t dtype, tutti_op_t op, int divisor, void *stream);

/* buf[i] /= ranks: the end of an AVG. */
int tt_cuda_divide(void *buf, size_t count, tutti_dtype_t dtype, int ranks, void *stream);

/* dst[i] = src[i] * scalar (PROD's arithmetic): the scalar is *dev_scalar, read by the
 * kernel, when dev_scalar is not NULL, else the dtype's bytes at host address `value`. dst may
 * be src. The pre-pass of premul-sum operators. */
int tt_cuda_premul(void *dst, const void *src, size_t count, tutti_dtype_t dtype, const void *value,
                   const void *dev_scalar, void *stream);

#ifdef __cplusplus
}
#endif

#endif
