/*
 * allgather_hier.c -- hierarchical all-gather for nodes of equal size L > 1.
 *
 * Block b (rank b's data) lives at recvbuf[b * count]. Local index l, node g, N nodes:
 *   A. across nodes, among the ranks with local index l (node order): ring all-gather of
 *      their blocks (copy the own block into place first unless in place);
 *   B. inside the node: for each node h in turn, a ring all-gather of the blocks of node h's
 *      ranks (each member now holds the block of its column on h).
 * A crosses the network with N-1 blocks per rank, on L rings at once; B stays on shared
 * memory. Within B the rings run one after the other (not interleaved), so one free slot per
 * connection keeps each deadlock-free. A and B are separate phases: B forwards blocks that
 * A wrote. a->cross_only: A alone (the symmetric path copies the column's blocks to every
 * rank of the node after it).
 */
#include "algorithms/algorithms.h"
#include "algorithms/hier.h"

void tt_allgather_hier(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    const struct tt_topo_view *t = a->topo;

    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int me = r->order[r->pos], L, N, l, g;
        struct tt_hier h;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (tt_hier_init(&h, t, r->nranks, me) != 0) {
            p->oom = 1;
            return;
        }
        L = h.L, N = h.nnodes, l = h.local, g = h.node;
        tt_plan_self_copy(p, a, off, (size_t)me * a->count + off, cnt, 0);
        /* A: the column of local index l, across nodes. */
        for (int k = 0; k < N; k++) {
            int owner = tt_hier_rank(t, r->nranks, ((g - k) % N + N) % N, l);
            struct tt_step s = {.src = TT_BUF_SEND,
                                .dst = TT_BUF_RECV,
                                .count = cnt,
                                .send_peer = tt_hier_rank(t, r->nranks, (g + 1) % N, l),
                                .recv_peer = tt_hier_rank(t, r->nranks, (g + N - 1) % N, l),
                                .src_off = off,
                                .dst_off = (size_t)owner * a->count + off};
            s.prim = k == 0 ? TT_PRIM_SEND : k < N - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
            tt_plan_step(p, &s);
        }
        /* B: inside the node, one ring per node's blocks. */
        tt_plan_phase(p);
        for (int node = 0; node < N && !a->cross_only; node++) {
            for (int k = 0; k < L; k++) {
                int owner = tt_hier_rank(t, r->nranks, node, ((l - k) % L + L) % L);
                struct tt_step s = {.src = TT_BUF_RECV,
                                    .dst = TT_BUF_RECV,
                                    .count = cnt,
                                    .send_peer = h.node_ranks[(l + 1) % L],
                                    .recv_peer = h.node_ranks[(l + L - 1) % L],
                                    .src_off = (size_t)owner * a->count + off,
                                    .dst_off = (size_t)owner * a->count + off};
                s.prim = k == 0 ? TT_PRIM_SEND : k < L - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
                tt_plan_step(p, &s);
            }
        }
        tt_hier_free(&h);
    }
}
