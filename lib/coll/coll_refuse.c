/*
 * coll_refuse.c -- what a call refused for this rank's own buffers does (coll_check.c finds
 * the reason): it runs refused (exec.h poison), or puts the communicator in the error state.
 */
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/core/redop.h"
#include "lib/stream/stream.h"

#include <stdio.h>

/* Where a call refused for its own buffers is run without them (tag.h), `c` being valid in
 * what every rank must pass alike: not on a CUDA stream or the device path (its peers may be
 * on device connections). In a group it is recorded, never packed (coll_group.c). */
static int can_run_refused(const struct tutti_comm *comm, tutti_stream_t stream)
{
    return !tt_stream_is_cuda(stream) && !comm->cuda.dev_path;
}

/*
 * This rank refused c for its own buffers (reason `why`; the message is set). Its peers may
 * not have: they would wait for its part, or send it messages its next call would read. So it
 * runs the call all the same, refused (exec.h poison): no buffer touched, its messages empty
 * and marked, which fails every peer that hears of it at once, naming this rank and the
 * reason, and consumes what they send; the communicator stays usable and in step. Where that
 * cannot run, the communicator enters the error state instead (tt_coll_refuse_alone). Either
 * way this call returns its refusal.
 */
tutti_result_t tt_coll_refused(struct tutti_comm *comm, const struct tt_call *c,
                               tutti_stream_t stream, tutti_result_t rc, unsigned why)
{
    static char nothing[64]; /* where the unused buffers point: never read or written */
    char msg[TT_ERRMSG_LEN];
    struct tt_call p = *c;
    tutti_result_t run;

    if (comm->nranks == 1)
        return rc;
    if (!can_run_refused(comm, stream))
        return tt_coll_refuse_alone(comm, rc);
    snprintf(msg, sizeof(msg), "%s", tt_thread_error());
    p.refused = 1;
    p.refusal = why;
    p.sendbuf = p.recvbuf = nothing;
    p.inplace = p.device = 0;
    p.engine = TT_ENGINE_HOST;
    p.premul.on = tt_redop_is_custom(c->op); /* named in the tag; never applied */
    p.op = p.premul.on ? TUTTI_SUM : c->op;
    run =
        tt_group_open() ? tt_group_add_coll(comm, &p, stream) : tt_coll_dispatch(comm, &p, stream);
    if (run != TUTTI_SUCCESS) /* the run itself failed (a peer gone): that is the news */
        return run;
    return tt_fail_quiet(comm, rc, "%s", msg);
}
