/*
 * join.c -- uneven inputs (PyTorch's Join). With config.uneven_inputs every synchronised step
 * starts with a round of flags: a 4-byte all-reduce (max) of rank + 1 from each rank still
 * training and 0 from each rank that has joined, queued on the stream ahead of the step's
 * buckets (ddp.c, begin_step). A joined rank waits in tutti_ddp_join for each round's result:
 * above 0, some rank is in a step, and the joined rank runs the same step with every gradient
 * zero (tutti_ddp_finish with `joining` set takes every parameter as unused), then the
 * optimizer step where there is one, so that every collective of the step has its partner;
 * 0, every rank has joined, and all take the parameters of the rank the latest round named.
 * Uses include/tutti.h only.
 */
#include "ddp_int.h"

tutti_result_t ddp_join_round(struct tutti_ddp *d, int32_t flag)
{
    tutti_result_t rc;

    d->join_flag = flag;
    rc = tutti_all_reduce(&d->join_flag, &d->join_max, 1, TUTTI_INT32, TUTTI_MAX, d->comm,
                          d->stream);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "uneven inputs: queueing the step's round of flags: %s",
                        tutti_last_error());
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_join(tutti_ddp_t d)
{
    tutti_result_t rc;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_join"));
    if (!d->cfg.uneven_inputs)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_join: config.uneven_inputs is 0; set it to 1 on every rank, so "
                        "that each synchronised step tells the ranks who still trains");
    if (d->in_step)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_join: a step is in flight (call it after tutti_ddp_finish)");
    if (d->no_sync)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_join: no_sync is on, so the gradients accumulated since the "
                        "last synchronised step would be lost; end with a synchronised step "
                        "(tutti_ddp_no_sync 0, then backward and finish) before joining");
    d->joining = 1;
    for (;;) {
        rc = ddp_join_round(d, 0);
        if (rc == TUTTI_SUCCESS && (rc = tutti_stream_sync(d->stream)) != TUTTI_SUCCESS)
            ddp_fail(d, rc, "tutti_ddp_join: a round of flags failed: %s",
                     tutti_stream_last_error(d->stream));
        if (rc != TUTTI_SUCCESS) {
            rc = ddp_break_step(d, rc);
            break;
        }
        if (d->join_max == 0)
            break;
        rc = tutti_ddp_finish(d);
        if (rc == TUTTI_SUCCESS && d->cfg.optim != TUTTI_DDP_OPTIM_NONE)
            rc = tutti_ddp_step(d);
        if (rc != TUTTI_SUCCESS)
            break;
    }
    d->joining = 0;
    if (rc == TUTTI_SUCCESS && d->last_active >= 0)
        rc = ddp_broadcast_model(d, d->last_active, "tutti_ddp_join");
    d->last_active = -1;
    return rc;
}
