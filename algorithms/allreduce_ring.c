/*
 * allreduce_ring.c -- ring all-reduce: reduce-scatter then all-gather.
 *
 * Schedule, for n ranks, position p on the ring, the channel's part split into n segments
 * seg[0..n-1] (seg[k] taken modulo n):
 *   step 0          send                    seg[p]      (from sendbuf)
 *   steps 1..n-2    recv-reduce-send        seg[p-k]
 *   step n-1        recv-reduce-copy-send   seg[p+1]    final value: POSTOP, into recvbuf
 *   steps n..2n-3   recv-copy-send          seg[p+1-j]  j = 1..n-2, into recvbuf
 *   step 2n-2       recv                    seg[p+2]    into recvbuf
 * Each rank sends and receives 2(n-1)/n of the data: bandwidth-optimal.
 * Preconditions: n >= 1; every rank uses the same rings and count.
 * In place: each segment of sendbuf is read (its reduce-scatter step) before recvbuf's copy
 * of that segment is written, so sendbuf == recvbuf is safe. n == 1: a copy (none in place).
 */
#include "algorithms/algorithms.h"

void tt_allreduce_ring(struct tt_plan *p, const struct tt_ring *rings, const struct tt_coll_args *a)
{
    for (int ch = 0; ch < a->nchannels; ch++) {
        const struct tt_ring *r = &rings[ch];
        int n = r->nranks, pos = r->pos;
        int next = tt_ring_at(r, pos + 1), prev = tt_ring_at(r, pos - 1);
        size_t off, cnt;

        tt_plan_channel(p, a, ch, &off, &cnt);
        if (n == 1) {
            tt_plan_self_copy(p, a, off, off, cnt, TT_STEP_POSTOP);
            continue;
        }
        for (int k = 0; k < 2 * n - 1; k++) {
            struct tt_step s = {
                .src = TT_BUF_SEND, .dst = TT_BUF_RECV, .send_peer = next, .recv_peer = prev};
            int seg;

            if (k == 0) {
                s.prim = TT_PRIM_SEND;
                seg = pos;
            } else if (k < n - 1) {
                s.prim = TT_PRIM_RECV_REDUCE_SEND;
                seg = pos - k;
            } else if (k == n - 1) {
                s.prim = TT_PRIM_RECV_REDUCE_COPY_SEND;
                s.flags = TT_STEP_POSTOP;
                seg = pos + 1;
            } else if (k < 2 * n - 2) {
                s.prim = TT_PRIM_RECV_COPY_SEND;
                seg = pos + 1 - (k - n + 1);
            } else {
                s.prim = TT_PRIM_RECV;
                seg = pos + 2;
            }
            seg = ((seg % n) + n) % n;
            tt_split(cnt, n, seg, &s.src_off, &s.count);
            s.src_off += off;
            s.dst_off = s.src_off;
            tt_plan_step(p, &s);
        }
    }
}
