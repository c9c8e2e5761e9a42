/*
 * half.h -- IEEE binary16 and bfloat16 <-> float32, round to nearest even.
 *
 * Integer-only and branch-light so loops over them vectorise, and so results do not depend
 * on the caller's floating-point environment (flush-to-zero, rounding mode). NaNs stay NaN
 * (quieted, sign kept); values beyond the half range become infinity.
 */
#ifndef TT_HALF_H
#define TT_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tt_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float tt_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline float tt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t exp = em >> 10, mant = em & 0x3ffu, u;

    if (exp == 0x1f) {
        u = 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0);
    } else if (exp != 0) {
        u = ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        u = 0;
    } else {
        /* Subnormal: mant * 2^-24, normalised by hand. */
        int shift = __builtin_clz(mant) - 21; /* leading zeros within 10 bits */
        mant = (mant << shift) & 0x3ffu;
        u = ((uint32_t)(113 - shift) << 23) | (mant << 13);
    }
    return tt_bits_f32(sign | u);
}

static inline uint16_t tt_float_to_half(float f)
{
    uint32_t u = tt_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: exponent >= -14 */
        uint32_t odd = (a >> 13) & 1u;
        a += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round to nearest even */
        return (uint16_t)(sign | (a >> 13));
    }
    /* Subnormal half or zero: value * 2^24 rounded to an integer. */
    uint32_t e = a >> 23;
    if (e < 102) /* < 2^-25: rounds to zero */
        return (uint16_t)sign;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += (rem > half) | ((rem == half) & q);
    return (uint16_t)(sign | q);
}

static inline float tt_bf16_to_float(uint16_t b)
{
    return tt_bits_f32((uint32_t)b << 16);
}

static inline uint16_t tt_float_to_bf16(float f)
{
    uint32_t u = tt_f32_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
