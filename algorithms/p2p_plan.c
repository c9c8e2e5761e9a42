/*
 * p2p_plan.c -- the plan of a point-to-point batch (one call, or a tutti_group_start/end group).
 *
 * One lane per (peer, direction), lanes in peer order with sends before receives; within a
 * lane the messages keep the order they were given (call order). Both ends of a pair list
 * their messages in call order, so the k-th send to a peer meets that peer's k-th receive
 * from this rank, and the executor's lanes run concurrently, so no order of calls across
 * peers can deadlock. Messages are bytes: a step's count is its message's byte count.
 */
#include "algorithms/algorithms.h"

#include <stdlib.h>

struct key {
    int peer, is_send, index;
};

static int key_cmp(const void *pa, const void *pb)
{
    const struct key *a = pa, *b = pb;

    if (a->peer != b->peer)
        return a->peer < b->peer ? -1 : 1;
    if (a->is_send != b->is_send)
        return a->is_send ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* A batch of up to this many messages is sorted in place on the stack (a loop of small
 * exchanges rebuilds its plan on every call when sends and receives alternate). */
#define SMALL_BATCH 16

void tt_plan_p2p(struct tt_plan *p, const struct tt_msg *msgs, int n, int *perm)
{
    struct key small[SMALL_BATCH];
    struct key *keys = n <= SMALL_BATCH ? small : malloc((size_t)n * sizeof(*keys));

    if (!keys) {
        p->oom = 1;
        return;
    }
    for (int i = 0; i < n; i++)
        keys[i] = (struct key){msgs[i].peer, msgs[i].is_send != 0, i};
    if (n <= SMALL_BATCH) { /* insertion sort: key_cmp is a total order, so any sort agrees */
        for (int i = 1; i < n; i++) {
            struct key k = keys[i];
            int j = i;
            for (; j > 0 && key_cmp(&keys[j - 1], &k) > 0; j--)
                keys[j] = keys[j - 1];
            keys[j] = k;
        }
    } else {
        qsort(keys, (size_t)n, sizeof(*keys), key_cmp);
    }
    for (int i = 0; i < n; i++) {
        const struct tt_msg *m = &msgs[keys[i].index];
        struct tt_step s = {.prim = m->is_send ? TT_PRIM_SEND : TT_PRIM_RECV,
                            .src = (uint16_t)i,
                            .dst = (uint16_t)i,
                            .send_peer = m->peer,
                            .recv_peer = m->peer,
                            .count = m->bytes};

        if (i == 0 || keys[i].peer != keys[i - 1].peer || keys[i].is_send != keys[i - 1].is_send)
            tt_plan_lane(p, 0);
        tt_plan_step(p, &s);
        perm[i] = keys[i].index;
    }
    if (keys != small)
        free(keys);
}
