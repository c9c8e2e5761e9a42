/* sim.c -- the schedule simulator; see sim.h. */
#include "sim.h"

#include "lib/error.h"
#include "lib/exec.h"
#include "transport/transport.h"

#include <stdlib.h>
#include <string.h>

/* Connection from rank s to rank d on channel ch, if not there yet. */
static tutti_result_t sim_connect(const struct tt_transport_ctx *ctx, struct tt_exec_conns *conns,
                                  int ch, int s, int d)
{
    int n = conns[0].nranks;
    size_t idx_at_d = (size_t)ch * (size_t)n + (size_t)s,
           idx_at_s = (size_t)ch * (size_t)n + (size_t)d;
    unsigned char blob[TT_BLOB_MAX];
    size_t len;
    tutti_result_t rc;

    if (s < 0 || s >= n || d < 0 || d >= n)
        return tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL, "sim: plan names peer %d",
                             s < 0 || s >= n ? s : d);
    if (conns[s].send[idx_at_s])
        return TUTTI_SUCCESS;
    rc = tt_transport_mem.recv_setup(ctx, s, ch, blob, &len, &conns[d].recv[idx_at_d]);
    if (rc == TUTTI_SUCCESS)
        rc = tt_transport_mem.send_connect(ctx, d, ch, blob, len, &conns[s].send[idx_at_s]);
    return rc;
}

tutti_result_t sim_run(const struct sim_config *cfg, const struct tt_algo *algo,
                       struct tt_coll_args a, void **send, void **recv, tutti_dtype_t dtype,
                       tutti_op_t op)
{
    int n = cfg->nranks, nch = cfg->nchannels;
    size_t nconn = (size_t)n * 2 * (size_t)nch; /* two connection channels per data channel */
    struct tt_transport_ctx ctx = {
        .job_tag = "sim", .slot_bytes = cfg->slot_bytes, .nslots = cfg->nslots};
    struct tt_exec_conns *conns = calloc((size_t)n, sizeof(*conns));
    struct tt_plan *plans = calloc((size_t)n, sizeof(*plans));
    struct tt_exec *x = calloc((size_t)n, sizeof(*x));
    struct tt_exec_mem *mem = calloc((size_t)n, sizeof(*mem));
    struct tt_ring *rings = calloc((size_t)n * (size_t)nch, sizeof(*rings));
    int *order = malloc((size_t)n * sizeof(int)), *pos = malloc((size_t)n * sizeof(int));
    void *bufs[64][2];
    tutti_result_t rc = TUTTI_SUCCESS;

    if (n > 64)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "sim: at most 64 ranks");
    for (int k = 0; k < n; k++)
        order[k] = cfg->ring_order ? cfg->ring_order[k] : k;
    for (int k = 0; k < n; k++)
        pos[order[k]] = k;
    a.nchannels = nch;
    a.topo = cfg->topo;
    for (int r = 0; r < n; r++) {
        conns[r] = (struct tt_exec_conns){.nranks = n,
                                          .nchannels = 2 * nch,
                                          .send = calloc(nconn, sizeof(void *)),
                                          .recv = calloc(nconn, sizeof(void *))};
        for (int ch = 0; ch < nch; ch++)
            rings[(size_t)r * (size_t)nch + (size_t)ch] =
                (struct tt_ring){.nranks = n, .pos = pos[r], .order = order};
    }
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++) {
        algo->build(&plans[r], &rings[(size_t)r * (size_t)nch], &a);
        if (plans[r].oom)
            rc = tt_fail_quiet(NULL, TUTTI_ERR_SYSTEM, "sim: plan out of memory");
    }
    /* Connect the pairs the plans use, both ends at once. */
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++)
        for (int l = 0; l < plans[r].nlanes && rc == TUTTI_SUCCESS; l++) {
            const struct tt_lane *lane = &plans[r].lanes[l];
            for (size_t i = 0; i < lane->nsteps && rc == TUTTI_SUCCESS; i++) {
                const struct tt_step *st = &plans[r].steps[lane->first + i];
                if (st->prim == TT_PRIM_SEND || st->prim == TT_PRIM_RECV_REDUCE_SEND ||
                    st->prim == TT_PRIM_RECV_REDUCE_COPY_SEND || st->prim == TT_PRIM_RECV_COPY_SEND)
                    rc = sim_connect(&ctx, conns, lane->channel, r, st->send_peer);
                if (st->prim != TT_PRIM_SEND && st->prim != TT_PRIM_COPY && rc == TUTTI_SUCCESS)
                    rc = sim_connect(&ctx, conns, lane->channel, st->recv_peer, r);
            }
        }
    for (int r = 0; r < n && rc == TUTTI_SUCCESS; r++) {
        bufs[r][TT_BUF_SEND] = send[r];
        bufs[r][TT_BUF_RECV] = recv[r];
        rc = tt_exec_init(&x[r], &plans[r], bufs[r], dtype, op, n, cfg->slot_bytes, &conns[r],
                          &mem[r]);
    }
    while (rc == TUTTI_SUCCESS) {
        int moved = 0, done = 0;
        for (int r = 0; r < n; r++) {
            tutti_result_t p = tt_exec_progress(&x[r]);
            if (p == TUTTI_SUCCESS)
                done++;
            else if (p != TUTTI_IN_PROGRESS)
                rc = p;
            moved |= x[r].moved;
        }
        if (rc != TUTTI_SUCCESS || done == n)
            break;
        if (!moved)
            rc = tt_fail_quiet(NULL, TUTTI_ERR_INTERNAL,
                               "sim: deadlock: %d of %d ranks done and none can move", done, n);
    }
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < nconn; i++)
            if (conns[r].send[i])
                tt_transport_mem.close(conns[r].send[i]);
    }
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < nconn; i++)
            if (conns[r].recv[i])
                tt_transport_mem.close(conns[r].recv[i]);
        free(conns[r].send);
        free(conns[r].recv);
        tt_plan_free(&plans[r]);
        tt_exec_mem_free(&mem[r]);
    }
    free(conns);
    free(plans);
    free(x);
    free(mem);
    free(rings);
    free(order);
    free(pos);
    return rc;
}
