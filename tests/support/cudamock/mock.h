/*
 * mock.h -- what cudamock's files share: cudamock.c (errors, memory and IPC, the devices,
 * driver entry points) and the stream files (stream_int.h: streams, events, copies, kernels).
 */
#ifndef CUDAMOCK_MOCK_H
#define CUDAMOCK_MOCK_H

#include "cudamock.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

/* e, kept as the calling thread's last error (cudaGetLastError) unless success or
 * not-ready. */
cudaError_t cudamock_ret(cudaError_t e);

double cudamock_now(void);

/* The calling thread's current device (cudaSetDevice), 0 by default. */
int cudamock_current_device(void);

/* A host function (cudaLaunchHostFunc) must make no CUDA call: CUDA may answer
 * cudaErrorNotPermitted, or deadlock (the driver runs host functions on its own thread).
 * Set while one runs; a CUDA call then is refused, loudly (GUARD, at each entry point). */
extern __thread int cudamock_in_host_fn;
int cudamock_refused_in_host_fn(const char *fn);

#define GUARD()                                                                                    \
    do {                                                                                           \
        if (cudamock_refused_in_host_fn(__func__))                                                 \
            return cudaErrorNotPermitted;                                                          \
    } while (0)
#define GUARD_CU()                                                                                 \
    do {                                                                                           \
        if (cudamock_refused_in_host_fn(__func__))                                                 \
            return CUDA_ERROR_NOT_PERMITTED;                                                       \
    } while (0)

/* Everything queued on every stream so far has run (the wait of cudaFree and cudaFreeHost). */
void cudamock_device_wait(void);

/* Queue fn on stream h, to run on a copy of the `size` bytes at args (no launch checks). */
cudaError_t cudamock_queue(cudaStream_t h, void (*fn)(void *), const void *args, size_t size);

/* cuStreamWaitValue32 (GEQ only), handed out by cudaGetDriverEntryPointByVersion. */
CUresult cudamock_wait_value32(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags);

#endif
