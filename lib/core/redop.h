/*
 * redop.h -- operators made at run time (tutti_op_create_premul_sum; redop.c) and what a
 * call made with one does before its plan runs.
 */
#ifndef TT_REDOP_H
#define TT_REDOP_H

#include "lib/base/dtype.h" /* tt_redop_is_custom */
#include "tutti.h"

#include <stddef.h>

struct tutti_comm;
struct tt_call;

/* c->op is such a handle: check it against comm and c->dtype, copy what the call needs into
 * c->premul and make c->op SUM. TUTTI_ERR_INVALID_ARG (message set) if it cannot. */
tutti_result_t tt_redop_bind(struct tutti_comm *comm, struct tt_call *c);

/* A premul call's pre-pass: dst[i] = src[i] * scalar for i < n, before the plan runs; or,
 * `fused`, none: the executor scales the caller's input as it reads it (exec.h premul). */
struct tt_pre {
    int fused;
    void *dst;
    const void *src;
    size_t n;
    tutti_dtype_t dtype;
    unsigned char value[8]; /* the scalar, or */
    const void *dev;        /* its device address (device path: read by the kernel) */
};

/*
 * For a checked call with c->premul.on, about to run. On the host (but in place on one rank):
 * fused, the executor scales as it reads. Otherwise where its scaled input goes (recvbuf or comm's
 * buffer, grown; device memory on the device path), pointing bufs[TT_BUF_SEND] at it and
 * setting *inplace to what the plan is then. Fills pre; a device scalar is read here unless
 * the call is on the device path (`device`).
 */
tutti_result_t tt_redop_prepare(struct tutti_comm *comm, const struct tt_call *c, int device,
                                void **bufs, int *inplace, struct tt_pre *pre);

/* Run the pre-pass: on the host, or queued on the device path's stream (`device`). */
tutti_result_t tt_redop_run_pre(struct tutti_comm *comm, const struct tt_pre *pre, int device);

/* Free comm's operators and buffers (tutti_comm_destroy). */
void tt_redop_free(struct tutti_comm *comm);

#endif
