/*
 * comm_split.c -- tutti_comm_split: new communicators from groups of an existing one.
 *
 * Over the parent: an all-gather of every rank's (color, key); each group's first member in
 * (key, rank) order makes an id (tutti_get_id: it serves that group's rendezvous); a second
 * all-gather carries those ids; then every member joins its group with tutti_comm_init, all
 * groups at once. The exchanges are collectives on the parent, so a parent that fails (a dead
 * peer, an abort) fails the split on every rank the way it fails a collective.
 */
#include "lib/core/comm.h"
#include "lib/base/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct member {
    int32_t color, key;
};

static int id_is_zero(const tutti_id_t *id)
{
    static const tutti_id_t zero;
    return memcmp(id, &zero, sizeof(zero)) == 0;
}

/* The split after the argument checks; all and ids have a slot per rank of comm. */
static tutti_result_t split(struct tutti_comm *comm, int color, int key, tutti_comm_t *newcomm,
                            const tutti_config_t *config, struct member *all, tutti_id_t *ids)
{
    tutti_config_t inherit = TUTTI_CONFIG_INIT;
    struct member me = {color, key};
    tutti_id_t mine;
    int size = 0, index = 0, leader = -1;
    tutti_result_t rc, made = TUTTI_SUCCESS;

    rc = tutti_all_gather(&me, all, sizeof(me), TUTTI_UINT8, comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_split: %s", tutti_comm_last_error(comm));
    /* My group in (key, rank) order: its size, my place, its first member. */
    for (int r = 0; r < comm->nranks && color != TUTTI_SPLIT_NONE; r++) {
        if (all[r].color != color)
            continue;
        size++;
        if (all[r].key < key || (all[r].key == key && r < comm->rank))
            index++;
        if (leader < 0 || all[r].key < all[leader].key)
            leader = r;
    }
    /* The ids travel even if making one failed (a zero id), so no rank waits for a group. */
    memset(&mine, 0, sizeof(mine));
    if (leader == comm->rank && (made = tutti_get_id(&mine)) != TUTTI_SUCCESS)
        memset(&mine, 0, sizeof(mine));
    rc = tutti_all_gather(&mine, ids, sizeof(mine), TUTTI_UINT8, comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_split: %s", tutti_comm_last_error(comm));
    if (color == TUTTI_SPLIT_NONE)
        return TUTTI_SUCCESS;
    if (made != TUTTI_SUCCESS || id_is_zero(&ids[leader]))
        return tt_fail(comm, made != TUTTI_SUCCESS ? made : TUTTI_ERR_REMOTE,
                       "tutti_comm_split: rank %d could not serve the rendezvous of color %d%s%s",
                       leader, color, made != TUTTI_SUCCESS ? ": " : "",
                       made != TUTTI_SUCCESS ? tutti_last_error() : "");
    if (!config) { /* the parent's settings */
        inherit.timeout_s = comm->timeout_s;
        inherit.nchannels = comm->nchannels;
        config = &inherit;
    }
    rc = tutti_comm_init(newcomm, size, &ids[leader], index, config);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_split: color %d, rank %d of %d: %s", color, index,
                       size, tutti_last_error());
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_split(tutti_comm_t comm, int color, int key, tutti_comm_t *newcomm,
                                const tutti_config_t *config)
{
    struct member *all;
    tutti_id_t *ids;
    tutti_result_t rc;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_split"));
    if (!newcomm)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_split: newcomm is NULL");
    *newcomm = NULL;
    if (color < TUTTI_SPLIT_NONE)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_split: color is %d; must be >= 0, or TUTTI_SPLIT_NONE (-1)",
                       color);
    all = calloc((size_t)comm->nranks, sizeof(*all));
    ids = calloc((size_t)comm->nranks, sizeof(*ids));
    rc = all && ids ? split(comm, color, key, newcomm, config, all, ids)
                    : tt_fail(comm, TUTTI_ERR_SYSTEM,
                              "tutti_comm_split: out of memory for %d ranks", comm->nranks);
    free(all);
    free(ids);
    return rc;
}
