/*
 * mlp.h -- a multi-layer perceptron: Linear, ReLU, ..., Linear, softmax cross-entropy, with
 * its GEMMs in BLAS (cblas_sgemm, row-major). Parameters in forward order: W0, b0, W1, b1, ...
 * (parameter 2l is layer l's weight, out x in; 2l + 1 its bias).
 */
#ifndef TRAIN_MLP_H
#define TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

#define MLP_MAX_LAYERS 16

struct mlp {
    int nlayers;                  /* linear layers */
    int dims[MLP_MAX_LAYERS + 1]; /* dims[0] inputs ... dims[nlayers] classes */
    float *W[MLP_MAX_LAYERS], *b[MLP_MAX_LAYERS];
    float *gW[MLP_MAX_LAYERS], *gb[MLP_MAX_LAYERS]; /* where gradients go (may be re-pointed) */
    float *own_grads;                               /* the gradient buffers mlp_init allocated */
    int max_batch;
    float *act[MLP_MAX_LAYERS + 1]; /* act[0]: the input batch; act[l]: layer l-1's output */
    float *d0, *d1;                 /* backward scratch */
    size_t param_bytes, act_bytes;
    /* When set: called before layer l's W and b are read (on = 1 in forward, 2 in backward,
     * where gW and gb are written next) and after the last read (on = 0). ZeRO-3 gathers and
     * releases the layer there. */
    void (*use)(void *arg, int layer, int on);
    void *use_arg;
};

/* hidden layers of `hidden` units; weights and biases U(-1/sqrt(in), 1/sqrt(in)) from seed. */
int mlp_init(struct mlp *m, int inputs, int hidden, int hidden_layers, int classes, int max_batch,
             uint64_t seed);
void mlp_free(struct mlp *m);

size_t mlp_param_count(const struct mlp *m, int index);
int mlp_nparams(const struct mlp *m);
float *mlp_param(struct mlp *m, int index);

/* Gather rows idx[0..B) of x (dim columns) into the input batch and run the layers. */
void mlp_forward(struct mlp *m, const float *x, size_t dim, const uint32_t *idx, int B);

/*
 * Loss of the batch (mean over its B samples) and the backward pass: gradients of
 * scale * (sum of per-sample losses) are written (accumulate: added) into gW/gb; `ready(arg,
 * index)` is called as soon as parameter index's gradient is final.
 */
double mlp_backward(struct mlp *m, const uint8_t *labels, const uint32_t *idx, int B, float scale,
                    int accumulate, void (*ready)(void *arg, int index), void *arg);

/* How many of rows idx[0..B) the current weights classify correctly (runs forward). */
int mlp_correct(struct mlp *m, const float *x, size_t dim, const uint8_t *labels,
                const uint32_t *idx, int B);

#endif
