/*
 * ddp_half.h -- the fp16 and bf16 hooks' conversions (ddp_half.c): float32 to float16 or bfloat16,
 * rounded to nearest even, and back.
 */
#ifndef TT_DDP_HALF_H
#define TT_DDP_HALF_H

#include <stddef.h>
#include <stdint.h>

/* h[j] = x[j] * scale, rounded to float16 (bf16 == 0) or bfloat16 (bf16 != 0). */
void ddp_half_pack(uint16_t *h, const float *x, size_t n, float scale, int bf16);

/* x[j] = h[j] widened (exact). */
void ddp_half_unpack(float *x, const uint16_t *h, size_t n, int bf16);

#endif
