/*
 * pick.c -- a host call's measured choices (copy_pick.h): ask the pickers how the call
 * moves its bytes over shm, report the timed calls of their trials, and at a trial's end let a
 * collective's ranks vote, so that they all take the same way.
 */
#include "lib/engine/engine.h"
#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* What a rank brings to a trial's joint decision. */
struct pick_vote {
    float med[2];
    uint32_t way;
    int32_t token; /* the class voted on */
};

/*
 * A trial of a collective's size class has just ended on every rank (with matching knobs the
 * ranks run the same trials in the same calls: comm->pick_agree). Each rank's medians and way
 * go to all; where every rank voted on the same class and every way matches, *med becomes the
 * ranks' mean median each way (summed in rank order: the same bits everywhere), so all ranks take
 * the same decision. Alone, a rank timing only its own part chose for itself, and the ranks of
 * one call drifted apart: on 4 ranks / 2 cores one rank of a broadcast went back to two copies
 * while the others kept one, and every later trial mixed the ways (BENCHMARKS.md, "Trials
 * decided together").
 */
static tutti_result_t pick_vote(struct tutti_comm *comm, const struct tt_pick_class *k, int token,
                                float med[2], int *agreed)
{
    struct pick_vote me = {{k->med[0], k->med[1]}, k->way, token}, *all;
    double sum[2] = {0, 0};
    tutti_result_t rc;

    *agreed = 0;
    all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "out of memory for a trial's vote");
    rc = tt_coll_allgather_own(comm, "trial vote", 1, &me, sizeof(me), all);
    if (rc == TUTTI_SUCCESS) {
        *agreed = 1;
        for (int r = 0; r < comm->nranks; r++) {
            *agreed &= all[r].way == me.way && all[r].token == me.token;
            sum[0] += all[r].med[0];
            sum[1] += all[r].med[1];
        }
        if (*agreed) {
            med[0] = (float)(sum[0] / comm->nranks);
            med[1] = (float)(sum[1] / comm->nranks);
        }
    }
    free(all);
    return rc;
}

/* A timed call of a trial is over (copy_pick.h): `how` names picker p's two ways; `vote`:
 * a collective, whose ranks decide together where they can. Say when a size's way changes. */
static tutti_result_t pick_done(struct tutti_comm *comm, struct tt_pick *p,
                                const char *const how[2], int token, double seconds, int ok,
                                int vote)
{
    const struct tt_pick_class *k;
    char upto[48] = " and more";
    size_t lo, hi;
    int kind, agreed = 0, voting = vote && comm->pick_agree && comm->nranks > 1;
    float med[2];
    tutti_result_t rc = TUTTI_SUCCESS;

    if (!tt_pick_record(p, token, seconds, ok))
        return TUTTI_SUCCESS;
    k = tt_pick_class_of(p, token, &kind, &lo, &hi);
    med[0] = k->med[0];
    med[1] = k->med[1];
    if (voting)
        rc = pick_vote(comm, k, token, med, &agreed);
    if (rc != TUTTI_SUCCESS)
        return rc;
    if (hi != SIZE_MAX)
        snprintf(upto, sizeof(upto), " to %zu KiB", hi >> 10);
    if (voting && tt_log_on(TT_LOG_TRACE, TT_SUB_TUNE))
        TT_TRACE(TT_SUB_TUNE,
                 "%s calls of %zu KiB%s, trial vote: %s (%.1f us a call %s, %.1f us %s)",
                 tt_coll_name((enum tt_coll)kind), lo >> 10, upto,
                 agreed ? "the ranks' mean median" : "the ranks' trials differ, this rank's median",
                 med[k->way] * 1e6, how[k->way], med[!k->way] * 1e6, how[!k->way]);
    if (!tt_pick_decide(p, token, med) || !tt_log_on(TT_LOG_INFO, TT_SUB_TUNE))
        return rc;
    TT_INFO(TT_SUB_TUNE,
            "%s calls of %zu KiB%s now go %s (trial: median %.1f us a call, against %.1f us %s%s)",
            kind < TT_NUM_COLLS ? tt_coll_name((enum tt_coll)kind) : "point-to-point", lo >> 10,
            upto, how[k->way], k->med[k->way] * 1e6, k->med[!k->way] * 1e6, how[!k->way],
            agreed ? "; the ranks' mean" : "");
    return rc;
}

static const char *const nt_how[2] = {"with ordinary stores into FIFO slots",
                                      "with streaming stores into FIFO slots"};
static const char *const single_how[2] = {"in two copies through the FIFO",
                                          "in one copy (the receiver reads the sender's memory)"};

int tt_coll_nt_pick(struct tutti_comm *comm, unsigned kind, size_t bytes, struct tt_run *r)
{
    int token;

    r->nt_slots = tt_pick_way(&comm->pick, (int)kind, bytes, &token);
    return token;
}

tutti_result_t tt_coll_nt_done(struct tutti_comm *comm, int token, double seconds, int ok)
{
    if (token < 0)
        return TUTTI_SUCCESS;
    return pick_done(comm, &comm->pick, nt_how, token, seconds, ok, 1);
}

static const char *const net_how[2] = {
    "in messages of a whole slot (or of TUTTI_NET_COPY_MSG: a broadcast, a large all-gather)",
    "in messages of a quarter slot"};

/* An all-gather of this many bytes or more (every rank's part together) goes in messages past a
 * slot (comm_init.c fit_net_copy). */
#define NET_COPY_AG_MIN ((size_t)16 << 20)

int tt_coll_net_chunk_pick(struct tutti_comm *comm, unsigned kind, size_t bytes, struct tt_run *r)
{
    int token, copies = kind == TT_COLL_BROADCAST ||
                        (kind == TT_COLL_ALL_GATHER && bytes >= NET_COPY_AG_MIN);

    r->chunk_bytes = tt_pick_way(&comm->pick_net, (int)kind, bytes, &token) ? comm->slot_bytes / 4
                     : copies                                               ? comm->net_copy_bytes
                                                                            : 0;
    return token;
}

tutti_result_t tt_coll_net_chunk_done(struct tutti_comm *comm, int token, double seconds, int ok)
{
    if (token < 0)
        return TUTTI_SUCCESS;
    return pick_done(comm, &comm->pick_net, net_how, token, seconds, ok, 1);
}

int tt_coll_single_copy_pick(struct tutti_comm *comm, unsigned kind, size_t bytes, struct tt_run *r)
{
    int token;

    r->single_send = tt_pick_way(&comm->pick_sc, (int)kind, bytes, &token);
    r->single_trial = token >= 0;
    return token;
}

tutti_result_t tt_coll_single_copy_done(struct tutti_comm *comm, int token, double seconds, int ok,
                                        int vote)
{
    if (token < 0)
        return TUTTI_SUCCESS;
    return pick_done(comm, &comm->pick_sc, single_how, token, seconds, ok, vote);
}
