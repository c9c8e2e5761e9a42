/*
 * test_half.c -- the fp16 and bf16 hooks' conversions (ddp/half.c) against references that do
 * not share their code: GCC's _Float16 for float16, the nearer of the two neighbouring
 * bfloat16 values (ties to the even one) for bfloat16. Both paths: the vector one on long
 * runs, the one-at-a-time one on runs of a single element.
 */
#include "../../../ddp/ddp_half.h"
#include "../../../lib/base/half.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define f32 tt_bits_f32 /* lib/base/half.h's bit casts (only those) */
#define bits tt_f32_bits

static uint16_t f16_ref(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

/* The bfloat16 value of code c as a double; the code above the largest finite one counts
 * as 2^128 (where rounding to infinity starts). */
static double bf16_val(uint32_t c)
{
    double m = ldexp((double)((c & 0x7f) | ((c & 0x7f80) ? 0x80 : 0)), -7);
    int e = (int)((c >> 7) & 0xff);
    double v = e == 0xff ? ldexp(1.0, 128) : ldexp(m, e ? e - 127 : -126);
    return (c & 0x8000) ? -v : v;
}

static uint16_t bf16_ref(float f)
{
    uint32_t lo = bits(f) >> 16, hi = lo + 1; /* toward zero, and one further out */
    double dl = fabs((double)f - bf16_val(lo)), dh = fabs(bf16_val(hi) - (double)f);
    return (uint16_t)(dl < dh || (dl == dh && !(lo & 1)) ? lo : hi);
}

static int f16_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static int bf16_nan(uint16_t h)
{
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

/* One float's conversion, got against the reference: NaN must give a quiet NaN. */
static void check_pack(float in, float scale, uint16_t got, int bf16, const char *path)
{
    volatile float v = in * scale; /* rounded to float, as the conversion sees it */
    if (isnan(v)) {
        cr_assert(bf16 ? bf16_nan(got) && (got & 0x40) : f16_nan(got) && (got & 0x200),
                  "%s %s: %a: want a quiet NaN, got 0x%04x", bf16 ? "bf16" : "fp16", path, v, got);
        return;
    }
    uint16_t want = bf16 ? bf16_ref(v) : f16_ref(v);
    cr_assert_eq(got, want, "%s %s: %a * %a: want 0x%04x, got 0x%04x", bf16 ? "bf16" : "fp16", path,
                 in, scale, want, got);
}

/* Every float exponent and sign, with mantissas ending in ten zero bits (so every float16
 * and bfloat16 midpoint), in 0x001 and in 0x3ff (either side of one), scaled by 1 and by two
 * scales that round. */
static void check_pack_all(int bf16)
{
    const size_t n = (size_t)1 << 22;
    const float scales[] = {1.0f, 0.25f, 1.0f / 3.0f};
    const uint32_t lows[] = {0, 1, 0x3ff};
    float *x = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * 2);

    for (size_t s = 0; s < sizeof(scales) / sizeof(scales[0]); s++)
        for (size_t l = 0; l < (s ? 1 : sizeof(lows) / sizeof(lows[0])); l++) {
            for (size_t k = 0; k < n; k++)
                x[k] = f32((uint32_t)(k << 10) | lows[l]);
            ddp_half_pack(h, x, n - 3, scales[s], bf16); /* n - 3: a tail too */
            for (size_t k = 0; k < n - 3; k++)
                check_pack(x[k], scales[s], h[k], bf16, "vector");
            for (size_t k = 0; k < n; k += 61) {
                uint16_t one;
                ddp_half_pack(&one, &x[k], 1, scales[s], bf16);
                check_pack(x[k], scales[s], one, bf16, "one at a time");
            }
        }
    free(x), free(h);
}

Test(half, pack_fp16)
{
    check_pack_all(0);
}

Test(half, pack_bf16)
{
    check_pack_all(1);
}

Test(half, unpack_every_code)
{
    uint16_t *h = malloc(65536 * 2);
    float *x = malloc(65536 * sizeof(float));

    for (uint32_t c = 0; c < 65536; c++)
        h[c] = (uint16_t)c;
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int one = 0; one < 2; one++) {
            if (one)
                for (uint32_t c = 0; c < 65536; c++)
                    ddp_half_unpack(&x[c], &h[c], 1, bf16);
            else
                ddp_half_unpack(x, h, 65536, bf16);
            for (uint32_t c = 0; c < 65536; c++) {
                _Float16 r;
                memcpy(&r, &h[c], 2);
                float want = bf16 ? f32(c << 16) : (float)r;
                if (isnan(want))
                    cr_assert(isnan(x[c]), "0x%04x: want NaN", c);
                else
                    cr_assert(bits(x[c]) == bits(want), "%s 0x%04x: want %a got %a",
                              bf16 ? "bf16" : "fp16", c, want, x[c]);
            }
        }
    free(h), free(x);
}
