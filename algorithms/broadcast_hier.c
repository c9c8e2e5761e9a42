/*
 * broadcast_hier.c -- hierarchical broadcast: across nodes, then inside each node.
 *
 * With lr the root's local index: the ranks with local index lr (one per node, where the node
 * has one) form a chain across nodes starting at the root's node; then on each node the rank
 * with index lr (or index 0 where the node is smaller) heads a chain over the node's ranks in
 * local order. Both chains carry the whole array in chunks, and chunk c of the node chain
 * only needs chunk c of the cross-node chain, so the two pipeline into each other: the
 * network carries the data once per node instead of once per rank. a->cross_only: the chain
 * across heads alone (the symmetric path copies from each head to its node's ranks after it).
 */
#include "algorithms/algorithms.h"
#include "algorithms/hier.h"

void tt_broadcast_hier(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    const struct tt_topo_view *t = a->topo;

    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int me = r->order[r->pos], N, g, l, L, lr, rg, head;
        struct tt_hier h;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (tt_hier_init(&h, t, r->nranks, me) != 0) {
            p->oom = 1;
            return;
        }
        N = h.nnodes, g = h.node, l = h.local, L = h.L;
        lr = t->local_of[a->root], rg = t->node_of[a->root];
        head = lr < L ? lr : 0; /* this node's head */
        struct tt_step s = {
            .src = TT_BUF_RECV, .dst = TT_BUF_RECV, .src_off = off, .dst_off = off, .count = cnt};
        if (l == head) {
            /* The chain across node heads, in node order from the root's node. */
            int d = ((g - rg) % N + N) % N, prev = -1, next = -1;
            for (int k = d - 1; k >= 0 && prev < 0; k--) {
                int node = (rg + k) % N;
                prev = tt_hier_rank(t, r->nranks, node, lr < t->node_size[node] ? lr : 0);
            }
            for (int k = d + 1; k < N && next < 0; k++) {
                int node = (rg + k) % N;
                next = tt_hier_rank(t, r->nranks, node, lr < t->node_size[node] ? lr : 0);
            }
            if (me == a->root) {
                tt_plan_self_copy(p, a, off, off, cnt, 0);
                s.src = TT_BUF_SEND;
                s.prim = TT_PRIM_SEND, s.send_peer = next;
                if (next >= 0)
                    tt_plan_step(p, &s);
            } else {
                s.prim = next >= 0 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
                s.recv_peer = prev, s.send_peer = next;
                tt_plan_step(p, &s);
            }
            s.src = me == a->root ? TT_BUF_SEND : TT_BUF_RECV;
            if (L > 1 && !a->cross_only) { /* head of the node chain */
                s.prim = TT_PRIM_SEND, s.send_peer = h.node_ranks[(head + 1) % L];
                tt_plan_step(p, &s);
            }
        } else if (!a->cross_only) {
            /* The chain inside the node, from its head around the local order. */
            int d = ((l - head) % L + L) % L;
            s.recv_peer = h.node_ranks[(l + L - 1) % L];
            s.send_peer = h.node_ranks[(l + 1) % L];
            s.prim = d < L - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
            tt_plan_step(p, &s);
        }
        tt_hier_free(&h);
    }
}
