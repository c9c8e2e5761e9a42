/*
 * reduce_ref.h -- independent references for the reduction kernels' tests (reduce_ref.c).
 */
#ifndef TT_TEST_REDUCE_REF_H
#define TT_TEST_REDUCE_REF_H

#include "tutti.h"

#include <stddef.h>
#include <stdint.h>

/* xorshift64: the tests' random bits, the same sequence every run. */
uint64_t next(void);

/* binary16 through GCC's _Float16. */
uint16_t f16_bits(_Float16 h);
_Float16 f16_from_bits(uint16_t u);

/* bfloat16 round-to-nearest-even of a float, by arithmetic on doubles; and a code's value. */
uint16_t bf16_ref(float f);
float bf16_val(uint16_t b);

/* FP8 from the formats' definition (OCP 8-bit floating point): the mantissa bits of t
 * (TT_FP8_E4M3 or TT_FP8_E5M2), a code's value, whether it is NaN, and x's code by a search
 * over every code (nearest, ties to even, saturating; NaN 0xff). */
int fp8_mbits(tutti_dtype_t t);
double fp8_val(unsigned c, int mbits);
int fp8_nan(unsigned c, int mbits);
uint8_t fp8_ref(double x, int mbits);

/* Is v (the element's bits, widened) a NaN of dtype t? */
int nan_bits(tutti_dtype_t t, uint64_t v);

/* Asserts that want and got are the same bits, or both NaN: what, case j, element i. */
void same_bits(tutti_dtype_t t, uint64_t want, uint64_t got, const char *what, size_t j, size_t i);

#endif
