/*
 * nccl_main.c -- nccl_check's communicators, made each way NCCL's user guide shows (see
 * nccl_check.c), and its timeout check.
 */
#include "nccl_check.h"

#include <string.h>
#include <unistd.h>

/* ---- making the communicators ---- */

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static void one_per_process(const char *dir)
{
    char path[512], tmp[600];
    ncclUniqueId id;
    FILE *f;

    nranks = env_int("WORLD_SIZE", 1);
    nlocal = 1;
    R[0].rank = env_int("RANK", 0);
    R[0].dev = 0;
    snprintf(path, sizeof(path), "%s/nccl-id", dir);
    if (R[0].rank == 0) {
        NC(ncclGetUniqueId(&id));
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path)) {
            perror(path);
            exit(1);
        }
    } else {
        for (int i = 0; !(f = fopen(path, "rb")); i++) {
            if (i > 6000) {
                fprintf(stderr, "no id in %s after 60 s\n", path);
                exit(1);
            }
            usleep(10000);
        }
        if (fread(&id, sizeof(id), 1, f) != 1)
            exit(1);
        fclose(f);
    }
    CU(cudaSetDevice(0));
    NC(ncclCommInitRank(&R[0].comm, nranks, id, R[0].rank));
}

static void make_local(const char *mode, int n)
{
    ncclComm_t comms[MAXR];
    ncclUniqueId id;
    int ndev = 0;

    CU(cudaGetDeviceCount(&ndev));
    nranks = nlocal = n;
    for (int k = 0; k < n; k++) {
        R[k].rank = k;
        R[k].dev = k % ndev;
    }
    if (strcmp(mode, "all") == 0) {
        int devs[MAXR];
        for (int k = 0; k < n; k++)
            devs[k] = R[k].dev;
        NC(ncclCommInitAll(comms, n, devs));
    } else if (strcmp(mode, "group") == 0) {
        NC(ncclGetUniqueId(&id));
        NC(ncclGroupStart());
        for (int k = 0; k < n; k++) {
            CU(cudaSetDevice(R[k].dev));
            NC(ncclCommInitRank(&comms[k], n, id, k));
        }
        NC(ncclGroupEnd());
    } else { /* nonblocking */
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        int pending = n;
        cfg.blocking = 0;
        NC(ncclGetUniqueId(&id));
        for (int k = 0; k < n; k++) {
            CU(cudaSetDevice(R[k].dev));
            ncclResult_t r = ncclCommInitRankConfig(&comms[k], n, id, k, &cfg);
            if (r != ncclInProgress && r != ncclSuccess) {
                fprintf(stderr, "non-blocking init: %s\n", ncclGetErrorString(r));
                exit(1);
            }
        }
        for (int polls = 0; pending > 0; polls++) {
            pending = 0;
            for (int k = 0; k < n; k++) {
                ncclResult_t async;
                NC(ncclCommGetAsyncError(comms[k], &async));
                if (async == ncclInProgress)
                    pending++;
                else if (async != ncclSuccess) {
                    fprintf(stderr, "non-blocking init failed: %s\n", ncclGetLastError(comms[k]));
                    exit(1);
                }
            }
            if (polls > 60000) {
                fprintf(stderr, "non-blocking init: still in progress after 60 s\n");
                exit(1);
            }
            if (pending)
                usleep(1000);
        }
    }
    for (int k = 0; k < n; k++)
        R[k].comm = comms[k];
}

/* The all-reduce rank 1 never joins: no hang, the error NCCL's way. */
static int timeout_check(void)
{
    struct buf b;
    ncclResult_t async = ncclSuccess;

    CU(cudaStreamCreate(&R[0].s));
    if (R[0].rank == 1) {
        sleep(6); /* past rank 0's timeout, in no call */
        NC(ncclCommDestroy(R[0].comm));
        printf("nccl_check timeout: rank 1 made no call\n");
        return 0;
    }
    b = dalloc(0, 4096 * 4);
    NC(ncclAllReduce(b.dev, b.dev, 4096, ncclFloat32, ncclSum, R[0].comm, R[0].s));
    CU(cudaStreamSynchronize(R[0].s)); /* the stream goes on once the call has failed */
    NC(ncclCommGetAsyncError(R[0].comm, &async));
    const char *why = ncclGetLastError(R[0].comm);
    if (async != ncclRemoteError || !strstr(why, "no progress") ||
        !strstr(why, "TUTTI_NCCL_TIMEOUT")) {
        fprintf(stderr, "FAIL timeout: async error %d (%s), last error: %s\n", (int)async,
                ncclGetErrorString(async), why);
        return 1;
    }
    printf("nccl_check timeout: rank 0: %s: %s\n", ncclGetErrorString(async), why);
    dfree(&b);
    NC(ncclCommAbort(R[0].comm));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: nccl_check ranks DIR | all N | group N | nonblocking N | timeout DIR\n");
        return 2;
    }
    if (strcmp(argv[1], "timeout") == 0) {
        one_per_process(argv[2]);
        return timeout_check();
    }
    if (strcmp(argv[1], "ranks") == 0)
        one_per_process(argv[2]);
    else
        make_local(argv[1], atoi(argv[2]));
    for (int k = 0; k < nlocal; k++) {
        CU(cudaSetDevice(R[k].dev));
        CU(cudaStreamCreate(&R[k].s));
    }
    run_checks();
    for (int k = 0; k < nlocal; k++) {
        NC(ncclCommFinalize(R[k].comm));
        NC(ncclCommDestroy(R[k].comm));
        CU(cudaSetDevice(R[k].dev));
        CU(cudaStreamDestroy(R[k].s));
    }
    printf("nccl_check %s %s: rank%s %d%s of %d: %d checks passed\n", argv[1], argv[2],
           nlocal > 1 ? "s" : "", R[0].rank, nlocal > 1 ? "..." : "", nranks, checks);
    return 0;
}
