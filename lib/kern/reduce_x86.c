/*
 * reduce_x86.c -- the host reduction steps with x86-64's conversion instructions, for the
 * 16- and 8-bit floats, where the portable kernels (reduce.c) spend most of their time
 * converting; see reduce.h. Each kernel does whole vectors and hands the tail (and, where an
 * instruction would flush a subnormal, that vector) to the portable kernel, whose results
 * these match bit for bit (test_reduce). Chosen at run time by what the CPU has.
 */
#include "lib/base/half.h"
#include "lib/kern/reduce.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The portable kernel for a vector kernel's tail. */
#define TT_TAIL(dtype, op) tt_reduce_kernel_portable(dtype, op)

/*
 * float16 on x86-64 CPUs with F16C (every x86-64-v3 one): the conversions are one
 * instruction each way, with the rounding (to nearest even) in the instruction, not taken
 * from MXCSR; half.h's integer conversions, vectorised, take some 40 operations an element
 * (bench/reduce-kernels: 1.46 ns an element against bfloat16's 0.11, F16C 0.076).
 */

#define TT_V_SUM(x, y) _mm256_add_ps(x, y)
#define TT_V_PROD(x, y) _mm256_mul_ps(x, y)
/* TT_FMIN / TT_FMAX: x where x wins or is NaN, else y. */
#define TT_V_MIN(x, y)                                                                             \
    _mm256_blendv_ps(                                                                              \
        y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)))
#define TT_V_MAX(x, y)                                                                             \
    _mm256_blendv_ps(                                                                              \
        y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)))

/* The loop of every vector kernel below: W elements a step (the rest of the arguments, which
 * read and write at i; commas and all); then i is where the tail, fewer than W, begins. */
#define TT_VLOOP(W, ...)                                                                           \
    size_t i = 0;                                                                                  \
    for (; i + (W) <= n; i += (W)) {                                                               \
        __VA_ARGS__                                                                                \
    }
/* A premul step's scalar: the bits at k_ as T (kb), and KDECL, its float value, in every lane. */
#define TT_SCALAR(KDECL)                                                                           \
    memcpy(&kb, k_, sizeof(kb));                                                                   \
    __m256 k = _mm256_set1_ps(KDECL)

/*
 * A vector kernel (the F16C, AVX2 bfloat16 and FP8 ones below): W elements of storage type T
 * a step, which STEP computes and stores (from a + i and b + i into d0 + i, and d1 + i when d1
 * is not NULL); the tail, fewer than W, through the portable kernel.
 */
#define TT_VKERNEL(name, TARGET, T, W, STEP, tail)                                                 \
    __attribute__((target(TARGET))) static void name(void *d0_, void *d1_, const void *a_,         \
                                                     const void *b_, size_t n)                     \
    {                                                                                              \
        T *d0 = d0_, *d1 = d1_;                                                                    \
        const T *a = a_, *b = b_;                                                                  \
        TT_VLOOP(W, STEP)                                                                          \
        if (i < n)                                                                                 \
            tail(d0 + i, d1 ? d1 + i : NULL, a + i, b + i, n - i);                                 \
    }

/* A family's four kernels, SUM PROD MIN MAX of dtype DT, and their table sfx_kernels. */
#define TT_FAMILY(KERNEL, sfx, DT, SUMX, PRODX, MINX, MAXX)                                        \
    KERNEL(sum_##sfx, SUMX, TT_TAIL(DT, TUTTI_SUM))                                                \
    KERNEL(prod_##sfx, PRODX, TT_TAIL(DT, TUTTI_PROD))                                             \
    KERNEL(min_##sfx, MINX, TT_TAIL(DT, TUTTI_MIN))                                                \
    KERNEL(max_##sfx, MAXX, TT_TAIL(DT, TUTTI_MAX))                                                \
    static const tt_reduce_fn sfx##_kernels[4] = {sum_##sfx, prod_##sfx, min_##sfx, max_##sfx};

/* A step's results r into d0 + i, and d1 + i when d1 is not NULL. */
#define TT_PUT(STORE, V, r)                                                                        \
    STORE((V *)(d0 + i), r);                                                                       \
    if (d1)                                                                                        \
        STORE((V *)(d1 + i), r);

/* float16: eight elements a step. */
#define TT_STEP_F16C(VEXPR)                                                                        \
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));                         \
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));                         \
    __m128i r = _mm256_cvtps_ph(VEXPR, _MM_FROUND_TO_NEAREST_INT);                                 \
    TT_PUT(_mm_storeu_si128, __m128i, r)
#define TT_KERNEL_F16C(name, VEXPR, tail)                                                          \
    TT_VKERNEL(name, "avx2,f16c", uint16_t, 8, TT_STEP_F16C(VEXPR), tail)

TT_FAMILY(TT_KERNEL_F16C, f16c, TUTTI_FLOAT16, TT_V_SUM(x, y), TT_V_PROD(x, y), TT_V_MIN(x, y),
          TT_V_MAX(x, y))

/*
 * FP8 through F16C, sixteen elements at a time. An E5M2 code is the top byte of the float16
 * of the same value; an E4M3 code, shifted left by 7, is the float16 of its value times 2^-8
 * (its NaN, S.1111.111, is made one). E4M3 is computed on those scaled values: sums, minima
 * and maxima scale with them, exactly (no float underflows at 2^-17); a product is scaled
 * back once, by 2^8 (x y 2^-16 is exact in float: 8 significant bits, nowhere near float's
 * least normal). Back: the result rounded to float16, then the float16 bits rounded to the
 * FP8 code's (to nearest even: both encodings are linear in the bits, subnormals included),
 * saturated, NaN kept (whatever its payload, S.1111.111 or S.11111.10). Rounding twice is exact
 * here: float16's 11 bits are at least 2q + 2 for FP8's q of 3 or 4 significant bits
 * (Figueroa), and test_reduce checks every pair of codes against the portable kernels,
 * bit for bit. half.h's conversions take some 50 operations an element (bench/reduce-kernels:
 * 3.5 ns an element for E4M3 sums, 2.5 for E5M2; these kernels: see BENCHMARKS.md).
 */
__attribute__((target("avx2,f16c"))) static inline void tt_fp8_load(const uint8_t *p, int e4m3,
                                                                    __m256 *lo, __m256 *hi)
{
    __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)), h;

    if (e4m3) {
        __m256i m = _mm256_and_si256(c, _mm256_set1_epi16(0x7f));
        __m256i s = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8);
        __m256i nan = _mm256_cmpeq_epi16(m, _mm256_set1_epi16(0x7f)); /* to 0x7f80: NaN */
        h = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(m, 7), s),
                            _mm256_and_si256(nan, _mm256_set1_epi16(0x7e00)));
    } else {
        h = _mm256_slli_epi16(c, 8);
    }
    *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

/* Lanes of |x| OP |y| (32-bit masks, lo's eight then hi's) as sixteen 16-bit masks. */
#define TT_ABS(v) _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define TT_CMP16(xl, xh, yl, yh, OP)                                                               \
    _mm256_permute4x64_epi64(                                                                      \
        _mm256_packs_epi32(_mm256_castps_si256(_mm256_cmp_ps(TT_ABS(xl), TT_ABS(yl), OP)),         \
                           _mm256_castps_si256(_mm256_cmp_ps(TT_ABS(xh), TT_ABS(yh), OP))),        \
        0xd8)

/* exact: the floats may be any, not only the results of one operation on two FP8 values
 * (AVG's quotients), so the second rounding may not be exact: where the float16 lands on an
 * FP8 midpoint that the float is not on, round by the side of it the float lies. */
__attribute__((target("avx2,f16c"))) static inline void
tt_fp8_store(uint8_t *d0, uint8_t *d1, __m256 lo, __m256 hi, int e4m3, int exact)
{
    const int sh = e4m3 ? 7 : 8; /* float16 bits below the FP8 code's */

    __m256i h = _mm256_set_m128i(_mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT),
                                 _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
    __m256i m = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi16(m, sh), _mm256_set1_epi16(1));
    __m256i q = _mm256_add_epi16(_mm256_add_epi16(m, _mm256_set1_epi16((1 << (sh - 1)) - 1)), odd);
    q = _mm256_srli_epi16(q, sh);
    if (exact) {
        __m256 bl = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
        __m256 bh = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
        __m256i gt = TT_CMP16(lo, hi, bl, bh, _CMP_GT_OQ),
                lt = TT_CMP16(lo, hi, bl, bh, _CMP_LT_OQ);
        __m256i mid = _mm256_cmpeq_epi16(_mm256_and_si256(m, _mm256_set1_epi16((1 << sh) - 1)),
                                         _mm256_set1_epi16(1 << (sh - 1)));
        q = _mm256_blendv_epi8(q, _mm256_sub_epi16(_mm256_srli_epi16(m, sh), gt),
                               _mm256_and_si256(mid, _mm256_or_si256(gt, lt)));
    }
    q = _mm256_min_epu16(q, _mm256_set1_epi16(e4m3 ? 0x7e : 0x7b));
    q = _mm256_blendv_epi8(q, _mm256_set1_epi16(e4m3 ? 0x7f : 0x7e),
                           _mm256_cmpgt_epi16(m, _mm256_set1_epi16(0x7c00)));
    q = _mm256_or_si256(q, _mm256_srli_epi16(_mm256_andnot_si256(m, h), 8)); /* the sign */
    __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storeu_si128((__m128i *)d0, b);
    if (d1)
        _mm_storeu_si128((__m128i *)d1, b);
}

#define TT_STEP_FP8(E4M3, VEXPR)                                                                   \
    __m256 al, ah, bl, bh, x, y, rl, rh;                                                           \
    tt_fp8_load(a + i, E4M3, &al, &ah);                                                            \
    tt_fp8_load(b + i, E4M3, &bl, &bh);                                                            \
    x = al, y = bl, rl = VEXPR;                                                                    \
    x = ah, y = bh, rh = VEXPR;                                                                    \
    tt_fp8_store(d0 + i, d1 ? d1 + i : NULL, rl, rh, E4M3, 0);
#define TT_KERNEL_FP8(name, E4M3, VEXPR, tail)                                                     \
    TT_VKERNEL(name, "avx2,f16c", uint8_t, 16, TT_STEP_FP8(E4M3, VEXPR), tail)

#define TT_KERNEL_E4M3(name, VEXPR, tail) TT_KERNEL_FP8(name, 1, VEXPR, tail)
#define TT_KERNEL_E5M2(name, VEXPR, tail) TT_KERNEL_FP8(name, 0, VEXPR, tail)
TT_FAMILY(TT_KERNEL_E4M3, e4m3x, TUTTI_FLOAT8_E4M3, TT_V_SUM(x, y),
          _mm256_mul_ps(TT_V_PROD(x, y), _mm256_set1_ps(256.0f)), TT_V_MIN(x, y), TT_V_MAX(x, y))
TT_FAMILY(TT_KERNEL_E5M2, e5m2x, TUTTI_FLOAT8_E5M2, TT_V_SUM(x, y), TT_V_PROD(x, y), TT_V_MIN(x, y),
          TT_V_MAX(x, y))

/*
 * bfloat16 on CPUs with AVX512_BF16 (AMD Zen 4, Intel Cooper Lake and Sapphire Rapids on):
 * vcvtneps2bf16 rounds 16 floats to nearest even in one instruction, where half.h's rounding
 * takes some ten (bench/reduce-kernels: bfloat16 sum 0.094 ns an element, float32's 0.044).
 * The instruction reads and writes subnormals as zero whatever MXCSR says: a vector whose
 * result has a subnormal lane goes through the portable kernel instead (so every result is
 * half.h's, the GPU's). Its NaN is half.h's: the top half, made quiet.
 */
#define TT_V5_SUM(x, y) _mm512_add_ps(x, y)
#define TT_V5_PROD(x, y) _mm512_mul_ps(x, y)
#define TT_V5_MIN(x, y)                                                                            \
    _mm512_mask_blend_ps(                                                                          \
        _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x)
#define TT_V5_MAX(x, y)                                                                            \
    _mm512_mask_blend_ps(                                                                          \
        _mm512_cmp_ps_mask(x, y, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x)
#define TT_BF16_LOAD(p)                                                                            \
    _mm512_castsi512_ps(                                                                           \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))

/* Has float vector r a subnormal lane (which vcvtneps2bf16 would flush)? */
#define TT_BF16_SUBNORMAL(r)                                                                       \
    (_mm512_testn_epi32_mask(_mm512_castps_si512(r), _mm512_set1_epi32(0x7f800000)) &              \
     _mm512_test_epi32_mask(_mm512_castps_si512(r), _mm512_set1_epi32(0x007fffff)))
#define TT_BF16_ROUND(r) ((__m256i)_mm512_cvtneps_pbh(r))
#define TT_KERNEL_BF16(name, VEXPR, tail)                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void name(              \
        void *d0_, void *d1_, const void *a_, const void *b_, size_t n)                            \
    {                                                                                              \
        uint16_t *d0 = d0_, *d1 = d1_;                                                             \
        const uint16_t *a = a_, *b = b_;                                                           \
        size_t i = 0;                                                                              \
        for (; i + 16 <= n; i += 16) {                                                             \
            __m512 x = TT_BF16_LOAD(a + i), y = TT_BF16_LOAD(b + i), r = VEXPR;                    \
            if (TT_BF16_SUBNORMAL(r)) {                                                            \
                tail(d0 + i, d1 ? d1 + i : NULL, a + i, b + i, 16); /* a subnormal result */       \
                continue;                                                                          \
            }                                                                                      \
            __m256i h = TT_BF16_ROUND(r);                                                          \
            _mm256_storeu_si256((__m256i *)(d0 + i), h);                                           \
            if (d1)                                                                                \
                _mm256_storeu_si256((__m256i *)(d1 + i), h);                                       \
        }                                                                                          \
        if (i < n)                                                                                 \
            tail(d0 + i, d1 ? d1 + i : NULL, a + i, b + i, n - i);                                 \
    }

TT_FAMILY(TT_KERNEL_BF16, bf16x, TUTTI_BFLOAT16, TT_V5_SUM(x, y), TT_V5_PROD(x, y), TT_V5_MIN(x, y),
          TT_V5_MAX(x, y))

/*
 * bfloat16 with AVX2 alone (CPUs without AVX512_BF16): a 32-bit lane holds two bfloat16s, and
 * each is a float as it stands, the high one with the low half masked off, the low one shifted
 * up; so no widening on the way in and no packing on the way out, where the compiler's
 * vectorisation of the portable kernel does both (bench/reduce-kernels: 0.34 ns an element,
 * these kernels: see BENCHMARKS.md). The rounding is half.h's, in integers, bit for bit
 * (subnormals too); NaN: the top half, made quiet.
 */
__attribute__((target("avx2"))) static inline __m256i tt_bf16_round_avx2(__m256 r)
{
    __m256i u = _mm256_castps_si256(r);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i q = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(q, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
}
#define TT_BF16_HI(v) _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)))
#define TT_BF16_LO(v) _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
/* Rounded lanes (bfloat16 in their top halves) back into pairs: lo's to the low half. */
#define TT_BF16_PAIR(lo, hi) _mm256_blend_epi16(_mm256_srli_epi32(lo, 16), hi, 0xaa)

#define TT_STEP_BF16A(VEXPR)                                                                       \
    __m256i va = _mm256_loadu_si256((const __m256i *)(a + i));                                     \
    __m256i vb = _mm256_loadu_si256((const __m256i *)(b + i));                                     \
    __m256 x = TT_BF16_HI(va), y = TT_BF16_HI(vb);                                                 \
    __m256i hi = tt_bf16_round_avx2(VEXPR);                                                        \
    x = TT_BF16_LO(va), y = TT_BF16_LO(vb);                                                        \
    __m256i r = TT_BF16_PAIR(tt_bf16_round_avx2(VEXPR), hi);                                       \
    TT_PUT(_mm256_storeu_si256, __m256i, r)
#define TT_KERNEL_BF16A(name, VEXPR, tail)                                                         \
    TT_VKERNEL(name, "avx2", uint16_t, 16, TT_STEP_BF16A(VEXPR), tail)

TT_FAMILY(TT_KERNEL_BF16A, bf16a, TUTTI_BFLOAT16, TT_V_SUM(x, y), TT_V_PROD(x, y), TT_V_MIN(x, y),
          TT_V_MAX(x, y))

/*
 * The premul pre-pass d = s * k (k the scalar's bits at k_) as TT_VKERNEL: W elements of T a
 * step; KDECL makes the float k from kb, STEP scales s + i into d + i.
 */
#define TT_VSCALE(name, TARGET, T, W, KDECL, STEP, DT)                                             \
    __attribute__((target(TARGET))) static void name(void *d_, const void *s_, size_t n,           \
                                                     const void *k_)                               \
    {                                                                                              \
        T *d = d_, kb;                                                                             \
        const T *s = s_;                                                                           \
        TT_SCALAR(KDECL);                                                                          \
        TT_VLOOP(W, STEP)                                                                          \
        if (i < n)                                                                                 \
            tt_premul_portable(DT, d + i, s + i, n - i, k_);                                       \
    }

#define TT_STEP_SCALE_F16C                                                                         \
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));                         \
    _mm_storeu_si128((__m128i *)(d + i),                                                           \
                     _mm256_cvtps_ph(_mm256_mul_ps(x, k), _MM_FROUND_TO_NEAREST_INT));
TT_VSCALE(premul_f16c, "avx2,f16c", uint16_t, 8, tt_half_to_float(kb), TT_STEP_SCALE_F16C,
          TUTTI_FLOAT16)

/* bfloat16 with AVX512_BF16, as its reduction kernels: a vector with a subnormal product goes
 * through the portable kernel. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
premul_bf16x(void *d_, const void *s_, size_t n, const void *k_)
{
    uint16_t *d = d_, kb;
    const uint16_t *s = s_;
    size_t i = 0;

    memcpy(&kb, k_, sizeof(kb));
    __m512 k = _mm512_set1_ps(tt_bf16_to_float(kb));
    for (; i + 16 <= n; i += 16) {
        __m512 r = _mm512_mul_ps(TT_BF16_LOAD(s + i), k);
        if (TT_BF16_SUBNORMAL(r))
            tt_premul_portable(TUTTI_BFLOAT16, d + i, s + i, 16, k_);
        else
            _mm256_storeu_si256((__m256i *)(d + i), TT_BF16_ROUND(r));
    }
    if (i < n)
        tt_premul_portable(TUTTI_BFLOAT16, d + i, s + i, n - i, k_);
}

/* bfloat16 with AVX2 and FP8 with F16C, as their reduction kernels; E4M3's product is scaled
 * back by 2^8 (k is the scalar's value, the loaded codes are scaled). */
#define TT_STEP_SCALE_BF16A                                                                        \
    __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));                                      \
    __m256i hi = tt_bf16_round_avx2(_mm256_mul_ps(TT_BF16_HI(v), k));                              \
    __m256i lo = tt_bf16_round_avx2(_mm256_mul_ps(TT_BF16_LO(v), k));                              \
    _mm256_storeu_si256((__m256i *)(d + i), TT_BF16_PAIR(lo, hi));
TT_VSCALE(premul_bf16a, "avx2", uint16_t, 16, tt_bf16_to_float(kb), TT_STEP_SCALE_BF16A,
          TUTTI_BFLOAT16)

#define TT_STEP_SCALE_FP8(E4M3)                                                                    \
    __m256 lo, hi;                                                                                 \
    tt_fp8_load(s + i, E4M3, &lo, &hi);                                                            \
    tt_fp8_store(d + i, NULL, _mm256_mul_ps(lo, k), _mm256_mul_ps(hi, k), E4M3, 0);
TT_VSCALE(premul_e4m3x, "avx2,f16c", uint8_t, 16, tt_fp8_to_float(kb, TT_FP8_E4M3),
          TT_STEP_SCALE_FP8(1), TUTTI_FLOAT8_E4M3)
TT_VSCALE(premul_e5m2x, "avx2,f16c", uint8_t, 16, tt_fp8_to_float(kb, TT_FP8_E5M2),
          TT_STEP_SCALE_FP8(0), TUTTI_FLOAT8_E5M2)

/* The fused premul-sum step d0 = a + s * k as TT_VSCALE: the product rounded to the dtype,
 * then the sum. */
#define TT_VPMSUM(name, TARGET, T, W, KDECL, STEP, DT)                                             \
    __attribute__((target(TARGET))) static void name(void *d0_, void *d1_, const void *a_,         \
                                                     const void *b_, size_t n, const void *k_)     \
    {                                                                                              \
        T *d0 = d0_, *d1 = d1_, kb;                                                                \
        const T *a = a_, *b = b_;                                                                  \
        TT_SCALAR(KDECL);                                                                          \
        TT_VLOOP(W, STEP)                                                                          \
        if (i < n)                                                                                 \
            tt_premul_sum_kernel_portable(DT)(d0 + i, d1 ? d1 + i : NULL, a + i, b + i, n - i,     \
                                              k_);                                                 \
    }

#define TT_STEP_PMSUM_F16C                                                                         \
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));                         \
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));                         \
    __m128i p = _mm256_cvtps_ph(_mm256_mul_ps(y, k), _MM_FROUND_TO_NEAREST_INT);                   \
    __m128i r = _mm256_cvtps_ph(_mm256_add_ps(x, _mm256_cvtph_ps(p)), _MM_FROUND_TO_NEAREST_INT);  \
    TT_PUT(_mm_storeu_si128, __m128i, r)
TT_VPMSUM(pmsum_f16c, "avx2,f16c", uint16_t, 8, tt_half_to_float(kb), TT_STEP_PMSUM_F16C,
          TUTTI_FLOAT16)

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
pmsum_bf16x(void *d0_, void *d1_, const void *a_, const void *b_, size_t n, const void *k_)
{
    uint16_t *d0 = d0_, *d1 = d1_, kb;
    const uint16_t *a = a_, *b = b_;
    size_t i = 0;

    memcpy(&kb, k_, sizeof(kb));
    __m512 k = _mm512_set1_ps(tt_bf16_to_float(kb));
    for (; i + 16 <= n; i += 16) {
        __m512 p = _mm512_mul_ps(TT_BF16_LOAD(b + i), k), r;
        __m256i h = TT_BF16_ROUND(p);
        r = _mm512_add_ps(TT_BF16_LOAD(a + i),
                          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
        if (TT_BF16_SUBNORMAL(p) | TT_BF16_SUBNORMAL(r)) {
            tt_premul_sum_kernel_portable(TUTTI_BFLOAT16)(d0 + i, d1 ? d1 + i : NULL, a + i, b + i,
                                                          16, k_);
            continue;
        }
        h = TT_BF16_ROUND(r);
        _mm256_storeu_si256((__m256i *)(d0 + i), h);
        if (d1)
            _mm256_storeu_si256((__m256i *)(d1 + i), h);
    }
    if (i < n)
        tt_premul_sum_kernel_portable(TUTTI_BFLOAT16)(d0 + i, d1 ? d1 + i : NULL, a + i, b + i,
                                                      n - i, k_);
}

/* bfloat16: the products rounded (bfloat16 in the top halves), then the sums. */
#define TT_STEP_PMSUM_BF16A                                                                        \
    __m256i va = _mm256_loadu_si256((const __m256i *)(a + i));                                     \
    __m256i vb = _mm256_loadu_si256((const __m256i *)(b + i));                                     \
    __m256i ph = tt_bf16_round_avx2(_mm256_mul_ps(TT_BF16_HI(vb), k));                             \
    __m256i pl = tt_bf16_round_avx2(_mm256_mul_ps(TT_BF16_LO(vb), k));                             \
    __m256i hi = tt_bf16_round_avx2(_mm256_add_ps(TT_BF16_HI(va), TT_BF16_HI(ph)));                \
    __m256i lo = tt_bf16_round_avx2(_mm256_add_ps(TT_BF16_LO(va), TT_BF16_HI(pl)));                \
    __m256i r = TT_BF16_PAIR(lo, hi);                                                              \
    TT_PUT(_mm256_storeu_si256, __m256i, r)
TT_VPMSUM(pmsum_bf16a, "avx2", uint16_t, 16, tt_bf16_to_float(kb), TT_STEP_PMSUM_BF16A,
          TUTTI_BFLOAT16)

/* FP8: the product rounded to FP8 (stored, then loaded: the store is the rounding), then the
 * sum. */
#define TT_STEP_PMSUM_FP8(E4M3)                                                                    \
    __m256 al, ah, bl, bh;                                                                         \
    uint8_t p[16];                                                                                 \
    tt_fp8_load(b + i, E4M3, &bl, &bh);                                                            \
    tt_fp8_store(p, NULL, _mm256_mul_ps(bl, k), _mm256_mul_ps(bh, k), E4M3, 0);                    \
    tt_fp8_load(p, E4M3, &bl, &bh);                                                                \
    tt_fp8_load(a + i, E4M3, &al, &ah);                                                            \
    tt_fp8_store(d0 + i, d1 ? d1 + i : NULL, _mm256_add_ps(al, bl), _mm256_add_ps(ah, bh), E4M3, 0);
TT_VPMSUM(pmsum_e4m3x, "avx2,f16c", uint8_t, 16, tt_fp8_to_float(kb, TT_FP8_E4M3),
          TT_STEP_PMSUM_FP8(1), TUTTI_FLOAT8_E4M3)
TT_VPMSUM(pmsum_e5m2x, "avx2,f16c", uint8_t, 16, tt_fp8_to_float(kb, TT_FP8_E5M2),
          TT_STEP_PMSUM_FP8(0), TUTTI_FLOAT8_E5M2)

/* AVG's division, d[i] /= divisor in float, as the portable loops (float16 and bfloat16 round
 * once, as there; FP8 exactly, as above). By a power of two, the product with the reciprocal:
 * exact, so the same value, and faster. */
#define TT_POW2(divisor) (((divisor) & ((divisor)-1)) == 0)
#define TT_DIVISOR(divisor)                                                                        \
    _mm256_set1_ps(TT_POW2(divisor) ? 1.0f / (float)(divisor) : (float)(divisor))
#define TT_DIVIDE(x, v, divisor) (TT_POW2(divisor) ? _mm256_mul_ps(x, v) : _mm256_div_ps(x, v))
/* Can the quotient be other than the code's value scaled exactly (a divisor not a power of
 * two)? Only then does FP8 need tt_fp8_store's exact rounding: a quotient by a power of two has
 * the code's three or four significant bits, which float16 holds, except far below FP8's least
 * subnormal, where both roundings give zero (bench/reduce-kernels -d 2 65536 divide: E4M3
 * 0.61-0.67 ns an element with the exact rounding, 0.36-0.42 without). */
#define TT_INEXACT(divisor) (!TT_POW2(divisor))
#define TT_VAVG(name, TARGET, T, W, STEP, DT)                                                      \
    __attribute__((target(TARGET))) static void name(void *d_, size_t n, int divisor)              \
    {                                                                                              \
        T *d = d_;                                                                                 \
        __m256 v = TT_DIVISOR(divisor);                                                            \
        TT_VLOOP(W, STEP)                                                                          \
        if (i < n)                                                                                 \
            tt_postop_avg_portable(DT, d + i, n - i, divisor);                                     \
    }

#define TT_STEP_AVG_F16C                                                                           \
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + i)));                         \
    _mm_storeu_si128((__m128i *)(d + i),                                                           \
                     _mm256_cvtps_ph(TT_DIVIDE(x, v, divisor), _MM_FROUND_TO_NEAREST_INT));
#define TT_STEP_AVG_BF16A                                                                          \
    __m256i x = _mm256_loadu_si256((const __m256i *)(d + i));                                      \
    __m256i hi = tt_bf16_round_avx2(TT_DIVIDE(TT_BF16_HI(x), v, divisor));                         \
    __m256i lo = tt_bf16_round_avx2(TT_DIVIDE(TT_BF16_LO(x), v, divisor));                         \
    _mm256_storeu_si256((__m256i *)(d + i), TT_BF16_PAIR(lo, hi));
#define TT_STEP_AVG_FP8(E4M3)                                                                      \
    __m256 lo, hi;                                                                                 \
    tt_fp8_load(d + i, E4M3, &lo, &hi);                                                            \
    tt_fp8_store(d + i, NULL, TT_DIVIDE(lo, v, divisor), TT_DIVIDE(hi, v, divisor), E4M3,          \
                 TT_INEXACT(divisor));
TT_VAVG(avg_f16c, "avx2,f16c", uint16_t, 8, TT_STEP_AVG_F16C, TUTTI_FLOAT16)
TT_VAVG(avg_bf16a, "avx2", uint16_t, 16, TT_STEP_AVG_BF16A, TUTTI_BFLOAT16)
TT_VAVG(avg_e4m3x, "avx2,f16c", uint8_t, 16, TT_STEP_AVG_FP8(1), TUTTI_FLOAT8_E4M3)
TT_VAVG(avg_e5m2x, "avx2,f16c", uint8_t, 16, TT_STEP_AVG_FP8(0), TUTTI_FLOAT8_E5M2)

/*
 * AVG by a power of two, 2^k (2, 4, 8 ranks), on the codes: where the quotient is a normal
 * number the division is exact, and its code is the dividend's with k taken off the exponent
 * field. So a vector whose every lane is such a dividend (exponent field above k, not infinity
 * or NaN) or a zero is one integer subtraction; any other (a quotient subnormal or zero,
 * infinity, NaN) goes through the float kernel above, whose bits these are.
 * TT_POW2_K: k where the divisor is 2^k below 2^KMAX, else 0 (the float kernel throughout).
 */
#define TT_POW2_K(divisor, KMAX)                                                                   \
    (TT_POW2(divisor) && (divisor) < 1 << (KMAX) ? __builtin_ctz(divisor) : 0)
#define TT_VAVG_POW2(name, T, LANES, SET1, CMPGT, CMPEQ, SUB, MASK, SPECIAL, SHIFT, KMAX, FLOATK)  \
    __attribute__((target("avx2"))) static void name(void *d_, size_t n, int divisor)              \
    {                                                                                              \
        T *d = d_;                                                                                 \
        int k = TT_POW2_K(divisor, KMAX);                                                          \
        size_t i = 0;                                                                              \
        if (k == 0) {                                                                              \
            FLOATK(d, n, divisor);                                                                 \
            return;                                                                                \
        }                                                                                          \
        const __m256i ek = SET1(k << (SHIFT)), em = SET1(MASK), sp = SET1(SPECIAL),                \
                      ab = SET1(MASK | ((1 << (SHIFT)) - 1)), zero = _mm256_setzero_si256();       \
        for (; i + LANES <= n; i += LANES) {                                                       \
            __m256i h = _mm256_loadu_si256((const __m256i *)(d + i)), a = _mm256_and_si256(h, ab); \
            __m256i fast = _mm256_and_si256(CMPGT(_mm256_and_si256(h, em), ek), CMPGT(sp, a));     \
            if (_mm256_movemask_epi8(_mm256_or_si256(fast, CMPEQ(a, zero))) != -1) {               \
                FLOATK(d + i, LANES, divisor);                                                     \
                continue;                                                                          \
            }                                                                                      \
            _mm256_storeu_si256((__m256i *)(d + i), SUB(h, _mm256_and_si256(fast, ek)));           \
        }                                                                                          \
        if (i < n)                                                                                 \
            FLOATK(d + i, n - i, divisor);                                                         \
    }
#define TT_AVG16(name, MASK, SPECIAL, SHIFT, KMAX, FLOATK)                                         \
    TT_VAVG_POW2(name, uint16_t, 16, _mm256_set1_epi16, _mm256_cmpgt_epi16, _mm256_cmpeq_epi16,    \
                 _mm256_sub_epi16, MASK, SPECIAL, SHIFT, KMAX, FLOATK)
#define TT_AVG8(name, MASK, SPECIAL, SHIFT, KMAX, FLOATK)                                          \
    TT_VAVG_POW2(name, uint8_t, 32, _mm256_set1_epi8, _mm256_cmpgt_epi8, _mm256_cmpeq_epi8,        \
                 _mm256_sub_epi8, MASK, SPECIAL, SHIFT, KMAX, FLOATK)
/* The exponent field (MASK) above the significand's SHIFT bits; from SPECIAL (of the code
 * less its sign) on, infinities and NaNs; KMAX, the exponent field's largest normal value, or
 * 30 (int's largest power of two): from k = KMAX on no quotient is a normal code, and k << SHIFT
 * would reach the lane's sign bit in E4M3. */
TT_AVG16(avg2_f16c, 0x7c00, 0x7c00, 10, 30, avg_f16c)
TT_AVG16(avg2_bf16a, 0x7f80, 0x7f80, 7, 30, avg_bf16a)
TT_AVG8(avg2_e4m3x, 0x78, 0x7f, 3, 15, avg_e4m3x)
TT_AVG8(avg2_e5m2x, 0x7c, 0x7c, 2, 30, avg_e5m2x)

/* AVX512_BF16 here (with the AVX-512 subsets its intrinsics use)? */
static int tt_cpu_bf16(void)
{
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* AVX2 and F16C here (every x86-64-v3 CPU)? */
static int tt_cpu_f16c(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

enum { TT_K_F16C, TT_K_BF16X, TT_K_BF16A, TT_K_E4M3, TT_K_E5M2 };
static const struct tt_cpu_kernels cpu_kernels[] = {
    [TT_K_F16C] = {f16c_kernels, premul_f16c, pmsum_f16c, avg2_f16c},
    [TT_K_BF16X] = {bf16x_kernels, premul_bf16x, pmsum_bf16x, avg2_bf16a},
    [TT_K_BF16A] = {bf16a_kernels, premul_bf16a, pmsum_bf16a, avg2_bf16a},
    [TT_K_E4M3] = {e4m3x_kernels, premul_e4m3x, pmsum_e4m3x, avg2_e4m3x},
    [TT_K_E5M2] = {e5m2x_kernels, premul_e5m2x, pmsum_e5m2x, avg2_e5m2x},
};

const struct tt_cpu_kernels *tt_cpu_kernels(tutti_dtype_t dtype)
{
    switch (dtype) {
    case TUTTI_FLOAT16: return tt_cpu_f16c() ? &cpu_kernels[TT_K_F16C] : NULL;
    case TUTTI_BFLOAT16:
        return tt_cpu_bf16()                    ? &cpu_kernels[TT_K_BF16X]
               : __builtin_cpu_supports("avx2") ? &cpu_kernels[TT_K_BF16A]
                                                : NULL;
    case TUTTI_FLOAT8_E4M3: return tt_cpu_f16c() ? &cpu_kernels[TT_K_E4M3] : NULL;
    case TUTTI_FLOAT8_E5M2: return tt_cpu_f16c() ? &cpu_kernels[TT_K_E5M2] : NULL;
    default: return NULL;
    }
}

#else /* no x86-64 conversion instructions: the portable kernels throughout */

const struct tt_cpu_kernels *tt_cpu_kernels(tutti_dtype_t dtype)
{
    (void)dtype;
    return NULL;
}
#endif
