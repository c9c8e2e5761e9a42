/*
 * reduce_ref.c -- the references that the reduction kernels' tests (test_reduce.c, test_avg.c)
 * check against: they share no code with lib/kern/reduce.c or lib/base/half.h's conversions. GCC's
 * _Float16 for binary16, frexp/nearbyint arithmetic for bfloat16, a search over every code
 * for FP8.
 */
#include "reduce_ref.h"

#include "../../../lib/base/half.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static uint64_t rng = 0x1234567887654321ull;
uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

uint16_t f16_bits(_Float16 h)
{
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

_Float16 f16_from_bits(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return h;
}

/* bfloat16 round-to-nearest-even of a float, by arithmetic on doubles. */
uint16_t bf16_ref(float f)
{
    int e;
    double d = f, r;

    if (isnan(f))
        return 0x7fc0 | (signbit(f) ? 0x8000 : 0);
    if (d == 0 || isinf(d))
        return (uint16_t)(tt_f32_bits(f) >> 16);
    frexp(d, &e); /* d = m * 2^e, 0.5 <= |m| < 1: 8 significant bits means quantum 2^(e-8) */
    int q = e - 8 < -133 ? -133 : e - 8;
    r = ldexp(nearbyint(ldexp(d, -q)), q);
    if (fabs(r) > 3.3895313892515355e38) /* beyond the largest bfloat16 */
        r = copysign(INFINITY, d);
    return (uint16_t)(tt_f32_bits((float)r) >> 16);
}

float bf16_val(uint16_t b)
{
    return tt_bits_f32((uint32_t)b << 16);
}

int fp8_mbits(tutti_dtype_t t)
{
    return t == TUTTI_FLOAT8_E4M3 ? TT_FP8_E4M3 : TT_FP8_E5M2;
}

/* The value of code c: E4M3 has no infinities and one NaN per sign (S.1111.111); E5M2's
 * top exponent holds infinities and NaNs, as in IEEE 754. */
double fp8_val(unsigned c, int mbits)
{
    int bias = mbits == 3 ? 7 : 15, e = (int)(c & 0x7f) >> mbits, m = (int)c & ((1 << mbits) - 1);
    double s = c & 0x80 ? -1 : 1;

    if ((mbits == 3 && (c & 0x7f) == 0x7f) || (mbits == 2 && e == 31 && m))
        return NAN;
    if (mbits == 2 && e == 31)
        return s * INFINITY;
    return s * (e ? ldexp(1 + ldexp(m, -mbits), e - bias) : ldexp(m, 1 - bias - mbits));
}

int fp8_nan(unsigned c, int mbits)
{
    return isnan(fp8_val(c, mbits));
}

/* x as FP8 by search: the nearest finite value of x's sign, ties to the even code; so an
 * infinity or a value beyond the largest saturates to the largest. NaN: 0xff (NaN in both). */
uint8_t fp8_ref(double x, int mbits)
{
    unsigned base = signbit(x) ? 0x80 : 0, best = base;
    double bd = INFINITY;

    if (isnan(x))
        return 0xff;
    if (fabs(x) > 1e6) /* the largest codes' distances stay apart in a double */
        x = copysign(1e6, x);
    for (unsigned c = base; c < base + 0x80; c++) {
        double v = fp8_val(c, mbits), d = fabs(v - x);
        if (isfinite(v) && (d < bd || (d == bd && !(c & 1)))) {
            bd = d;
            best = c;
        }
    }
    return (uint8_t)best;
}

int nan_bits(tutti_dtype_t t, uint64_t v)
{
    switch (t) {
    case TUTTI_FLOAT8_E4M3:
    case TUTTI_FLOAT8_E5M2: return fp8_nan((unsigned)v, fp8_mbits(t));
    case TUTTI_FLOAT16: return (v & 0x7c00) == 0x7c00 && (v & 0x3ff);
    case TUTTI_BFLOAT16: return (v & 0x7f80) == 0x7f80 && (v & 0x7f);
    case TUTTI_FLOAT32: return isnan(tt_bits_f32((uint32_t)v));
    case TUTTI_FLOAT64: {
        double d;
        memcpy(&d, &v, 8);
        return isnan(d);
    }
    default: return 0;
    }
}

/* want and got are the same bits, or both NaN. */
void same_bits(tutti_dtype_t t, uint64_t want, uint64_t got, const char *what, size_t j, size_t i)
{
    cr_assert(got == want || (nan_bits(t, want) && nan_bits(t, got)),
              "%s %s, case %zu [%zu]: want 0x%llx got 0x%llx", tutti_dtype_name(t), what, j, i,
              (unsigned long long)want, (unsigned long long)got);
}
