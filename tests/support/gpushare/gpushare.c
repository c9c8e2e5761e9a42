/*
 * gpushare.c -- LD_PRELOAD for programs that put rank i on GPU i (nccl-tests' threads, -t N):
 * with GPUSHARE_DEVICES=N the program sees N devices, which all are the machine's own, device i
 * being real device i modulo their number, so N ranks share one GPU. tutti runs several ranks
 * on one GPU; NVIDIA's NCCL refuses it. Used by tools/gpu-check only (it needs a GPU).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>

static int real_count(void)
{
    static int n;
    cudaError_t (*f)(int *) = (cudaError_t(*)(int *))dlsym(RTLD_NEXT, "cudaGetDeviceCount");

    if (n <= 0 && (!f || f(&n) != cudaSuccess || n <= 0))
        n = 1;
    return n;
}

static int real_device(int d)
{
    return d >= 0 ? d % real_count() : d;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    const char *v = getenv("GPUSHARE_DEVICES");
    int n = real_count(), want = v ? atoi(v) : 0;

    if (!count)
        return cudaErrorInvalidValue;
    *count = want > n ? want : n;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t (*f)(int) = (cudaError_t(*)(int))dlsym(RTLD_NEXT, "cudaSetDevice");
    return f ? f(real_device(device)) : cudaErrorUnknown;
}

#undef cudaGetDeviceProperties
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    cudaError_t (*f)(struct cudaDeviceProp *, int) =
        (cudaError_t(*)(struct cudaDeviceProp *, int))dlsym(RTLD_NEXT, "cudaGetDeviceProperties");
    return f ? f(prop, real_device(device)) : cudaErrorUnknown;
}

cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
{
    cudaError_t (*f)(struct cudaDeviceProp *, int) =
        (cudaError_t(*)(struct cudaDeviceProp *, int))dlsym(RTLD_NEXT,
                                                            "cudaGetDeviceProperties_v2");
    return f ? f(prop, real_device(device)) : cudaErrorUnknown;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    cudaError_t (*f)(int *, enum cudaDeviceAttr, int) =
        (cudaError_t(*)(int *, enum cudaDeviceAttr, int))dlsym(RTLD_NEXT, "cudaDeviceGetAttribute");
    return f ? f(value, attr, real_device(device)) : cudaErrorUnknown;
}
