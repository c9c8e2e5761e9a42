/*
 * run_plan.c -- running comm->plan on this thread (engine.h): connect what it needs, run the
 * executor under the communicator's wait policy (timeout, abort, stall reports, peers' give-up
 * notices), and turn a failure into the communicator's error state. The device path's start
 * and end come as hooks (lib/cuda), so this file calls no CUDA. Also the library's own small
 * all-gather that checks and votes use.
 */
#include "lib/engine/engine.h"

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/boot/bootstrap.h"
#include "lib/core/comm.h"
#include "lib/core/redop.h"
#include "lib/exec/tag.h"
#include "lib/kern/reduce.h"

#include <stdio.h>

struct stall_ctx {
    struct tutti_comm *comm;
    const struct tt_label *what;
};

/* TUTTI_STALL_WARN: say whom we wait for and which ranks of this node are elsewhere. */
static void stall_report(void *arg, const struct tt_exec *x, double waited)
{
    const struct stall_ctx *sc = arg;
    const struct tutti_comm *c = sc->comm;
    char msg[1024], name[96];
    int n = 0, me = c->topo.local_of[c->rank], node = c->topo.node_of[c->rank];

    tt_label_format(sc->what, name, sizeof(name));
    n += snprintf(msg + n, sizeof(msg) - (size_t)n, "%s: no progress for %.0f s, %s rank %d", name,
                  waited, x->wait_dir == 's' ? "sending to" : "waiting for", x->wait_peer);
    for (int r = 0; c->board.lines && r < c->nranks && n < (int)sizeof(msg) - 96; r++) {
        const struct tt_board_line *l;
        uint64_t seq;
        if (c->topo.node_of[r] != node || c->topo.local_of[r] == me)
            continue;
        l = &c->board.lines[c->topo.local_of[r]];
        seq = atomic_load_explicit(&l->seq, memory_order_acquire);
        if (seq < c->seq)
            n += snprintf(msg + n, sizeof(msg) - (size_t)n,
                          "; rank %d has not reached it (its last operation: #%llu)", r,
                          (unsigned long long)seq);
        else if (seq == c->seq && !atomic_load_explicit(&l->active, memory_order_acquire))
            n += snprintf(msg + n, sizeof(msg) - (size_t)n, "; rank %d has finished it", r);
    }
    if (c->topo.nnodes > 1)
        snprintf(msg + n, sizeof(msg) - (size_t)n, "; ranks on other nodes are not visible here");
    TT_WARN(TT_SUB_COLL, "%s (TUTTI_STALL_WARN)", msg);
}

/* The wait policy's gave_up: a rank's notice over bootstrap that its communicator failed. */
static int gave_up_notice(void *arg, char *why, size_t size)
{
    struct tutti_comm *c = arg;

    return c->nranks > 1 && c->boot ? tt_boot_told(c->boot, 0, why, size) : -1;
}

tutti_result_t tt_engine_run_plan(struct tutti_comm *comm, struct tt_run *r)
{
    const struct tt_label *what = r->what;
    const struct tt_pre *pre = r->pre;
    int prev_dev = 0, device = r->dev != NULL;
    struct tt_exec x;
    tutti_result_t rc, end;

    if (comm->plan.oom)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory building the plan", what->name);
    if (device) {
        rc = r->dev->begin(comm, r->after, &prev_dev);
        if (rc != TUTTI_SUCCESS)
            return tt_comm_set_error(comm, rc);
    }
    rc = pre && !pre->fused ? tt_redop_run_pre(comm, pre, device) : TUTTI_SUCCESS;
    if (rc == TUTTI_SUCCESS)
        rc = tt_comm_connect_plan(comm, &comm->plan, device);
    if (rc == TUTTI_SUCCESS)
        rc = tt_exec_init(&x, &comm->plan, r->bufs, r->dtype, r->op, comm->nranks,
                          device           ? comm->cuda.slot_bytes
                          : r->chunk_bytes ? r->chunk_bytes
                                           : comm->slot_bytes,
                          device ? &comm->cuda.conns : &comm->conns, &comm->exec_mem);
    r->refused_by = -1;
    if (rc == TUTTI_SUCCESS) {
        x.tag = what->tag;
        x.tag_steps = what->coll == TT_LABEL_P2P;
        x.poison = what->refused;
        x.refusal = what->refusal;
        x.refused_by = what->refused_by;
        x.regs = r->regs;
        x.mover = device ? &comm->cuda.mover : NULL;
        x.nt_slots = !device && r->nt_slots;
        if (pre && pre->fused) {
            x.premul = pre->value;
            x.pm_kernel = tt_premul_sum_kernel(r->dtype);
        }
        if (comm->single_copy && !device &&
            (what->coll == TT_COLL_ALL_GATHER || what->coll == TT_COLL_BROADCAST ||
             what->coll == TT_LABEL_P2P)) {
            rc = tt_exec_single_copy(&x, r->single_send);
            x.drain = r->single_trial;
        }
    }
    if (rc == TUTTI_SUCCESS) {
        struct stall_ctx sc = {comm, what};
        struct tt_wait_policy w = {.timeout_s = comm->timeout_s,
                                   .spin = comm->spin,
                                   .yield_s = comm->yield_s,
                                   .sleepy = comm->sleepy,
                                   .abort_flag = &comm->abort_flag,
                                   .stall_s = comm->stall_s,
                                   .stall = stall_report,
                                   .stall_arg = &sc,
                                   .gave_up = gave_up_notice,
                                   .gave_up_arg = comm};
        int local = comm->topo.local_of[comm->rank];

        tt_board_enter(&comm->board, local, comm->seq, what->coll);
        rc = tt_exec_run(&x, &w, what);
        tt_board_leave(&comm->board, local);
        if (rc == TUTTI_SUCCESS && x.poison) {
            r->refused_by = x.refused_by;
            r->refused_why = x.refusal;
        }
    }
    if (device) {
        end = r->dev->end(comm, prev_dev);
        if (rc == TUTTI_SUCCESS)
            rc = end;
    }
    if (rc != TUTTI_SUCCESS)
        return tt_comm_set_error(comm, rc);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_coll_allgather_own(struct tutti_comm *comm, const char *name, unsigned which,
                                     const void *mine, size_t each, void *all)
{
    struct tt_coll_args a = {
        .coll = TT_COLL_ALL_GATHER, .count = each, .nchannels = 1, .topo = &comm->view};
    struct tt_label label = {.name = name,
                             .coll = TT_COLL_ALL_GATHER,
                             .seq = comm->seq,
                             .count = each,
                             .dtype = TUTTI_UINT8,
                             .tag =
                                 tt_tag_call(TT_TAG_OWN, comm->seq, TUTTI_UINT8, which, each, 0)};

    tt_plan_reset(&comm->plan);
    tt_allgather_ring(&comm->plan, comm->rings, &a);
    struct tt_run r = {.bufs = (void *[]){(void *)mine, all},
                       .dtype = TUTTI_UINT8,
                       .op = TUTTI_SUM,
                       .what = &label};

    return tt_engine_run_plan(comm, &r);
}
