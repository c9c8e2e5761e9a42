/* mlp.c -- see mlp.h. */
#include "mlp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float bound)
{
    double u = (double)(next_u64(s) >> 11) / 9007199254740992.0;
    return (float)((2 * u - 1) * bound);
}

int mlp_init(struct mlp *m, int inputs, int hidden, int hidden_layers, int classes, int max_batch,
             uint64_t seed)
{
    size_t grads = 0, maxw = 0;
    float *g;

    memset(m, 0, sizeof(*m));
    if (hidden_layers < 0 || hidden_layers + 1 > MLP_MAX_LAYERS)
        return -1;
    m->nlayers = hidden_layers + 1;
    m->dims[0] = inputs;
    for (int l = 1; l <= hidden_layers; l++)
        m->dims[l] = hidden;
    m->dims[m->nlayers] = classes;
    m->max_batch = max_batch;
    for (int l = 0; l < m->nlayers; l++) {
        size_t in = (size_t)m->dims[l], out = (size_t)m->dims[l + 1];
        float bound = 1.0f / sqrtf((float)in);
        m->W[l] = malloc(out * in * sizeof(float));
        m->b[l] = malloc(out * sizeof(float));
        if (!m->W[l] || !m->b[l])
            return -1;
        for (size_t j = 0; j < out * in; j++)
            m->W[l][j] = uniform(&seed, bound);
        for (size_t j = 0; j < out; j++)
            m->b[l][j] = uniform(&seed, bound);
        grads += out * in + out;
        m->param_bytes += (out * in + out) * sizeof(float);
    }
    m->own_grads = g = calloc(grads, sizeof(float));
    if (!g)
        return -1;
    for (int l = 0; l < m->nlayers; l++) {
        size_t in = (size_t)m->dims[l], out = (size_t)m->dims[l + 1];
        m->gW[l] = g;
        g += out * in;
        m->gb[l] = g;
        g += out;
    }
    for (int l = 0; l <= m->nlayers; l++) {
        m->act[l] = malloc((size_t)max_batch * (size_t)m->dims[l] * sizeof(float));
        if (!m->act[l])
            return -1;
        m->act_bytes += (size_t)max_batch * (size_t)m->dims[l] * sizeof(float);
        maxw = (size_t)m->dims[l] > maxw ? (size_t)m->dims[l] : maxw;
    }
    m->d0 = malloc((size_t)max_batch * maxw * sizeof(float));
    m->d1 = malloc((size_t)max_batch * maxw * sizeof(float));
    m->act_bytes += 2 * (size_t)max_batch * maxw * sizeof(float);
    return m->d0 && m->d1 ? 0 : -1;
}

void mlp_free(struct mlp *m)
{
    for (int l = 0; l < m->nlayers; l++) {
        free(m->W[l]);
        free(m->b[l]);
    }
    for (int l = 0; l <= m->nlayers; l++)
        free(m->act[l]);
    free(m->own_grads);
    free(m->d0);
    free(m->d1);
    memset(m, 0, sizeof(*m));
}

int mlp_nparams(const struct mlp *m)
{
    return 2 * m->nlayers;
}

size_t mlp_param_count(const struct mlp *m, int index)
{
    int l = index / 2;
    return index % 2 ? (size_t)m->dims[l + 1] : (size_t)m->dims[l + 1] * (size_t)m->dims[l];
}

float *mlp_param(struct mlp *m, int index)
{
    return index % 2 ? m->b[index / 2] : m->W[index / 2];
}

void mlp_forward(struct mlp *m, const float *x, size_t dim, const uint32_t *idx, int B)
{
    for (int i = 0; i < B; i++)
        memcpy(m->act[0] + (size_t)i * dim, x + (size_t)idx[i] * dim, dim * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        float *z = m->act[l + 1];
        if (m->use)
            m->use(m->use_arg, l, 1);
        /* Z = X W^T, then bias and (except on the last layer) ReLU in one pass. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, m->act[l], in,
                    m->W[l], in, 0.0f, z, out);
        for (int i = 0; i < B; i++) {
            float *row = z + (size_t)i * (size_t)out;
            const float *bias = m->b[l];
            if (l + 1 < m->nlayers)
                for (int j = 0; j < out; j++) {
                    float v = row[j] + bias[j];
                    row[j] = v > 0 ? v : 0;
                }
            else
                for (int j = 0; j < out; j++)
                    row[j] += bias[j];
        }
        if (m->use)
            m->use(m->use_arg, l, 0);
    }
}

double mlp_backward(struct mlp *m, const uint8_t *labels, const uint32_t *idx, int B, float scale,
                    int accumulate, void (*ready)(void *arg, int index), void *arg)
{
    int L = m->nlayers, classes = m->dims[L];
    const float *logits = m->act[L];
    float *dz = m->d0, *dnext = m->d1, beta = accumulate ? 1.0f : 0.0f;
    double loss = 0;

    /* Softmax cross-entropy: d loss_i / d z = softmax(z) - onehot(y). */
    for (int i = 0; i < B; i++) {
        const float *z = logits + (size_t)i * (size_t)classes;
        float *g = dz + (size_t)i * (size_t)classes, mx = z[0];
        double sum = 0;
        int y = labels[idx[i]];
        for (int j = 1; j < classes; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < classes; j++) {
            g[j] = expf(z[j] - mx);
            sum += g[j];
        }
        loss += log(sum) + mx - z[y];
        for (int j = 0; j < classes; j++)
            g[j] = (float)(g[j] / sum) * scale;
        g[y] -= scale;
    }
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], out = m->dims[l + 1];
        if (m->use)
            m->use(m->use_arg, l, 2);
        /* Weight gradient first, so its reduction can start while the rest runs. */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, dz, out, m->act[l],
                    in, beta, m->gW[l], in);
        if (!accumulate)
            memset(m->gb[l], 0, (size_t)out * sizeof(float));
        for (int i = 0; i < B; i++) {
            const float *row = dz + (size_t)i * (size_t)out;
            for (int j = 0; j < out; j++)
                m->gb[l][j] += row[j];
        }
        if (ready) {
            ready(arg, 2 * l + 1);
            ready(arg, 2 * l);
        }
        if (l == 0) {
            if (m->use)
                m->use(m->use_arg, l, 0);
            break;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, dz, out, m->W[l],
                    in, 0.0f, dnext, in);
        if (m->use)
            m->use(m->use_arg, l, 0);
        for (size_t j = 0; j < (size_t)B * (size_t)in; j++)
            dnext[j] = m->act[l][j] > 0 ? dnext[j] : 0;
        float *t = dz;
        dz = dnext;
        dnext = t;
    }
    return loss / B;
}

int mlp_correct(struct mlp *m, const float *x, size_t dim, const uint8_t *labels,
                const uint32_t *idx, int B)
{
    int ok = 0, classes = m->dims[m->nlayers];

    mlp_forward(m, x, dim, idx, B);
    for (int i = 0; i < B; i++) {
        const float *z = m->act[m->nlayers] + (size_t)i * (size_t)classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            best = z[j] > z[best] ? j : best;
        ok += best == labels[idx[i]];
    }
    return ok;
}
