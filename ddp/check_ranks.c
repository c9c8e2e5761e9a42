/*
 * check_ranks.c -- tutti_ddp_init's check that every rank registered the same parameters
 * (count, names, shapes) and buffers (count, names, sizes) with the same settings, so that
 * every step's collectives match.
 * Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ddp_fill_desc(const struct tutti_ddp *d, struct ddp_desc *x)
{
    int n = d->nparams + d->nbuffers;

    memset(x, 0, (size_t)n * sizeof(*x));
    for (int i = 0; i < d->nparams; i++) {
        const struct ddp_param *p = &d->params[i];
        memcpy(x[i].name, p->name, DDP_NAME_LEN);
        x[i].count = p->count;
        x[i].ndim = (uint64_t)p->ndim;
        for (int k = 0; k < p->ndim; k++)
            x[i].shape[k] = p->shape[k];
    }
    for (int i = 0; i < d->nbuffers; i++) {
        struct ddp_desc *b = &x[d->nparams + i];
        memcpy(b->name, d->buffers[i].name, DDP_NAME_LEN);
        b->count = b->shape[0] = d->buffers[i].count;
        b->ndim = 1;
    }
}

static void desc_str(const struct ddp_desc *x, char *buf, size_t size)
{
    int n = snprintf(buf, size, "'%s' [", x->name);
    for (uint64_t i = 0; i < x->ndim && i < DDP_MAX_DIMS && n < (int)size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%llu", i ? ", " : "",
                      (unsigned long long)x->shape[i]);
    if (n < (int)size)
        snprintf(buf + n, size - (size_t)n, "] float32");
}

/*
 * The settings that decide which collectives a step makes and what they carry (or that every
 * rank must hold alike, as PowerSGD's seed): one vector per rank, reals by their bits. A
 * hook's own settings count only with that hook.
 */
enum {
    S_PARAMS,
    S_BUFFERS,
    S_HOOK,
    S_TOPK,
    S_PSGD_RANK,
    S_SEED,
    S_ZERO,
    S_OPTIM,
    S_FIRST_MB,
    S_CAP_MB,
    S_REBUILD,
    S_UNEVEN,
    S_ADAPT,
    S_COUNT
};
static const char *const setting_name[S_COUNT] = {"parameters",
                                                  "buffers",
                                                  "hook",
                                                  "topk_ratio",
                                                  "powersgd_rank",
                                                  "seed",
                                                  "zero",
                                                  "optim",
                                                  "first_bucket_mb",
                                                  "bucket_cap_mb",
                                                  "rebuild_buckets",
                                                  "uneven_inputs",
                                                  "adaptive_buckets"};
#define S_REAL ((1u << S_TOPK) | (1u << S_FIRST_MB) | (1u << S_CAP_MB))

static void settings_of(const struct tutti_ddp *d, uint64_t *v)
{
    const tutti_ddp_config_t *c = &d->cfg;
    double real[S_COUNT] = {0};

    memset(v, 0, S_COUNT * sizeof(*v));
    v[S_PARAMS] = (uint64_t)d->nparams;
    v[S_BUFFERS] = (uint64_t)d->nbuffers;
    v[S_HOOK] = (uint64_t)c->hook;
    if (c->hook == TUTTI_DDP_HOOK_TOPK)
        real[S_TOPK] = c->topk_ratio;
    if (c->hook == TUTTI_DDP_HOOK_POWERSGD) {
        v[S_PSGD_RANK] = (uint64_t)c->powersgd_rank;
        v[S_SEED] = c->seed;
    }
    v[S_ZERO] = (uint64_t)c->zero;
    v[S_OPTIM] = (uint64_t)c->optim;
    real[S_FIRST_MB] = c->first_bucket_mb;
    real[S_CAP_MB] = c->bucket_cap_mb;
    v[S_REBUILD] = c->rebuild_buckets != 0;
    v[S_UNEVEN] = (uint64_t)c->uneven_inputs;
    v[S_ADAPT] = (uint64_t)c->adaptive_buckets;
    for (int k = 0; k < S_COUNT; k++)
        if (S_REAL >> k & 1)
            memcpy(&v[k], &real[k], sizeof(v[k]));
}

static void setting_str(int k, uint64_t v, char *buf, size_t size)
{
    double x;

    memcpy(&x, &v, sizeof(x));
    if (S_REAL >> k & 1)
        snprintf(buf, size, "%.17g", x);
    else if (k == S_HOOK)
        snprintf(buf, size, "%s", tutti_ddp_hook_name((tutti_ddp_hook_t)v));
    else
        snprintf(buf, size, "%llu", (unsigned long long)v);
}

/* Every rank sees the same tables, so every rank reaches the same verdict. */
tutti_result_t ddp_check_ranks(struct tutti_ddp *d)
{
    uint64_t mine[S_COUNT], *settings = calloc((size_t)d->nranks * S_COUNT, sizeof(*settings));
    int n = d->nparams + d->nbuffers;
    struct ddp_desc *all = NULL, *me = NULL;
    tutti_result_t rc;
    char a[160], b[160];

    if (!settings)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory");
    settings_of(d, mine);
    rc = tutti_all_gather(mine, settings, S_COUNT, TUTTI_UINT64, d->comm, NULL);
    if (rc != TUTTI_SUCCESS) {
        ddp_fail(d, rc, "tutti_ddp_init: exchanging parameter counts and settings: %s",
                 tutti_comm_last_error(d->comm));
        goto out;
    }
    for (int r = 1; r < d->nranks; r++)
        for (int k = 0; k < S_COUNT; k++) {
            uint64_t x = settings[(size_t)r * S_COUNT + (size_t)k], y = settings[k];
            if (x == y)
                continue;
            setting_str(k, x, a, sizeof(a));
            setting_str(k, y, b, sizeof(b));
            if (k == S_PARAMS || k == S_BUFFERS)
                rc = ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                              "tutti_ddp_init: rank %d registered %s %s, rank 0 registered %s", r,
                              a, setting_name[k], b);
            else
                rc = ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                              "tutti_ddp_init: rank %d has %s = %s, rank 0 has %s; every rank "
                              "must use the same settings",
                              r, setting_name[k], a, b);
            goto out;
        }
    me = calloc((size_t)n, sizeof(*me));
    all = calloc((size_t)n * (size_t)d->nranks, sizeof(*all));
    if (!me || !all) {
        rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory");
        goto out;
    }
    ddp_fill_desc(d, me);
    rc = tutti_all_gather(me, all, (size_t)n * sizeof(*me), TUTTI_UINT8, d->comm, NULL);
    if (rc != TUTTI_SUCCESS) {
        ddp_fail(d, rc, "tutti_ddp_init: exchanging parameter and buffer shapes: %s",
                 tutti_comm_last_error(d->comm));
        goto out;
    }
    for (int r = 1; r < d->nranks; r++)
        for (int i = 0; i < n; i++) {
            const struct ddp_desc *x = &all[(size_t)r * (size_t)n + (size_t)i], *y = &all[i];
            int buffer = i >= d->nparams;
            if (memcmp(x, y, sizeof(*x)) == 0)
                continue;
            desc_str(x, a, sizeof(a));
            desc_str(y, b, sizeof(b));
            rc = ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                          "tutti_ddp_init: %s %d differs: rank %d registered %s, rank 0 "
                          "registered %s",
                          buffer ? "buffer" : "parameter", buffer ? i - d->nparams : i, r, a, b);
            goto out;
        }
out:
    free(settings);
    free(me);
    free(all);
    return rc;
}
