/*
 * nccl_group.c -- NCCL's groups on tutti. Between ncclGroupStart and the outermost ncclGroupEnd
 * calls are checked and recorded, in this thread; the end first joins the communicators made or
 * split inside the group (all at once, each on its own device), then, communicator by
 * communicator in order of first use, runs that communicator's calls as one tutti group on one
 * stream (nccl_calls.c). NCCL lets a group span communicators (one thread driving several ranks
 * or GPUs) and streams: each tutti group is queued and returns at once, so no rank waits for
 * another that this thread has yet to queue, and where one communicator's calls name several
 * streams, the first stream waits for the others (an event each) before its calls and they wait
 * for it after.
 */
#include "nccl_int.h"

#include <stdlib.h>

static __thread struct {
    int depth;
    struct nc_call *calls;
    int ncalls, cap;
    struct ncclComm **inits;
    int ninits, initcap;
    ncclResult_t failed; /* the first refusal of a call recorded in the group */
} grp;

int nc_in_group(void)
{
    return grp.depth > 0;
}

void nc_group_add_init(struct ncclComm *c)
{
    if (grp.ninits == grp.initcap) {
        int cap = grp.initcap ? 2 * grp.initcap : 8;
        struct ncclComm **t = realloc(grp.inits, (size_t)cap * sizeof(*t));
        if (!t) {
            atomic_store(&c->state, ncclSystemError);
            nc_error(c, ncclSystemError, "ncclCommInitRank: out of memory in a group");
            return;
        }
        grp.inits = t;
        grp.initcap = cap;
    }
    grp.inits[grp.ninits++] = c;
}

ncclResult_t nc_group_record(const struct nc_call *k)
{
    if (grp.ncalls == grp.cap) {
        int cap = grp.cap ? 2 * grp.cap : 32;
        struct nc_call *t = realloc(grp.calls, (size_t)cap * sizeof(*t));
        if (!t)
            return nc_group_refused(
                nc_error(k->comm, ncclSystemError, "%s: out of memory in a group", k->fn));
        grp.calls = t;
        grp.cap = cap;
    }
    grp.calls[grp.ncalls++] = *k;
    return ncclSuccess;
}

ncclResult_t nc_group_refused(ncclResult_t r)
{
    if (grp.depth > 0 && grp.failed == ncclSuccess)
        grp.failed = r;
    return r;
}

/* ---- groups ---- */

ncclResult_t pncclGroupStart(void)
{
    if (grp.depth == 0)
        grp.failed = ncclSuccess;
    grp.depth++;
    return ncclSuccess;
}
NC_ALIAS(ncclGroupStart)

static void group_clear(void)
{
    grp.ncalls = 0;
    grp.ninits = 0;
    grp.failed = ncclSuccess;
}

/* The group's calls, communicator by communicator in order of first use (stable sort). */
static ncclResult_t run_group(void)
{
    int n = grp.ncalls;
    ncclResult_t r = ncclSuccess;
    struct nc_call *k = grp.calls, *mine = malloc((size_t)(n ? n : 1) * sizeof(*mine));
    char *taken = calloc((size_t)(n ? n : 1), 1);

    if (!mine || !taken) {
        free(mine);
        free(taken);
        return nc_error(NULL, ncclSystemError, "ncclGroupEnd: out of memory");
    }
    for (int i = 0; i < n; i++) {
        int m = 0;
        if (taken[i])
            continue;
        for (int j = i; j < n; j++)
            if (!taken[j] && k[j].comm == k[i].comm) {
                mine[m++] = k[j];
                taken[j] = 1;
            }
        ncclResult_t one = nc_run_calls(mine, m);
        if (r == ncclSuccess)
            r = one;
    }
    free(mine);
    free(taken);
    return r;
}

ncclResult_t pncclGroupEnd(void)
{
    ncclResult_t r;

    if (grp.depth == 0)
        return nc_error(NULL, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart open");
    if (--grp.depth > 0)
        return ncclSuccess;
    if (grp.failed != ncclSuccess) { /* NCCL runs nothing of a group with a refused call */
        r = grp.failed;
        if (grp.ninits) /* the peers of the communicators it made are joining them */
            nc_group_run_inits(grp.inits, grp.ninits);
        group_clear();
        return r;
    }
    /* Non-blocking communicators too are joined before the end returns (ncclSuccess is an
     * answer NCCL may give them). */
    r = grp.ninits ? nc_group_run_inits(grp.inits, grp.ninits) : ncclSuccess;
    if (r == ncclSuccess)
        r = run_group();
    group_clear();
    return r;
}
NC_ALIAS(ncclGroupEnd)

/* NCCL estimates the group's time without running it; tutti runs nothing and estimates
 * nothing (estimatedTime stays NCCL_UNDEF_FLOAT). The group's communicators are joined. */
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    ncclResult_t r = ncclSuccess;

    if (grp.depth == 0)
        return nc_error(NULL, ncclInvalidUsage, "ncclGroupSimulateEnd: no ncclGroupStart open");
    if (simInfo && simInfo->magic != 0x74685283)
        return nc_error(NULL, ncclInvalidArgument,
                        "ncclGroupSimulateEnd: simInfo was not initialised with "
                        "NCCL_SIM_INFO_INITIALIZER");
    if (--grp.depth > 0)
        return ncclSuccess;
    if (grp.ninits)
        r = nc_group_run_inits(grp.inits, grp.ninits);
    if (simInfo)
        simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
    group_clear();
    return r;
}
NC_ALIAS(ncclGroupSimulateEnd)
