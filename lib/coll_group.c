/*
 * coll_group.c -- collectives inside tutti_group_start/end. Each call is checked when it is
 * made and recorded (p2p.c keeps the group); tutti_group_end runs the group's point-to-point
 * batch, then its collectives in call order, queued on the group's stream or run now. Every
 * rank makes the same calls in the same order, so every rank runs them alike.
 *
 * Run now, consecutive small all-reduces of one dtype and built-in op on host buffers travel
 * as one all-reduce over a packed copy (as NCCL aggregates a group's collectives): one call's
 * latency in place of one per tensor, for two memcpys. A packed run reads every input first
 * and writes the outputs in call order, so it gives what the calls one after another give
 * unless a call reads what an earlier one writes: a run never takes such a call in.
 */
#include "coll.h"
#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_CALL_BYTES (64 * 1024) /* a larger call goes alone: its copies would cost more */
#define FUSE_RUN_BYTES (256 * 1024) /* the packed copy at most */
#define FUSE_RUN_CALLS 256          /* bounds the dependence check's pairs */

static size_t call_bytes(const struct tt_call *c)
{
    return c->count * tutti_dtype_size(c->dtype);
}

static int fusable(const struct tt_call *c, const struct tt_call *first)
{
    return c->coll == TT_COLL_ALL_REDUCE && !c->device && !c->premul.on &&
           c->dtype == first->dtype && c->op == first->op && call_bytes(c) <= FUSE_CALL_BYTES;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* Does c read what a call of run[0..n) writes? */
static int depends(const struct tt_call *run, int n, const struct tt_call *c)
{
    for (int k = 0; k < n; k++)
        if (overlap(c->sendbuf, call_bytes(c), run[k].recvbuf, call_bytes(&run[k])))
            return 1;
    return 0;
}

/* run[0..n): one all-reduce over their values packed end to end. */
static tutti_result_t run_fused(struct tutti_comm *comm, const struct tt_call *run, int n)
{
    size_t total = 0, off = 0, esize = tutti_dtype_size(run[0].dtype);
    unsigned char *packed;
    tutti_result_t rc;

    for (int k = 0; k < n; k++)
        total += run[k].count;
    packed = malloc(total ? total * esize : 1);
    if (!packed)
        return tt_fail(comm, TUTTI_ERR_SYSTEM,
                       "tutti_group_end: out of memory for %d grouped all-reduces", n);
    for (int k = 0; k < n; k++) {
        memcpy(packed + off, run[k].sendbuf, call_bytes(&run[k]));
        off += call_bytes(&run[k]);
    }
    rc = tutti_all_reduce(packed, packed, total, run[0].dtype, run[0].op, comm, NULL);
    off = 0;
    for (int k = 0; k < n && rc == TUTTI_SUCCESS; k++) {
        memcpy(run[k].recvbuf, packed + off, call_bytes(&run[k]));
        off += call_bytes(&run[k]);
    }
    free(packed);
    return rc;
}

tutti_result_t tt_coll_run_group(struct tutti_comm *comm, const struct tt_call *calls, int n,
                                 tutti_stream_t stream)
{
    tutti_result_t rc = TUTTI_SUCCESS;

    for (int i = 0, j; i < n && rc == TUTTI_SUCCESS; i = j) {
        size_t bytes = call_bytes(&calls[i]);
        j = i + 1;
        if (!stream && fusable(&calls[i], &calls[i]))
            while (j < n && j - i < FUSE_RUN_CALLS && fusable(&calls[j], &calls[i]) &&
                   bytes + call_bytes(&calls[j]) <= FUSE_RUN_BYTES &&
                   !depends(calls + i, j - i, &calls[j]))
                bytes += call_bytes(&calls[j++]);
        rc = j - i > 1 ? run_fused(comm, calls + i, j - i)
                       : tt_coll_dispatch(comm, &calls[i], stream);
    }
    return rc;
}
