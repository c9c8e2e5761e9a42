/*
 * cudamock.h -- what the CUDA runtime stand-in (cudamock.c) offers its own kernels: a host
 * function queued on a stream in place of a kernel launch, and a check that a range is memory
 * a kernel may touch.
 */
#ifndef CUDAMOCK_H
#define CUDAMOCK_H

#include <stddef.h>

/* Queue fn on `stream` (a cudaStream_t; NULL: the legacy default stream) as a kernel: it
 * runs on the stream's thread in stream order, on a copy of the `size` bytes of arguments at
 * `args` (freed after it). Returns a cudaError_t (0: queued). */
int cudamock_launch(void *stream, void (*fn)(void *), const void *args, size_t size);

/* 1 when [p, p + bytes) lies in device memory or mapped pinned memory (what a kernel may
 * touch), else 0 with the reason printed. */
int cudamock_device_range(const void *p, size_t bytes, const char *what);

/* The next n kernel launches fail (cudaErrorLaunchFailure), as a kernel a GPU refuses. */
void cudamock_fail_launches(int n);

#endif
