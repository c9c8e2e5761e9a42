/*
 * buckets.c -- DDP buckets: grouping parameters in a given order into buckets (the first one
 * first_bucket_mb, then bucket_cap_mb, as PyTorch does), their views or the staging buffer
 * the reduction runs on, each rank's owned range of a bucket (ZeRO), and copies between
 * the flat parameter space and the parameters. Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

float *ddp_bucket_data(const struct tutti_ddp *d, const struct ddp_bucket *b)
{
    return d->cfg.grad_as_bucket_view ? b->view : d->staging;
}

void ddp_free_buckets(struct ddp_bucket *bk, int n)
{
    for (int i = 0; i < n; i++)
        free(bk[i].params); /* (the views are one block: d->views) */
    free(bk);
}

static const double adapt_caps[DDP_ADAPT_N] = {0.25, 1, 4, 16, 64}; /* MiB */
#define ADAPT_TIMED DDP_ADAPT_TIMED /* steps timed per candidate, after one warm-up step */

int ddp_adapting(const struct tutti_ddp *d)
{
    return d->cfg.adaptive_buckets && d->adapt_cand < DDP_ADAPT_N;
}

/* Buckets again in the current order with bucket_cap_mb = cap. */
static tutti_result_t regroup(struct tutti_ddp *d, double cap)
{
    int *order = malloc((size_t)d->nparams * sizeof(int));
    tutti_result_t rc;

    if (!order)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "adaptive buckets: out of memory");
    memcpy(order, d->build_order, (size_t)d->nparams * sizeof(int));
    d->cfg.bucket_cap_mb = cap;
    rc = ddp_build_buckets(d, order);
    free(order);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * After a synchronised finish, between steps: the first call puts the first candidate in
 * place; each candidate then runs one warm-up step and ADAPT_TIMED timed ones (the exposed
 * seconds tutti_ddp_finish waited in each, their median kept: one slow step of a noisy host
 * does not decide); after the last, an all-reduce (max) of every rank's medians picks the
 * candidate whose slowest rank waited least, on every rank alike.
 */
tutti_result_t ddp_adapt_buckets(struct tutti_ddp *d)
{
    double all[DDP_ADAPT_N];
    char line[320];
    int best = 0, n = 0;
    tutti_result_t rc;

    if (!d->adapt_started) {
        d->adapt_started = 1;
        return regroup(d, adapt_caps[0]);
    }
    if (++d->adapt_steps > 1) /* (the first is the warm-up) */
        d->adapt_step_s[d->adapt_steps - 2] = d->exposed_s - d->adapt_t0;
    d->adapt_t0 = d->exposed_s;
    if (d->adapt_steps <= ADAPT_TIMED)
        return TUTTI_SUCCESS;
    qsort(d->adapt_step_s, ADAPT_TIMED, sizeof(double), cmp_double);
    d->adapt_exposed[d->adapt_cand] = d->adapt_step_s[ADAPT_TIMED / 2];
    d->adapt_steps = 0;
    if (++d->adapt_cand < DDP_ADAPT_N)
        return regroup(d, adapt_caps[d->adapt_cand]);
    rc = tutti_all_reduce(d->adapt_exposed, all, DDP_ADAPT_N, TUTTI_FLOAT64, TUTTI_MAX, d->comm,
                          NULL);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "adaptive buckets: agreeing on the choice: %s", tutti_last_error());
    for (int c = 0; c < DDP_ADAPT_N; c++) {
        if (all[c] < all[best])
            best = c;
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%g MiB %.3f ms", c ? ", " : "",
                      adapt_caps[c], all[c] * 1e3);
    }
    if (d->rank == 0)
        ddp_info(d,
                 "adaptive buckets: exposed communication per step (the slowest rank's): %s; "
                 "keeping %g MiB",
                 line, adapt_caps[best]);
    return regroup(d, adapt_caps[best]);
}

tutti_result_t ddp_build_buckets(struct tutti_ddp *d, const int *order)
{
    struct ddp_bucket *nb = calloc((size_t)d->nparams, sizeof(*nb));
    int n = 0, *bucket_of = malloc((size_t)d->nparams * sizeof(int));
    size_t cap_bytes = (size_t)(d->cfg.first_bucket_mb * 1048576.0), bytes = 0, most = 0, all = 0;
    float *views = NULL;
    void *views_win = NULL;

    if (!nb || !bucket_of)
        goto oom;
    /* Group in the given order; a bucket closes once it reaches its cap. */
    for (int k = 0; k < d->nparams; k++) {
        int i = order[k];
        bucket_of[i] = n;
        nb[n].nparams++;
        bytes += d->params[i].count * sizeof(float);
        if (bytes >= cap_bytes || k == d->nparams - 1) {
            n++;
            bytes = 0;
            cap_bytes = (size_t)(d->cfg.bucket_cap_mb * 1048576.0);
        }
    }
    for (int b = 0; b < n; b++) {
        nb[b].index = b;
        nb[b].owner = d;
        nb[b].params = malloc((size_t)nb[b].nparams * sizeof(int));
        if (!nb[b].params)
            goto oom;
        nb[b].nparams = 0;
    }
    for (int i = 0; i < d->nparams; i++) {
        struct ddp_bucket *b = &nb[bucket_of[i]];
        b->params[b->nparams++] = i; /* ascending: i grows */
    }
    for (int b = 0; b < n; b++) {
        qsort(nb[b].params, (size_t)nb[b].nparams, sizeof(int), cmp_int);
        nb[b].count = 0;
        for (int k = 0; k < nb[b].nparams; k++)
            nb[b].count += d->params[nb[b].params[k]].count;
        nb[b].pending = nb[b].nparams;
        most = nb[b].count > most ? nb[b].count : most;
        all += nb[b].count;
    }
    /* The views: one block, symmetric memory where the ranks share a host (alike on every
     * rank: the buckets are). */
    if (d->cfg.grad_as_bucket_view) {
        views = ddp_sym_alloc(d, all, &views_win);
        if (!views)
            goto oom;
        for (int b = 0, at = 0; b < n; at += (int)nb[b].count, b++)
            nb[b].view = views + at;
    }
    /* Move the gradients that live in the old views, then switch. */
    for (int b = 0; b < n; b++) {
        size_t off = 0;
        for (int k = 0; k < nb[b].nparams; k++) {
            struct ddp_param *p = &d->params[nb[b].params[k]];
            if (d->cfg.grad_as_bucket_view && d->buckets)
                memcpy(nb[b].view + off, d->buckets[p->bucket].view + p->bucket_off,
                       p->count * sizeof(float));
            off += p->count;
        }
    }
    for (int b = 0; b < n; b++) {
        size_t off = 0;
        for (int k = 0; k < nb[b].nparams; k++) {
            struct ddp_param *p = &d->params[nb[b].params[k]];
            p->bucket = b;
            p->bucket_off = off;
            off += p->count;
        }
    }
    if (!d->cfg.grad_as_bucket_view && d->cfg.zero != 3 && most > d->staging_count) {
        /* (alike on every rank: the buckets are; its values need not survive) */
        void *win;
        float *s = ddp_sym_alloc(d, most, &win);
        if (!s)
            goto oom;
        ddp_sym_free(d, d->staging, d->staging_win);
        d->staging = s;
        d->staging_win = win;
        d->staging_count = most;
    }
    ddp_free_buckets(d->buckets, d->nbuckets);
    if (d->cfg.grad_as_bucket_view) {
        ddp_sym_free(d, d->views, d->views_win);
        d->views = views;
        d->views_win = views_win;
    }
    d->buckets = nb;
    d->nbuckets = n;
    memcpy(d->build_order, order, (size_t)d->nparams * sizeof(int));
    free(bucket_of);
    return TUTTI_SUCCESS;
oom:
    if (nb)
        ddp_free_buckets(nb, d->nparams);
    if (views)
        ddp_sym_free(d, views, views_win);
    free(bucket_of);
    return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp: out of memory building buckets");
}

void ddp_owner_run(const struct tutti_ddp *d, const struct ddp_bucket *b, int r, size_t *lo,
                   size_t *hi)
{
    size_t olo, ohi, first = b->count, last = 0, off = 0, a, z;

    ddp_owned(d, r, &olo, &ohi);
    for (int k = 0; k < b->nparams; k++) {
        const struct ddp_param *p = &d->params[b->params[k]];
        if (ddp_param_part(p, olo, ohi, &a, &z)) {
            size_t s = off + (a - p->flat_off), e = off + (z - p->flat_off);
            first = s < first ? s : first;
            last = e > last ? e : last;
        }
        off += p->count;
    }
    *lo = first < last ? first : 0;
    *hi = first < last ? last : 0;
}

void ddp_flat_copy(const struct tutti_ddp *d, float *flat, size_t lo, size_t hi, int to_flat)
{
    if (d->cfg.zero == 3) {
        size_t a = lo > d->own_lo ? lo : d->own_lo, z = hi < d->own_hi ? hi : d->own_hi;
        if (a < z && to_flat)
            memcpy(flat + (a - lo), d->param_shard + (a - d->own_lo), (z - a) * sizeof(float));
        else if (a < z)
            memcpy(d->param_shard + (a - d->own_lo), flat + (a - lo), (z - a) * sizeof(float));
        return;
    }
    for (int i = 0; i < d->nparams; i++) {
        const struct ddp_param *p = &d->params[i];
        size_t a, z;
        if (!ddp_param_part(p, lo, hi, &a, &z))
            continue;
        if (to_flat)
            memcpy(flat + (a - lo), p->data + (a - p->flat_off), (z - a) * sizeof(float));
        else
            memcpy(p->data + (a - p->flat_off), flat + (a - lo), (z - a) * sizeof(float));
    }
}
