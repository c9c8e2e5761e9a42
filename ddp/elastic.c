/*
 * elastic.c -- a DDP that outlives a lost rank and takes new ones.
 *
 * tutti_ddp_recover: after a call failed because a rank was lost, the survivors shrink the
 * communicator (tutti_comm_shrink), free what was made over the old one and make it again over
 * the new one (ddp_setup: the ranks' check, rank 0's parameters and buffers everywhere, buckets,
 * shards and windows for the new size), then rebuild the optimizer state for the new shards
 * from what each survivor held (ddp_optim_restore). tutti_ddp_grow: at a join point, the same
 * over the communicator tutti_comm_grow makes; a newcomer's tutti_ddp_init runs the same
 * collectives (ddp.c), contributing no state.
 */
#include "ddp_int.h"

#include <stdlib.h>
#include <string.h>

/* Move d onto next (which d then owns), keeping the registrations and the optimizer state. */
static tutti_result_t move_to(struct tutti_ddp *d, tutti_comm_t next, const char *fn)
{
    struct ddp_optim_saved sv;
    tutti_result_t rc;

    rc = ddp_optim_save(d, &sv);
    if (rc == TUTTI_SUCCESS) {
        if (d->stream)
            tutti_stream_sync(d->stream); /* (its failure was reported when it happened) */
        ddp_teardown(d);
        if (d->own_comm)
            tutti_comm_destroy(d->comm);
        d->comm = next;
        d->own_comm = 1;
        tutti_comm_rank(next, &d->rank);
        tutti_comm_size(next, &d->nranks);
        d->weight = 1.0 / (double)d->nranks;
        rc = ddp_setup(d, fn);
        if (rc == TUTTI_SUCCESS)
            rc = ddp_optim_restore(d, &sv, fn);
    }
    free(sv.slot[0]);
    free(sv.slot[1]);
    if (rc != TUTTI_SUCCESS)
        d->broken = 1;
    return rc;
}

static tutti_result_t check(struct tutti_ddp *d, const char *fn)
{
    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: ddp is NULL", fn);
    if (!d->optim)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "%s: call tutti_ddp_init first", fn);
    if (d->cfg.zero == 3)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "%s: zero 3 shards the parameters themselves, so a lost rank's share of "
                        "the model is gone; elastic training needs zero <= 2",
                        fn);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_recover(tutti_ddp_t d)
{
    tutti_comm_t next;
    tutti_result_t rc;
    int was;

    TUTTI_DDP_CHECK(check(d, "tutti_ddp_recover"));
    was = d->nranks;
    if (d->stream)
        tutti_stream_sync(d->stream);
    rc = tutti_comm_shrink(d->comm, &next, NULL);
    if (rc != TUTTI_SUCCESS) {
        d->broken = 1;
        return ddp_fail(d, rc, "tutti_ddp_recover: %s", tutti_comm_last_error(d->comm));
    }
    TUTTI_DDP_CHECK(move_to(d, next, "tutti_ddp_recover"));
    ddp_info(d, "recovered: %d of %d rank(s) go on", d->nranks, was);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_grow(tutti_ddp_t d, int *added)
{
    tutti_comm_t next;
    tutti_result_t rc;
    int was;

    if (added)
        *added = 0;
    TUTTI_DDP_CHECK(check(d, "tutti_ddp_grow"));
    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_grow"));
    if (d->in_step)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_grow: a step is in flight (grow between steps)");
    was = d->nranks;
    rc = tutti_comm_grow(d->comm, 0, &next, NULL);
    if (rc != TUTTI_SUCCESS) {
        d->broken = 1;
        return ddp_fail(d, rc, "tutti_ddp_grow: %s", tutti_comm_last_error(d->comm));
    }
    if (!next)
        return TUTTI_SUCCESS;
    TUTTI_DDP_CHECK(move_to(d, next, "tutti_ddp_grow"));
    if (added)
        *added = d->nranks - was;
    ddp_info(d, "grew from %d to %d rank(s)", was, d->nranks);
    return TUTTI_SUCCESS;
}

tutti_comm_t tutti_ddp_comm(tutti_ddp_t d)
{
    return d ? d->comm : NULL;
}
