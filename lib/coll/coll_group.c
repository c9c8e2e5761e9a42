/*
 * coll_group.c -- collectives inside tutti_group_start/end. Each call is checked when it is
 * made and recorded (sendrecv.c keeps the group); tutti_group_end runs the group's point-to-point
 * batch, then its collectives in call order, queued on the group's stream or run now. Every
 * rank makes the same calls in the same order, so every rank runs them alike.
 *
 * Run now, consecutive small calls on host buffers of one kind, dtype and built-in op
 * (all-reduces, all-gathers or reduce-scatters) travel as one call over a packed copy (as
 * NCCL aggregates a group's collectives): one call's latency in place of one per tensor, for
 * two memcpys. A packed run reads every input first and writes the outputs in call order, so
 * it gives what the calls one after another give unless a call reads what an earlier one
 * writes: a run never takes such a call in.
 */
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/base/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_CALL_BYTES (64 * 1024) /* a larger call goes alone: its copies would cost more */
#define FUSE_RUN_BYTES (256 * 1024) /* a packed side at most */
#define FUSE_RUN_CALLS 256          /* bounds the dependence check's pairs */

/* A call's block: what each rank contributes to an all-gather, or ends with from a
 * reduce-scatter; an all-reduce's whole array. */
static size_t block_bytes(const struct tt_call *c)
{
    return c->count * tutti_dtype_size(c->dtype);
}

/* How many blocks c reads (a reduce-scatter: one for every rank) and writes (an all-gather). */
static size_t in_blocks(const struct tutti_comm *comm, const struct tt_call *c)
{
    return c->coll == TT_COLL_REDUCE_SCATTER ? (size_t)comm->nranks : 1;
}

static size_t out_blocks(const struct tutti_comm *comm, const struct tt_call *c)
{
    return c->coll == TT_COLL_ALL_GATHER ? (size_t)comm->nranks : 1;
}

/* What a packed run holds of c: the larger of what it reads and what it writes. */
static size_t footprint(const struct tutti_comm *comm, const struct tt_call *c)
{
    size_t in = in_blocks(comm, c), out = out_blocks(comm, c);
    return block_bytes(c) * (in > out ? in : out);
}

/*
 * May c travel packed with first's run? The same kind (all-reduce, all-gather or
 * reduce-scatter, whose every rank reads its input, so that every rank of a program without
 * dependences decides alike), dtype and op; never a call this rank refused (coll.c
 * refused_call), which runs alone.
 */
static int fusable(const struct tutti_comm *comm, const struct tt_call *c,
                   const struct tt_call *first)
{
    return (c->coll == TT_COLL_ALL_REDUCE || c->coll == TT_COLL_ALL_GATHER ||
            c->coll == TT_COLL_REDUCE_SCATTER) &&
           c->coll == first->coll && !c->device && !c->premul.on && !c->refused &&
           c->dtype == first->dtype && c->op == first->op && footprint(comm, c) <= FUSE_CALL_BYTES;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* Does c read what a call of run[0..n) writes? */
static int depends(const struct tutti_comm *comm, const struct tt_call *run, int n,
                   const struct tt_call *c)
{
    for (int k = 0; k < n; k++)
        if (overlap(c->sendbuf, block_bytes(c) * in_blocks(comm, c), run[k].recvbuf,
                    block_bytes(&run[k]) * out_blocks(comm, &run[k])))
            return 1;
    return 0;
}

/*
 * run[0..n): one call of their kind over their blocks packed. Each side of the call is a
 * series of slabs (one, or one per rank where the side has a block per rank), and slab r holds
 * every call's block r end to end.
 */
static tutti_result_t run_fused(struct tutti_comm *comm, const struct tt_call *run, int n)
{
    const struct tt_call *c0 = &run[0];
    size_t total = 0, off = 0, esize = tutti_dtype_size(c0->dtype);
    size_t ins = in_blocks(comm, c0), outs = out_blocks(comm, c0);
    int reduce = c0->coll == TT_COLL_ALL_REDUCE; /* in place: one side */
    unsigned char *in, *out;
    tutti_result_t rc;

    for (int k = 0; k < n; k++)
        total += run[k].count;
    in = malloc(total ? total * esize * (ins + (reduce ? 0 : outs)) : 1);
    if (!in)
        return tt_fail(comm, TUTTI_ERR_SYSTEM,
                       "tutti_group_end: out of memory for %d grouped %s calls", n,
                       tt_coll_name((enum tt_coll)c0->coll));
    out = reduce ? in : in + total * esize * ins;
    for (int k = 0; k < n; k++) {
        size_t b = block_bytes(&run[k]);
        for (size_t r = 0; r < ins; r++)
            memcpy(in + r * total * esize + off, (const unsigned char *)run[k].sendbuf + r * b, b);
        off += b;
    }
    if (reduce)
        rc = tutti_all_reduce(in, in, total, c0->dtype, c0->op, comm, NULL);
    else if (c0->coll == TT_COLL_ALL_GATHER)
        rc = tutti_all_gather(in, out, total, c0->dtype, comm, NULL);
    else
        rc = tutti_reduce_scatter(in, out, total, c0->dtype, c0->op, comm, NULL);
    off = 0;
    for (int k = 0; k < n && rc == TUTTI_SUCCESS; k++) {
        size_t b = block_bytes(&run[k]);
        for (size_t r = 0; r < outs; r++)
            memcpy((unsigned char *)run[k].recvbuf + r * b, out + r * total * esize + off, b);
        off += b;
    }
    free(in);
    return rc;
}

tutti_result_t tt_coll_run_group(struct tutti_comm *comm, const struct tt_call *calls, int n,
                                 tutti_stream_t stream)
{
    tutti_result_t rc = TUTTI_SUCCESS;

    for (int i = 0, j; i < n && rc == TUTTI_SUCCESS; i = j) {
        size_t bytes = footprint(comm, &calls[i]);
        j = i + 1;
        if (!stream && fusable(comm, &calls[i], &calls[i]))
            while (j < n && j - i < FUSE_RUN_CALLS && fusable(comm, &calls[j], &calls[i]) &&
                   bytes + footprint(comm, &calls[j]) <= FUSE_RUN_BYTES &&
                   !depends(comm, calls + i, j - i, &calls[j]))
                bytes += footprint(comm, &calls[j++]);
        rc = j - i > 1 ? run_fused(comm, calls + i, j - i)
                       : tt_coll_dispatch(comm, &calls[i], stream);
    }
    return rc;
}
