/*
 * nccl_init.c -- NCCL's communicators on tutti: made alone, inside a group (joined together at
 * its end), for every device of the process at once, non-blocking (a thread joins while the
 * program polls ncclCommGetAsyncError), or by split; finalized, destroyed, aborted, revoked.
 */
#include "nccl_int.h"

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- making communicators ---- */

/* A communicator that has not joined yet: arguments checked, device and timeout read. */
static ncclResult_t comm_new(ncclComm_t *out, int nranks, int rank, const ncclConfig_t *config,
                             const char *fn, struct ncclComm **made)
{
    struct ncclComm *c;
    double timeout;
    tutti_result_t rc;
    int blocking = 1, dev = 0;

    if (!out)
        return nc_error(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return nc_error(NULL, ncclInvalidArgument, "%s: rank %d of %d ranks", fn, rank, nranks);
    if (config) {
        if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize))
            return nc_error(NULL, ncclInvalidArgument,
                            "%s: config was not initialised with NCCL_CONFIG_INITIALIZER", fn);
        if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 &&
            config->blocking != 1)
            return nc_error(NULL, ncclInvalidArgument, "%s: config->blocking is %d (0 or 1)", fn,
                            config->blocking);
        blocking = config->blocking != 0;
    }
    rc = tutti_env_number("TUTTI_NCCL_TIMEOUT", &timeout);
    if (rc != TUTTI_SUCCESS)
        return nc_tutti_failed(NULL, rc, fn);
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        return nc_error(NULL, ncclUnhandledCudaError, "%s: cudaGetDevice: %s", fn,
                        cudaGetErrorString(e));
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return nc_error(NULL, ncclSystemError, "%s: out of memory", fn);
    c->magic = NC_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->device = dev;
    c->blocking = blocking;
    c->timeout_s = timeout;
    atomic_init(&c->state, ncclInProgress);
    pthread_mutex_init(&c->lock, NULL);
    *made = c;
    return ncclSuccess;
}

static void comm_free(struct ncclComm *c)
{
    c->magic = 0;
    pthread_mutex_destroy(&c->lock);
    free(c->ops);
    free(c);
}

/* Join: on c's device, in the calling thread. */
static void *init_main(void *arg)
{
    struct ncclComm *c = arg;
    tutti_config_t cfg = TUTTI_CONFIG_INIT;
    tutti_comm_t tc = NULL;
    tutti_result_t rc;
    ncclResult_t r;

    if (cudaSetDevice(c->device) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        nc_error(c, ncclUnhandledCudaError, "ncclCommInitRank: rank %d: cudaSetDevice(%d): %s",
                 c->rank, c->device, cudaGetErrorString(e));
        atomic_store(&c->state, ncclUnhandledCudaError);
        return NULL;
    }
    cfg.timeout_s = c->timeout_s;
    if (c->split_parent) {
        rc = tutti_comm_split(c->split_parent->tc, c->split_color, c->split_key, &tc, &cfg);
        if (rc == TUTTI_SUCCESS && tc) {
            tutti_comm_rank(tc, &c->rank);
            tutti_comm_size(tc, &c->nranks);
        }
    } else {
        rc = tutti_comm_init(&tc, c->nranks, (const tutti_id_t *)&c->id, c->rank, &cfg);
    }
    if (rc != TUTTI_SUCCESS) {
        r = nc_tutti_failed(c, rc, c->split_parent ? "ncclCommSplit" : "ncclCommInitRank");
        atomic_store(&c->state, r);
        return NULL;
    }
    c->tc = tc;
    atomic_store(&c->state, ncclSuccess);
    return NULL;
}

ncclResult_t nc_group_run_inits(struct ncclComm **comms, int n)
{
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    ncclResult_t r = ncclSuccess;
    int *started = calloc((size_t)n, sizeof(*started));

    if (!t || !started) {
        free(t);
        free(started);
        return nc_error(NULL, ncclSystemError, "ncclGroupEnd: out of memory");
    }
    for (int i = 0; i < n; i++) {
        started[i] = pthread_create(&t[i], NULL, init_main, comms[i]) == 0;
        if (!started[i]) {
            nc_error(comms[i], ncclSystemError, "ncclGroupEnd: no thread for rank %d's init",
                     comms[i]->rank);
            atomic_store(&comms[i]->state, ncclSystemError);
        }
    }
    for (int i = 0; i < n; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        comms[i]->group_init = 0;
        if (r == ncclSuccess && atomic_load(&comms[i]->state) != ncclSuccess) {
            r = (ncclResult_t)atomic_load(&comms[i]->state);
            nc_error(NULL, r, "%s", comms[i]->err);
        }
        if (comms[i]->split_parent && comms[i]->split_color == NCCL_SPLIT_NOCOLOR) {
            comm_free(comms[i]); /* took part in the split, got no communicator */
            comms[i] = NULL;
        } else {
            comms[i]->split_parent = NULL;
        }
    }
    free(t);
    free(started);
    return r;
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config)
{
    struct ncclComm *c;
    ncclResult_t r = comm_new(comm, nranks, rank, config, "ncclCommInitRank", &c);

    if (r != ncclSuccess)
        return r;
    c->id = commId;
    *comm = c;
    if (nc_in_group()) { /* joined at the group's end, with the group's other inits */
        c->group_init = 1;
        nc_group_add_init(c);
        return ncclSuccess;
    }
    if (!c->blocking) {
        if (pthread_create(&c->init_thread, NULL, init_main, c) != 0) {
            *comm = NULL;
            comm_free(c);
            return nc_error(NULL, ncclSystemError, "ncclCommInitRank: no thread for the init");
        }
        c->has_thread = 1;
        return ncclInProgress;
    }
    init_main(c);
    r = (ncclResult_t)atomic_load(&c->state);
    if (r != ncclSuccess) {
        *comm = NULL;
        comm_free(c);
    }
    return r;
}
NC_ALIAS(ncclCommInitRankConfig)

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
NC_ALIAS(ncclCommInitRank)

/* Several ids spread NCCL's bootstrap; tutti's rendezvous is one root: the first id's. */
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds)
        return nc_error(NULL, ncclInvalidArgument,
                        "ncclCommInitRankScalable: %d ids at %p (at least one)", nId,
                        (void *)commIds);
    return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
NC_ALIAS(ncclCommInitRankScalable)

ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    struct ncclComm **c;
    ncclUniqueId id;
    ncclResult_t r;
    int count = 0, prev = 0;

    if (!comms || ndev < 1)
        return nc_error(NULL, ncclInvalidArgument, "ncclCommInitAll: %d devices into %p", ndev,
                        (void *)comms);
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        return nc_error(NULL, ncclUnhandledCudaError, "ncclCommInitAll: cudaGetDeviceCount: %s",
                        cudaGetErrorString(e));
    }
    for (int i = 0; i < ndev; i++)
        if ((devlist ? devlist[i] : i) < 0 || (devlist ? devlist[i] : i) >= count)
            return nc_error(NULL, ncclInvalidArgument,
                            "ncclCommInitAll: device %d (entry %d) of %d devices",
                            devlist ? devlist[i] : i, i, count);
    c = calloc((size_t)ndev, sizeof(*c));
    if (!c)
        return nc_error(NULL, ncclSystemError, "ncclCommInitAll: out of memory");
    r = pncclGetUniqueId(&id);
    (void)cudaGetDevice(&prev);
    for (int i = 0; i < ndev && r == ncclSuccess; i++) {
        (void)cudaSetDevice(devlist ? devlist[i] : i);
        r = comm_new(&comms[i], ndev, i, NULL, "ncclCommInitAll", &c[i]);
        if (r == ncclSuccess)
            c[i]->id = id;
    }
    (void)cudaSetDevice(prev);
    if (r == ncclSuccess)
        r = nc_group_run_inits(c, ndev);
    for (int i = 0; i < ndev; i++) {
        if (r != ncclSuccess && c[i]) {
            if (c[i]->tc)
                tutti_comm_destroy(c[i]->tc);
            comm_free(c[i]);
            c[i] = NULL;
        }
        comms[i] = c[i];
    }
    free(c);
    return r;
}
NC_ALIAS(ncclCommInitAll)

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config)
{
    struct ncclComm *c;
    tutti_config_t cfg = TUTTI_CONFIG_INIT;
    tutti_comm_t tc = NULL;
    tutti_result_t rc;
    ncclResult_t r;
    int rank = 0, size = 1;

    if ((r = nc_comm(comm, "ncclCommSplit", 1)) != ncclSuccess)
        return r;
    if (!newcomm)
        return nc_error(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    if (color < NCCL_SPLIT_NOCOLOR)
        return nc_error(comm, ncclInvalidArgument,
                        "ncclCommSplit: color %d (>= 0, or NCCL_SPLIT_NOCOLOR)", color);
    if (nc_in_group()) { /* split at the group's end, with the group's other inits */
        r = comm_new(newcomm, 1, 0, config, "ncclCommSplit", &c);
        if (r != ncclSuccess)
            return r;
        c->device = comm->device;
        c->timeout_s = comm->timeout_s;
        c->split_parent = comm;
        c->split_color = color;
        c->split_key = key;
        c->group_init = 1;
        nc_group_add_init(c);
        *newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : c;
        return ncclSuccess;
    }
    cfg.timeout_s = comm->timeout_s;
    rc = tutti_comm_split(comm->tc, color, key, &tc, &cfg);
    if (rc != TUTTI_SUCCESS)
        return nc_tutti_failed(comm, rc, "ncclCommSplit");
    *newcomm = NULL;
    if (!tc)
        return ncclSuccess;
    tutti_comm_rank(tc, &rank);
    tutti_comm_size(tc, &size);
    r = comm_new(newcomm, size, rank, config, "ncclCommSplit", &c);
    if (r != ncclSuccess) {
        tutti_comm_destroy(tc);
        return r;
    }
    c->device = comm->device;
    c->tc = tc;
    atomic_store(&c->state, ncclSuccess);
    *newcomm = c;
    return ncclSuccess;
}
NC_ALIAS(ncclCommSplit)

/* Only the ranks that stay call it: that needs communicators that shrink (tutti has none yet),
 * except for the trivial case of nobody excluded. */
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t r;

    if ((r = nc_comm(comm, "ncclCommShrink", 1)) != ncclSuccess)
        return r;
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
        return nc_error(comm, ncclInvalidArgument, "ncclCommShrink: flags %d", shrinkFlags);
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
        return nc_error(comm, ncclInvalidArgument, "ncclCommShrink: %d excluded ranks at %p",
                        excludeRanksCount, (void *)excludeRanksList);
    if (excludeRanksCount > 0)
        return nc_error(comm, ncclInvalidUsage,
                        "ncclCommShrink: excluding ranks needs communicators that shrink, which "
                        "tutti does not have yet; make a new communicator of the remaining ranks "
                        "with ncclCommInitRank instead");
    return pncclCommSplit(comm, 0, comm->rank, newcomm, config);
}
NC_ALIAS(ncclCommShrink)

/* ---- ending communicators ---- */

/* Wait for what comm's device has queued (the binding's work on any stream included). */
static ncclResult_t device_sync(struct ncclComm *c, const char *fn)
{
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);

    if (e == cudaSuccess && prev != c->device)
        e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (prev != c->device)
        (void)cudaSetDevice(prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nc_error(c, ncclUnhandledCudaError, "%s: cudaDeviceSynchronize: %s", fn,
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}

/* The init thread of a non-blocking communicator has ended. */
static void join_init(struct ncclComm *c)
{
    if (c->has_thread) {
        pthread_join(c->init_thread, NULL);
        c->has_thread = 0;
    }
}

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t r;

    if ((r = nc_comm(comm, "ncclCommFinalize", 0)) != ncclSuccess)
        return r;
    join_init(comm);
    if (atomic_load(&comm->state) != ncclSuccess)
        return ncclSuccess; /* nothing ever ran on it */
    r = device_sync(comm, "ncclCommFinalize");
    if (r == ncclSuccess) {
        tutti_result_t e = TUTTI_SUCCESS;
        char msg[NC_ERRLEN];
        tutti_comm_get_error(comm->tc, &e, msg, sizeof(msg));
        if (e != TUTTI_SUCCESS)
            r = nc_error(comm, nc_result(e), "ncclCommFinalize: %s", msg);
    }
    comm->finalized = 1;
    return r;
}
NC_ALIAS(ncclCommFinalize)

static ncclResult_t comm_end(ncclComm_t comm, int abort, const char *fn)
{
    ncclResult_t r;

    if (!comm)
        return ncclSuccess;
    if ((r = nc_comm(comm, fn, 0)) != ncclSuccess)
        return r;
    if (abort && comm->tc)
        tutti_comm_abort(comm->tc);
    join_init(comm);
    if (comm->tc) {
        if (!comm->finalized && !abort)
            (void)device_sync(comm, fn);
        tutti_comm_destroy(comm->tc);
    }
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    return comm_end(comm, 0, "ncclCommDestroy");
}
NC_ALIAS(ncclCommDestroy)

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    return comm_end(comm, 1, "ncclCommAbort");
}
NC_ALIAS(ncclCommAbort)

#ifndef NCCL_REVOKE_DEFAULT /* an nccl.h older than ncclCommRevoke (2.28.3 has none): its one flag \
                             */
#define NCCL_REVOKE_DEFAULT 0
#endif

/* In-flight and later operations fail; only destroy (or abort) remains. */
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    ncclResult_t r;

    if ((r = nc_comm(comm, "ncclCommRevoke", 1)) != ncclSuccess)
        return r;
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return nc_error(comm, ncclInvalidArgument, "ncclCommRevoke: flags %d (must be 0)",
                        revokeFlags);
    return nc_result(tutti_comm_abort(comm->tc));
}
NC_ALIAS(ncclCommRevoke)

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    tutti_result_t e = TUTTI_SUCCESS;
    char msg[NC_ERRLEN];
    ncclResult_t r;
    int st;

    if ((r = nc_comm(comm, "ncclCommGetAsyncError", 0)) != ncclSuccess)
        return r;
    if (!asyncError)
        return nc_error(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    st = atomic_load(&comm->state);
    if (st != ncclSuccess) {
        if (st != ncclInProgress)
            join_init(comm);
        *asyncError = (ncclResult_t)st;
        return ncclSuccess;
    }
    join_init(comm);
    if (tutti_comm_get_error(comm->tc, &e, msg, sizeof(msg)) != TUTTI_SUCCESS)
        return nc_tutti_failed(comm, TUTTI_ERR_INVALID_ARG, "ncclCommGetAsyncError");
    *asyncError = nc_result(e);
    if (e != TUTTI_SUCCESS) {
        char note[96];
        nc_error(comm, *asyncError, "%s (tutti: %s%s)", msg, tutti_strerror(e),
                 nc_timeout_note(comm, msg, note, sizeof(note)));
    }
    return ncclSuccess;
}
NC_ALIAS(ncclCommGetAsyncError)
