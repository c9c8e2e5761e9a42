/*
 * queue.c -- one bucket's reduction, queued on the ddp's stream: its gradients copied into
 * the bucket (and weighted), the hook's work, the result copied out (to the gradients, or
 * this rank's runs into the ZeRO-2 shard) and accounted. With zero 3 the gradients are
 * reduced from their own buffers (zero3.c). Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <stdio.h>
#include <string.h>

/* Work queued before and after a bucket's hook: copy in, time it; copy out, account. */
static tutti_result_t bucket_begin(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    float *data = ddp_bucket_data(d, b);
    /* The compressing hooks divide by nranks themselves (data / n): the weight of
     * tutti_ddp_set_batch goes in as weight * nranks. The hook none reduces with a premul sum
     * by the weight instead of an average (the product inside the reduction: no extra pass).
     * A user hook gets the weighted values. */
    float scale = d->cfg.hook == TUTTI_DDP_HOOK_USER ? 1.0f / (float)d->nranks : 1.0f;
    if (d->weighted && d->cfg.hook != TUTTI_DDP_HOOK_NONE)
        scale =
            (float)(d->cfg.hook == TUTTI_DDP_HOOK_USER ? d->weight : d->weight * (double)d->nranks);
    size_t off = 0;

    b->t_start = ddp_now();
    if (d->cfg.zero == 3) /* reduced from each parameter's own buffer (zero3.c) */
        return TUTTI_SUCCESS;
    for (int k = 0; k < b->nparams; k++) {
        const struct ddp_param *p = &d->params[b->params[k]];
        float *dst = data + off;
        if (p->zero_fill)
            memset(dst, 0, p->count * sizeof(float));
        else if (!d->cfg.grad_as_bucket_view)
            memcpy(dst, p->grad, p->count * sizeof(float));
        if (scale != 1.0f)
            for (size_t j = 0; j < p->count; j++)
                dst[j] *= scale;
        off += p->count;
    }
    return TUTTI_SUCCESS;
}

static tutti_result_t bucket_end(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    const float *data = ddp_bucket_data(d, b);
    double now = ddp_now();

    if (d->cfg.zero == 3) {
        ddp_zero3_end(d, b);
    } else if (d->cfg.zero == 2) {
        size_t lo, hi, off = 0;
        /* This rank's run, reduced onto it: into the flat shard. */
        ddp_owner_run(d, b, d->rank, &lo, &hi);
        for (int k = 0; k < b->nparams && lo < hi; k++) {
            const struct ddp_param *p = &d->params[b->params[k]];
            size_t a = off > lo ? off : lo, z = off + p->count < hi ? off + p->count : hi;
            if (a < z)
                memcpy(d->shard_grad + (p->flat_off + (a - off) - d->own_lo), data + a,
                       (z - a) * sizeof(float));
            off += p->count;
        }
    } else if (!d->cfg.grad_as_bucket_view) {
        size_t off = 0;
        for (int k = 0; k < b->nparams; k++) {
            const struct ddp_param *p = &d->params[b->params[k]];
            memcpy(p->grad, data + off, p->count * sizeof(float));
            off += p->count;
        }
    }
    d->comm_s += now - b->t_start;
    d->bytes_reduced += b->count * sizeof(float);
    if (tutti_trace_enabled()) {
        char args[96];
        snprintf(args, sizeof(args), "{\"bucket\":%d,\"bytes\":%zu,\"hook\":\"%s\"}", b->index,
                 b->count * sizeof(float), tutti_ddp_hook_name(d->cfg.hook));
        tutti_trace_span("bucket reduction", "ddp", b->t_start * 1e6, now * 1e6, args);
    }
    return TUTTI_SUCCESS;
}

/* A failure mid-step: make the peers fail too, and keep the first message. */
tutti_result_t ddp_launch(struct tutti_ddp *d, struct ddp_bucket *b)
{
    tutti_result_t rc;

    b->launched = 1;
    rc = tutti_stream_launch(d->stream, bucket_begin, b);
    if (rc == TUTTI_SUCCESS)
        rc = d->cfg.zero == 3 ? ddp_zero3_queue(d, b) : ddp_hook_queue(d, b);
    if (rc == TUTTI_SUCCESS)
        rc = tutti_stream_launch(d->stream, bucket_end, b);
    if (rc != TUTTI_SUCCESS) {
        if (!d->err[0])
            ddp_fail(d, rc, "bucket %d: queueing its reduction: %s", b->index, tutti_last_error());
        return ddp_break_step(d, rc);
    }
    return TUTTI_SUCCESS;
}
