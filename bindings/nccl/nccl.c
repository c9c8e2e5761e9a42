/*
 * nccl.c -- NCCL's API on tutti: results and errors, the version, ids, communicators' queries,
 * memory, registration and windows. nccl_init.c makes and ends communicators, nccl_calls.c runs
 * the collectives and point-to-point, nccl_group.c holds groups.
 *
 * Each function is defined once as pncclX (NCCL's profiling names) and exported as ncclX too, a
 * weak alias, so a profiler may interpose ncclX and call pncclX. Every code and enum is mapped
 * explicitly: NCCL's and tutti's values differ (NCCL's Float32 is 7, tutti's 8).
 *
 * A communicator's waits are tutti's, bounded: TUTTI_NCCL_TIMEOUT (1800 s by default) of no
 * progress fails the call or the queued work with ncclRemoteError, the cause in
 * ncclGetLastError; NCCL itself would wait for ever.
 */
#include "nccl_int.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(ncclUniqueId) == sizeof(tutti_id_t), "an NCCL id carries a tutti id");

/* ---- results and errors ---- */

static __thread char thread_err[NC_ERRLEN];

ncclResult_t nc_result(tutti_result_t rc)
{
    switch (rc) {
    case TUTTI_SUCCESS: return ncclSuccess;
    case TUTTI_ERR_INVALID_ARG: return ncclInvalidArgument;
    case TUTTI_ERR_SYSTEM: return ncclSystemError;
    case TUTTI_ERR_INTERNAL: return ncclInternalError;
    case TUTTI_ERR_REMOTE: return ncclRemoteError;
    case TUTTI_ERR_TIMEOUT: return ncclRemoteError;  /* a peer made no progress */
    case TUTTI_ERR_ABORTED: return ncclInvalidUsage; /* used after ncclCommAbort/Revoke */
    case TUTTI_ERR_UNSUPPORTED: return ncclInvalidUsage;
    case TUTTI_IN_PROGRESS: return ncclInProgress;
    default: return ncclInternalError;
    }
}

ncclResult_t nc_error(struct ncclComm *c, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(thread_err, sizeof(thread_err), fmt, ap);
    va_end(ap);
    if (c) {
        pthread_mutex_lock(&c->lock);
        snprintf(c->err, sizeof(c->err), "%s", thread_err);
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

const char *nc_timeout_note(const struct ncclComm *c, const char *msg, char *buf, size_t size)
{
    if (!c || !strstr(msg, "TUTTI_TIMEOUT"))
        return "";
    snprintf(buf, size, "; communicators of the NCCL API wait TUTTI_NCCL_TIMEOUT, %g s",
             c->timeout_s);
    return buf;
}

ncclResult_t nc_tutti_failed(struct ncclComm *c, tutti_result_t rc, const char *fn)
{
    const char *msg = c && c->tc ? tutti_comm_last_error(c->tc) : tutti_last_error();
    char note[96];

    if (!*msg)
        msg = tutti_last_error();
    return nc_error(c, nc_result(rc), "%s: %s (tutti: %s%s)", fn, msg, tutti_strerror(rc),
                    nc_timeout_note(c, msg, note, sizeof(note)));
}

ncclResult_t nc_comm(ncclComm_t comm, const char *fn, int ready)
{
    int st;

    if (!comm || comm->magic != NC_MAGIC)
        return nc_error(NULL, ncclInvalidArgument, "%s: comm is %s", fn,
                        comm ? "not a live communicator (destroyed?)" : "NULL");
    if (!ready)
        return ncclSuccess;
    st = atomic_load(&comm->state);
    if (st == ncclInProgress)
        return nc_error(comm, ncclInvalidUsage,
                        "%s: the communicator's initialization has not finished (poll "
                        "ncclCommGetAsyncError until it returns ncclSuccess)",
                        fn);
    if (st != ncclSuccess)
        return nc_error(comm, (ncclResult_t)st, "%s: the communicator's initialization failed: %s",
                        fn, comm->err);
    return ncclSuccess;
}

const char *pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (ncclGetLastError says which)";
    case ncclSystemError: return "unhandled system error (ncclGetLastError says which)";
    case ncclInternalError: return "internal error (ncclGetLastError says which)";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError says which)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError says which)";
    case ncclRemoteError:
        return "remote process exited, failed or timed out, or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}
NC_ALIAS(ncclGetErrorString)

/* The communicator's last failure if it has one, else the calling thread's. */
const char *pncclGetLastError(ncclComm_t comm)
{
    if (comm && comm->magic == NC_MAGIC && comm->err[0])
        return comm->err;
    return thread_err;
}
NC_ALIAS(ncclGetLastError)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void pncclResetDebugInit(void) {}
NC_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop

ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return nc_error(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
NC_ALIAS(ncclGetVersion)

ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    tutti_id_t id;
    tutti_result_t rc;

    if (!uniqueId)
        return nc_error(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    rc = tutti_get_id(&id);
    if (rc != TUTTI_SUCCESS)
        return nc_tutti_failed(NULL, rc, "ncclGetUniqueId");
    memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
}
NC_ALIAS(ncclGetUniqueId)

/* ---- queries ---- */

/* A query: one of comm's numbers into *out. */
static ncclResult_t query(ncclComm_t comm, int *out, int value, const char *fn)
{
    ncclResult_t r = nc_comm(comm, fn, 1);

    if (r == ncclSuccess && !out)
        return nc_error(comm, ncclInvalidArgument, "%s: the output is NULL", fn);
    if (r == ncclSuccess)
        *out = value;
    return r;
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    return query(comm, count, comm && comm->magic == NC_MAGIC ? comm->nranks : 0, "ncclCommCount");
}
NC_ALIAS(ncclCommCount)

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    return query(comm, device, comm && comm->magic == NC_MAGIC ? comm->device : 0,
                 "ncclCommCuDevice");
}
NC_ALIAS(ncclCommCuDevice)

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return query(comm, rank, comm && comm->magic == NC_MAGIC ? comm->rank : 0, "ncclCommUserRank");
}
NC_ALIAS(ncclCommUserRank)

/* ---- memory: registration and windows are hints (tutti_comm_register) ---- */

ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t r = nc_comm(comm, "ncclCommRegister", 1);
    tutti_result_t rc;

    if (r != ncclSuccess)
        return r;
    rc = tutti_comm_register(comm->tc, buff, size, handle);
    return rc == TUTTI_SUCCESS ? ncclSuccess : nc_tutti_failed(comm, rc, "ncclCommRegister");
}
NC_ALIAS(ncclCommRegister)

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t r = nc_comm(comm, "ncclCommDeregister", 1);
    tutti_result_t rc;

    if (r != ncclSuccess)
        return r;
    rc = tutti_comm_deregister(comm->tc, handle);
    return rc == TUTTI_SUCCESS ? ncclSuccess : nc_tutti_failed(comm, rc, "ncclCommDeregister");
}
NC_ALIAS(ncclCommDeregister)

/* A window: a window of tutti's symmetric memory over the range (collective, as NCCL's: any
 * cudaMalloc memory, so ncclMemAlloc's), where every rank could make one, and a registration
 * of the range (zero-copy sends where a transport gains from it). */
struct ncclWindow_vidmem {
    uint64_t magic;
    struct ncclComm *comm;
    void *reg;
    void *win; /* NULL: no symmetric window (tutti's log says why) */
};

#define NC_WIN_MAGIC 0x6e63636c77696e64ull /* "ncclwind" */

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags)
{
    ncclResult_t r = nc_comm(comm, "ncclCommWindowRegister", 1);
    struct ncclWindow_vidmem *w;
    tutti_result_t rc;

    if (r != ncclSuccess)
        return r;
    if (!win || (winFlags & ~NCCL_WIN_COLL_SYMMETRIC))
        return nc_error(comm, ncclInvalidArgument, "ncclCommWindowRegister: win %p, flags %#x",
                        (void *)win, (unsigned)winFlags);
    w = calloc(1, sizeof(*w));
    if (!w)
        return nc_error(comm, ncclSystemError, "ncclCommWindowRegister: out of memory");
    rc = tutti_comm_register(comm->tc, buff, size, &w->reg);
    if (rc != TUTTI_SUCCESS) {
        free(w);
        return nc_tutti_failed(comm, rc, "ncclCommWindowRegister");
    }
    /* Every rank gets the same answer (a failure fails all, naming the rank, in tutti's log);
     * without a window, calls on the range take the usual path. */
    if (tutti_comm_window_register(comm->tc, buff, size, &w->win) != TUTTI_SUCCESS)
        w->win = NULL;
    w->magic = NC_WIN_MAGIC;
    w->comm = comm;
    *win = w;
    return ncclSuccess;
}
NC_ALIAS(ncclCommWindowRegister)

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    ncclResult_t r = nc_comm(comm, "ncclCommWindowDeregister", 1);
    tutti_result_t rc;

    if (r != ncclSuccess)
        return r;
    if (!win || win->magic != NC_WIN_MAGIC || win->comm != comm)
        return nc_error(comm, ncclInvalidArgument,
                        "ncclCommWindowDeregister: not a live window of this communicator");
    rc = win->win ? tutti_comm_window_deregister(comm->tc, win->win) : TUTTI_SUCCESS;
    if (rc == TUTTI_SUCCESS)
        rc = tutti_comm_deregister(comm->tc, win->reg);
    else
        tutti_comm_deregister(comm->tc, win->reg);
    win->magic = 0;
    free(win);
    return rc == TUTTI_SUCCESS ? ncclSuccess
                               : nc_tutti_failed(comm, rc, "ncclCommWindowDeregister");
}
NC_ALIAS(ncclCommWindowDeregister)

ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    cudaError_t e;

    if (!ptr)
        return nc_error(NULL, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    e = cudaMalloc(ptr, size);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nc_error(NULL, ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc(%zu): %s", size,
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}
NC_ALIAS(ncclMemAlloc)

ncclResult_t pncclMemFree(void *ptr)
{
    cudaError_t e = ptr ? cudaFree(ptr) : cudaSuccess;

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nc_error(NULL, ncclUnhandledCudaError, "ncclMemFree: cudaFree(%p): %s", ptr,
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}
NC_ALIAS(ncclMemFree)
