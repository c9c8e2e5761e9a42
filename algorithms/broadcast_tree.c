/*
 * broadcast_tree.c -- binomial-tree broadcast from the root; small messages.
 *
 * With d = distance from the root along the ring order and n ranks: d > 0 receives from its
 * parent d - 2^k, where 2^k is d's lowest set bit, then sends to its children d + 2^j for
 * j = k-1 .. 0 (the root: every 2^j < n, largest first), skipping those >= n. Depth is
 * ceil(log2 n) hops against the chain's n-1, but an inner rank sends each chunk to several
 * children, so for large messages the chain (bandwidth) wins.
 * The root copies sendbuf to recvbuf unless in place and sends from sendbuf; the others
 * forward from recvbuf, chunk by chunk (chunk-major execution pipelines down the tree).
 */
#include "algorithms/algorithms.h"

void tt_broadcast_tree(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, d = tt_ring_dist(r, a->root), rootpos = r->pos - d, top;
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (d == 0) {
            tt_plan_self_copy(p, a, off, off, cnt, 0);
            for (top = 1; top < n; top <<= 1)
                ;
        } else {
            top = d & -d; /* lowest set bit: the round this rank receives in */
            tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_RECV,
                                              .dst = TT_BUF_RECV,
                                              .recv_peer = tt_ring_at(r, rootpos + d - top),
                                              .dst_off = off,
                                              .count = cnt});
        }
        for (int bit = top >> 1; bit >= 1; bit >>= 1)
            if (d + bit < n)
                tt_plan_step(p, &(struct tt_step){.prim = TT_PRIM_SEND,
                                                  .src = d == 0 ? TT_BUF_SEND : TT_BUF_RECV,
                                                  .send_peer = tt_ring_at(r, rootpos + d + bit),
                                                  .src_off = off,
                                                  .count = cnt});
    }
}
