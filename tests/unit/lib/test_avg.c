/*
 * test_avg.c -- AVG's division (tt_postop_avg): every code of the 16- and 8-bit floats, and
 * float32 and float64 on random bits, against the references of reduce_ref.c and against the
 * portable kernels, bit for bit.
 */
#include "../../../lib/base/half.h"
#include "../../../lib/kern/reduce.h"
#include "reduce_ref.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

Test(reduce, avg_divides_once)
{
    int32_t i32[4] = {-7, 7, 9, -1};
    uint8_t u8[2] = {255, 3};
    float f[2] = {3.0f, -1.0f};
    uint16_t h[2] = {f16_bits((_Float16)3.0f), bf16_ref(3.0f)};

    tt_postop_avg(TUTTI_INT32, i32, 4, 2);
    cr_assert(i32[0] == -3 && i32[1] == 3 && i32[2] == 4 && i32[3] == 0, "truncates toward 0");
    tt_postop_avg(TUTTI_UINT8, u8, 2, 200); /* a divisor wider than the type */
    cr_assert(u8[0] == 1 && u8[1] == 0);
    tt_postop_avg(TUTTI_FLOAT32, f, 2, 4);
    cr_assert(f[0] == 0.75f && f[1] == -0.25f);
    tt_postop_avg(TUTTI_FLOAT16, &h[0], 1, 3);
    cr_assert_eq(h[0], f16_bits((_Float16)(3.0f / 3.0f)));
    tt_postop_avg(TUTTI_BFLOAT16, &h[1], 1, 3);
    cr_assert_eq(h[1], bf16_ref(1.0f));
    /* FP8: 7 / 3 = 2.33 rounds to 2.25 (E4M3) and 2.5 (E5M2: 2, 2.5, 3 around it) */
    uint8_t q[2] = {fp8_ref(7, TT_FP8_E4M3), fp8_ref(7, TT_FP8_E5M2)};
    tt_postop_avg(TUTTI_FLOAT8_E4M3, &q[0], 1, 3);
    tt_postop_avg(TUTTI_FLOAT8_E5M2, &q[1], 1, 3);
    cr_assert(fp8_val(q[0], TT_FP8_E4M3) == 2.25 && fp8_val(q[1], TT_FP8_E5M2) == 2.5,
              "FP8 averages: %g, %g", fp8_val(q[0], TT_FP8_E4M3), fp8_val(q[1], TT_FP8_E5M2));
}

/* The divisors after dv for FP8's codes: every one to 300, some to 1200, then the powers of two
 * to 2^30 (which skip the exact rounding: TT_INEXACT); 0 at the end. */
static int next_divisor(int dv)
{
    return dv < 300       ? dv + 1
           : dv < 1200    ? (dv + 37 < 1200 ? dv + 37 : 2048)
           : dv < 1 << 30 ? dv * 2
                          : 0;
}

/* AVG's division, every code of the 16- and 8-bit floats by divisors small and large, through
 * the post-op this CPU runs (reduce_x86.c's where present) against the portable one, bit for
 * bit, and for FP8 against the reference too (the float quotient rounded once: the vector
 * path rounds through float16 and must not round twice). Lengths leave vector tails. */
Test(reduce, avg_every_code)
{
    const int divs[] = {2,  3,  5,   6,   7,    9,    10,    11,      12,           13,
                        24, 96, 100, 127, 1000, 4099, 65537, 1 << 20, (1 << 30) + 3};
    const size_t n = 65536 + 7;
    uint16_t *h = malloc(n * 2), *g = malloc(n * 2);

    for (size_t j = 0; j < sizeof(divs) / sizeof(divs[0]); j++)
        for (int t = TUTTI_FLOAT16; t <= TUTTI_BFLOAT16; t++) {
            for (size_t i = 0; i < n; i++)
                h[i] = g[i] = (uint16_t)(i - 7);
            tt_postop_avg((tutti_dtype_t)t, h, n, divs[j]);
            tt_postop_avg_portable((tutti_dtype_t)t, g, n, divs[j]);
            for (size_t i = 0; i < n; i++)
                same_bits((tutti_dtype_t)t, g[i], h[i], "avg", (size_t)divs[j], i);
        }
    /* FP8: the codes in order from 0xf9 (vectors of mixed binades, and a tail), then each in
     * a run of 32 (a vector of one code: the powers of two's integer path, where it applies). */
    for (int t = TUTTI_FLOAT8_E4M3; t <= TUTTI_FLOAT8_E5M2; t++) {
        int mb = fp8_mbits((tutti_dtype_t)t);
        enum { RUNS = 256 * 32 + 7 };
        uint8_t want[256], *c = malloc(RUNS), *e = malloc(RUNS);
        for (int dv = 2; dv > 0; dv = next_divisor(dv)) {
            for (int x = 0; x < 256; x++) {
                volatile float q = (float)fp8_val((unsigned)x, mb) / (float)dv;
                want[x] = fp8_ref(q, mb);
            }
            for (int layout = 0; layout < 2; layout++) {
                size_t len = layout ? RUNS : 256 + 7;
                for (size_t i = 0; i < len; i++)
                    c[i] = e[i] = (uint8_t)(layout ? i / 32 : i - 7);
                tt_postop_avg((tutti_dtype_t)t, c, len, dv);
                tt_postop_avg_portable((tutti_dtype_t)t, e, len, dv);
                for (size_t i = 0; i < len; i++) {
                    uint8_t x = (uint8_t)(layout ? i / 32 : i - 7);
                    same_bits((tutti_dtype_t)t, want[x], c[i], "avg", (size_t)dv, i);
                    same_bits((tutti_dtype_t)t, e[i], c[i], "avg against portable", (size_t)dv, i);
                }
            }
        }
        free(c), free(e);
    }
    free(h), free(g);
}

/* AVG's division for float32 and float64, on random bits (subnormals, infinities, NaNs among
 * them): by powers of two the kernels multiply by the reciprocal, which must give the
 * quotient, bit for bit, down to subnormal results; other divisors divide. */
Test(reduce, avg_floats_any_bits)
{
    const int divs[] = {2, 4, 8, 64, 1 << 20, 1 << 30, 3, 6, 1000};
    const size_t n = 100003;
    float *f = malloc(n * 4), *f0 = malloc(n * 4);
    double *g = malloc(n * 8), *g0 = malloc(n * 8);

    for (size_t i = 0; i < n; i++) {
        uint64_t r = next();
        f0[i] = tt_bits_f32((uint32_t)r);
        memcpy(&g0[i], &r, 8);
        if (i % 3 == 0) /* tiny: quotients that are subnormal */
            f0[i] = tt_bits_f32(((uint32_t)r & 0x80ffffffu) | 0x00800000u),
            g0[i] = ldexp(1.0 + (double)(r % 1000) / 1000, -1015 - (int)(r % 9));
    }
    for (size_t j = 0; j < sizeof(divs) / sizeof(divs[0]); j++) {
        memcpy(f, f0, n * 4);
        memcpy(g, g0, n * 8);
        tt_postop_avg(TUTTI_FLOAT32, f, n, divs[j]);
        tt_postop_avg(TUTTI_FLOAT64, g, n, divs[j]);
        for (size_t i = 0; i < n; i++) {
            volatile float wf = f0[i] / (float)divs[j];
            volatile double wg = g0[i] / (double)divs[j];
            uint64_t bg, bw;
            memcpy(&bg, &g[i], 8);
            memcpy(&bw, (const void *)&wg, 8);
            same_bits(TUTTI_FLOAT32, tt_f32_bits(wf), tt_f32_bits(f[i]), "avg", (size_t)divs[j], i);
            same_bits(TUTTI_FLOAT64, bw, bg, "avg", (size_t)divs[j], i);
        }
    }
    free(f), free(f0), free(g), free(g0);
}

/* AVG's division for float16 and bfloat16 against the independent references (GCC's _Float16,
 * bf16_ref): every code, by divisors powers of two and not, each code's neighbours in the
 * same vector alike (a run of one binade: the powers of two's integer path) or mixed (the
 * codes in order, then shuffled: subnormal and special quotients beside normal ones). */
Test(reduce, avg_against_references)
{
    const int divs[] = {2, 3, 4, 8, 16, 1 << 10, 1 << 14, 1 << 15, 1 << 24, 1 << 30, 7, 1000};
    const size_t n = 65536;
    uint16_t *c = malloc(n * 2), *h = malloc(n * 2);

    for (int shuffled = 0; shuffled < 2; shuffled++)
        for (size_t j = 0; j < sizeof(divs) / sizeof(divs[0]); j++) {
            const float dv = (float)divs[j];
            for (size_t i = 0; i < n; i++)
                c[i] = (uint16_t)i;
            for (size_t i = n - 1; shuffled && i > 0; i--) {
                size_t r = (size_t)(next() % (i + 1));
                uint16_t t = c[i];
                c[i] = c[r], c[r] = t;
            }
            memcpy(h, c, n * 2);
            tt_postop_avg(TUTTI_FLOAT16, h, n, divs[j]);
            for (size_t i = 0; i < n; i++)
                same_bits(TUTTI_FLOAT16, f16_bits((_Float16)((float)f16_from_bits(c[i]) / dv)),
                          h[i], "avg", (size_t)divs[j], i);
            memcpy(h, c, n * 2);
            tt_postop_avg(TUTTI_BFLOAT16, h, n, divs[j]);
            for (size_t i = 0; i < n; i++)
                same_bits(TUTTI_BFLOAT16, bf16_ref(bf16_val(c[i]) / dv), h[i], "avg",
                          (size_t)divs[j], i);
        }
    free(c), free(h);
}
