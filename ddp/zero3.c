/*
 * zero3.c -- ZeRO stage 3: the parameters sharded too.
 *
 * With zero 3 a rank keeps only its own part of the flat space (ddp_int.h), [own_lo, own_hi),
 * of each of the three: parameter values (param_shard), reduced gradients (shard_grad) and
 * optimizer state. Whole parameters exist only between tutti_ddp_gather and
 * tutti_ddp_release: the gather copies each owner's run of the range into one block by one
 * group of broadcasts (an all-gather over the flat ownership), once every rank has agreed on
 * the range (agree(): a mismatch or a refusal fails them all) and after everything queued on the
 * ddp's stream has run (the reductions must go first on the communicator anyway; waiting for
 * the host functions after them too frees their gradient buffers first); the release frees the
 * block. Gradients live in buffers allocated when the application first asks for one in a
 * step (tutti_ddp_grad) and freed once reduced: each parameter's runs are reduced onto their
 * owners straight from its buffer (no bucket copy), and the owner keeps its run in shard_grad.
 * tutti_ddp_step then updates param_shard from shard_grad; nothing is all-gathered after it
 * (the next gather reads the shards). Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ddp_arena {
    float *base;
    void *win;
    size_t len; /* floats */
    pthread_mutex_t lock;
    struct {
        size_t off, len; /* floats, 16-aligned offsets (64 bytes) */
    } * live;
    int nlive, cap;
};

/* The gradient window (ddp_zero3_init, every rank alike): the largest parameter's gradient
 * and a bucket cap beside it (one bucket reducing while the next fills). */
static tutti_result_t arena_init(struct tutti_ddp *d)
{
    struct ddp_arena *a;
    size_t len = 0;

    if (!d->sym_hosts)
        return TUTTI_SUCCESS;
    for (int i = 0; i < d->nparams; i++)
        len = d->params[i].count > len ? d->params[i].count : len;
    len += (size_t)(d->cfg.bucket_cap_mb * 1048576.0) / sizeof(float);
    a = calloc(1, sizeof(*a));
    if (a && (a->live = calloc((size_t)d->nparams, sizeof(*a->live))) != NULL)
        a->base = ddp_sym_alloc(d, len, &a->win); /* (collective: every rank gets here) */
    if (!a || !a->base) {
        if (a)
            free(a->live);
        free(a);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory");
    }
    a->cap = d->nparams;
    a->len = len;
    pthread_mutex_init(&a->lock, NULL);
    d->garena = a;
    return TUTTI_SUCCESS;
}

/* count zeroed floats from the window, or NULL where they do not fit. */
static float *arena_take(struct ddp_arena *a, size_t count)
{
    size_t need = (count + 15) & ~(size_t)15, at = 0;
    float *p = NULL;
    int k;

    if (!a || !a->win)
        return NULL;
    pthread_mutex_lock(&a->lock);
    for (k = 0; k <= a->nlive && a->nlive < a->cap; k++) {
        size_t end = k < a->nlive ? a->live[k].off : a->len;
        if (end >= at && end - at >= need) {
            memmove(&a->live[k + 1], &a->live[k], (size_t)(a->nlive - k) * sizeof(a->live[0]));
            a->live[k].off = at;
            a->live[k].len = need;
            a->nlive++;
            p = a->base + at;
            break;
        }
        if (k < a->nlive)
            at = a->live[k].off + a->live[k].len;
    }
    pthread_mutex_unlock(&a->lock);
    if (p)
        memset(p, 0, count * sizeof(float));
    return p;
}

/* Free a gradient buffer: back to the window, or to the heap it came from. */
static void grad_free(struct tutti_ddp *d, float *p)
{
    struct ddp_arena *a = d->garena;

    if (!a || !a->win || p < a->base || p >= a->base + a->len) {
        free(p);
        return;
    }
    pthread_mutex_lock(&a->lock);
    for (int k = 0; k < a->nlive; k++)
        if (a->base + a->live[k].off == p) {
            memmove(&a->live[k], &a->live[k + 1], (size_t)(a->nlive - k - 1) * sizeof(a->live[0]));
            a->nlive--;
            break;
        }
    pthread_mutex_unlock(&a->lock);
}

size_t ddp_zero3_arena_bytes(const struct tutti_ddp *d)
{
    return d->garena ? d->garena->len * sizeof(float) : 0;
}

struct ddp_unit {
    int first, count;
    float *block;
    size_t bytes;
};

static void count_grad(struct tutti_ddp *d, size_t bytes, int add)
{
    if (!add) {
        __atomic_sub_fetch(&d->grad_bytes, bytes, __ATOMIC_RELAXED);
        return;
    }
    size_t now = __atomic_add_fetch(&d->grad_bytes, bytes, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&d->grad_peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&d->grad_peak, &peak, now, 0,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

tutti_result_t ddp_zero3_init(struct tutti_ddp *d)
{
    d->param_shard = calloc(d->shard ? d->shard : 1, sizeof(float));
    if (!d->param_shard)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory for the shard");
    for (int i = 0; i < d->nparams; i++) {
        struct ddp_param *p = &d->params[i];
        size_t a, z;
        if (ddp_param_part(p, d->own_lo, d->own_hi, &a, &z))
            memcpy(d->param_shard + (a - d->own_lo), p->data + (a - p->flat_off),
                   (z - a) * sizeof(float));
        p->data = NULL; /* the application's copy is not read again: it may free it */
        p->grad = NULL;
    }
    return arena_init(d);
}

void ddp_zero3_free(struct tutti_ddp *d)
{
    if (d->cfg.zero != 3) /* (the gradients are the application's) */
        return;
    for (int u = 0; u < d->nunits; u++)
        free(d->units[u].block);
    free(d->units);
    for (int i = 0; i < d->nparams; i++)
        grad_free(d, d->params[i].grad);
    free(d->param_shard);
    if (d->garena) {
        ddp_sym_free(d, d->garena->base, d->garena->win);
        pthread_mutex_destroy(&d->garena->lock);
        free(d->garena->live);
        free(d->garena);
        d->garena = NULL;
    }
}

static tutti_result_t range_ok(struct tutti_ddp *d, const char *fn, int first, int count)
{
    if (first < 0 || count < 1 || first > d->nparams - count)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "%s: parameters %d..%d are not registered ones (0..%d)", fn, first,
                        first + count - 1, d->nparams - 1);
    return TUTTI_SUCCESS;
}

/*
 * Every rank's gather agrees before a byte moves (one small all-reduce): the same range, and no
 * rank refusing (rc: this rank's refusal, its message already set). Otherwise every rank fails
 * naming why, and the ddp stays usable: no broadcast ran. Ranks asking for different ranges
 * would pair broadcasts of different runs, which can match in size and mix values.
 */
static tutti_result_t agree(struct tutti_ddp *d, int first, int count, tutti_result_t rc)
{
    int64_t v[5] = {first, -(int64_t)first, count, -(int64_t)count, rc != TUTTI_SUCCESS}, m[5];
    tutti_result_t arc = tutti_all_reduce(v, m, 5, TUTTI_INT64, TUTTI_MAX, d->comm, NULL);

    if (arc != TUTTI_SUCCESS) {
        ddp_fail(d, arc, "tutti_ddp_gather: agreeing on the range: %s",
                 tutti_comm_last_error(d->comm));
        return ddp_break_step(d, arc);
    }
    if (rc != TUTTI_SUCCESS)
        return rc;
    if (m[4])
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_gather: another rank refused this gather of parameters "
                        "%d..%d (its message says why)",
                        first, first + count - 1);
    if (m[0] != -m[1] || m[2] != -m[3])
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_gather: the ranks asked for different ranges (parameters "
                        "%d..%d here); every rank must gather the same ranges in the same order",
                        first, first + count - 1);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_gather(tutti_ddp_t d, int first, int count)
{
    struct ddp_unit *u;
    size_t lo = 0, hi = 0;
    float *block = NULL;
    tutti_result_t rc, end;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_gather"));
    rc = range_ok(d, "tutti_ddp_gather", first, count);
    if (d->cfg.zero != 3)
        return rc; /* every rank holds every parameter */
    for (int i = first; rc == TUTTI_SUCCESS && i < first + count; i++)
        if (d->params[i].full)
            rc = ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                          "tutti_ddp_gather: parameter %d '%s' is gathered already (release "
                          "it first; every rank must gather the same ranges in the same order)",
                          i, d->params[i].name);
    if (rc == TUTTI_SUCCESS && d->nunits == d->units_cap) {
        int cap = d->units_cap ? 2 * d->units_cap : 8;
        u = realloc(d->units, (size_t)cap * sizeof(*u));
        if (u) {
            d->units = u;
            d->units_cap = cap;
        } else {
            rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_gather: out of memory");
        }
    }
    if (rc == TUTTI_SUCCESS) {
        lo = d->params[first].flat_off;
        hi = d->params[first + count - 1].flat_off + d->params[first + count - 1].count;
        block = malloc((hi - lo) * sizeof(float));
        if (!block)
            rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_gather: out of memory for %zu values",
                          hi - lo);
    }
    /* The buckets queued so far reduced and their gradient buffers freed first (the broadcasts
     * would wait for their reductions anyway): what the next layer allocates does not pile up
     * on top of them. */
    end = tutti_stream_sync(d->stream);
    if (end != TUTTI_SUCCESS) {
        free(block);
        ddp_fail(d, end, "tutti_ddp_gather: a bucket reduction failed: %s",
                 tutti_stream_last_error(d->stream));
        return ddp_break_step(d, end);
    }
    rc = agree(d, first, count, rc);
    if (rc != TUTTI_SUCCESS) {
        free(block);
        return rc;
    }
    rc = tutti_group_start();
    for (int r = 0; r < d->nranks && rc == TUTTI_SUCCESS; r++) {
        size_t olo, ohi;
        ddp_owned(d, r, &olo, &ohi);
        size_t a = lo > olo ? lo : olo, z = hi < ohi ? hi : ohi;
        if (a >= z)
            continue;
        if (r == d->rank)
            memcpy(block + (a - lo), d->param_shard + (a - d->own_lo), (z - a) * sizeof(float));
        rc = tutti_broadcast(block + (a - lo), block + (a - lo), z - a, TUTTI_FLOAT32, r, d->comm,
                             NULL);
    }
    end = tutti_group_end();
    if (rc == TUTTI_SUCCESS)
        rc = end;
    if (rc != TUTTI_SUCCESS) {
        free(block);
        ddp_fail(d, rc, "tutti_ddp_gather: parameters %d..%d from their owners: %s", first,
                 first + count - 1, tutti_last_error());
        return ddp_break_step(d, rc);
    }
    u = &d->units[d->nunits++];
    u->first = first;
    u->count = count;
    u->block = block;
    u->bytes = (hi - lo) * sizeof(float);
    for (int i = first; i < first + count; i++)
        d->params[i].full = block + (d->params[i].flat_off - lo);
    d->gathered_bytes += u->bytes;
    if (d->gathered_bytes > d->gathered_peak)
        d->gathered_peak = d->gathered_bytes;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_release(tutti_ddp_t d, int first, int count)
{
    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_release"));
    TUTTI_DDP_CHECK(range_ok(d, "tutti_ddp_release", first, count));
    if (d->cfg.zero != 3)
        return TUTTI_SUCCESS;
    for (int k = 0; k < d->nunits; k++) {
        struct ddp_unit *u = &d->units[k];
        if (u->first != first || u->count != count)
            continue;
        for (int i = first; i < first + count; i++)
            d->params[i].full = NULL;
        d->gathered_bytes -= u->bytes;
        free(u->block);
        *u = d->units[--d->nunits];
        return TUTTI_SUCCESS;
    }
    return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                    "tutti_ddp_release: parameters %d..%d were not gathered as one range by "
                    "tutti_ddp_gather",
                    first, first + count - 1);
}

float *tutti_ddp_param(tutti_ddp_t d, int index)
{
    if (!d || !d->initialized || index < 0 || index >= d->nparams)
        return NULL;
    return d->cfg.zero == 3 ? d->params[index].full : d->params[index].data;
}

float *ddp_zero3_grad(struct tutti_ddp *d, struct ddp_param *p)
{
    if (!p->grad) {
        p->grad = arena_take(d->garena, p->count);
        if (!p->grad)
            p->grad = calloc(p->count, sizeof(float));
        if (p->grad)
            count_grad(d, p->count * sizeof(float), 1);
    }
    return p->grad;
}

#define Q(call)                                                                                    \
    do {                                                                                           \
        tutti_result_t q_rc_ = (call);                                                             \
        if (q_rc_ != TUTTI_SUCCESS)                                                                \
            return ddp_fail(d, q_rc_, "bucket %d (zero 3): %s", b->index, tutti_last_error());     \
    } while (0)

/* Each parameter's gradient, run by run, reduced onto the run's owner (the mean, or with
 * tutti_ddp_set_batch the weighted sum): a reduce-scatter over the flat ownership. */
tutti_result_t ddp_zero3_queue(struct tutti_ddp *d, struct ddp_bucket *b)
{
    tutti_op_t op = d->weighted ? d->weight_op : TUTTI_AVG;

    for (int k = 0; k < b->nparams; k++) {
        struct ddp_param *p = &d->params[b->params[k]];
        if (!ddp_zero3_grad(d, p)) /* (a parameter nobody asked the gradient of: zeros) */
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "bucket %d: out of memory for '%s''s gradient",
                            b->index, p->name);
        for (int r = 0; r < d->nranks; r++) {
            size_t olo, ohi, a, z;
            ddp_owned(d, r, &olo, &ohi);
            if (ddp_param_part(p, olo, ohi, &a, &z))
                Q(tutti_reduce(p->grad + (a - p->flat_off), p->grad + (a - p->flat_off), z - a,
                               TUTTI_FLOAT32, op, r, d->comm, d->stream));
        }
    }
    return TUTTI_SUCCESS;
}

/* On the stream, once the bucket's reductions ran: this rank's runs into shard_grad, and the
 * gradient buffers freed (the application asks for new ones next step). */
void ddp_zero3_end(struct tutti_ddp *d, struct ddp_bucket *b)
{
    for (int k = 0; k < b->nparams; k++) {
        struct ddp_param *p = &d->params[b->params[k]];
        size_t a, z;
        if (ddp_param_part(p, d->own_lo, d->own_hi, &a, &z))
            memcpy(d->shard_grad + (a - d->own_lo), p->grad + (a - p->flat_off),
                   (z - a) * sizeof(float));
        grad_free(d, p->grad);
        p->grad = NULL;
        count_grad(d, p->count * sizeof(float), 0);
    }
}
