/*
 * kernels.cu -- CUDA reduction kernels: dst[i] = a[i] (op) b[i] for every dtype and op of
 * tutti.h, the fused reduce-copy of the device data path, and the final division of AVG.
 *
 * Semantics are the host kernels' (lib/kern/reduce.c), so host and device give bitwise the same
 * answer: integers wrap; float16 and bfloat16 are widened to float32, combined, rounded to
 * nearest even (which is what the native __hadd/__hmul do for one operation); FP8 the same,
 * saturating at the largest finite value (__NV_SATFINITE); MIN/MAX return
 * NaN when either input is NaN; AVG is a SUM followed by one division by the rank count
 * (integers truncate toward zero).
 *
 * Vectorised: where dst, a and b are 16-byte aligned each thread moves whole 16-byte vectors
 * (uint4: 16 int8 or FP8, 8 half, 4 float, 2 double per load), the remainder element by element; a
 * grid-stride loop bounds the grid whatever the count.
 */
#include "lib/cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>

namespace
{

/* An FP8 element of format K (__NV_E4M3, __NV_E5M2), as its storage byte: to float exactly
 * (through half, which holds every FP8 value), from float rounded to nearest even and
 * saturated (__NV_SATFINITE, what __nv_fp8_e4m3's constructor does). */
template <__nv_fp8_interpretation_t K> struct F8 {
    __nv_fp8_storage_t b;
};
template <__nv_fp8_interpretation_t K> __device__ float f8_to_float(F8<K> x)
{
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.b, K)));
}
template <__nv_fp8_interpretation_t K> __device__ F8<K> float_to_f8(float f)
{
    return F8<K>{__nv_cvt_float_to_fp8(f, __NV_SATFINITE, K)};
}

template <typename T> struct Sum {
    __device__ static T f(T x, T y) { return x + y; }
};
template <typename T> struct Prod {
    __device__ static T f(T x, T y) { return x * y; }
};
template <typename T> struct Min {
    __device__ static T f(T x, T y) { return y < x ? y : x; }
};
template <typename T> struct Max {
    __device__ static T f(T x, T y) { return y > x ? y : x; }
};

/* Signed integers wrap: compute in the unsigned type. */
template <typename S, typename U> struct WrapSum {
    __device__ static S f(S x, S y) { return (S)((U)x + (U)y); }
};
template <typename S, typename U> struct WrapProd {
    __device__ static S f(S x, S y) { return (S)((U)x * (U)y); }
};

/* Floating point MIN/MAX with NaN propagation. */
template <typename T> struct FMin {
    __device__ static T f(T x, T y) { return x != x ? x : y != y ? y : (y < x ? y : x); }
};
template <typename T> struct FMax {
    __device__ static T f(T x, T y) { return x != x ? x : y != y ? y : (y > x ? y : x); }
};

/* Half types: widen, combine with the float op, round to nearest even. */
template <typename H, typename FOp> struct Half16 {
    __device__ static H f(H x, H y);
};
template <typename FOp> struct Half16<__half, FOp> {
    __device__ static __half f(__half x, __half y)
    {
        return __float2half_rn(FOp::f(__half2float(x), __half2float(y)));
    }
};
template <typename FOp> struct Half16<__nv_bfloat16, FOp> {
    __device__ static __nv_bfloat16 f(__nv_bfloat16 x, __nv_bfloat16 y)
    {
        return __float2bfloat16_rn(FOp::f(__bfloat162float(x), __bfloat162float(y)));
    }
};
template <__nv_fp8_interpretation_t K, typename FOp> struct Half16<F8<K>, FOp> {
    __device__ static F8<K> f(F8<K> x, F8<K> y)
    {
        return float_to_f8<K>(FOp::f(f8_to_float(x), f8_to_float(y)));
    }
};

/* x / n as the dtype's division (AVG's last step): integers truncate, halves and FP8 divide in
 * float and round once. n stays an int, as on the host (reduce.c): cast to an 8-bit type, 200
 * ranks would divide int8 by -56 and 256 would divide uint8 by zero. */
template <typename T> struct DivBy {
    __device__ static T f(T x, int n) { return (T)(x / n); }
};
template <> struct DivBy<__half> {
    __device__ static __half f(__half x, int n)
    {
        return __float2half_rn(__half2float(x) / (float)n);
    }
};
template <> struct DivBy<__nv_bfloat16> {
    __device__ static __nv_bfloat16 f(__nv_bfloat16 x, int n)
    {
        return __float2bfloat16_rn(__bfloat162float(x) / (float)n);
    }
};

template <__nv_fp8_interpretation_t K> struct DivBy<F8<K>> {
    __device__ static F8<K> f(F8<K> x, int n) { return float_to_f8<K>(f8_to_float(x) / (float)n); }
};

/* dst[i] = a[i] op b[i], and the same into dst2 when it is not NULL (the fused
 * reduce-copy: a step that keeps the result and forwards it writes both in one pass); divided
 * by div first when it is more than 1 (the end of an AVG: the sum, the division and the copy
 * that were three passes over the chunk and three operations on the stream are one). */
template <typename T, typename Op> __device__ T combine(T x, T y, int div)
{
    T z = Op::f(x, y);
    return div > 1 ? DivBy<T>::f(z, div) : z;
}

template <typename T, typename Op>
__global__ void reduce_kernel(T *dst, T *dst2, const T *a, const T *b, size_t n, int vec, int div)
{
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    constexpr int per = (int)(sizeof(uint4) / sizeof(T));
    size_t done = 0;

    if (vec) {
        const size_t nv = n / per;
        for (size_t v = tid; v < nv; v += stride) {
            uint4 x = reinterpret_cast<const uint4 *>(a)[v];
            uint4 y = reinterpret_cast<const uint4 *>(b)[v];
            uint4 z;
            const T *xs = reinterpret_cast<const T *>(&x);
            const T *ys = reinterpret_cast<const T *>(&y);
            T *zs = reinterpret_cast<T *>(&z);
#pragma unroll
            for (int k = 0; k < per; k++)
                zs[k] = combine<T, Op>(xs[k], ys[k], div);
            reinterpret_cast<uint4 *>(dst)[v] = z;
            if (dst2)
                reinterpret_cast<uint4 *>(dst2)[v] = z;
        }
        done = nv * per;
    }
    for (size_t i = done + tid; i < n; i += stride) {
        T z = combine<T, Op>(a[i], b[i], div);
        dst[i] = z;
        if (dst2)
            dst2[i] = z;
    }
}

template <typename T> __global__ void divide_kernel(T *buf, size_t n, int ranks)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        buf[i] = DivBy<T>::f(buf[i], ranks);
}

/* dst[i] = src[i] * k, k = *dev when dev is not NULL (read on the device, in stream order),
 * else `value`; Op is the dtype's PROD. */
template <typename T, typename Op>
__global__ void premul_kernel(T *dst, const T *src, size_t n, T value, const T *dev)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const T k = dev ? *dev : value;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = Op::f(src[i], k);
}

int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return (int)(blocks < 1 ? 1 : blocks > 4096 ? 4096 : blocks);
}

/* The arguments of a reduce-copy, as the launchers pass them on. */
struct RC {
    void *dst, *dst2;
    const void *a, *b;
    size_t n;
    int div;
    cudaStream_t s;
};

template <typename T, typename Op> cudaError_t launch(const RC &r)
{
    int vec = (((uintptr_t)r.dst | (uintptr_t)r.dst2 | (uintptr_t)r.a | (uintptr_t)r.b) & 15) == 0;
    size_t work = vec ? r.n / (sizeof(uint4) / sizeof(T)) + 1 : r.n;
    reduce_kernel<T, Op><<<grid_for(work), 256, 0, r.s>>>((T *)r.dst, (T *)r.dst2, (const T *)r.a,
                                                          (const T *)r.b, r.n, vec, r.div);
    return cudaGetLastError();
}

template <typename S, typename U> cudaError_t launch_int(const RC &r, tutti_op_t op)
{
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return launch<S, WrapSum<S, U>>(r);
    case TUTTI_PROD: return launch<S, WrapProd<S, U>>(r);
    case TUTTI_MIN: return launch<S, Min<S>>(r);
    case TUTTI_MAX: return launch<S, Max<S>>(r);
    default: return cudaErrorInvalidValue;
    }
}

template <typename F> cudaError_t launch_float(const RC &r, tutti_op_t op)
{
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return launch<F, Sum<F>>(r);
    case TUTTI_PROD: return launch<F, Prod<F>>(r);
    case TUTTI_MIN: return launch<F, FMin<F>>(r);
    case TUTTI_MAX: return launch<F, FMax<F>>(r);
    default: return cudaErrorInvalidValue;
    }
}

template <typename H> cudaError_t launch_half(const RC &r, tutti_op_t op)
{
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return launch<H, Half16<H, Sum<float>>>(r);
    case TUTTI_PROD: return launch<H, Half16<H, Prod<float>>>(r);
    case TUTTI_MIN: return launch<H, Half16<H, FMin<float>>>(r);
    case TUTTI_MAX: return launch<H, Half16<H, FMax<float>>>(r);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T> cudaError_t divide(void *buf, size_t n, int ranks, cudaStream_t s)
{
    divide_kernel<T><<<grid_for(n), 256, 0, s>>>((T *)buf, n, ranks);
    return cudaGetLastError();
}

template <typename T, typename Op>
cudaError_t premul(void *dst, const void *src, size_t n, const void *value, const void *dev,
                   cudaStream_t s)
{
    T v;
    memset(&v, 0, sizeof(v));
    if (!dev)
        memcpy(&v, value, sizeof(v));
    premul_kernel<T, Op>
        <<<grid_for(n), 256, 0, s>>>((T *)dst, (const T *)src, n, v, (const T *)dev);
    return cudaGetLastError();
}

/* Integers wrap (the unsigned type U computes); halves and FP8 go through float. */
template <typename S, typename U>
cudaError_t premul_int(void *dst, const void *src, size_t n, const void *value, const void *dev,
                       cudaStream_t s)
{
    return premul<S, WrapProd<S, U>>(dst, src, n, value, dev, s);
}
template <typename H>
cudaError_t premul_half(void *dst, const void *src, size_t n, const void *value, const void *dev,
                        cudaStream_t s)
{
    return premul<H, Half16<H, Prod<float>>>(dst, src, n, value, dev, s);
}

} // namespace

extern "C" int tt_cuda_reduce_copy(void *dst, void *dst2, const void *a, const void *b,
                                   size_t count, tutti_dtype_t dtype, tutti_op_t op, int divisor,
                                   void *stream)
{
    const RC r = {dst, dst2, a, b, count, divisor, (cudaStream_t)stream};
    if (count == 0)
        return 0;
    switch (dtype) {
    case TUTTI_INT8: return launch_int<int8_t, uint8_t>(r, op);
    case TUTTI_UINT8: return launch_int<uint8_t, uint8_t>(r, op);
    case TUTTI_INT32: return launch_int<int32_t, uint32_t>(r, op);
    case TUTTI_UINT32: return launch_int<uint32_t, uint32_t>(r, op);
    case TUTTI_INT64: return launch_int<int64_t, uint64_t>(r, op);
    case TUTTI_UINT64: return launch_int<uint64_t, uint64_t>(r, op);
    case TUTTI_FLOAT16: return launch_half<__half>(r, op);
    case TUTTI_BFLOAT16: return launch_half<__nv_bfloat16>(r, op);
    case TUTTI_FLOAT32: return launch_float<float>(r, op);
    case TUTTI_FLOAT64: return launch_float<double>(r, op);
    case TUTTI_FLOAT8_E4M3: return launch_half<F8<__NV_E4M3>>(r, op);
    case TUTTI_FLOAT8_E5M2: return launch_half<F8<__NV_E5M2>>(r, op);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int tt_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                              tutti_dtype_t dtype, tutti_op_t op, void *stream)
{
    return tt_cuda_reduce_copy(dst, NULL, a, b, count, dtype, op, 0, stream);
}

extern "C" int tt_cuda_divide(void *buf, size_t count, tutti_dtype_t dtype, int ranks, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (count == 0)
        return 0;
    switch (dtype) {
    case TUTTI_INT8: return divide<int8_t>(buf, count, ranks, s);
    case TUTTI_UINT8: return divide<uint8_t>(buf, count, ranks, s);
    case TUTTI_INT32: return divide<int32_t>(buf, count, ranks, s);
    case TUTTI_UINT32: return divide<uint32_t>(buf, count, ranks, s);
    case TUTTI_INT64: return divide<int64_t>(buf, count, ranks, s);
    case TUTTI_UINT64: return divide<uint64_t>(buf, count, ranks, s);
    case TUTTI_FLOAT16: return divide<__half>(buf, count, ranks, s);
    case TUTTI_BFLOAT16: return divide<__nv_bfloat16>(buf, count, ranks, s);
    case TUTTI_FLOAT32: return divide<float>(buf, count, ranks, s);
    case TUTTI_FLOAT64: return divide<double>(buf, count, ranks, s);
    case TUTTI_FLOAT8_E4M3: return divide<F8<__NV_E4M3>>(buf, count, ranks, s);
    case TUTTI_FLOAT8_E5M2: return divide<F8<__NV_E5M2>>(buf, count, ranks, s);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int tt_cuda_premul(void *dst, const void *src, size_t count, tutti_dtype_t dtype,
                              const void *value, const void *dev, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (count == 0)
        return 0;
    if (!value && !dev)
        return cudaErrorInvalidValue;
    switch (dtype) {
    case TUTTI_INT8: return premul_int<int8_t, uint8_t>(dst, src, count, value, dev, s);
    case TUTTI_UINT8: return premul_int<uint8_t, uint8_t>(dst, src, count, value, dev, s);
    case TUTTI_INT32: return premul_int<int32_t, uint32_t>(dst, src, count, value, dev, s);
    case TUTTI_UINT32: return premul_int<uint32_t, uint32_t>(dst, src, count, value, dev, s);
    case TUTTI_INT64: return premul_int<int64_t, uint64_t>(dst, src, count, value, dev, s);
    case TUTTI_UINT64: return premul_int<uint64_t, uint64_t>(dst, src, count, value, dev, s);
    case TUTTI_FLOAT16: return premul_half<__half>(dst, src, count, value, dev, s);
    case TUTTI_BFLOAT16: return premul_half<__nv_bfloat16>(dst, src, count, value, dev, s);
    case TUTTI_FLOAT32: return premul<float, Prod<float>>(dst, src, count, value, dev, s);
    case TUTTI_FLOAT64: return premul<double, Prod<double>>(dst, src, count, value, dev, s);
    case TUTTI_FLOAT8_E4M3: return premul_half<F8<__NV_E4M3>>(dst, src, count, value, dev, s);
    case TUTTI_FLOAT8_E5M2: return premul_half<F8<__NV_E5M2>>(dst, src, count, value, dev, s);
    default: return cudaErrorInvalidValue;
    }
}
