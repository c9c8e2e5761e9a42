/*
 * hooks.c -- how a bucket is reduced: plain all-reduce, float16 / bfloat16 compression, int8
 * quantisation and top-k sparsification with error feedback, PowerSGD (its arithmetic in
 * powersgd.c), or the user's hook.
 *
 * Each hook queues, on the ddp's stream, host functions that transform the bucket and the
 * collectives between them; everything for one bucket runs in order on the stream's worker
 * while the application's thread goes on with backward. Buffers are sized once for the
 * largest bucket: the stream runs one bucket at a time, so they are never shared.
 *
 * Averaging: every builtin hook leaves the mean over ranks in the bucket. Error-feedback
 * residuals live in the flat space (ddp_int.h), on the scale of the mean, per rank.
 * Summation order is the same on every rank (all-gathered parts are added in rank order),
 * so every rank ends with bitwise the same gradients.
 */
#include "ddp_half.h"
#include "hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define INT8_BLOCK 256

static tutti_result_t half_pack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    const float *data = ddp_bucket_data(d, b);
    float inv = 1.0f / (float)d->nranks;
    uint16_t *h = d->hook->half;

    ddp_half_pack(h, data, b->count, inv, d->cfg.hook == TUTTI_DDP_HOOK_BF16);
    return TUTTI_SUCCESS;
}

static tutti_result_t half_unpack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    float *data = ddp_bucket_data(d, b);
    const uint16_t *h = d->hook->half;

    ddp_half_unpack(data, h, b->count, d->cfg.hook == TUTTI_DDP_HOOK_BF16);
    return TUTTI_SUCCESS;
}

/* x = data / n + residual, in bucket order (the residual follows each parameter's run). */
void ddp_add_residual(struct tutti_ddp *d, const struct ddp_bucket *b, const float *data, float *x)
{
    float inv = 1.0f / (float)d->nranks;
    size_t off = 0;

    for (int k = 0; k < b->nparams; k++) {
        const struct ddp_param *p = &d->params[b->params[k]];
        const float *e = d->hook->ef + p->flat_off;
        for (size_t j = 0; j < p->count; j++)
            x[off + j] = data[off + j] * inv + e[j];
        off += p->count;
    }
}

/* residual = x - sent, where sent[j] is what went out for x[j]. */
static void keep_residual(struct tutti_ddp *d, const struct ddp_bucket *b, const float *x,
                          const float *sent)
{
    size_t off = 0;

    for (int k = 0; k < b->nparams; k++) {
        const struct ddp_param *p = &d->params[b->params[k]];
        float *e = d->hook->ef + p->flat_off;
        for (size_t j = 0; j < p->count; j++)
            e[j] = x[off + j] - sent[off + j];
        off += p->count;
    }
}

/* ---- int8: blocks of 256 values, one float32 scale each ---- */

static size_t int8_bytes(size_t count)
{
    size_t nb = (count + INT8_BLOCK - 1) / INT8_BLOCK;
    return (nb * sizeof(float) + count + 7) & ~(size_t)7;
}

static tutti_result_t int8_pack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    float *x = h->x, *deq = (float *)ddp_bucket_data(d, b); /* reused: the input is in x */
    size_t nb = (b->count + INT8_BLOCK - 1) / INT8_BLOCK;
    float *scales = (float *)h->send;
    int8_t *q = (int8_t *)(h->send + nb * sizeof(float));

    ddp_add_residual(d, b, ddp_bucket_data(d, b), x);
    for (size_t blk = 0; blk < nb; blk++) {
        size_t lo = blk * INT8_BLOCK, hi = lo + INT8_BLOCK < b->count ? lo + INT8_BLOCK : b->count;
        float most = 0, s, inv;
        for (size_t j = lo; j < hi; j++)
            most = fabsf(x[j]) > most ? fabsf(x[j]) : most;
        s = most / 127.0f;
        inv = s > 0 ? 1.0f / s : 0;
        scales[blk] = s;
        for (size_t j = lo; j < hi; j++) {
            long v = lrintf(x[j] * inv);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q[j] = (int8_t)v;
            deq[j] = (float)v * s;
        }
    }
    keep_residual(d, b, x, deq);
    return TUTTI_SUCCESS;
}

static tutti_result_t int8_unpack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    float *data = ddp_bucket_data(d, b);
    size_t nb = (b->count + INT8_BLOCK - 1) / INT8_BLOCK, part = int8_bytes(b->count);

    memset(data, 0, b->count * sizeof(float));
    for (int r = 0; r < d->nranks; r++) {
        const unsigned char *base = h->recv + (size_t)r * part;
        const float *scales = (const float *)base;
        const int8_t *q = (const int8_t *)(base + nb * sizeof(float));
        for (size_t j = 0; j < b->count; j++)
            data[j] += (float)q[j] * scales[j / INT8_BLOCK];
    }
    return TUTTI_SUCCESS;
}

/* ---- top-k ---- */

struct pair {
    uint32_t index;
    float value;
};

static size_t topk_k(const struct tutti_ddp *d, size_t count)
{
    size_t k = (size_t)ceil(d->cfg.topk_ratio * (double)count);
    return k < 1 ? 1 : k > count ? count : k;
}

/* The k-th largest of v[0..n), 1 <= k <= n (v is reordered): three-way quickselect. */
static float kth_largest(float *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n, want = k - 1;

    while (hi - lo > 1) {
        float pivot = v[lo + (hi - lo) / 2], t;
        size_t lt = lo, i = lo, gt = hi;
        /* [lo, lt) > pivot, [lt, i) == pivot, [gt, hi) < pivot */
        while (i < gt) {
            if (v[i] > pivot) {
                t = v[lt], v[lt] = v[i], v[i] = t;
                lt++, i++;
            } else if (v[i] < pivot) {
                gt--;
                t = v[gt], v[gt] = v[i], v[i] = t;
            } else {
                i++;
            }
        }
        if (want < lt)
            hi = lt;
        else if (want >= gt)
            lo = gt;
        else
            return pivot;
    }
    return v[lo];
}

static tutti_result_t topk_pack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    float *x = h->x, *sent = ddp_bucket_data(d, b), *mag;
    size_t k = topk_k(d, b->count), n = 0;
    struct pair *out = (struct pair *)h->send;
    float thr;

    ddp_add_residual(d, b, sent, x);
    mag = (float *)h->recv; /* scratch until the all-gather fills it */
    for (size_t j = 0; j < b->count; j++)
        mag[j] = fabsf(x[j]);
    thr = kth_largest(mag, b->count, k);
    /* Strictly above the threshold first, then ties, up to k. */
    for (size_t j = 0; j < b->count && n < k; j++)
        if (fabsf(x[j]) > thr)
            out[n++] = (struct pair){(uint32_t)j, x[j]};
    for (size_t j = 0; j < b->count && n < k; j++)
        if (fabsf(x[j]) == thr)
            out[n++] = (struct pair){(uint32_t)j, x[j]};
    memset(sent, 0, b->count * sizeof(float));
    for (size_t i = 0; i < n; i++)
        sent[out[i].index] = out[i].value;
    keep_residual(d, b, x, sent);
    return TUTTI_SUCCESS;
}

static tutti_result_t topk_unpack(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    float *data = ddp_bucket_data(d, b);
    size_t k = topk_k(d, b->count);
    const struct pair *all = (const struct pair *)d->hook->recv;

    memset(data, 0, b->count * sizeof(float));
    for (int r = 0; r < d->nranks; r++)
        for (size_t i = 0; i < k; i++) {
            const struct pair *p = &all[(size_t)r * k + i];
            if (p->index < b->count)
                data[p->index] += p->value;
        }
    return TUTTI_SUCCESS;
}

/* ---- setup ---- */

/* splitmix64 -> a normal deviate (Box-Muller): the same factors on every rank. */
static double seeded_normal(uint64_t *s)
{
    double u[2];
    for (int t = 0; t < 2; t++) {
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        u[t] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static void *alloc_bytes(struct ddp_hook_state *h, size_t bytes)
{
    h->bytes += bytes;
    return calloc(1, bytes ? bytes : 1);
}

tutti_result_t ddp_hook_init(struct tutti_ddp *d)
{
    struct ddp_hook_state *h = calloc(1, sizeof(*h));
    size_t most = 0, n = (size_t)d->nranks;
    int fail = 0;

    if (!h)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory");
    d->hook = h;
    /* Sized for a bucket as large as the whole model: rebuilding may regroup anything. */
    most = d->total;
    switch (d->cfg.hook) {
    case TUTTI_DDP_HOOK_FP16:
    case TUTTI_DDP_HOOK_BF16:
        h->half = alloc_bytes(h, most * sizeof(uint16_t));
        fail = !h->half;
        break;
    case TUTTI_DDP_HOOK_INT8:
        h->ef = alloc_bytes(h, d->total * sizeof(float));
        h->x = alloc_bytes(h, most * sizeof(float));
        h->send_max = int8_bytes(most);
        h->send = alloc_bytes(h, h->send_max);
        h->recv = alloc_bytes(h, h->send_max * n);
        fail = !h->ef || !h->x || !h->send || !h->recv;
        break;
    case TUTTI_DDP_HOOK_TOPK: {
        size_t kmax = topk_k(d, most);
        h->ef = alloc_bytes(h, d->total * sizeof(float));
        h->x = alloc_bytes(h, most * sizeof(float));
        h->send_max = kmax * sizeof(struct pair);
        h->send = alloc_bytes(h, h->send_max);
        /* Also the magnitude scratch of topk_pack. */
        h->recv = alloc_bytes(h, h->send_max * n > most * sizeof(float) ? h->send_max * n
                                                                        : most * sizeof(float));
        fail = !h->ef || !h->x || !h->send || !h->recv;
        break;
    }
    case TUTTI_DDP_HOOK_POWERSGD: {
        uint64_t seed = d->cfg.seed;
        h->ef = alloc_bytes(h, d->total * sizeof(float));
        h->x = alloc_bytes(h, most * sizeof(float));
        h->qt = calloc((size_t)d->nparams, sizeof(float *));
        h->rk = calloc((size_t)d->nparams, sizeof(int));
        fail = !h->ef || !h->x || !h->qt || !h->rk;
        for (int i = 0; i < d->nparams && !fail; i++) {
            size_t rows, cols;
            int r = ddp_psgd_rank(d, &d->params[i], &rows, &cols);
            h->rk[i] = r;
            if (r) {
                h->qt[i] = alloc_bytes(h, (size_t)r * cols * sizeof(float));
                fail = !h->qt[i];
                for (size_t j = 0; !fail && j < (size_t)r * cols; j++)
                    h->qt[i][j] = (float)seeded_normal(&seed);
                h->pmax += rows * (size_t)r;
                h->qmax += cols * (size_t)r;
            } else {
                h->vmax += d->params[i].count;
            }
        }
        if (!fail) {
            h->pbuf = alloc_bytes(h, h->pmax * sizeof(float));
            h->qbuf = alloc_bytes(h, h->qmax * sizeof(float));
            h->vbuf = alloc_bytes(h, h->vmax * sizeof(float));
            fail = !h->pbuf || !h->qbuf || !h->vbuf;
        }
        break;
    }
    default: break;
    }
    if (fail)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_init: out of memory for the %s hook",
                        tutti_ddp_hook_name(d->cfg.hook));
    return TUTTI_SUCCESS;
}

void ddp_hook_free(struct tutti_ddp *d)
{
    struct ddp_hook_state *h = d->hook;

    if (!h)
        return;
    for (int i = 0; h->qt && i < d->nparams; i++)
        free(h->qt[i]);
    free(h->qt);
    free(h->rk);
    free(h->ef);
    free(h->half);
    free(h->x);
    free(h->send);
    free(h->recv);
    free(h->pbuf);
    free(h->qbuf);
    free(h->vbuf);
    free(h);
    d->hook = NULL;
}

size_t ddp_hook_bytes(const struct tutti_ddp *d)
{
    return d->hook ? d->hook->bytes : 0;
}

size_t ddp_hook_state_size(const struct tutti_ddp *d)
{
    return d->hook && d->hook->ef ? d->total * sizeof(float) : 0;
}

void *ddp_hook_state_ptr(const struct tutti_ddp *d)
{
    return d->hook ? d->hook->ef : NULL;
}

size_t ddp_hook_shared_size(const struct tutti_ddp *d)
{
    size_t n = 0;
    const struct ddp_hook_state *h = d->hook;

    for (int i = 0; h && h->qt && i < d->nparams; i++)
        if (h->rk[i])
            n += (size_t)h->rk[i] * (d->params[i].count / d->params[i].shape[0]) * sizeof(float);
    return n;
}

void ddp_hook_shared_copy(struct tutti_ddp *d, unsigned char *buf, int save)
{
    struct ddp_hook_state *h = d->hook;

    for (int i = 0; h && h->qt && i < d->nparams; i++)
        if (h->rk[i]) {
            size_t bytes =
                (size_t)h->rk[i] * (d->params[i].count / d->params[i].shape[0]) * sizeof(float);
            if (save)
                memcpy(buf, h->qt[i], bytes);
            else
                memcpy(h->qt[i], buf, bytes);
            buf += bytes;
        }
}

/* ---- queueing ---- */

#define Q(call)                                                                                    \
    do {                                                                                           \
        tutti_result_t q_rc_ = (call);                                                             \
        if (q_rc_ != TUTTI_SUCCESS)                                                                \
            return ddp_fail(d, q_rc_, "bucket %d (%s hook): %s", b->index,                         \
                            tutti_ddp_hook_name(d->cfg.hook), tutti_last_error());                 \
    } while (0)

tutti_result_t ddp_hook_queue(struct tutti_ddp *d, struct ddp_bucket *b)
{
    struct ddp_hook_state *h = d->hook;
    tutti_stream_t s = d->stream;
    float *data = ddp_bucket_data(d, b);

    switch (d->cfg.hook) {
    case TUTTI_DDP_HOOK_NONE: {
        /* the mean, or with tutti_ddp_set_batch the weighted sum */
        tutti_op_t op = d->weighted ? d->weight_op : TUTTI_AVG;
        if (d->cfg.zero == 2) {
            /* Each owner gets the mean of its run (reduce-scatter over the flat ownership). */
            for (int r = 0; r < d->nranks; r++) {
                size_t lo, hi;
                ddp_owner_run(d, b, r, &lo, &hi);
                if (lo < hi)
                    Q(tutti_reduce(data + lo, data + lo, hi - lo, TUTTI_FLOAT32, op, r, d->comm,
                                   s));
            }
            return TUTTI_SUCCESS;
        }
        Q(tutti_all_reduce(data, data, b->count, TUTTI_FLOAT32, op, d->comm, s));
        return TUTTI_SUCCESS;
    }
    case TUTTI_DDP_HOOK_FP16:
    case TUTTI_DDP_HOOK_BF16:
        Q(tutti_stream_launch(s, half_pack, b));
        Q(tutti_all_reduce(h->half, h->half, b->count,
                           d->cfg.hook == TUTTI_DDP_HOOK_FP16 ? TUTTI_FLOAT16 : TUTTI_BFLOAT16,
                           TUTTI_SUM, d->comm, s));
        Q(tutti_stream_launch(s, half_unpack, b));
        return TUTTI_SUCCESS;
    case TUTTI_DDP_HOOK_INT8:
        Q(tutti_stream_launch(s, int8_pack, b));
        Q(tutti_all_gather(h->send, h->recv, int8_bytes(b->count), TUTTI_UINT8, d->comm, s));
        Q(tutti_stream_launch(s, int8_unpack, b));
        return TUTTI_SUCCESS;
    case TUTTI_DDP_HOOK_TOPK:
        Q(tutti_stream_launch(s, topk_pack, b));
        Q(tutti_all_gather(h->send, h->recv, topk_k(d, b->count) * sizeof(struct pair), TUTTI_UINT8,
                           d->comm, s));
        Q(tutti_stream_launch(s, topk_unpack, b));
        return TUTTI_SUCCESS;
    case TUTTI_DDP_HOOK_POWERSGD: {
        size_t np, nq, nv;
        ddp_psgd_sizes(d, b, &np, &nq, &nv);
        Q(tutti_stream_launch(s, ddp_psgd_a, b));
        if (np)
            Q(tutti_all_reduce(h->pbuf, h->pbuf, np, TUTTI_FLOAT32, TUTTI_SUM, d->comm, s));
        if (nv)
            Q(tutti_all_reduce(h->vbuf, h->vbuf, nv, TUTTI_FLOAT32, TUTTI_SUM, d->comm, s));
        if (np) {
            Q(tutti_stream_launch(s, ddp_psgd_b, b));
            Q(tutti_all_reduce(h->qbuf, h->qbuf, nq, TUTTI_FLOAT32, TUTTI_SUM, d->comm, s));
        }
        Q(tutti_stream_launch(s, ddp_psgd_c, b));
        return TUTTI_SUCCESS;
    }
    case TUTTI_DDP_HOOK_USER: {
        tutti_ddp_bucket_t desc = {b->index, data, b->count, b->nparams, b->params, d->steps};
        tutti_result_t rc = d->cfg.user_hook(d->cfg.user_state, &desc, d->comm, s);
        if (rc != TUTTI_SUCCESS)
            return ddp_fail(d, rc, "bucket %d: the user hook failed: %s", b->index,
                            tutti_last_error());
        return TUTTI_SUCCESS;
    }
    default: break;
    }
    return ddp_fail(d, TUTTI_ERR_INTERNAL, "bucket %d: unknown hook %d", b->index,
                    (int)d->cfg.hook);
}
