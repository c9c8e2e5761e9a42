/*
 * optim.c -- SGD with momentum and Adam over the averaged gradients, whole or sharded.
 *
 * The state covers a range of the flat space (ddp_int.h): everything (zero 0) or this rank's
 * shard (zero 1 and 2). A sharded step updates the rank's own parameter values, then
 * all-gathers the flat parameters so every rank holds the whole model again. The arithmetic is
 * element by element, in float32, in PyTorch's order of operations, so it does not matter
 * which rank updates an element: ZeRO-1 gives bitwise the parameters of plain DDP.
 */
#include "ddp_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ddp_optim {
    float *slot[2]; /* SGD: momentum; Adam: first and second moments */
    int nslots;
    size_t lo, hi;      /* flat range of the state */
    long long t;        /* steps taken */
    float *gathered;    /* zero >= 1: the flat parameters, shard x nranks, for the all-gather */
    void *gathered_win; /* its window (ddp_sym_alloc) */
    size_t bytes;
};

tutti_result_t ddp_optim_init(struct tutti_ddp *d)
{
    struct ddp_optim *o = calloc(1, sizeof(*o));

    if (!o)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory");
    d->optim = o;
    o->lo = d->cfg.zero ? d->own_lo : 0;
    o->hi = d->cfg.zero ? d->own_hi : d->total;
    o->nslots = d->cfg.optim == TUTTI_DDP_OPTIM_ADAM  ? 2
                : d->cfg.optim == TUTTI_DDP_OPTIM_SGD ? 1
                                                      : 0;
    for (int s = 0; s < o->nslots; s++) {
        o->slot[s] = calloc(o->hi - o->lo + 1, sizeof(float));
        if (!o->slot[s])
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory for the optimizer");
        o->bytes += (o->hi - o->lo) * sizeof(float);
    }
    if (d->cfg.zero == 1 || d->cfg.zero == 2) {
        o->gathered = ddp_sym_alloc(d, d->shard * (size_t)d->nranks + 1, &o->gathered_win);
        if (!o->gathered)
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory for the optimizer");
    }
    return TUTTI_SUCCESS;
}

void ddp_optim_free(struct tutti_ddp *d)
{
    struct ddp_optim *o = d->optim;

    if (!o)
        return;
    free(o->slot[0]);
    free(o->slot[1]);
    ddp_sym_free(d, o->gathered, o->gathered_win);
    free(o);
    d->optim = NULL;
}

size_t ddp_optim_bytes(const struct tutti_ddp *d)
{
    return d->optim ? d->optim->bytes : 0;
}

int ddp_optim_slots(const struct tutti_ddp *d)
{
    return d->optim ? d->optim->nslots : 0;
}

float *ddp_optim_slot(const struct tutti_ddp *d, int slot, size_t *lo, size_t *hi)
{
    *lo = d->optim->lo;
    *hi = d->optim->hi;
    return d->optim->slot[slot];
}

long long *ddp_optim_t(const struct tutti_ddp *d)
{
    return &d->optim->t;
}

static void sgd(const tutti_ddp_config_t *c, float *p, const float *g, float *buf, size_t n)
{
    float lr = (float)c->lr, mom = (float)c->momentum, wd = (float)c->weight_decay;

    for (size_t j = 0; j < n; j++) {
        float gj = g[j];
        if (wd != 0)
            gj += wd * p[j];
        if (mom != 0) {
            buf[j] = mom * buf[j] + gj; /* buf starts at 0: the first step gives buf = g */
            gj = buf[j];
        }
        p[j] -= lr * gj;
    }
}

static void adam(const tutti_ddp_config_t *c, long long t, float *p, const float *g, float *m,
                 float *v, size_t n)
{
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps,
          wd = (float)c->weight_decay;
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    float step = (float)c->lr / bc1, bc2s = sqrtf(bc2);

    for (size_t j = 0; j < n; j++) {
        float gj = g[j];
        if (wd != 0)
            gj += wd * p[j];
        m[j] = b1 * m[j] + (1.0f - b1) * gj;
        v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
        p[j] -= step * (m[j] / (sqrtf(v[j]) / bc2s + eps));
    }
}

tutti_result_t tutti_ddp_step(tutti_ddp_t d)
{
    struct ddp_optim *o;
    double t0 = ddp_now();
    tutti_result_t rc;

    if (!d || !d->initialized)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_step: ddp is NULL or not initialised");
    if (d->broken)
        return ddp_fail(d, TUTTI_ERR_ABORTED, "tutti_ddp_step: unusable after an earlier failure");
    if (d->in_step)
        return ddp_fail(
            d, TUTTI_ERR_INVALID_ARG,
            "tutti_ddp_step: the backward pass is not finished (call tutti_ddp_finish)");
    if (d->cfg.optim == TUTTI_DDP_OPTIM_NONE)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_step: no optimizer is configured (config.optim)");
    o = d->optim;
    o->t++;
    for (int i = 0; i < d->nparams; i++) {
        const struct ddp_param *p = &d->params[i];
        const float *g;
        float *v;
        size_t a, z;
        if (!ddp_param_part(p, o->lo, o->hi, &a, &z))
            continue;
        g = d->cfg.zero >= 2 ? d->shard_grad + (a - d->own_lo)
                             : tutti_ddp_grad(d, i) + (a - p->flat_off);
        /* zero 3: the values are the shard's (ddp_int.h) */
        v = d->cfg.zero == 3 ? d->param_shard + (a - d->own_lo) : p->data + (a - p->flat_off);
        if (d->cfg.optim == TUTTI_DDP_OPTIM_SGD)
            sgd(&d->cfg, v, g, o->slot[0] + (a - o->lo), z - a);
        else
            adam(&d->cfg, o->t, v, g, o->slot[0] + (a - o->lo), o->slot[1] + (a - o->lo), z - a);
    }
    if (d->cfg.zero == 1 || d->cfg.zero == 2) { /* (zero 3: the next gathers read the shards) */
        float *mine = o->gathered + (size_t)d->rank * d->shard;
        ddp_flat_copy(d, mine, d->own_lo, d->own_hi, 1);
        rc = tutti_all_gather(mine, o->gathered, d->shard, TUTTI_FLOAT32, d->comm, NULL);
        if (rc != TUTTI_SUCCESS) {
            d->broken = 1;
            return ddp_fail(d, rc, "tutti_ddp_step: all-gathering the parameters: %s",
                            tutti_comm_last_error(d->comm));
        }
        ddp_flat_copy(d, o->gathered, 0, d->total, 0);
    }
    d->step_s += ddp_now() - t0;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_set_lr(tutti_ddp_t d, double lr)
{
    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_ddp_set_lr: ddp is NULL");
    if (!(lr >= 0))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_set_lr: lr %g must be >= 0", lr);
    d->cfg.lr = lr;
    return TUTTI_SUCCESS;
}

/* One grouped all-reduce (average) of every registered parameter, in place. */
tutti_result_t tutti_ddp_average_params(tutti_ddp_t d)
{
    tutti_result_t rc, end;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_average_params"));
    if (d->in_step)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_average_params: a step is in flight (call it between steps)");
    if (d->cfg.zero)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_average_params: not with zero %d (each optimizer step "
                        "all-gathers the parameters from their owners)",
                        d->cfg.zero);
    rc = tutti_group_start();
    for (int i = 0; rc == TUTTI_SUCCESS && i < d->nparams; i++)
        rc = tutti_all_reduce(d->params[i].data, d->params[i].data, d->params[i].count,
                              TUTTI_FLOAT32, TUTTI_AVG, d->comm, NULL);
    end = tutti_group_end();
    if (rc == TUTTI_SUCCESS)
        rc = end;
    if (rc != TUTTI_SUCCESS) {
        d->broken = 1; /* some parameters may be averaged and others not */
        return ddp_fail(d, rc, "tutti_ddp_average_params: %s", tutti_last_error());
    }
    return TUTTI_SUCCESS;
}

tutti_result_t ddp_optim_save(struct tutti_ddp *d, struct ddp_optim_saved *sv)
{
    struct ddp_optim *o = d->optim;

    memset(sv, 0, sizeof(*sv));
    if (!o)
        return TUTTI_SUCCESS;
    sv->nslots = o->nslots;
    sv->lo = o->lo;
    sv->hi = o->hi;
    sv->t = o->t;
    for (int s = 0; s < o->nslots; s++) {
        sv->slot[s] = malloc((o->hi - o->lo + 1) * sizeof(float));
        if (!sv->slot[s])
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "out of memory for the optimizer state");
        memcpy(sv->slot[s], o->slot[s], (o->hi - o->lo) * sizeof(float));
    }
    return TUTTI_SUCCESS;
}

tutti_result_t ddp_optim_restore(struct tutti_ddp *d, struct ddp_optim_saved *sv, const char *fn)
{
    struct ddp_optim *o = d->optim;
    /* Where every rank held the whole state (zero 0), rank 0's counts: a step that failed on
     * some ranks and not others may have left them apart. */
    int whole = sv && sv->lo == 0 && sv->hi == d->total;
    int give = sv && (!whole || d->rank == 0);
    float *f = o->nslots ? malloc((d->total + 1) * sizeof(float)) : NULL;
    long long t = sv ? sv->t : 0;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (o->nslots && !f)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "%s: out of memory for the optimizer state", fn);
    for (int s = 0; s < o->nslots && rc == TUTTI_SUCCESS; s++) {
        memset(f, 0, (d->total + 1) * sizeof(float));
        if (give && s < sv->nslots && sv->slot[s])
            memcpy(f + sv->lo, sv->slot[s], (sv->hi - sv->lo) * sizeof(float));
        rc = tutti_all_reduce(f, f, d->total, TUTTI_FLOAT32, TUTTI_SUM, d->comm, NULL);
        if (rc == TUTTI_SUCCESS)
            memcpy(o->slot[s], f + o->lo, (o->hi - o->lo) * sizeof(float));
    }
    free(f);
    if (rc == TUTTI_SUCCESS)
        rc = tutti_all_reduce(&t, &t, 1, TUTTI_INT64, TUTTI_MAX, d->comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "%s: handing over the optimizer state: %s", fn,
                        tutti_comm_last_error(d->comm));
    o->t = t;
    return TUTTI_SUCCESS;
}
