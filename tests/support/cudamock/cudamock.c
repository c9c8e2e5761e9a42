/*
 * cudamock.c -- the CUDA runtime calls libtutti and the gpu suite make, on the host, so that
 * the device path's control logic (stream order, events, the runner and its GPU-side waits,
 * p2p connections over IPC handles, staging) runs where no GPU is: in CI. It stands in for
 * libcudart_static in the `gpu-mock` build of gpu_check; libtutti itself never links it.
 *
 * What it models:
 * - a device (0), whose memory is host memory: cudaMalloc maps a memfd, and an IPC handle
 *   names the owner's pid and descriptor, which another process opens through
 *   /proc/PID/fd/N and maps (so a sender's copies land in the receiver's allocation, as over
 *   CUDA IPC). Opening a handle in the process that made it fails, as in CUDA;
 * - streams as threads: each stream runs its operations (copies, memsets, kernels, host
 *   functions, event records, waits) one after another on a thread of its own. Each device's
 *   legacy default stream (NULL) orders against every blocking stream of that device both
 *   ways, as CUDA's does;
 *   streams made with cudaStreamNonBlocking do not wait for it;
 * - events (record, query, synchronize, wait, elapsed time), cuStreamWaitValue32 (GEQ) on
 *   mapped pinned memory, stream capture (a stream being captured takes no work: anything
 *   queued on it is refused loudly, since tutti must refuse such calls before queueing);
 * - cudaFree and cudaFreeHost wait for the whole device first, as CUDA's do;
 * - a host function (cudaLaunchHostFunc) that makes a CUDA call is refused loudly
 *   (cudaErrorNotPermitted), as CUDA may refuse it, or deadlock; host functions run one at a
 *   time, whatever their stream, as on the driver's one thread for them;
 * - kernels (cudamock_launch) check that their pointers are device or mapped memory, where a
 *   GPU would fault; cudamock_fail_launches(n) makes the next n launches fail, so that tests
 *   can see what a failing kernel does to a collective.
 * - CUDAMOCK_DEVICES=N (default 1) devices, each with its own PCI bus id, each reaching the
 *   others (as over NVLink); their memory is all host memory, recorded with its device;
 * What it does not: time-slicing between processes, copy engines, performance of any kind,
 * managed memory, graphs (a captured graph is empty).
 *
 * This file: errors, memory and IPC, the device, driver entry points; stream.c: streams,
 * events, copies, kernels and the stall report.
 */
#include "mock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ---- */

static __thread cudaError_t last_error;

cudaError_t cudamock_ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (cudamock)";
    case cudaErrorMemoryAllocation: return "out of memory (cudamock)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (cudamock)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (cudamock)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (cudamock)";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered (cudamock)";
    case cudaErrorLaunchFailure: return "unspecified launch failure (cudamock)";
    case cudaErrorNotPermitted: return "operation not permitted (cudamock)";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing (cudamock)";
    default: return "unknown error (cudamock)";
    }
}

double cudamock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__thread int cudamock_in_host_fn;

int cudamock_refused_in_host_fn(const char *fn)
{
    if (!cudamock_in_host_fn)
        return 0;
    fprintf(stderr,
            "cudamock: %s called from a host function (cudaLaunchHostFunc): CUDA forbids "
            "it\n",
            fn);
    last_error = cudaErrorNotPermitted;
    return 1;
}

/* ---- memory: a table of what was allocated or opened ---- */

enum kind { DEVICE = 1, PINNED };

struct region {
    char *base;
    size_t size;
    enum kind kind;
    int fd;          /* device memory made here: the memfd an IPC handle names; else -1 */
    int opened;      /* device memory opened from another process's handle */
    unsigned mapped; /* pinned: cudaHostAllocMapped */
    int device;      /* the current device when it was made */
};

static __thread int current_device;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static size_t nregions, cap_regions;

static int add_region(struct region r)
{
    pthread_mutex_lock(&mem_lock);
    if (nregions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 64;
        struct region *g = realloc(regions, cap * sizeof(*g));
        if (!g) {
            pthread_mutex_unlock(&mem_lock);
            return -1;
        }
        regions = g, cap_regions = cap;
    }
    regions[nregions++] = r;
    pthread_mutex_unlock(&mem_lock);
    return 0;
}

/* The region holding p (copied out), or 0 when none does. */
static int find_region(const void *p, struct region *out)
{
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions && !found; i++)
        if ((const char *)p >= regions[i].base &&
            (const char *)p < regions[i].base + regions[i].size) {
            *out = regions[i];
            found = 1;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

/* Remove the region that starts at p and is of kind k (copied out); 0 when there is none. */
static int take_region(const void *p, enum kind k, struct region *out)
{
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].base == p && regions[i].kind == k) {
            *out = regions[i];
            regions[i] = regions[--nregions];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

int cudamock_device_range(const void *p, size_t bytes, const char *what)
{
    struct region r;

    if (bytes == 0)
        return 1;
    if (find_region(p, &r) && (r.kind == DEVICE || r.mapped) &&
        (const char *)p + bytes <= r.base + r.size)
        return 1;
    fprintf(stderr,
            "cudamock: %s: %zu bytes at %p are not device memory (a GPU would fault here)\n", what,
            bytes, p);
    return 0;
}

/* ---- device memory and IPC ---- */

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return n ? (n + page - 1) / page * page : page;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    size_t size = page_round(bytes);
    int fd;
    void *m;

    GUARD();
    if (!p)
        return cudamock_ret(cudaErrorInvalidValue);
    *p = NULL;
    fd = memfd_create("cudamock", MFD_CLOEXEC);
    if (fd < 0)
        return cudamock_ret(cudaErrorMemoryAllocation);
    if (ftruncate(fd, (off_t)size) != 0 ||
        (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        close(fd);
        return cudamock_ret(cudaErrorMemoryAllocation);
    }
    if (add_region((struct region){
            .base = m, .size = size, .kind = DEVICE, .fd = fd, .device = current_device}) != 0) {
        munmap(m, size);
        close(fd);
        return cudamock_ret(cudaErrorMemoryAllocation);
    }
    *p = m;
    return cudaSuccess;
}

/* Free device allocation p now: 0, or -1 (said why) if it is not one. */
static int free_device(void *p, const char *fn)
{
    struct region r;

    if (!take_region(p, DEVICE, &r)) {
        fprintf(stderr, "cudamock: %s(%p): not an allocation of cudaMalloc\n", fn, p);
        return -1;
    }
    if (r.opened) {
        add_region(r);
        fprintf(stderr, "cudamock: %s(%p): opened from an IPC handle\n", fn, p);
        return -1;
    }
    munmap(r.base, r.size);
    close(r.fd);
    return 0;
}

cudaError_t cudaFree(void *p)
{
    GUARD();
    if (!p)
        return cudaSuccess;
    cudamock_device_wait();
    return free_device(p, "cudaFree") == 0 ? cudaSuccess : cudamock_ret(cudaErrorInvalidValue);
}

/* Stream-ordered allocation: at once (a pool would hand it out at once too); the free runs in
 * the stream's order, without cudaFree's wait for the whole device. */
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t h)
{
    (void)h;
    return cudaMalloc(p, bytes);
}

static void free_queued(void *arg)
{
    void *p;
    memcpy(&p, arg, sizeof(p));
    free_device(p, "cudaFreeAsync");
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t h)
{
    GUARD();
    if (!p)
        return cudaSuccess;
    return cudamock_ret(cudamock_queue(h, free_queued, &p, sizeof(p)));
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    size_t size = page_round(bytes);

    GUARD();
    if (!p)
        return cudamock_ret(cudaErrorInvalidValue);
    *p = NULL;
    if (posix_memalign(p, (size_t)sysconf(_SC_PAGESIZE), size) != 0)
        return cudamock_ret(cudaErrorMemoryAllocation);
    if (add_region((struct region){.base = *p,
                                   .size = size,
                                   .kind = PINNED,
                                   .fd = -1,
                                   .mapped = flags & cudaHostAllocMapped}) != 0) {
        free(*p);
        *p = NULL;
        return cudamock_ret(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    struct region r;

    GUARD();
    if (!p)
        return cudaSuccess;
    cudamock_device_wait();
    if (!take_region(p, PINNED, &r)) {
        fprintf(stderr, "cudamock: cudaFreeHost(%p): not an allocation of cudaHostAlloc\n", p);
        return cudamock_ret(cudaErrorInvalidValue);
    }
    free(r.base);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **d, void *p, unsigned int flags)
{
    struct region r;

    GUARD();
    (void)flags;
    if (!d || !find_region(p, &r) || r.kind != PINNED || !r.mapped)
        return cudamock_ret(cudaErrorInvalidValue);
    *d = p;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    struct region r;

    GUARD();
    if (!a)
        return cudamock_ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof(*a));
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    if (!find_region(p, &r))
        return cudaSuccess;
    a->device = r.device;
    if (r.kind == DEVICE) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeHost;
        a->hostPointer = (void *)p;
        a->devicePointer = r.mapped ? (void *)p : NULL;
    }
    return cudaSuccess;
}

struct ipc {
    char magic[8];
    int32_t pid, fd;
    uint64_t size;
};

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    struct region r;
    struct ipc i = {"cudamock", 0, 0, 0};

    GUARD();
    if (!h || !find_region(p, &r) || r.kind != DEVICE || r.opened || r.base != p)
        return cudamock_ret(cudaErrorInvalidValue);
    i.pid = (int32_t)getpid(), i.fd = r.fd, i.size = r.size;
    memset(h, 0, sizeof(*h));
    memcpy(h, &i, sizeof(i));
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags)
{
    struct ipc i;
    char path[64];
    void *m;
    int fd;

    GUARD();
    (void)flags;
    memcpy(&i, &h, sizeof(i));
    if (!p || memcmp(i.magic, "cudamock", 8) != 0)
        return cudamock_ret(cudaErrorInvalidValue);
    if (i.pid == (int32_t)getpid()) /* CUDA opens no handle of the process that made it */
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)i.pid, (int)i.fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "cudamock: cudaIpcOpenMemHandle: %s: %s\n", path, strerror(errno));
        return cudamock_ret(cudaErrorInvalidResourceHandle);
    }
    m = mmap(NULL, (size_t)i.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return cudamock_ret(cudaErrorMemoryAllocation);
    if (add_region((struct region){
            .base = m, .size = (size_t)i.size, .kind = DEVICE, .fd = -1, .opened = 1}) != 0) {
        munmap(m, (size_t)i.size);
        return cudamock_ret(cudaErrorMemoryAllocation);
    }
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    struct region r;

    GUARD();
    if (!take_region(p, DEVICE, &r))
        return cudamock_ret(cudaErrorInvalidValue);
    if (!r.opened) {
        add_region(r);
        return cudamock_ret(cudaErrorInvalidValue);
    }
    munmap(r.base, r.size);
    return cudaSuccess;
}

/* ---- the devices ---- */

static int ndevices(void)
{
    const char *v = getenv("CUDAMOCK_DEVICES");
    int n = v && *v ? atoi(v) : 1;
    return n >= 1 && n <= 64 ? n : 1;
}

int cudamock_current_device(void)
{
    return current_device;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    GUARD();
    if (!n)
        return cudamock_ret(cudaErrorInvalidValue);
    *n = ndevices();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    GUARD();
    if (d < 0 || d >= ndevices())
        return cudamock_ret(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    GUARD();
    if (!d)
        return cudamock_ret(cudaErrorInvalidValue);
    *d = current_device;
    return cudaSuccess;
}

/* Device d's PCI bus id: 0000:0A:00.0 for device 0, then 0B, 0C... */
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
    GUARD();
    if (!bus || len < 13 || d < 0 || d >= ndevices())
        return cudamock_ret(cudaErrorInvalidValue);
    snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x0A + d);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *bus)
{
    unsigned dom, b, dev, fn;

    GUARD();
    if (!d || !bus || sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dev, &fn) != 4 || dom || dev || fn ||
        b < 0x0A || (int)(b - 0x0A) >= ndevices())
        return cudamock_ret(cudaErrorInvalidDevice);
    *d = (int)(b - 0x0A);
    return cudaSuccess;
}

/* Every device reaches every other (CUDA answers 0 for a device and itself). */
cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    GUARD();
    if (!can || d < 0 || d >= ndevices() || peer < 0 || peer >= ndevices())
        return cudamock_ret(cudaErrorInvalidDevice);
    *can = d != peer;
    return cudaSuccess;
}

/* Peer access from the current device to `peer`, once (CUDA answers
 * cudaErrorPeerAccessAlreadyEnabled the second time). */
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    static _Atomic unsigned long long enabled[64];
    unsigned long long bit;

    GUARD();
    if (flags || peer < 0 || peer >= ndevices() || peer == current_device)
        return cudamock_ret(peer == current_device ? cudaErrorInvalidDevice
                                                   : cudaErrorInvalidValue);
    bit = 1ull << peer;
    if (atomic_fetch_or(&enabled[current_device], bit) & bit)
        return cudamock_ret(cudaErrorPeerAccessAlreadyEnabled);
    return cudaSuccess;
}

/* ---- driver entry points ---- */

static CUresult mock_get_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    struct region r;

    GUARD_CU();
    if (!find_region((const void *)(uintptr_t)p, &r) || r.kind != DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (base)
        *base = (CUdeviceptr)(uintptr_t)r.base;
    if (size)
        *size = r.size;
    return CUDA_SUCCESS;
}

/* No dma-buf export: the GPUDirect RDMA path reports it unavailable. */
static CUresult mock_no_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
                               unsigned long long flags)
{
    GUARD_CU();
    (void)handle, (void)p, (void)size, (void)type, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    void *f = NULL;
    CUresult (*wait)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = cudamock_wait_value32;
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = mock_get_range;
    CUresult (*dmabuf)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) =
        mock_no_dmabuf;

    GUARD();
    (void)version, (void)flags;
    if (!symbol || !fn)
        return cudamock_ret(cudaErrorInvalidValue);
    if (!strcmp(symbol, "cuStreamWaitValue32"))
        memcpy(&f, &wait, sizeof(f));
    else if (!strcmp(symbol, "cuMemGetAddressRange"))
        memcpy(&f, &range, sizeof(f));
    else if (!strcmp(symbol, "cuMemGetHandleForAddressRange"))
        memcpy(&f, &dmabuf, sizeof(f));
    *fn = f;
    if (status)
        *status = f ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
