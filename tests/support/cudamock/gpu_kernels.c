/*
 * gpu_kernels.c -- tests/integration/gpu/gpu_kernels.cu on cudamock: the slow fill spins for `spin`
 * clock cycles of a 2 GHz GPU (as a sleep), then fills; the doubling doubles.
 */
#include "cudamock.h"

#include <cuda_runtime_api.h>
#include <time.h>

struct fill {
    float *buf;
    size_t n;
    float value;
    long long spin;
};

static void run_fill(void *arg)
{
    struct fill *f = arg;
    struct timespec ts = {(time_t)(f->spin / 2000000000ll), (long)(f->spin % 2000000000ll / 2)};

    nanosleep(&ts, NULL);
    for (size_t i = 0; i < f->n; i++)
        f->buf[i] = f->value;
}

int gpu_slow_fill(float *buf, size_t n, float value, long long spin, void *stream)
{
    struct fill f = {buf, n, value, spin};

    if (!cudamock_device_range(buf, n * sizeof(float), "slow_fill"))
        return cudaErrorIllegalAddress;
    return cudamock_launch(stream, run_fill, &f, sizeof(f));
}

struct twice {
    float *buf;
    size_t n;
};

static void run_twice(void *arg)
{
    struct twice *t = arg;
    for (size_t i = 0; i < t->n; i++)
        t->buf[i] *= 2.0f;
}

int gpu_twice(float *buf, size_t n, void *stream)
{
    struct twice t = {buf, n};

    if (!cudamock_device_range(buf, n * sizeof(float), "twice"))
        return cudaErrorIllegalAddress;
    return cudamock_launch(stream, run_twice, &t, sizeof(t));
}
