/*
 * net_measure.c -- TUTTI_TUNE_LINKS=measure: the tuner's network link, measured at init.
 *
 * Every rank sends to the next rank of the ring and receives from the previous one at once,
 * 8-byte messages SMALL_REPS times, then LARGE_BYTES ones LARGE_REPS times, each exchange timed
 * on its own (a group of one send and one receive). A rank whose next rank is on another node
 * has crossed the network: it keeps the median of each. An all-reduce (max) of the latency and
 * of the seconds a byte took then gives every rank the same figures, the slowest network hop's,
 * and they replace the network half of the tuner's links (tt_tune_set_network). Ring positions
 * group each node's ranks, so a communicator on N nodes crosses N links this way.
 */
#include "lib/init/net_measure.h"

#include "algorithms/plan.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_REPS 15
#define LARGE_REPS 5
#define LARGE_BYTES ((size_t)1 << 20)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of reps exchanges of bytes with the ring's neighbours. */
static tutti_result_t exchange(struct tutti_comm *c, int next, int prev, char *sbuf, char *rbuf,
                               size_t bytes, int reps, double *median)
{
    double t[SMALL_REPS > LARGE_REPS ? SMALL_REPS : LARGE_REPS];

    for (int i = 0; i < reps; i++) {
        double t0 = tt_now();
        TT_CHECK(tutti_group_start());
        tutti_result_t rs = tutti_send(sbuf, bytes, TUTTI_UINT8, next, c, NULL);
        tutti_result_t rr = tutti_recv(rbuf, bytes, TUTTI_UINT8, prev, c, NULL);
        tutti_result_t re = tutti_group_end();
        TT_CHECK(rs != TUTTI_SUCCESS ? rs : rr != TUTTI_SUCCESS ? rr : re);
        t[i] = tt_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof(t[0]), cmp_double);
    *median = t[reps / 2];
    return TUTTI_SUCCESS;
}

tutti_result_t tt_comm_measure_net(struct tutti_comm *c)
{
    const struct tt_ring *ring = &c->rings[0];
    int next = tt_ring_at(ring, ring->pos + 1), prev = tt_ring_at(ring, ring->pos - 1);
    int crosses = c->topo.node_of[next] != c->topo.node_of[c->rank];
    double small = 0, large = 0, mine[2] = {0, 0}, all[2];
    char *sbuf = calloc(1, LARGE_BYTES), *rbuf = malloc(LARGE_BYTES);
    tutti_result_t rc = TUTTI_SUCCESS;

    if (!sbuf || !rbuf) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "TUTTI_TUNE_LINKS=measure: out of memory");
        goto out;
    }
    /* (every rank runs every exchange, whether its own link crosses or not) */
    if ((rc = exchange(c, next, prev, sbuf, rbuf, 8, SMALL_REPS, &small)) != TUTTI_SUCCESS ||
        (rc = exchange(c, next, prev, sbuf, rbuf, LARGE_BYTES, LARGE_REPS, &large)) !=
            TUTTI_SUCCESS)
        goto out;
    if (crosses) {
        mine[0] = small;
        mine[1] = (large > small ? large - small : large) / (double)LARGE_BYTES;
    }
    rc = tutti_all_reduce(mine, all, 2, TUTTI_FLOAT64, TUTTI_MAX, c, NULL);
    if (rc != TUTTI_SUCCESS)
        goto out;
    if (all[1] > 0) {
        tt_tune_set_network(&c->tuner, all[0] * 1e6, 1e-9 / all[1]);
        if (c->rank == 0)
            TT_INFO(TT_SUB_TUNE,
                    "TUTTI_TUNE_LINKS=measure: the network link measured at init: %.1f us a "
                    "hop, %.2f GB/s (the slowest of %d crossing(s) of the ring)",
                    all[0] * 1e6, 1e-9 / all[1], c->topo.nnodes);
    }
out:
    free(sbuf);
    free(rbuf);
    if (rc != TUTTI_SUCCESS)
        tt_fail(NULL, rc, "TUTTI_TUNE_LINKS=measure: measuring the network link: %s",
                tt_thread_error());
    return rc;
}
