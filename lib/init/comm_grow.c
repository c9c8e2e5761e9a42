/*
 * comm_grow.c -- growth: newcomers wait at the job's join service (TUTTI_JOIN; tutti-run
 * --elastic serves one, lib/boot/boot_join.c) and the members admit them at a join point of
 * their choosing (tutti_comm_grow): rank 0 asks how many wait, the members learn it by a
 * broadcast, rank 0 serves a rendezvous for the new communicator (tutti_get_id) and admits up
 * to that many, and members and newcomers join that rendezvous, the members first in their
 * order, the newcomers after in the order they arrived.
 */
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"
#include "lib/boot/join.h"
#include "lib/core/comm.h"
#include "lib/init/comm_init.h"

#include <stdint.h>
#include <string.h>

/* TUTTI_JOIN's service, else the one a MASTER_ADDR job keeps (tt_join_from_master). */
static tutti_result_t join_service(const char *fn, struct tt_id_info *svc)
{
    const char *s = tt_env_str("TUTTI_JOIN");
    tutti_id_t id;

    if (!*s) {
        if (tt_join_from_master(svc) != TUTTI_SUCCESS)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: %s", fn, tutti_last_error());
        return TUTTI_SUCCESS;
    }
    if (tutti_id_from_string(s, &id) != TUTTI_SUCCESS || tt_id_decode(&id, svc) != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: TUTTI_JOIN: %s", fn, tutti_last_error());
    return TUTTI_SUCCESS;
}

/* Rank 0's part before the broadcast: how many newcomers it admits (into *admitted), with the
 * rendezvous id; -1 if it could not (its error on this thread). */
static tutti_result_t admit(struct tutti_comm *comm, int max_new, tutti_id_t *id, int *admitted)
{
    struct tt_id_info svc;
    double deadline = tt_now() + comm->timeout_s;
    int waiting;

    *admitted = 0;
    TT_CHECK(join_service("tutti_comm_grow", &svc));
    TT_CHECK(tt_join_count(&svc, deadline, &waiting));
    if (max_new > 0 && waiting > max_new)
        waiting = max_new;
    if (waiting == 0)
        return TUTTI_SUCCESS;
    TT_CHECK(tutti_get_id(id)); /* a rendezvous served here for the new communicator */
    return tt_join_admit(&svc, waiting, comm->nranks, id, deadline, admitted);
}

/*
 * The grown communicator, its set-up bounded by TUTTI_SHRINK_TIMEOUT rather than its own
 * timeout: every rank of it is waiting for it right now, so one that does not come within that
 * (a newcomer that died after it was admitted) is not coming; the grow then fails on every rank
 * (the members shrink and go on). The communicator keeps cfg's timeout.
 */
static tutti_result_t make(tutti_comm_t *out, int nranks, const tutti_id_t *id, int rank,
                           tutti_config_t *cfg)
{
    double keep = cfg->timeout_s > 0 ? cfg->timeout_s : tt_env_double("TUTTI_TIMEOUT");
    double bound = tt_env_double("TUTTI_SHRINK_TIMEOUT");

    cfg->timeout_s = bound < keep ? bound : keep;
    TT_CHECK(tutti_comm_init(out, nranks, id, rank, cfg));
    (*out)->timeout_s = keep;
    tt_boot_set_timeout((*out)->boot, keep);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_grow(tutti_comm_t comm, int max_new, tutti_comm_t *newcomm,
                               const tutti_config_t *config)
{
    tutti_config_t inherit = TUTTI_CONFIG_INIT;
    struct {
        int32_t admitted, ok;
        tutti_id_t id;
    } plan;
    tutti_result_t rc;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_grow"));
    if (!newcomm)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_grow: newcomm is NULL");
    *newcomm = NULL;
    memset(&plan, 0, sizeof(plan));
    if (comm->rank == 0) {
        int k = 0;
        rc = admit(comm, max_new, &plan.id, &k);
        plan.admitted = k;
        plan.ok = rc == TUTTI_SUCCESS;
        if (rc != TUTTI_SUCCESS)
            TT_WARN(TT_SUB_INIT, "tutti_comm_grow: %s", tt_thread_error());
    }
    rc = tutti_broadcast(&plan, &plan, sizeof(plan), TUTTI_UINT8, 0, comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_grow: %s", tutti_comm_last_error(comm));
    if (!plan.ok)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_grow: rank 0 could not admit the newcomers%s%s",
                       comm->rank == 0 ? ": " : " (its log says why)",
                       comm->rank == 0 ? tt_thread_error() : "");
    if (plan.admitted == 0)
        return TUTTI_SUCCESS;
    if (config)
        memcpy(&inherit, config, config->size < sizeof(inherit) ? config->size : sizeof(inherit));
    else { /* the members' settings */
        inherit.timeout_s = comm->timeout_s;
        inherit.nchannels = comm->nchannels;
    }
    rc = make(newcomm, comm->nranks + plan.admitted, &plan.id, comm->rank, &inherit);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_grow: %s", tutti_last_error());
    (*newcomm)->grown_from = comm->nranks;
    TT_INFO(TT_SUB_INIT, "tutti_comm_grow: %d member(s) admitted %d newcomer(s)", comm->nranks,
            (int)plan.admitted);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_join(tutti_comm_t *comm, const tutti_config_t *config)
{
    tutti_config_t cfg = TUTTI_CONFIG_INIT;
    struct tt_id_info svc;
    tutti_id_t id;
    int rank, nranks, members;

    tt_base_init();
    if (!comm)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_join: comm is NULL");
    TT_CHECK(tt_env_validate("tutti_comm_join"));
    TT_CHECK(join_service("tutti_comm_join", &svc));
    TT_INFO(TT_SUB_INIT, "tutti_comm_join: waiting to be admitted (up to TUTTI_TIMEOUT, %g s)",
            tt_env_double("TUTTI_TIMEOUT"));
    if (tt_join_wait(&svc, tt_now() + tt_env_double("TUTTI_TIMEOUT"), &id, &rank, &nranks,
                     &members) != TUTTI_SUCCESS)
        return tt_fail(NULL, TUTTI_ERR_TIMEOUT, "tutti_comm_join: not admitted: %s",
                       tt_thread_error());
    if (config)
        memcpy(&cfg, config, config->size < sizeof(cfg) ? config->size : sizeof(cfg));
    TT_CHECK(make(comm, nranks, &id, rank, &cfg));
    (*comm)->grown_from = members;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_joined(tutti_comm_t comm, int *members)
{
    TT_CHECK(tt_comm_check(comm, "tutti_comm_joined"));
    if (!members)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_joined: members is NULL");
    *members = comm->grown_from;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_join_env_id(tutti_id_t *id)
{
    struct tt_id_info svc;

    tt_base_init();
    if (!id)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_join_env_id: id is NULL");
    TT_CHECK(tt_env_validate("tutti_join_env_id"));
    TT_CHECK(join_service("tutti_join_env_id", &svc));
    tt_id_encode(&svc, id);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_join_waiting(const tutti_id_t *service, int *count)
{
    struct tt_id_info svc;

    tt_base_init();
    if (!service || !count)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_join_waiting: %s is NULL",
                       !service ? "service" : "count");
    if (tt_id_decode(service, &svc) != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_join_waiting: %s", tutti_last_error());
    return tt_join_count(&svc, tt_now() + 5.0, count);
}
