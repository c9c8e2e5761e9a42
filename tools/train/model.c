/* model.c -- see model.h. */
#include "model.h"
#include "elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

void model_ready(void *arg, int index)
{
    struct model *md = arg;
    tutti_result_t rc;

    if (md->lost) /* (the rest of this backward pass only computes) */
        return;
    rc = tutti_ddp_grad_ready(md->ddp, index);
    if (rc == TUTTI_SUCCESS)
        return;
    if (md->elastic && elastic_failure(rc)) { /* a bucket's reduction failed: a rank was lost */
        md->lost = 1;
        return;
    }
    die("%s", tutti_ddp_last_error(md->ddp));
}

void model_point_grads(struct model *md)
{
    if (md->zero3) /* (asked for layer by layer in backward: use_layer) */
        return;
    for (int l = 0; l < md->m.nlayers; l++) {
        md->m.gW[l] = tutti_ddp_grad(md->ddp, 2 * l);
        md->m.gb[l] = tutti_ddp_grad(md->ddp, 2 * l + 1);
    }
}

/* --zero 3: layer l gathered before its forward (on 1) and backward (on 2, with its gradient
 * buffers), released after (on 0). Collective: every rank runs the same passes. */
static void use_layer(void *arg, int l, int on)
{
    struct model *md = arg;

    if (!on) {
        if (tutti_ddp_release(md->ddp, 2 * l, 2) != TUTTI_SUCCESS)
            die("%s", tutti_ddp_last_error(md->ddp));
        md->m.W[l] = md->m.b[l] = NULL;
        return;
    }
    if (tutti_ddp_gather(md->ddp, 2 * l, 2) != TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
    md->m.W[l] = tutti_ddp_param(md->ddp, 2 * l);
    md->m.b[l] = tutti_ddp_param(md->ddp, 2 * l + 1);
    if (on == 2) {
        md->m.gW[l] = tutti_ddp_grad(md->ddp, 2 * l);
        md->m.gb[l] = tutti_ddp_grad(md->ddp, 2 * l + 1);
        if (!md->m.gW[l] || !md->m.gb[l])
            die("--zero 3: no gradient buffer for layer %d: %s", l + 1,
                tutti_ddp_last_error(md->ddp));
    }
}

/* --zero 3: the whole model gathered (on) for evaluation and checksums, or released. */
void model_whole(struct model *md, int on)
{
    if (!md->zero3)
        return;
    if ((on ? tutti_ddp_gather : tutti_ddp_release)(md->ddp, 0, mlp_nparams(&md->m)) !=
        TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
    for (int l = 0; l < md->m.nlayers; l++) {
        md->m.W[l] = on ? tutti_ddp_param(md->ddp, 2 * l) : NULL;
        md->m.b[l] = on ? tutti_ddp_param(md->ddp, 2 * l + 1) : NULL;
    }
    md->m.use = on ? NULL : use_layer;
}

void model_build(struct model *md, const struct opts *o, tutti_comm_t comm, int max_batch)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    char name[64];

    md->comm = comm;
    md->elastic = md->lost = 0;
    tutti_comm_rank(comm, &md->rank);
    tutti_comm_size(comm, &md->nranks);
    /* Different seeds per rank on purpose: tutti_ddp_init must make them agree. */
    if (mlp_init(&md->m, 784, o->hidden, o->layers, 10, max_batch,
                 o->seed + 7919ull * (unsigned long long)md->rank) != 0)
        die("out of memory for the model");
    cfg.bucket_cap_mb = o->bucket_mb;
    cfg.adaptive_buckets = o->adaptive_buckets;
    cfg.overlap = o->overlap;
    cfg.grad_as_bucket_view = o->views;
    cfg.hook = o->hook;
    cfg.zero = o->zero;
    cfg.optim = o->optim;
    cfg.lr = o->lr;
    cfg.momentum = o->optim == TUTTI_DDP_OPTIM_SGD ? o->momentum : 0;
    cfg.eps = o->eps;
    cfg.seed = o->seed;
    cfg.find_unused = o->find_unused;
    if (tutti_ddp_create(&md->ddp, comm, &cfg) != TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
    for (int i = 0; i < mlp_nparams(&md->m); i++) {
        int l = i / 2;
        size_t shape[2] = {(size_t)md->m.dims[l + 1], (size_t)md->m.dims[l]};
        snprintf(name, sizeof(name), "fc%d.%s", l + 1, i % 2 ? "bias" : "weight");
        if (tutti_ddp_register(md->ddp, name, mlp_param(&md->m, i),
                               i % 2 ? md->m.gb[l] : md->m.gW[l], mlp_param_count(&md->m, i),
                               i % 2 ? 1 : 2, shape, NULL) != TUTTI_SUCCESS)
            die("%s", tutti_ddp_last_error(md->ddp));
    }
    if (tutti_ddp_init(md->ddp) != TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
    if (o->views) { /* the gradients live in the buckets: the model's own buffers go */
        free(md->m.own_grads);
        md->m.own_grads = NULL;
        model_point_grads(md);
    }
    md->zero3 = o->zero == 3;
    if (md->zero3) { /* each rank keeps its shard: the model's own copies go */
        for (int l = 0; l < md->m.nlayers; l++) {
            free(md->m.W[l]);
            free(md->m.b[l]);
            md->m.W[l] = md->m.b[l] = md->m.gW[l] = md->m.gb[l] = NULL;
        }
        free(md->m.own_grads);
        md->m.own_grads = NULL;
        md->m.use = use_layer;
        md->m.use_arg = md;
    }
}

uint64_t model_hash(struct model *md, double *sum)
{
    uint64_t h = 0xcbf29ce484222325ull;
    *sum = 0;
    for (int i = 0; i < mlp_nparams(&md->m); i++) {
        const float *p = mlp_param(&md->m, i);
        const unsigned char *b = (const unsigned char *)p;
        for (size_t j = 0; j < mlp_param_count(&md->m, i); j++)
            *sum += p[j];
        for (size_t j = 0; j < mlp_param_count(&md->m, i) * sizeof(float); j++)
            h = (h ^ b[j]) * 0x100000001b3ull;
    }
    return h;
}

void model_print_memory(struct model *md, const struct opts *o)
{
    tutti_ddp_stats_t st;
    struct rusage ru;
    double mb = 1048576.0, grads;

    tutti_ddp_stats(md->ddp, &st);
    getrusage(RUSAGE_SELF, &ru);
    if (md->zero3) { /* what a rank keeps, and the most it held whole at once */
        printf("memory (rank %d, MiB): parameters %.2f of %.2f (its shard; at most %.2f gathered "
               "at once), gradients %.2f (its shard; at most %.2f in buffers at once, cut from "
               "a window of %.2f), optimizer state %.2f, activations %.1f, peak RSS %.1f\n",
               md->rank, (double)st.param_bytes / mb, (double)md->m.param_bytes / mb,
               (double)st.gathered_peak_bytes / mb, (double)st.shard_bytes / mb,
               (double)st.grad_peak_bytes / mb, (double)st.bucket_bytes / mb,
               (double)st.optim_bytes / mb, (double)md->m.act_bytes / mb,
               (double)ru.ru_maxrss / 1024.0);
        return;
    }
    /* With views the gradients are the buckets; otherwise the model's own buffers. */
    grads = o->views ? (double)st.bucket_bytes : (double)md->m.param_bytes;
    printf("memory (rank %d, MiB): parameters %.1f, gradients %.1f, optimizer state %.1f, "
           "activations %.1f, communication buffers %.1f, peak RSS %.1f\n",
           md->rank, (double)md->m.param_bytes / mb, grads / mb, (double)st.optim_bytes / mb,
           (double)md->m.act_bytes / mb,
           ((o->views ? 0 : (double)st.bucket_bytes) + (double)st.hook_bytes +
            (double)st.shard_bytes) /
               mb,
           (double)ru.ru_maxrss / 1024.0);
}
