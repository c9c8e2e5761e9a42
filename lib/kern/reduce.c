/*
 * reduce.c -- host reduction kernels; see reduce.h.
 *
 * Each kernel is a plain loop the compiler vectorises; on x86-64 each is also built for AVX2
 * and AVX-512 and the loader picks the best (target_clones). Integer arithmetic is done on
 * the unsigned type so overflow wraps instead of being undefined. fp16, bf16 and FP8 go through
 * float; where the CPU has conversion instructions for them, reduce_x86.c's kernels run instead
 * (tt_cpu_kernels), these only for their tails.
 */
#include "lib/kern/reduce.h"
#include "lib/base/half.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TT_NO_CLONES)
#define TT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TT_CLONES
#endif

/* NaN-propagating min/max: a NaN in either input wins. */
#define TT_FMIN(x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))
#define TT_FMAX(x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define TT_IMIN(x, y) ((x) < (y) ? (x) : (y))
#define TT_IMAX(x, y) ((x) > (y) ? (x) : (y))

#define TT_SUM(x, y) ((x) + (y))
#define TT_PROD(x, y) ((x) * (y))

/* Kernel on type T computing in type C (C unsigned for integers so overflow wraps). */
#define TT_KERNEL(name, T, C, EXPR)                                                                \
    TT_CLONES static void name(void *d0_, void *d1_, const void *a_, const void *b_, size_t n)     \
    {                                                                                              \
        T *d0 = d0_, *d1 = d1_;                                                                    \
        const T *a = a_, *b = b_;                                                                  \
        if (d1) {                                                                                  \
            _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                                    \
            {                                                                                      \
                C x = (C)a[i], y = (C)b[i];                                                        \
                T r = (T)(EXPR);                                                                   \
                d0[i] = r;                                                                         \
                d1[i] = r;                                                                         \
            }                                                                                      \
        } else {                                                                                   \
            _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                                    \
            {                                                                                      \
                C x = (C)a[i], y = (C)b[i];                                                        \
                d0[i] = (T)(EXPR);                                                                 \
            }                                                                                      \
        }                                                                                          \
    }

/* 16- and 8-bit floats (storage S): decode both, compute in float, round back. */
#define TT_KERNEL16(name, S, TO_F, FROM_F, EXPR)                                                   \
    TT_CLONES static void name(void *d0_, void *d1_, const void *a_, const void *b_, size_t n)     \
    {                                                                                              \
        S *d0 = d0_, *d1 = d1_;                                                                    \
        const S *a = a_, *b = b_;                                                                  \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                                        \
        {                                                                                          \
            float x = TO_F(a[i]), y = TO_F(b[i]);                                                  \
            d0[i] = FROM_F(EXPR);                                                                  \
        }                                                                                          \
        if (d1)                                                                                    \
            for (size_t i = 0; i < n; i++)                                                         \
                d1[i] = d0[i];                                                                     \
    }

#define TT_INT_KERNELS(suffix, T, C)                                                               \
    TT_KERNEL(sum_##suffix, T, C, TT_SUM(x, y))                                                    \
    TT_KERNEL(prod_##suffix, T, C, TT_PROD(x, y))                                                  \
    TT_KERNEL(min_##suffix, T, T, TT_IMIN(x, y))                                                   \
    TT_KERNEL(max_##suffix, T, T, TT_IMAX(x, y))

#define TT_FLT_KERNELS(suffix, T)                                                                  \
    TT_KERNEL(sum_##suffix, T, T, TT_SUM(x, y))                                                    \
    TT_KERNEL(prod_##suffix, T, T, TT_PROD(x, y))                                                  \
    TT_KERNEL(min_##suffix, T, T, TT_FMIN(x, y))                                                   \
    TT_KERNEL(max_##suffix, T, T, TT_FMAX(x, y))

#define TT_HALF_KERNELS(suffix, S, TO_F, FROM_F)                                                   \
    TT_KERNEL16(sum_##suffix, S, TO_F, FROM_F, TT_SUM(x, y))                                       \
    TT_KERNEL16(prod_##suffix, S, TO_F, FROM_F, TT_PROD(x, y))                                     \
    TT_KERNEL16(min_##suffix, S, TO_F, FROM_F, TT_FMIN(x, y))                                      \
    TT_KERNEL16(max_##suffix, S, TO_F, FROM_F, TT_FMAX(x, y))

/* The FP8 formats as one-argument conversions (half.h takes the format). */
static inline float e4m3_to_f(uint8_t c)
{
    return tt_fp8_to_float(c, TT_FP8_E4M3);
}
static inline uint8_t f_to_e4m3(float f)
{
    return tt_float_to_fp8(f, TT_FP8_E4M3);
}
static inline float e5m2_to_f(uint8_t c)
{
    return tt_fp8_to_float(c, TT_FP8_E5M2);
}
static inline uint8_t f_to_e5m2(float f)
{
    return tt_float_to_fp8(f, TT_FP8_E5M2);
}

/* Unsigned compute types: int8 sums promote to int, so cast through the unsigned type. */
TT_INT_KERNELS(i8, int8_t, uint8_t)
TT_INT_KERNELS(u8, uint8_t, uint8_t)
TT_INT_KERNELS(i32, int32_t, uint32_t)
TT_INT_KERNELS(u32, uint32_t, uint32_t)
TT_INT_KERNELS(i64, int64_t, uint64_t)
TT_INT_KERNELS(u64, uint64_t, uint64_t)
TT_HALF_KERNELS(f16, uint16_t, tt_half_to_float, tt_float_to_half)
TT_HALF_KERNELS(bf16, uint16_t, tt_bf16_to_float, tt_float_to_bf16)
TT_FLT_KERNELS(f32, float)
TT_FLT_KERNELS(f64, double)
TT_HALF_KERNELS(e4m3, uint8_t, e4m3_to_f, f_to_e4m3)
TT_HALF_KERNELS(e5m2, uint8_t, e5m2_to_f, f_to_e5m2)

#define TT_ROW(s)                                                                                  \
    {                                                                                              \
        sum_##s, prod_##s, min_##s, max_##s                                                        \
    }

/* Indexed [dtype][op] in the order of tutti_dtype_t and tutti_op_t (AVG uses SUM). */
static const tt_reduce_fn kernels[TUTTI_NUM_DTYPES][4] = {
    TT_ROW(i8),  TT_ROW(u8),   TT_ROW(i32), TT_ROW(u32), TT_ROW(i64),  TT_ROW(u64),
    TT_ROW(f16), TT_ROW(bf16), TT_ROW(f32), TT_ROW(f64), TT_ROW(e4m3), TT_ROW(e5m2),
};

tt_reduce_fn tt_reduce_kernel_portable(tutti_dtype_t dtype, tutti_op_t op)
{
    if ((unsigned)dtype >= TUTTI_NUM_DTYPES || (unsigned)op >= TUTTI_NUM_OPS)
        return NULL;
    return kernels[dtype][op == TUTTI_AVG ? TUTTI_SUM : op];
}

tt_reduce_fn tt_reduce_kernel(tutti_dtype_t dtype, tutti_op_t op)
{
    if ((unsigned)dtype >= TUTTI_NUM_DTYPES || (unsigned)op >= TUTTI_NUM_OPS)
        return NULL;
    if (op == TUTTI_AVG)
        op = TUTTI_SUM;
    const struct tt_cpu_kernels *cpu = tt_cpu_kernels(dtype);
    return cpu ? cpu->reduce[op] : kernels[dtype][op];
}

#define TT_DIV_LOOP(T)                                                                             \
    do {                                                                                           \
        T *p = d;                                                                                  \
        for (size_t i = 0; i < n; i++)                                                             \
            p[i] = (T)(p[i] / divisor);                                                            \
    } while (0)

#define TT_DIV16_LOOP(S, TO_F, FROM_F)                                                             \
    do {                                                                                           \
        S *p = d;                                                                                  \
        for (size_t i = 0; i < n; i++)                                                             \
            p[i] = FROM_F(TO_F(p[i]) / (float)divisor);                                            \
    } while (0)

/* float32 and float64: by a power of two (2, 4, 8 ranks), the product with the reciprocal,
 * which is exact and so the same value as the quotient, and several times faster than a
 * division (a 2-rank float32 AVG all-reduce took 1.3-1.7x a SUM's time, dividing). */
#define TT_DIVF(name, T)                                                                           \
    TT_CLONES static void name(void *d, size_t n, int divisor)                                     \
    {                                                                                              \
        T *p = d, v = (T)divisor, k = (T)1 / v;                                                    \
        if ((divisor & (divisor - 1)) == 0)                                                        \
            for (size_t i = 0; i < n; i++)                                                         \
                p[i] *= k;                                                                         \
        else                                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                p[i] /= v;                                                                         \
    }
TT_DIVF(div_f32, float)
TT_DIVF(div_f64, double)

void tt_postop_avg_portable(tutti_dtype_t dtype, void *d, size_t n, int divisor)
{
    if (divisor <= 1)
        return;
    switch (dtype) {
    case TUTTI_INT8: TT_DIV_LOOP(int8_t); break;
    case TUTTI_UINT8: TT_DIV_LOOP(uint8_t); break;
    case TUTTI_INT32: TT_DIV_LOOP(int32_t); break;
    case TUTTI_UINT32: TT_DIV_LOOP(uint32_t); break;
    case TUTTI_INT64: TT_DIV_LOOP(int64_t); break;
    case TUTTI_UINT64: TT_DIV_LOOP(uint64_t); break;
    case TUTTI_FLOAT16: TT_DIV16_LOOP(uint16_t, tt_half_to_float, tt_float_to_half); break;
    case TUTTI_BFLOAT16: TT_DIV16_LOOP(uint16_t, tt_bf16_to_float, tt_float_to_bf16); break;
    case TUTTI_FLOAT32: div_f32(d, n, divisor); break;
    case TUTTI_FLOAT64: div_f64(d, n, divisor); break;
    case TUTTI_FLOAT8_E4M3: TT_DIV16_LOOP(uint8_t, e4m3_to_f, f_to_e4m3); break;
    case TUTTI_FLOAT8_E5M2: TT_DIV16_LOOP(uint8_t, e5m2_to_f, f_to_e5m2); break;
    default: break;
    }
}

void tt_postop_avg(tutti_dtype_t dtype, void *d, size_t n, int divisor)
{
    const struct tt_cpu_kernels *cpu = divisor > 1 ? tt_cpu_kernels(dtype) : NULL;
    if (cpu)
        cpu->avg(d, n, divisor);
    else
        tt_postop_avg_portable(dtype, d, n, divisor);
}

/* d[i] = s[i] * k, k the scalar's bits as T (C: the compute type, unsigned for integers). */
#define TT_PREMUL(name, T, C)                                                                      \
    TT_CLONES static void name(void *d_, const void *s_, size_t n, const void *k_)                 \
    {                                                                                              \
        T *d = d_, k;                                                                              \
        const T *s = s_;                                                                           \
        memcpy(&k, k_, sizeof(k));                                                                 \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) d[i] = (T)((C)s[i] * (C)k);            \
    }
#define TT_PREMUL16(name, S, TO_F, FROM_F)                                                         \
    TT_CLONES static void name(void *d_, const void *s_, size_t n, const void *k_)                 \
    {                                                                                              \
        S *d = d_, kb;                                                                             \
        const S *s = s_;                                                                           \
        memcpy(&kb, k_, sizeof(kb));                                                               \
        float k = TO_F(kb);                                                                        \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) d[i] = FROM_F(TO_F(s[i]) * k);         \
    }

/* Every dtype in tutti_dtype_t's order: PLAIN(suffix, type, compute type) for the types C
 * computes in, CONV(suffix, storage, to float, from float) for the 16- and 8-bit floats. */
#define TT_EACH_DTYPE(PLAIN, CONV, P)                                                              \
    PLAIN(P, i8, int8_t, uint8_t)                                                                  \
    PLAIN(P, u8, uint8_t, uint8_t)                                                                 \
    PLAIN(P, i32, int32_t, uint32_t)                                                               \
    PLAIN(P, u32, uint32_t, uint32_t)                                                              \
    PLAIN(P, i64, int64_t, uint64_t)                                                               \
    PLAIN(P, u64, uint64_t, uint64_t)                                                              \
    CONV(P, f16, uint16_t, tt_half_to_float, tt_float_to_half)                                     \
    CONV(P, bf16, uint16_t, tt_bf16_to_float, tt_float_to_bf16)                                    \
    PLAIN(P, f32, float, float)                                                                    \
    PLAIN(P, f64, double, double)                                                                  \
    CONV(P, e4m3, uint8_t, e4m3_to_f, f_to_e4m3)                                                   \
    CONV(P, e5m2, uint8_t, e5m2_to_f, f_to_e5m2)
#define TT_NAME(P, sfx, ...) P##_##sfx,
#define TT_DEF_PREMUL(P, sfx, T, C) TT_PREMUL(P##_##sfx, T, C)
#define TT_DEF_PREMUL16(P, sfx, S, TO_F, FROM_F) TT_PREMUL16(P##_##sfx, S, TO_F, FROM_F)

TT_EACH_DTYPE(TT_DEF_PREMUL, TT_DEF_PREMUL16, premul)

void tt_premul_portable(tutti_dtype_t dtype, void *d, const void *s, size_t n, const void *scalar)
{
    static const tt_scale_fn fns[TUTTI_NUM_DTYPES] = {TT_EACH_DTYPE(TT_NAME, TT_NAME, premul)};
    if ((unsigned)dtype < TUTTI_NUM_DTYPES)
        fns[dtype](d, s, n, scalar);
}

void tt_premul(tutti_dtype_t dtype, void *d, const void *s, size_t n, const void *scalar)
{
    const struct tt_cpu_kernels *cpu = tt_cpu_kernels(dtype);
    if (cpu)
        cpu->premul(d, s, n, scalar);
    else
        tt_premul_portable(dtype, d, s, n, scalar);
}

/* The fused steps: the product rounded to T (C: compute type), then the sum (reduce.h). Two
 * statements, two roundings: the build is ISO C (-std=c11), so GCC contracts nothing into an
 * FMA, and test_reduce compares with tt_premul then the SUM kernel. */
#define TT_PMSUM(name, T, C)                                                                       \
    TT_CLONES static void name(void *d0_, void *d1_, const void *a_, const void *b_, size_t n,     \
                               const void *k_)                                                     \
    {                                                                                              \
        T *d0 = d0_, *d1 = d1_, k;                                                                 \
        const T *a = a_, *b = b_;                                                                  \
        memcpy(&k, k_, sizeof(k));                                                                 \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                                        \
        {                                                                                          \
            T p = (T)((C)b[i] * (C)k);                                                             \
            d0[i] = (T)((C)a[i] + (C)p);                                                           \
        }                                                                                          \
        if (d1)                                                                                    \
            memcpy(d1, d0, n * sizeof(T));                                                         \
    }
#define TT_PMSUM16(name, S, TO_F, FROM_F)                                                          \
    TT_CLONES static void name(void *d0_, void *d1_, const void *a_, const void *b_, size_t n,     \
                               const void *k_)                                                     \
    {                                                                                              \
        S *d0 = d0_, *d1 = d1_, kb;                                                                \
        const S *a = a_, *b = b_;                                                                  \
        memcpy(&kb, k_, sizeof(kb));                                                               \
        float k = TO_F(kb);                                                                        \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                                        \
        {                                                                                          \
            S p = FROM_F(TO_F(b[i]) * k);                                                          \
            d0[i] = FROM_F(TO_F(a[i]) + TO_F(p));                                                  \
        }                                                                                          \
        if (d1)                                                                                    \
            memcpy(d1, d0, n * sizeof(S));                                                         \
    }

#define TT_DEF_PMSUM(P, sfx, T, C) TT_PMSUM(P##_##sfx, T, C)
#define TT_DEF_PMSUM16(P, sfx, S, TO_F, FROM_F) TT_PMSUM16(P##_##sfx, S, TO_F, FROM_F)

TT_EACH_DTYPE(TT_DEF_PMSUM, TT_DEF_PMSUM16, pmsum)

tt_premul_fn tt_premul_sum_kernel_portable(tutti_dtype_t dtype)
{
    static const tt_premul_fn fns[TUTTI_NUM_DTYPES] = {TT_EACH_DTYPE(TT_NAME, TT_NAME, pmsum)};
    return (unsigned)dtype < TUTTI_NUM_DTYPES ? fns[dtype] : NULL;
}

tt_premul_fn tt_premul_sum_kernel(tutti_dtype_t dtype)
{
    if ((unsigned)dtype >= TUTTI_NUM_DTYPES)
        return NULL;
    const struct tt_cpu_kernels *cpu = tt_cpu_kernels(dtype);
    return cpu ? cpu->pmsum : tt_premul_sum_kernel_portable(dtype);
}
