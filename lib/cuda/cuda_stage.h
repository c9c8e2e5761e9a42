/*
 * cuda_stage.h -- staging device buffers through pinned host memory (cuda.c), shared with the
 * calls on wrapped CUDA streams (cuda_stream.c). Built with CUDA only.
 */
#ifndef TT_CUDA_STAGE_H
#define TT_CUDA_STAGE_H

#include "lib/gpu/gpu.h"
#include "lib/stream/stream.h"

#include <stddef.h>

struct tutti_comm;

/* Where each buffer's bytes live in the staging area, and which way they are copied. */
struct tt_stage_plan {
    size_t in_off, in_len;   /* device -> host: from the call's `in_src` */
    size_t out_off, out_len; /* host -> device: to the call's `out_dst` */
    const void *in_src;
    void *out_dst;
    size_t total;
    struct tt_call staged; /* the call on staging pointers (filled by tt_stage_bind) */
    size_t send_off, recv_off;
    int uses_send, uses_recv;
};

static inline size_t tt_align64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

/* The staging layout of checked collective c on comm. */
void tt_stage_layout(const struct tutti_comm *comm, const struct tt_call *c,
                     struct tt_stage_plan *p);

/* Point the staged call at base. */
void tt_stage_bind(struct tt_stage_plan *p, char *base);

#endif
