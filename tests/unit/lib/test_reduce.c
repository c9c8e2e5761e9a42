/*
 * test_reduce.c -- host reduction kernels and 16- and 8-bit float conversions against scalar
 * references that do not share their code: GCC's _Float16 for binary16, frexp/nearbyint
 * arithmetic for bfloat16, a search over every code for FP8, 64-bit integer arithmetic for
 * wrapping integer ops.
 */
#include "../../../lib/base/half.h"
#include "../../../lib/kern/reduce.h"
#include "reduce_ref.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

Test(half, binary16_to_float_exhaustive)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float want = (float)f16_from_bits((uint16_t)h), got = tt_half_to_float((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(got), "0x%04x: want NaN, got %a", h, got);
        else
            cr_assert(tt_f32_bits(want) == tt_f32_bits(got), "0x%04x: want %a, got %a", h, want,
                      got);
    }
}

static void check_to_half(float f)
{
    uint16_t want = f16_bits((_Float16)f), got = tt_float_to_half(f);

    if (isnan(f))
        cr_assert((got & 0x7c00) == 0x7c00 && (got & 0x3ff), "%a: want NaN, got 0x%04x", f, got);
    else
        cr_assert_eq(got, want, "%a: want 0x%04x, got 0x%04x", f, want, got);
}

Test(half, float_to_binary16_rounding)
{
    /* Every half value, the midpoints between neighbours, and one ulp either side. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        uint32_t u = tt_f32_bits(tt_half_to_float((uint16_t)h));
        uint32_t mid =
            tt_f32_bits((tt_half_to_float((uint16_t)h) + tt_half_to_float((uint16_t)(h + 1))) / 2);
        for (int s = 0; s < 2; s++) {
            uint32_t sign = s ? 0x80000000u : 0;
            check_to_half(tt_bits_f32((u | sign)));
            check_to_half(tt_bits_f32((mid | sign)));
            check_to_half(tt_bits_f32(((mid + 1) | sign)));
            check_to_half(tt_bits_f32(((mid - 1) | sign)));
        }
    }
    static const float edges[] = {65504.0f,      65519.99f, 65520.0f, 1e9f,      5.96e-8f, 2.98e-8f,
                                  2.9802322e-8f, 1e-30f,    INFINITY, -INFINITY, 0.0f,     -0.0f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        check_to_half(edges[i]);
    for (int i = 0; i < 2000000; i++)
        check_to_half(tt_bits_f32((uint32_t)next()));
}

Test(half, bfloat16_rounding)
{
    for (int i = 0; i < 2000000; i++) {
        float f = tt_bits_f32((uint32_t)next());
        uint16_t got = tt_float_to_bf16(f);
        if (isnan(f)) {
            cr_assert(isnan(bf16_val(got)), "%a: want NaN", f);
            continue;
        }
        cr_assert_eq(got, bf16_ref(f), "%a: want 0x%04x got 0x%04x", f, bf16_ref(f), got);
    }
    /* Ties: exactly halfway between two bfloat16 values go to the even one. */
    for (uint32_t b = 0; b < 0x7f7f; b += 7) {
        float tie = tt_bits_f32((b << 16) | 0x8000u);
        cr_assert_eq(tt_float_to_bf16(tie), bf16_ref(tie), "tie 0x%04x", b);
        cr_assert_eq(tt_float_to_bf16(tie), (b & 1) ? b + 1 : b, "tie 0x%04x", b);
    }
}

/* ---- FP8, from the formats' definition (OCP 8-bit floating point) ---- */

static void check_to_fp8(float f, int mbits)
{
    uint8_t want = fp8_ref(f, mbits), got = tt_float_to_fp8(f, mbits);

    if (isnan(f))
        cr_assert(fp8_nan(got, mbits), "%a to FP8 (m%d): want NaN, got 0x%02x", f, mbits, got);
    else
        cr_assert_eq(got, want, "%a to FP8 (m%d): want 0x%02x, got 0x%02x", f, mbits, want, got);
}

Test(half, fp8_exhaustive)
{
    for (int mbits = 2; mbits <= 3; mbits++) {
        /* Every code to float, and back. */
        for (unsigned c = 0; c < 256; c++) {
            double want = fp8_val(c, mbits);
            float got = tt_fp8_to_float((uint8_t)c, mbits);
            if (isnan(want)) {
                cr_assert(isnan(got), "0x%02x (m%d): want NaN, got %a", c, mbits, got);
                cr_assert(fp8_nan(tt_float_to_fp8(got, mbits), mbits), "0x%02x: NaN back", c);
                continue;
            }
            cr_assert((double)got == want && !signbit(got) == !signbit(want),
                      "0x%02x (m%d): want %a, got %a", c, mbits, want, got);
            check_to_fp8(got, mbits);
        }
        /* Rounding: the midpoints between neighbours, one float ulp either side of each. */
        for (unsigned c = 0; c < 0x7f; c++) {
            double lo = fp8_val(c, mbits), hi = fp8_val(c + 1, mbits);
            if (!isfinite(lo) || !isfinite(hi))
                continue;
            uint32_t mid = tt_f32_bits((float)((lo + hi) / 2));
            for (int neg = 0; neg < 2; neg++)
                for (int d = -1; d <= 1; d++)
                    check_to_fp8(tt_bits_f32((mid + (uint32_t)d) | (neg ? 0x80000000u : 0)), mbits);
        }
        /* Saturation, the largest finite values' neighbourhood, underflow, specials. */
        static const float edges[] = {448,      464,      464.01f,    480,     57344,    61439,
                                      61440,    65536,    1e30f,      0x1p-9f, 0x1p-10f, 0x1.8p-10f,
                                      0x1p-16f, 0x1p-17f, 0x1.8p-17f, 1e-30f,  INFINITY, -INFINITY,
                                      NAN,      0.0f,     -0.0f};
        for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
            check_to_fp8(edges[i], mbits);
            check_to_fp8(-edges[i], mbits);
        }
        /* Random floats: any bits, and within the formats' range (2^-20 .. 2^20). */
        for (int i = 0; i < 100000; i++) {
            uint32_t u = (uint32_t)next();
            check_to_fp8(tt_bits_f32(u), mbits);
            check_to_fp8(tt_bits_f32((u & 0x807fffffu) | ((107u + (u >> 8) % 41u) << 23)), mbits);
        }
    }
    cr_assert_eq(tt_float_to_fp8(1e6f, TT_FP8_E4M3), 0x7e, "E4M3 saturates at 448");
    cr_assert_eq(tt_float_to_fp8(-INFINITY, TT_FP8_E5M2), 0xfb, "E5M2 saturates at -57344");
}

/* ---- kernels ---- */

#define N 1027 /* odd: exercises vector tails */

static int64_t sx(tutti_dtype_t t, const void *p, size_t i)
{
    switch (t) {
    case TUTTI_INT8: return ((const int8_t *)p)[i];
    case TUTTI_UINT8: return ((const uint8_t *)p)[i];
    case TUTTI_INT32: return ((const int32_t *)p)[i];
    case TUTTI_UINT32: return ((const uint32_t *)p)[i];
    case TUTTI_INT64: return ((const int64_t *)p)[i];
    case TUTTI_UINT64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
    }
}

static int is_unsigned(tutti_dtype_t t)
{
    return t == TUTTI_UINT8 || t == TUTTI_UINT32 || t == TUTTI_UINT64;
}

/* The expected integer result, wrapped to the type's width, as its low bytes. */
static uint64_t int_ref(tutti_dtype_t t, tutti_op_t op, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int bits = (int)tutti_dtype_size(t) * 8;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    int lt = is_unsigned(t) ? ((ua & mask) < (ub & mask)) : a < b;

    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return (ua + ub) & mask;
    case TUTTI_PROD: return (ua * ub) & mask;
    case TUTTI_MIN: return (lt ? ua : ub) & mask;
    default: return (lt ? ub : ua) & mask;
    }
}

static double fmin_nan(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}
static double fmax_nan(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

static void fill(tutti_dtype_t t, void *p, int with_nan)
{
    size_t es = tutti_dtype_size(t);
    for (size_t i = 0; i < N; i++) {
        uint64_t r = next();
        double v = (double)((int64_t)(r % 2001) - 1000) / 8.0; /* exact in every float type */
        if (with_nan && i % 97 == 5)
            v = NAN;
        switch (t) {
        case TUTTI_FLOAT8_E4M3:
        case TUTTI_FLOAT8_E5M2: /* any code; without NaNs, every finite one (and infinities) */
            ((uint8_t *)p)[i] = with_nan || !fp8_nan(r & 0xff, fp8_mbits(t)) ? r & 0xff : 0x38;
            break;
        case TUTTI_FLOAT16: ((uint16_t *)p)[i] = f16_bits((_Float16)v); break;
        case TUTTI_BFLOAT16: ((uint16_t *)p)[i] = bf16_ref((float)v); break;
        case TUTTI_FLOAT32: ((float *)p)[i] = (float)v; break;
        case TUTTI_FLOAT64: ((double *)p)[i] = v * 1.000001; break;
        default: memcpy((char *)p + i * es, &r, es); break;
        }
    }
}

static double apply(tutti_op_t op, double x, double y)
{
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return x + y;
    case TUTTI_PROD: return x * y;
    case TUTTI_MIN: return fmin_nan(x, y);
    default: return fmax_nan(x, y);
    }
}

static float applyf(tutti_op_t op, float x, float y)
{
    volatile float r; /* computed in float, as IEEE says, not in a wider register */
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: r = x + y; break;
    case TUTTI_PROD: r = x * y; break;
    case TUTTI_MIN: r = (float)fmin_nan(x, y); break;
    default: r = (float)fmax_nan(x, y); break;
    }
    return r;
}

/* Expected bits of element i of a OP b. */
static uint64_t expect(tutti_dtype_t t, tutti_op_t op, const void *a, const void *b, size_t i)
{
    uint64_t bits = 0;

    switch (t) {
    case TUTTI_FLOAT8_E4M3:
    case TUTTI_FLOAT8_E5M2: {
        int mb = fp8_mbits(t);
        float x = (float)fp8_val(((const uint8_t *)a)[i], mb);
        float y = (float)fp8_val(((const uint8_t *)b)[i], mb);
        return fp8_ref(applyf(op, x, y), mb);
    }
    case TUTTI_FLOAT16: {
        float x = (float)f16_from_bits(((const uint16_t *)a)[i]);
        float y = (float)f16_from_bits(((const uint16_t *)b)[i]);
        return f16_bits((_Float16)applyf(op, x, y));
    }
    case TUTTI_BFLOAT16: {
        float x = bf16_val(((const uint16_t *)a)[i]), y = bf16_val(((const uint16_t *)b)[i]);
        return bf16_ref(applyf(op, x, y));
    }
    case TUTTI_FLOAT32:
        return tt_f32_bits(applyf(op, ((const float *)a)[i], ((const float *)b)[i]));
    case TUTTI_FLOAT64: {
        double r = apply(op, ((const double *)a)[i], ((const double *)b)[i]);
        memcpy(&bits, &r, 8);
        return bits;
    }
    default: return int_ref(t, op, sx(t, a, i), sx(t, b, i));
    }
}

static uint64_t got_bits(tutti_dtype_t t, const void *p, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * tutti_dtype_size(t), tutti_dtype_size(t));
    return v;
}

static void check_kernel(tutti_dtype_t t, tutti_op_t op, int with_nan)
{
    size_t es = tutti_dtype_size(t);
    char *a = malloc(N * es), *b = malloc(N * es), *d0 = malloc(N * es), *d1 = malloc(N * es);
    char *a_copy = malloc(N * es);
    tt_reduce_fn k = tt_reduce_kernel(t, op);

    cr_assert_not_null(k);
    fill(t, a, with_nan);
    fill(t, b, with_nan);
    memcpy(a_copy, a, N * es);
    k(d0, d1, a, b, N);
    for (size_t i = 0; i < N; i++) {
        uint64_t want = expect(t, op, a, b, i), g0 = got_bits(t, d0, i), g1 = got_bits(t, d1, i);
        if (nan_bits(t, want)) {
            cr_assert(nan_bits(t, g0) && nan_bits(t, g1), "%s %s [%zu]: want NaN",
                      tutti_dtype_name(t), tutti_op_name(op), i);
            continue;
        }
        cr_assert(g0 == want && g1 == want, "%s %s [%zu]: want 0x%llx got 0x%llx / 0x%llx",
                  tutti_dtype_name(t), tutti_op_name(op), i, (unsigned long long)want,
                  (unsigned long long)g0, (unsigned long long)g1);
    }
    /* In place: d0 == a, the way the executor calls it. */
    k(a, NULL, a, b, N);
    for (size_t i = 0; i < N; i++)
        if (!nan_bits(t, got_bits(t, d0, i)))
            cr_assert(got_bits(t, a, i) == got_bits(t, d0, i), "%s %s in place [%zu]",
                      tutti_dtype_name(t), tutti_op_name(op), i);
    free(a);
    free(b);
    free(d0);
    free(d1);
    free(a_copy);
}

Test(reduce, every_dtype_and_op)
{
    for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
        for (int op = 0; op < TUTTI_NUM_OPS; op++)
            check_kernel((tutti_dtype_t)t, (tutti_op_t)op, 0);
}

Test(reduce, nan_propagates_through_min_max_sum)
{
    for (int t = TUTTI_FLOAT16; t < TUTTI_NUM_DTYPES; t++) /* the floats, FP8 included */
        for (int op = 0; op < TUTTI_NUM_OPS; op++)
            check_kernel((tutti_dtype_t)t, (tutti_op_t)op, 1);
}

Test(reduce, integers_wrap)
{
    int8_t a8[2] = {127, -128}, b8[2] = {1, -1}, d8[2];
    uint32_t au[1] = {0xffffffffu}, bu[1] = {2}, du[1];
    int64_t a64[1] = {INT64_MAX}, b64[1] = {2}, d64[1];

    tt_reduce_kernel(TUTTI_INT8, TUTTI_SUM)(d8, NULL, a8, b8, 2);
    cr_assert(d8[0] == -128 && d8[1] == 127);
    tt_reduce_kernel(TUTTI_UINT32, TUTTI_SUM)(du, NULL, au, bu, 1);
    cr_assert_eq(du[0], 1u);
    tt_reduce_kernel(TUTTI_INT64, TUTTI_PROD)(d64, NULL, a64, b64, 1);
    cr_assert_eq(d64[0], -2);
}

Test(reduce, invalid_values_have_no_kernel)
{
    cr_assert_null(tt_reduce_kernel(TUTTI_NUM_DTYPES, TUTTI_SUM));
    cr_assert_null(tt_reduce_kernel(TUTTI_FLOAT32, TUTTI_NUM_OPS));
    cr_assert_null(tt_reduce_kernel((tutti_dtype_t)-1, TUTTI_SUM));
}

/* The premul-sum pre-pass: d[i] = s[i] * k is PROD's arithmetic against the independent
 * reference (expect), for scalars drawn like the data (NaNs and infinities included where
 * the dtype has them), out of place over lengths that leave vector tails, then in place. */
Test(reduce, premul_is_prod_by_a_scalar)
{
    for (int ti = 0; ti < TUTTI_NUM_DTYPES; ti++) {
        tutti_dtype_t t = (tutti_dtype_t)ti;
        size_t es = tutti_dtype_size(t);
        char *s = malloc(N * es), *k = malloc(N * es), *kk = malloc(N * es), *d = malloc(N * es);
        fill(t, s, t >= TUTTI_FLOAT16);
        fill(t, k, t >= TUTTI_FLOAT16);
        for (size_t j = 0; j <= 24; j++) {
            size_t n = j < 24 ? N - j * 7 : N; /* odd and even tails; the last in place */
            char *out = j < 24 ? d : s;
            for (size_t i = 0; i < n; i++)
                memcpy(kk + i * es, k + j * es, es);
            memcpy(d, s, N * es);
            tt_premul(t, out, s, n, k + j * es);
            for (size_t i = 0; i < n; i++) /* d: the input, in place */
                same_bits(t, expect(t, TUTTI_PROD, j < 24 ? s : d, kk, i), got_bits(t, out, i),
                          j < 24 ? "premul" : "premul in place", j, i);
        }
        free(s), free(k), free(kk), free(d);
    }
}

/* The fused premul-sum steps equal the pre-pass then the SUM kernel, bit for bit (two
 * roundings, no FMA), with the second output, over vector tails, then in place over a. */
Test(reduce, fused_premul_sum_is_scale_then_sum)
{
    for (int ti = 0; ti < TUTTI_NUM_DTYPES; ti++) {
        tutti_dtype_t t = (tutti_dtype_t)ti;
        size_t es = tutti_dtype_size(t);
        char *a = malloc(N * es), *b = malloc(N * es), *k = malloc(N * es), *p = malloc(N * es);
        char *want = malloc(N * es), *d0 = malloc(N * es), *d1 = malloc(N * es);
        tt_premul_fn f = tt_premul_sum_kernel(t);
        cr_assert_not_null(f);
        fill(t, a, 0);
        fill(t, b, 0);
        fill(t, k, 0);
        for (size_t j = 0; j <= 16; j++) {
            size_t n = j < 16 ? N - j * 5 : N;
            char *out = j < 16 ? d0 : a;
            tt_premul(t, p, b, n, k + j * es);
            tt_reduce_kernel(t, TUTTI_SUM)(want, NULL, a, p, n);
            f(out, j % 2 ? d1 : NULL, a, b, n, k + j * es);
            for (size_t i = 0; i < n; i++)
                same_bits(t, got_bits(t, want, i), got_bits(t, out, i), "fused", j, i);
            if (j % 2)
                cr_assert(memcmp(out, d1, n * es) == 0, "%s: second output differs",
                          tutti_dtype_name(t));
        }
        free(a), free(b), free(k), free(p), free(want), free(d0), free(d1);
    }
}

/* bfloat16, any bits: random codes (subnormals, infinities and NaNs among them), then pairs
 * whose results are subnormal every 97th element from the 1000th on, through the kernel this
 * CPU runs (AVX512_BF16's where present: such a vector goes through the portable kernel; else
 * AVX2's) and through the portable kernel, against the reference, in place too, every NaN
 * made quiet (min and max pass a signalling one through); then the premul-sum kernels. */
Test(reduce, bfloat16_any_bits)
{
    const size_t n = 20011;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *d = malloc(n * 2), *a0 = malloc(n * 2);

    for (size_t i = 0; i < n; i++) {
        uint64_t r = next();
        a[i] = (uint16_t)r;
        b[i] = (uint16_t)(r >> 16);
        if (i >= 1000 && i % 97 == 0) { /* tiny and tinier of the other sign: subnormal */
            a[i] = (uint16_t)(0x0040 + i % 0x3f);
            b[i] = (uint16_t)(0x8000 | (0x0001 + i % 0x3f));
        }
    }
    memcpy(a0, a, n * 2);
    for (int op = 0; op < 4; op++)
        for (int pk = 0; pk < 2; pk++) {
            tt_reduce_fn k =
                (pk ? tt_reduce_kernel_portable : tt_reduce_kernel)(TUTTI_BFLOAT16, (tutti_op_t)op);
            for (int inplace = 0; inplace < 2; inplace++) {
                uint16_t *out = inplace ? a : d;
                memcpy(a, a0, n * 2);
                k(out, NULL, a, b, n);
                for (size_t i = 0; i < n; i++) {
                    same_bits(TUTTI_BFLOAT16, expect(TUTTI_BFLOAT16, (tutti_op_t)op, a0, b, i),
                              got_bits(TUTTI_BFLOAT16, out, i), pk ? "portable kernel" : "kernel",
                              (size_t)op, i);
                    cr_assert(!nan_bits(TUTTI_BFLOAT16, out[i]) || (out[i] & 0x40),
                              "op %d [%zu]: NaN 0x%04x is not quiet", op, i, out[i]);
                }
            }
        }
    /* The premul-sum pre-pass and fused step on the same codes, scalars from tiny (subnormal
     * products) to huge (overflow), against PROD's and then SUM's reference. */
    uint16_t ks[] = {0x3f80, 0x0100, 0x00ff, 0x8001, 0x7f00, 0xc0a0, 0x7fc0};
    uint16_t *kk = malloc(n * 2), *p = malloc(n * 2);
    for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
        for (size_t i = 0; i < n; i++)
            kk[i] = ks[j];
        tt_premul(TUTTI_BFLOAT16, d, b, n, &ks[j]);
        for (size_t i = 0; i < n; i++) {
            p[i] = (uint16_t)expect(TUTTI_BFLOAT16, TUTTI_PROD, b, kk, i);
            same_bits(TUTTI_BFLOAT16, p[i], d[i], "premul", j, i);
        }
        tt_premul_sum_kernel(TUTTI_BFLOAT16)(d, NULL, a0, b, n, &ks[j]);
        for (size_t i = 0; i < n; i++)
            same_bits(TUTTI_BFLOAT16, expect(TUTTI_BFLOAT16, TUTTI_SUM, a0, p, i), d[i], "fused", j,
                      i);
    }
    free(a), free(b), free(d), free(a0), free(kk), free(p);
}

/* FP8, every pair of codes (NaNs included) under every op, through the kernel this CPU runs
 * (F16C's where present) and the portable one, against the reference; the two kernels also
 * agree bit for bit, so ranks on different CPUs compute the same bytes (a NaN's sign aside: of
 * two NaNs, which one an add returns is the compiler's choice of operand order). The pairs start at
 * an odd offset so that the vector kernels' tails run too. */
Test(reduce, fp8_every_pair)
{
    const size_t n = 65536 + 7;
    uint8_t *a = malloc(n), *b = malloc(n), *d = malloc(n), *p = malloc(n);

    for (size_t i = 0; i < n; i++) {
        a[i] = (uint8_t)(i - 7);
        b[i] = (uint8_t)((i - 7) >> 8);
    }
    for (int t = TUTTI_FLOAT8_E4M3; t <= TUTTI_FLOAT8_E5M2; t++)
        for (int op = 0; op < 4; op++) {
            tt_reduce_kernel((tutti_dtype_t)t, (tutti_op_t)op)(d, NULL, a, b, n);
            tt_reduce_kernel_portable((tutti_dtype_t)t, (tutti_op_t)op)(p, NULL, a, b, n);
            for (size_t i = 0; i < n; i++) {
                same_bits((tutti_dtype_t)t, expect((tutti_dtype_t)t, (tutti_op_t)op, a, b, i), d[i],
                          "kernel", (size_t)op, i);
                cr_assert(d[i] == p[i] || (nan_bits(t, d[i]) && nan_bits(t, p[i])),
                          "%s op %d: 0x%02x, 0x%02x: kernel 0x%02x, portable 0x%02x",
                          tutti_dtype_name((tutti_dtype_t)t), op, a[i], b[i], d[i], p[i]);
            }
        }
    /* The premul-sum steps, every scalar: the pre-pass over every code against PROD's
     * reference, the fused step over every pair against the portable pre-pass then SUM. */
    uint8_t *kk = malloc(n), *q = malloc(n);
    for (int t = TUTTI_FLOAT8_E4M3; t <= TUTTI_FLOAT8_E5M2; t++)
        for (unsigned k = 0; k < 256; k++) {
            uint8_t kb = (uint8_t)k;
            memset(kk, kb, n);
            tt_premul((tutti_dtype_t)t, d, a, 256 + 7, &kb);
            for (size_t i = 0; i < 256 + 7; i++)
                same_bits((tutti_dtype_t)t, expect((tutti_dtype_t)t, TUTTI_PROD, a, kk, i), d[i],
                          "premul", k, i);
            tt_premul_sum_kernel((tutti_dtype_t)t)(d, NULL, a, b, n, &kb);
            tt_premul_portable((tutti_dtype_t)t, q, b, n, &kb);
            tt_reduce_kernel_portable((tutti_dtype_t)t, TUTTI_SUM)(p, NULL, a, q, n);
            for (size_t i = 0; i < n; i++)
                same_bits((tutti_dtype_t)t, p[i], d[i], "fused premul-sum", k, i);
        }
    free(a), free(b), free(d), free(p), free(kk), free(q);
}
