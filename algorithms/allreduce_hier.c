/*
 * allreduce_hier.c -- hierarchical all-reduce for nodes of equal size L > 1.
 *
 * The channel's part is cut into L segments, seg(q), and seg(q) into N sub-segments (N nodes).
 * Local index l, node g. Three phases, each a ring:
 *   A. inside the node, ring reduce-scatter: step 0 send seg(l-1) (input), steps 1..L-2
 *      recv-reduce-send seg(l-1-k), last recv-reduce-copy seg(l) into recvbuf: this rank
 *      holds its node's sum of seg(l);
 *   B. across nodes, among the ranks with local index l (node order), ring all-reduce of
 *      seg(l) in recvbuf: each rank then holds the full sum of seg(l) (POSTOP here);
 *   C. inside the node, ring all-gather of the segments: send seg(l), recv-copy-send seg(l-k),
 *      recv seg(l+1).
 * Only 2(N-1)/N of seg(l) crosses the network per rank, over L rings in parallel: the network
 * carries 1/L of what a flat ring would put on it per rank.
 * Phases are separate (plan.h): B reads seg(l) at sub-segment offsets that A wrote in chunks
 * of seg(l), and C reads what B wrote the same way.
 * a->cross_only: B alone (A and C are the symmetric path's, which leaves this node's sum of
 * seg(l) in recvbuf before B and copies seg(l) to every rank of the node after it).
 */
#include "algorithms/algorithms.h"
#include "algorithms/hier.h"

int tt_fits_hier(int nranks, const struct tt_topo_view *t)
{
    return t && t->nnodes > 1 && t->uniform && t->node_size[0] > 1 && nranks > 2;
}

static void seg(size_t off, size_t cnt, int parts, int q, size_t *o, size_t *n)
{
    tt_split(cnt, parts, ((q % parts) + parts) % parts, o, n);
    *o += off;
}

void tt_allreduce_hier(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    const struct tt_topo_view *t = a->topo;

    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int me = r->order[r->pos], L, N, l, g, next, prev, cnext, cprev;
        struct tt_hier h;
        size_t off, cnt, o, n, so, sn;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (tt_hier_init(&h, t, r->nranks, me) != 0) {
            p->oom = 1;
            return;
        }
        L = h.L, N = h.nnodes, l = h.local, g = h.node;
        next = h.node_ranks[(l + 1) % L];
        prev = h.node_ranks[(l + L - 1) % L];
        cnext = tt_hier_rank(t, r->nranks, (g + 1) % N, l);
        cprev = tt_hier_rank(t, r->nranks, (g + N - 1) % N, l);

        /* A: reduce-scatter inside the node. */
        for (int k = 0; k < L && !a->cross_only; k++) {
            struct tt_step s = {
                .src = TT_BUF_SEND, .dst = TT_BUF_RECV, .send_peer = next, .recv_peer = prev};
            seg(off, cnt, L, k == L - 1 ? l : l - 1 - k, &o, &n);
            s.prim = k == 0      ? TT_PRIM_SEND
                     : k < L - 1 ? TT_PRIM_RECV_REDUCE_SEND
                                 : TT_PRIM_RECV_REDUCE_COPY;
            s.src_off = s.dst_off = o, s.count = n;
            tt_plan_step(p, &s);
        }
        /* B: all-reduce of seg(l) across nodes (a ring over the column). */
        tt_plan_phase(p);
        seg(off, cnt, L, l, &so, &sn);
        for (int k = 0; k < 2 * N - 1; k++) {
            struct tt_step s = {
                .src = TT_BUF_RECV, .dst = TT_BUF_RECV, .send_peer = cnext, .recv_peer = cprev};
            int sub;
            if (k == 0)
                s.prim = TT_PRIM_SEND, sub = g;
            else if (k < N - 1)
                s.prim = TT_PRIM_RECV_REDUCE_SEND, sub = g - k;
            else if (k == N - 1)
                s.prim = TT_PRIM_RECV_REDUCE_COPY_SEND, s.flags = TT_STEP_POSTOP, sub = g + 1;
            else if (k < 2 * N - 2)
                s.prim = TT_PRIM_RECV_COPY_SEND, sub = g + 1 - (k - N + 1);
            else
                s.prim = TT_PRIM_RECV, sub = g + 2;
            seg(so, sn, N, sub, &o, &n);
            s.src_off = s.dst_off = o, s.count = n;
            tt_plan_step(p, &s);
        }
        /* C: all-gather of the segments inside the node. */
        tt_plan_phase(p);
        for (int k = 0; k < L && !a->cross_only; k++) {
            struct tt_step s = {
                .src = TT_BUF_RECV, .dst = TT_BUF_RECV, .send_peer = next, .recv_peer = prev};
            seg(off, cnt, L, l - k, &o, &n);
            s.prim = k == 0 ? TT_PRIM_SEND : k < L - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
            s.src_off = s.dst_off = o, s.count = n;
            tt_plan_step(p, &s);
        }
        tt_hier_free(&h);
    }
}
