/*
 * hooks.h -- what the comm hooks (hooks.c) share with PowerSGD's arithmetic (powersgd.c).
 */
#ifndef TT_DDP_HOOKS_H
#define TT_DDP_HOOKS_H

#include "ddp_int.h"

struct ddp_hook_state {
    float *ef;      /* flat error feedback (int8, topk, powersgd) */
    uint16_t *half; /* fp16 / bf16 */
    float *x;       /* scratch: a bucket's values */
    unsigned char *send, *recv;
    size_t send_max; /* bytes of `send` (recv: nranks times) */
    /* PowerSGD */
    float **qt; /* per parameter: r x cols (transposed Q), NULL for non-matrices */
    int *rk;    /* per parameter: rank used (0: not compressed) */
    float *pbuf, *qbuf, *vbuf;
    size_t pmax, qmax, vmax;
    size_t bytes;
};

/* x = data / n + residual, in bucket order (the residual follows each parameter's run). */
void ddp_add_residual(struct tutti_ddp *d, const struct ddp_bucket *b, const float *data, float *x);

/* PowerSGD: the rank used for a parameter (0: sent whole; rows x cols as a matrix), a
 * bucket's packed P, Q and vector sizes, and the three host steps around its all-reduces. */
int ddp_psgd_rank(const struct tutti_ddp *d, const struct ddp_param *p, size_t *rows, size_t *cols);
void ddp_psgd_sizes(const struct tutti_ddp *d, const struct ddp_bucket *b, size_t *np, size_t *nq,
                    size_t *nv);
tutti_result_t ddp_psgd_a(void *arg);
tutti_result_t ddp_psgd_b(void *arg);
tutti_result_t ddp_psgd_c(void *arg);

#endif
