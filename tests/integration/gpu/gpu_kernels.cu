/* gpu_kernels.cu -- kernels for gpu_check.c: a slow fill (so that a collective queued behind
 * it on the same stream would read stale data if it did not wait) and a doubling. */
#include <stddef.h>
#include <stdint.h>

__global__ void slow_fill(float *buf, size_t n, float value, long long spin)
{
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] = value;
}

__global__ void twice(float *buf, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] *= 2.0f;
}

extern "C" int gpu_slow_fill(float *buf, size_t n, float value, long long spin, void *stream)
{
    slow_fill<<<64, 256, 0, (cudaStream_t)stream>>>(buf, n, value, spin);
    return (int)cudaGetLastError();
}

extern "C" int gpu_twice(float *buf, size_t n, void *stream)
{
    twice<<<64, 256, 0, (cudaStream_t)stream>>>(buf, n);
    return (int)cudaGetLastError();
}
