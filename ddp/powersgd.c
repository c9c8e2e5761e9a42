/*
 * powersgd.c -- the PowerSGD hook's arithmetic (hooks.c queues it): each matrix-shaped
 * gradient M (with its error feedback) is sent as two thin factors, P = M Q and Q = M^T P
 * after P is orthonormalised, all-reduced in turn; vectors are sent whole. Q is kept per
 * parameter as the next step's warm start.
 */
#include "hooks.h"

#include <math.h>
#include <string.h>

/* rows x cols of a parameter seen as a matrix, and the rank used (0: send it whole). */
int ddp_psgd_rank(const struct tutti_ddp *d, const struct ddp_param *p, size_t *rows, size_t *cols)
{
    size_t r = (size_t)d->cfg.powersgd_rank;

    *rows = p->shape[0];
    *cols = p->count / p->shape[0];
    if (p->ndim < 2 || *rows < 2 || *cols < 2)
        return 0;
    r = r < *rows ? r : *rows;
    r = r < *cols ? r : *cols;
    if (r * (*rows + *cols) >= p->count)
        return 0;
    return (int)r;
}

/* Sizes of a bucket's packed P, Q and vector parts. */
void ddp_psgd_sizes(const struct tutti_ddp *d, const struct ddp_bucket *b, size_t *np, size_t *nq,
                    size_t *nv)
{
    *np = *nq = *nv = 0;
    for (int k = 0; k < b->nparams; k++) {
        const struct ddp_param *p = &d->params[b->params[k]];
        size_t rows = 1, cols = 1;
        int r = d->hook->rk[b->params[k]];
        if (r) {
            rows = p->shape[0];
            cols = p->count / rows;
            *np += rows * (size_t)r;
            *nq += cols * (size_t)r;
        } else {
            *nv += p->count;
        }
    }
}

static float dot(const float *a, const float *b, size_t n)
{
    float s[8] = {0};
    size_t j = 0;

    for (; j + 8 <= n; j += 8)
        for (int t = 0; t < 8; t++)
            s[t] += a[j + (size_t)t] * b[j + (size_t)t];
    for (; j < n; j++)
        s[0] += a[j] * b[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* M (in the bucket) = data / n + residual; P = M Q; vectors copied out as they are. */
tutti_result_t ddp_psgd_a(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    float *data = ddp_bucket_data(d, b), inv = 1.0f / (float)d->nranks;
    size_t off = 0, po = 0, vo = 0;

    ddp_add_residual(d, b, data, h->x); /* x = M for every parameter */
    for (int k = 0; k < b->nparams; k++) {
        int i = b->params[k], r = h->rk[i];
        const struct ddp_param *p = &d->params[i];
        const float *m = h->x + off;
        if (r) {
            size_t rows = p->shape[0], cols = p->count / rows;
            for (size_t a = 0; a < rows; a++)
                for (int c = 0; c < r; c++)
                    h->pbuf[po + a * (size_t)r + (size_t)c] =
                        dot(m + a * cols, h->qt[i] + (size_t)c * cols, cols);
            po += rows * (size_t)r;
        } else {
            for (size_t j = 0; j < p->count; j++)
                h->vbuf[vo + j] = data[off + j] * inv; /* vectors: no residual, plain mean */
            vo += p->count;
        }
        off += p->count;
    }
    return TUTTI_SUCCESS;
}

/* Orthonormalise the columns of P (rows x r, row-major); Q^T = P^T M. */
tutti_result_t ddp_psgd_b(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    size_t off = 0, po = 0, qo = 0;

    for (int k = 0; k < b->nparams; k++) {
        int i = b->params[k], r = h->rk[i];
        const struct ddp_param *p = &d->params[i];
        if (r) {
            size_t rows = p->shape[0], cols = p->count / rows;
            float *pm = h->pbuf + po, *qt = h->qbuf + qo;
            const float *m = h->x + off;
            for (int c = 0; c < r; c++) {
                double norm = 0;
                for (int e = 0; e < c; e++) {
                    double proj = 0;
                    for (size_t a = 0; a < rows; a++)
                        proj +=
                            (double)pm[a * (size_t)r + (size_t)c] * pm[a * (size_t)r + (size_t)e];
                    for (size_t a = 0; a < rows; a++)
                        pm[a * (size_t)r + (size_t)c] -=
                            (float)proj * pm[a * (size_t)r + (size_t)e];
                }
                for (size_t a = 0; a < rows; a++)
                    norm += (double)pm[a * (size_t)r + (size_t)c] * pm[a * (size_t)r + (size_t)c];
                norm = sqrt(norm) + 1e-8;
                for (size_t a = 0; a < rows; a++)
                    pm[a * (size_t)r + (size_t)c] = (float)(pm[a * (size_t)r + (size_t)c] / norm);
            }
            memset(qt, 0, (size_t)r * cols * sizeof(float));
            for (size_t a = 0; a < rows; a++)
                for (int c = 0; c < r; c++) {
                    float s = pm[a * (size_t)r + (size_t)c];
                    float *row = qt + (size_t)c * cols;
                    const float *mr = m + a * cols;
                    for (size_t j = 0; j < cols; j++)
                        row[j] += s * mr[j];
                }
            po += rows * (size_t)r;
            qo += cols * (size_t)r;
        }
        off += p->count;
    }
    return TUTTI_SUCCESS;
}

/* The mean is approximated by P Q^T; residual = M - that / n; Q kept as the next warm start. */
tutti_result_t ddp_psgd_c(void *arg)
{
    struct ddp_bucket *b = arg;
    struct tutti_ddp *d = b->owner;
    struct ddp_hook_state *h = d->hook;
    float *data = ddp_bucket_data(d, b), inv = 1.0f / (float)d->nranks;
    size_t off = 0, po = 0, qo = 0, vo = 0;

    for (int k = 0; k < b->nparams; k++) {
        int i = b->params[k], r = h->rk[i];
        const struct ddp_param *p = &d->params[i];
        if (r) {
            size_t rows = p->shape[0], cols = p->count / rows;
            const float *pm = h->pbuf + po, *qt = h->qbuf + qo, *m = h->x + off;
            float *e = h->ef + p->flat_off;
            for (size_t a = 0; a < rows; a++) {
                float *out = data + off + a * cols;
                memset(out, 0, cols * sizeof(float));
                for (int c = 0; c < r; c++) {
                    float s = pm[a * (size_t)r + (size_t)c];
                    const float *row = qt + (size_t)c * cols;
                    for (size_t j = 0; j < cols; j++)
                        out[j] += s * row[j];
                }
                for (size_t j = 0; j < cols; j++)
                    e[a * cols + j] = m[a * cols + j] - out[j] * inv;
            }
            memcpy(h->qt[i], qt, (size_t)r * cols * sizeof(float));
            po += rows * (size_t)r;
            qo += cols * (size_t)r;
        } else {
            memcpy(data + off, h->vbuf + vo, p->count * sizeof(float));
            vo += p->count;
        }
        off += p->count;
    }
    return TUTTI_SUCCESS;
}
