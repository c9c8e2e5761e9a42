/*
 * ddp_half.c -- the fp16 and bf16 hooks' conversions: float32 to float16 or bfloat16, rounded to
 * nearest even (NaN stays NaN, made quiet; beyond float16's range: infinity), and back.
 *
 * The DDP layer sees only include/, so it does not share lib/base/half.h. One element at a time
 * the float16 conversion branches (5.0 ns an element packing, 1.4-2.5 unpacking, on this
 * project's 2-vCPU EPYC); on x86-64 CPUs with F16C (every x86-64-v3 one) eight elements go
 * through one vcvtps2ph or vcvtph2ps, whose rounding is in the instruction, not taken from
 * MXCSR, and bfloat16 through AVX2's integer operations; the tails one at a time.
 * tests/integration/ddp/test_half.c checks both paths against _Float16 and a nearest-value search.
 */
#include "ddp_half.h"

#include <math.h>
#include <string.h>

static uint16_t to_fp16(float f)
{
    uint32_t x, sign, mant;
    int exp;

    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    exp = (int)((x >> 23) & 0xff);
    mant = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    exp = exp - 127 + 15;
    if (exp >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        uint32_t m, shift, half, r;
        if (exp < -10)
            return (uint16_t)sign;
        m = mant | 0x800000u;
        shift = (uint32_t)(14 - exp);
        half = 1u << (shift - 1);
        r = m >> shift;
        if ((m & ((1u << shift) - 1)) > half || ((m & ((1u << shift) - 1)) == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    {
        uint32_t r = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (r & 1)))
            r++; /* may carry into the exponent: that is the right rounding */
        return (uint16_t)(sign | r);
    }
}

static float from_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    float f;

    if (exp == 0) {
        f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (exp == 0x1f)
        x = sign | 0x7f800000u | (mant << 13);
    else
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t to_bf16(float f)
{
    uint32_t x;

    memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static int have_f16c(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

/* The vector part of each conversion; returns how many elements it did (a multiple of 8). */
__attribute__((target("avx2,f16c"))) static size_t pack_fp16_f16c(uint16_t *h, const float *x,
                                                                  size_t n, float scale)
{
    __m256 s = _mm256_set1_ps(scale);
    size_t j = 0;

    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128(
            (__m128i *)(h + j),
            _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + j), s), _MM_FROUND_TO_NEAREST_INT));
    return j;
}

__attribute__((target("avx2,f16c"))) static size_t unpack_fp16_f16c(float *x, const uint16_t *h,
                                                                    size_t n)
{
    size_t j = 0;

    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
    return j;
}

/* bfloat16: the top half of the float rounded (bits + 0x7fff + the kept part's last bit), a
 * NaN's top half made quiet; two registers of eight packed into sixteen halves. */
__attribute__((target("avx2"))) static __m256i bf16_round8(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i r = _mm256_add_epi32(
        u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                            _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
    return _mm256_srli_epi32(r, 16);
}

__attribute__((target("avx2"))) static size_t pack_bf16_avx2(uint16_t *h, const float *x, size_t n,
                                                             float scale)
{
    __m256 s = _mm256_set1_ps(scale);
    size_t j = 0;

    for (; j + 16 <= n; j += 16) {
        __m256i a = bf16_round8(_mm256_mul_ps(_mm256_loadu_ps(x + j), s));
        __m256i b = bf16_round8(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), s));
        /* packus works within 128-bit lanes: a0 b0 a1 b1, put back in order */
        _mm256_storeu_si256((__m256i *)(h + j),
                            _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8));
    }
    return j;
}

__attribute__((target("avx2"))) static size_t unpack_bf16_avx2(float *x, const uint16_t *h,
                                                               size_t n)
{
    size_t j = 0;

    for (; j + 8 <= n; j += 8)
        _mm256_storeu_si256(
            (__m256i *)(x + j),
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + j))),
                              16));
    return j;
}
#endif

void ddp_half_pack(uint16_t *h, const float *x, size_t n, float scale, int bf16)
{
    size_t j = 0;

#if defined(__x86_64__) && defined(__GNUC__)
    if (have_f16c())
        j = bf16 ? pack_bf16_avx2(h, x, n, scale) : pack_fp16_f16c(h, x, n, scale);
#endif
    if (bf16)
        for (; j < n; j++)
            h[j] = to_bf16(x[j] * scale);
    else
        for (; j < n; j++)
            h[j] = to_fp16(x[j] * scale);
}

void ddp_half_unpack(float *x, const uint16_t *h, size_t n, int bf16)
{
    size_t j = 0;

#if defined(__x86_64__) && defined(__GNUC__)
    if (have_f16c())
        j = bf16 ? unpack_bf16_avx2(x, h, n) : unpack_fp16_f16c(x, h, n);
#endif
    if (bf16)
        for (; j < n; j++)
            x[j] = from_bf16(h[j]);
    else
        for (; j < n; j++)
            x[j] = from_fp16(h[j]);
}
