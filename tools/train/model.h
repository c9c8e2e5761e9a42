/*
 * model.h -- tutti-train's MLP under the DDP layer: building it (every rank's own initial
 * values, made rank 0's by tutti_ddp_init), where gradients go, ZeRO-3's layer gathers, the
 * parameter checksum and the memory breakdown.
 */
#ifndef TT_TRAIN_MODEL_H
#define TT_TRAIN_MODEL_H

#include "mlp.h"
#include "options.h"
#include "tutti.h"
#include "tutti_ddp.h"

#include <stdint.h>

struct model {
    struct mlp m;
    tutti_ddp_t ddp;
    tutti_comm_t comm;
    int rank, nranks;
    int zero3;   /* --zero 3: layers are gathered for use (use_layer) */
    int elastic; /* --elastic: a failed call marks `lost` instead of ending the process */
    int lost;    /* a rank was lost during this micro-batch (model_ready saw it fail) */
};

/* The MLP and its DDP context over comm (which outlives it), max_batch samples a pass. */
void model_build(struct model *md, const struct opts *o, tutti_comm_t comm, int max_batch);

/* mlp_backward's callback: parameter index's gradient is final. */
void model_ready(void *arg, int index);

/* The MLP's gradient pointers at the DDP layer's (they move when buckets are rebuilt). */
void model_point_grads(struct model *md);

/* --zero 3: the whole model gathered (on) for checksums, or released (collective). */
void model_whole(struct model *md, int on);

/* FNV-1a of every parameter's bytes; *sum: their sum. */
uint64_t model_hash(struct model *md, double *sum);

/* The memory line of this rank. */
void model_print_memory(struct model *md, const struct opts *o);

#endif
