/*
 * plan.h -- a plan is what one rank does for one collective: pure data.
 *
 * A plan has lanes (one per channel, or per peer for grouped point-to-point); each lane is
 * an ordered list of steps. A step is one primitive over an element range:
 *
 *   SEND                   src[src_off + i]                      -> send_peer
 *   RECV                   recv_peer                             -> dst[dst_off + i]
 *   RECV_REDUCE_SEND       recv_peer OP src[src_off + i]         -> send_peer
 *   RECV_REDUCE_COPY       recv_peer OP src[src_off + i]         -> dst[dst_off + i]
 *   RECV_REDUCE_COPY_SEND  recv_peer OP src[src_off + i]         -> dst and send_peer
 *   RECV_COPY_SEND         recv_peer                             -> dst and send_peer
 *   COPY                   src[src_off + i]                      -> dst[dst_off + i]
 *
 * src and dst name buffers by index (TT_BUF_SEND / TT_BUF_RECV / TT_BUF_SCRATCH for
 * collectives; one index per call in a point-to-point group). Offsets and counts are in elements.
 * TT_STEP_POSTOP marks the step that produces a final reduced value (where AVG divides).
 *
 * The executor runs a lane chunk-major: chunk 0 of every step in order, then chunk 1 of every
 * step, and so on (a step with fewer chunks is skipped once it is done). Both ends of a
 * connection cut their matching steps into the same chunks, so slots match one to one, and
 * each chunk index runs the whole schedule on one slice: a schedule that is deadlock-free
 * with one slot per connection stays so at any size. That is the pipelining.
 *
 * Chunk-major order is only right when chunk c of a step reads what chunk c of earlier steps
 * wrote (the same elements, or none). Where a step reads elements an earlier step wrote at
 * another offset (ranges that halve, phases over different splits), the builder starts a new
 * phase (tt_plan_phase): the executor finishes every chunk of a phase before the next.
 */
#ifndef TT_PLAN_H
#define TT_PLAN_H

#include <stddef.h>
#include <stdint.h>

enum tt_prim {
    TT_PRIM_SEND = 0,
    TT_PRIM_RECV,
    TT_PRIM_RECV_REDUCE_SEND,
    TT_PRIM_RECV_REDUCE_COPY,
    TT_PRIM_RECV_REDUCE_COPY_SEND,
    TT_PRIM_RECV_COPY_SEND,
    TT_PRIM_COPY,
    TT_NUM_PRIMS
};

/* A collective's buffers. TT_BUF_SCRATCH: memory the library provides, as large as the
 * collective's input, for algorithms whose table entry says `scratch`. */
enum { TT_BUF_SEND = 0, TT_BUF_RECV = 1, TT_BUF_SCRATCH = 2, TT_COLL_NBUFS = 3 };

#define TT_STEP_POSTOP 1u
#define TT_STEP_PHASE 2u /* the first step of a phase (see above) */

struct tt_step {
    uint8_t prim;
    uint8_t flags;
    uint16_t src; /* buffer index */
    uint16_t dst; /* buffer index */
    int32_t send_peer;
    int32_t recv_peer;
    size_t src_off;
    size_t dst_off;
    size_t count;
};

struct tt_lane {
    int channel;
    size_t first; /* index of the lane's first step in plan->steps */
    size_t nsteps;
};

struct tt_plan {
    struct tt_step *steps;
    size_t nsteps, steps_cap;
    struct tt_lane *lanes;
    int nlanes, lanes_cap;
    int oom;              /* an append failed: the plan is incomplete */
    int next_phase;       /* the next step appended starts a phase */
    unsigned long resets; /* tt_plan_reset calls so far: a caller that remembers what it
                             built can tell whether the plan still holds it */
};

/* Forget the contents, keep the memory. */
void tt_plan_reset(struct tt_plan *p);
void tt_plan_free(struct tt_plan *p);

/* Open a lane on a channel; later steps go into it. */
void tt_plan_lane(struct tt_plan *p, int channel);

/* Append a step to the open lane. Steps of zero count are dropped (both ends agree). */
void tt_plan_step(struct tt_plan *p, const struct tt_step *s);

/* The steps appended from now on form a new phase of the open lane. */
static inline void tt_plan_phase(struct tt_plan *p)
{
    p->next_phase = 1;
}

/* Does the primitive receive from recv_peer / send to send_peer? */
static inline int tt_prim_recvs(int prim)
{
    return prim != TT_PRIM_SEND && prim != TT_PRIM_COPY;
}

static inline int tt_prim_sends(int prim)
{
    return prim == TT_PRIM_SEND || prim == TT_PRIM_RECV_REDUCE_SEND ||
           prim == TT_PRIM_RECV_REDUCE_COPY_SEND || prim == TT_PRIM_RECV_COPY_SEND;
}

/* Does the primitive write dst? */
static inline int tt_prim_writes(int prim)
{
    return prim != TT_PRIM_SEND && prim != TT_PRIM_RECV_REDUCE_SEND;
}

/* Name of a primitive, for traces and tests. */
const char *tt_prim_name(int prim);

/* Element range [*off, *off + *count) of part `i` of `n` near-equal parts of `total`. */
static inline void tt_split(size_t total, int n, int i, size_t *off, size_t *count)
{
    size_t base = total / (size_t)n, extra = total % (size_t)n, ui = (size_t)i;

    *off = ui * base + (ui < extra ? ui : extra);
    *count = base + (ui < extra ? 1 : 0);
}

/* A ring: order[k] is the rank at position k; `pos` is this rank's position. */
struct tt_ring {
    int nranks;
    int pos;
    const int *order;
};

static inline int tt_ring_at(const struct tt_ring *r, int k)
{
    int n = r->nranks;
    return r->order[((k % n) + n) % n];
}

#endif
