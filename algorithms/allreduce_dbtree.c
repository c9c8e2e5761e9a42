/*
 * allreduce_dbtree.c -- pipelined double binary tree all-reduce (NCCL's "tree").
 *
 * Each channel's part is halved; each half goes through its own binary tree, on its own
 * connections (channels 2c and 2c+1). Tree 0 numbers the ring positions v = pos, tree 1
 * mirrors them (v = n-1-pos), both in heap order: parent (v-1)/2, children 2v+1 and 2v+2. The
 * leaves of one tree are inner nodes of the other, so every rank does about the same work.
 * Per tree, for a node with parent P and children C1, C2:
 *   reduce up:   leaf: send input to P. Inner: recv-reduce-copy from C1 (C1 OP input ->
 *                recvbuf), then from C2 recv-reduce-send to P (or, at the root,
 *                recv-reduce-copy: final value, POSTOP); with one child, send recvbuf to P.
 *   bcast down:  root: send recvbuf to C1 and C2. Inner: recv-copy-send from P to C1, send to
 *                C2. Leaf: recv from P.
 * Every step covers the whole half, so chunk c reads only chunk c: chunk-major execution
 * pipelines the chunks up and down the tree (depth log2(n)): latency O(log n) hops, and
 * each rank sends and receives about twice its data, which suits large messages at scale.
 */
#include "algorithms/algorithms.h"

static int tree_rank(const struct tt_ring *r, int tree, int v)
{
    return r->order[tree ? r->nranks - 1 - v : v];
}

void tt_allreduce_dbtree(struct tt_plan *p, const struct tt_ring *rings,
                         const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks;

        for (int tree = 0; tree < 2; tree++) {
            int v = tree ? n - 1 - r->pos : r->pos;
            int parent = v ? tree_rank(r, tree, (v - 1) / 2) : -1;
            int c1 = 2 * v + 1 < n ? tree_rank(r, tree, 2 * v + 1) : -1;
            int c2 = 2 * v + 2 < n ? tree_rank(r, tree, 2 * v + 2) : -1;
            size_t off, cnt;

            tt_plan_lane(p, 2 * ch + tree);
            tt_split(a->count, 2 * a->nchannels, 2 * ch + tree, &off, &cnt);
            if (n == 1) {
                tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
                continue;
            }
            struct tt_step s = {.src = TT_BUF_SEND,
                                .dst = TT_BUF_RECV,
                                .src_off = off,
                                .dst_off = off,
                                .count = cnt};
            /* Reduce up. */
            if (c1 < 0) {
                s.prim = TT_PRIM_SEND, s.send_peer = parent;
                tt_plan_step(p, &s);
            } else {
                s.prim = TT_PRIM_RECV_REDUCE_COPY, s.recv_peer = c1;
                s.flags = parent < 0 && c2 < 0 ? TT_STEP_POSTOP : 0;
                tt_plan_step(p, &s);
                s.src = TT_BUF_RECV, s.flags = 0;
                if (c2 >= 0 && parent < 0) {
                    s.prim = TT_PRIM_RECV_REDUCE_COPY, s.recv_peer = c2, s.flags = TT_STEP_POSTOP;
                    tt_plan_step(p, &s);
                } else if (c2 >= 0) {
                    s.prim = TT_PRIM_RECV_REDUCE_SEND, s.recv_peer = c2, s.send_peer = parent;
                    tt_plan_step(p, &s);
                } else if (parent >= 0) {
                    s.prim = TT_PRIM_SEND, s.send_peer = parent;
                    tt_plan_step(p, &s);
                }
            }
            /* Broadcast down. */
            s.src = TT_BUF_RECV, s.flags = 0;
            if (parent < 0) {
                s.prim = TT_PRIM_SEND, s.send_peer = c1;
                tt_plan_step(p, &s);
            } else if (c1 < 0) {
                s.prim = TT_PRIM_RECV, s.recv_peer = parent;
                tt_plan_step(p, &s);
            } else {
                s.prim = TT_PRIM_RECV_COPY_SEND, s.recv_peer = parent, s.send_peer = c1;
                tt_plan_step(p, &s);
            }
            if (c2 >= 0) {
                s.prim = TT_PRIM_SEND, s.send_peer = c2;
                tt_plan_step(p, &s);
            }
        }
    }
}
