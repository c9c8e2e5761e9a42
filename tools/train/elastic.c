/*
 * elastic.c -- tutti-train --elastic (elastic.h). After a failed call every survivor calls
 * tutti_ddp_recover (the DDP layer shrinks the communicator, rebuilds buckets and shards, and
 * makes parameters and optimizer state the same everywhere), then takes rank 0's position in
 * the data by a broadcast: the micro-batch that failed is run again where rank 0 had not
 * finished it. The global batch is then split over the ranks that are left. Every --grow-every
 * steps the ranks call tutti_ddp_grow, which admits waiting newcomers (a replacement started
 * by tutti-run --restart); they get the model from the DDP layer and the position here.
 */
#include "elastic.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double since = -1; /* when the size last changed, until a step completes */
static const char *why = "";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int elastic_failure(tutti_result_t rc)
{
    return rc == TUTTI_ERR_REMOTE || rc == TUTTI_ERR_TIMEOUT || rc == TUTTI_ERR_ABORTED ||
           rc == TUTTI_ERR_SYSTEM;
}

static void adopt(struct model *md)
{
    md->lost = 0;
    md->comm = tutti_ddp_comm(md->ddp);
    tutti_comm_rank(md->comm, &md->rank);
    tutti_comm_size(md->comm, &md->nranks);
    rank = md->rank;
}

/* Rank 0's position, on every rank; 0 if that broadcast failed. */
static int take_position(struct model *md, struct resume_state *rs)
{
    return tutti_broadcast(rs, rs, sizeof(*rs), TUTTI_UINT8, 0, md->comm, NULL) == TUTTI_SUCCESS;
}

void elastic_recover(struct model *md, struct resume_state *rs)
{
    double t0 = now();

    do {
        int was = md->nranks;
        tutti_result_t rc = tutti_ddp_recover(md->ddp);
        if (rc == TUTTI_ERR_FENCED) {
            printf("rank %d: fenced out: %s\n", md->rank, tutti_ddp_last_error(md->ddp));
            exit(3);
        }
        if (rc != TUTTI_SUCCESS)
            die("%s", tutti_ddp_last_error(md->ddp));
        adopt(md);
        if (md->rank == 0)
            printf("elastic: %d of %d rank(s) go on (recovered in %.2f s)\n", md->nranks, was,
                   now() - t0);
    } while (!take_position(md, rs));
    if (since < 0)
        since = t0;
    why = "the recovery";
    if (md->rank == 0)
        printf("elastic: continuing at epoch %lld, batch %lld, after %lld steps\n",
               (long long)rs->epoch + 1, (long long)rs->micro, (long long)rs->steps);
}

int elastic_grow(struct model *md, struct resume_state *rs)
{
    double t0 = now();
    int added = 0, was = md->nranks;
    tutti_result_t rc = tutti_ddp_grow(md->ddp, &added);

    if (rc != TUTTI_SUCCESS) {
        if (!elastic_failure(rc))
            die("%s", tutti_ddp_last_error(md->ddp));
        elastic_recover(md, rs);
        return 1;
    }
    if (added == 0)
        return 0;
    adopt(md);
    if (!take_position(md, rs)) {
        elastic_recover(md, rs);
        return 1;
    }
    since = t0;
    why = "the growth";
    if (md->rank == 0)
        printf("elastic: %d newcomer(s) joined at step %lld: %d rank(s) now (%.2f s)\n", added,
               (long long)rs->steps, md->nranks, now() - t0);
    (void)was;
    return 1;
}

int elastic_newcomer(struct model *md, struct resume_state *rs)
{
    int members = 0;

    if (tutti_comm_joined(md->comm, &members) != TUTTI_SUCCESS || members == 0 ||
        md->rank < members)
        return 0;
    if (!take_position(md, rs))
        elastic_recover(md, rs);
    printf("rank %d: joined %d member(s) at epoch %lld, batch %lld, after %lld steps\n", md->rank,
           members, (long long)rs->epoch + 1, (long long)rs->micro, (long long)rs->steps);
    return 1;
}

void elastic_step_done(struct model *md, const struct resume_state *rs)
{
    if (since < 0)
        return;
    if (md->rank == 0)
        printf("elastic: first step after %s done (step %lld, %.3f s after it began; t=%.6f)\n",
               why, (long long)rs->steps, now() - since, now());
    since = -1;
}
