/*
 * ddp.c -- the DDP context: parameter registration (checked across ranks: check_ranks.c),
 * the per-step readiness bookkeeping that queues bucket reductions in bucket order,
 * rebuilding buckets from the observed order (buckets themselves: buckets.c), finish,
 * no_sync, unused parameters; uneven inputs: join.c. Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tutti_result_t check_config(struct tutti_ddp *d, const tutti_ddp_config_t *c)
{
    if (c->size < sizeof(size_t) || c->size > sizeof(*c))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: config->size is %zu; initialise with "
                        "TUTTI_DDP_CONFIG_INIT",
                        c->size);
    if (!(c->bucket_cap_mb > 0) || !(c->first_bucket_mb > 0))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: bucket_cap_mb (%g) and first_bucket_mb (%g) must be > 0",
                        c->bucket_cap_mb, c->first_bucket_mb);
    if ((unsigned)c->hook >= TUTTI_DDP_NUM_HOOKS)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_create: hook %d is not a hook",
                        (int)c->hook);
    if (c->hook == TUTTI_DDP_HOOK_USER && !c->user_hook)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: hook is TUTTI_DDP_HOOK_USER but user_hook is NULL");
    if (c->hook == TUTTI_DDP_HOOK_TOPK && !(c->topk_ratio > 0 && c->topk_ratio <= 1))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: topk_ratio %g is not in (0, 1]", c->topk_ratio);
    if (c->hook == TUTTI_DDP_HOOK_POWERSGD && (c->powersgd_rank < 1 || c->powersgd_rank > 64))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: powersgd_rank %d is not in [1, 64]", c->powersgd_rank);
    if (c->zero < 0 || c->zero > 3)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: zero is %d; must be 0, 1, 2 or 3", c->zero);
    if (c->zero >= 2 && c->hook != TUTTI_DDP_HOOK_NONE)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: zero %d reduce-scatters gradients; it does not combine "
                        "with the %s hook",
                        c->zero, tutti_ddp_hook_name(c->hook));
    if (c->zero == 3 && c->grad_as_bucket_view)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_create: zero 3 keeps no whole gradients between steps; "
                        "grad_as_bucket_view (buckets holding every gradient) does not combine "
                        "with it");
    if (c->zero == 3 && c->size > offsetof(tutti_ddp_config_t, uneven_inputs) && c->uneven_inputs)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_create: zero 3 does not combine with uneven_inputs (a joined "
                        "rank could not take part in the others' gathers)");
    if (c->zero > 0 && c->optim == TUTTI_DDP_OPTIM_NONE)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: zero %d shards the optimizer; set optim (SGD or Adam)",
                        c->zero);
    if ((unsigned)c->optim > TUTTI_DDP_OPTIM_ADAM)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_create: optim %d is not an optimizer",
                        (int)c->optim);
    if (c->size > offsetof(tutti_ddp_config_t, adaptive_buckets) && c->adaptive_buckets != 0 &&
        c->adaptive_buckets != 1)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: adaptive_buckets is %d; must be 0 or 1",
                        c->adaptive_buckets);
    if (c->size > offsetof(tutti_ddp_config_t, adaptive_buckets) && c->adaptive_buckets &&
        c->uneven_inputs)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_create: adaptive_buckets does not combine with "
                        "uneven_inputs (a joined rank could not take part in the choice)");
    if (c->size > offsetof(tutti_ddp_config_t, uneven_inputs) && c->uneven_inputs != 0 &&
        c->uneven_inputs != 1)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: uneven_inputs is %d; must be 0 or 1", c->uneven_inputs);
    if (c->size > offsetof(tutti_ddp_config_t, overlap) && (c->overlap < -1 || c->overlap > 1))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: overlap is %d; must be -1 (auto), 0 or 1", c->overlap);
    if (c->optim != TUTTI_DDP_OPTIM_NONE && !(c->lr >= 0))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_create: lr %g must be >= 0", c->lr);
    if (c->optim == TUTTI_DDP_OPTIM_ADAM &&
        !(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps > 0))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_create: Adam needs 0 <= beta1, beta2 < 1 and eps > 0 (got %g, "
                        "%g, %g)",
                        c->beta1, c->beta2, c->eps);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_create(tutti_ddp_t *out, tutti_comm_t comm,
                                const tutti_ddp_config_t *config)
{
    tutti_ddp_config_t defaults = TUTTI_DDP_CONFIG_INIT;
    struct tutti_ddp *d;
    tutti_result_t rc;

    if (!out)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_ddp_create: ddp is NULL");
    *out = NULL;
    d = calloc(1, sizeof(*d));
    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_ddp_create: out of memory");
    d->rank = -1;
    rc = tutti_comm_rank(comm, &d->rank);
    if (rc == TUTTI_SUCCESS)
        rc = tutti_comm_size(comm, &d->nranks);
    if (rc != TUTTI_SUCCESS) {
        ddp_fail(d, rc, "tutti_ddp_create: comm: %s", tutti_last_error());
        free(d);
        return rc;
    }
    d->comm = comm;
    d->last_active = -1;
    d->weight = 1.0 / (double)d->nranks;
    d->cfg = defaults;
    if (config) {
        rc = check_config(d, config);
        if (rc != TUTTI_SUCCESS) {
            free(d);
            return rc;
        }
        memcpy(&d->cfg, config, config->size);
        d->cfg.size = sizeof(d->cfg);
    }
    *out = d;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_register(tutti_ddp_t d, const char *name, float *data, float *grad,
                                  size_t count, int ndim, const size_t *shape, int *index)
{
    struct ddp_param *p;
    size_t prod = 1;

    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_ddp_register: ddp is NULL");
    if (d->initialized)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register: parameters are registered before tutti_ddp_init");
    if (!name || !name[0])
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_register: name is empty");
    if (count == 0 || !data)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register: parameter '%s': data is NULL or count is 0", name);
    if (!grad && !d->cfg.grad_as_bucket_view && d->cfg.zero != 3)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register: parameter '%s': grad is NULL (allowed only with "
                        "grad_as_bucket_view or zero 3)",
                        name);
    if (ndim < 1 || ndim > DDP_MAX_DIMS || !shape)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register: parameter '%s': ndim %d is not in [1, %d] (or shape "
                        "is NULL)",
                        name, ndim, DDP_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        prod *= shape[i];
    if (prod != count)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register: parameter '%s': its shape holds %zu values, count "
                        "says %zu",
                        name, prod, count);
    if (d->nparams == d->params_cap) {
        int cap = d->params_cap ? 2 * d->params_cap : 16;
        struct ddp_param *g = realloc(d->params, (size_t)cap * sizeof(*g));
        if (!g)
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_register: out of memory");
        d->params = g;
        d->params_cap = cap;
    }
    p = &d->params[d->nparams];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->data = data;
    p->grad = d->cfg.grad_as_bucket_view ? NULL : grad;
    p->count = count;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof(*shape));
    p->flat_off = d->total;
    d->total += count;
    if (index)
        *index = d->nparams;
    d->nparams++;
    return TUTTI_SUCCESS;
}

tutti_result_t ddp_broadcast_model(struct tutti_ddp *d, int root, const char *fn)
{
    for (int i = 0; i < d->nparams; i++) {
        tutti_result_t rc = tutti_broadcast(d->params[i].data, d->params[i].data,
                                            d->params[i].count, TUTTI_FLOAT32, root, d->comm, NULL);
        if (rc != TUTTI_SUCCESS)
            return ddp_fail(d, rc, "%s: broadcasting '%s' from rank %d: %s", fn, d->params[i].name,
                            root, tutti_comm_last_error(d->comm));
    }
    return ddp_broadcast_buffers(d, root, fn);
}

/* What tutti_ddp_init makes over d->comm once the parameters are registered (collective: the
 * ranks' check, rank 0's model everywhere, bucket and optimizer memory in windows);
 * tutti_ddp_recover and tutti_ddp_grow make it again over a new communicator. */
tutti_result_t ddp_setup(struct tutti_ddp *d, const char *fn)
{
    int *order;
    tutti_result_t rc;

    TUTTI_DDP_CHECK(ddp_check_ranks(d));
    TUTTI_DDP_CHECK(ddp_sym_hosts(d, fn));
    d->buffer_flat = malloc(d->buffer_total ? d->buffer_total * sizeof(float) : 1);
    if (!d->buffer_flat)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
    TUTTI_DDP_CHECK(ddp_broadcast_model(d, 0, fn));
    d->shard = (d->total + (size_t)d->nranks - 1) / (size_t)d->nranks;
    ddp_owned(d, d->rank, &d->own_lo, &d->own_hi);
    order = malloc((size_t)d->nparams * sizeof(int));
    d->ready_order = malloc((size_t)d->nparams * sizeof(int));
    d->build_order = malloc((size_t)d->nparams * sizeof(int));
    if (!order || !d->ready_order || !d->build_order) {
        free(order);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
    }
    for (int k = 0; k < d->nparams; k++)
        order[k] = d->nparams - 1 - k; /* reverse registration order */
    rc = ddp_build_buckets(d, order);
    free(order);
    TUTTI_DDP_CHECK(rc);
    if (d->cfg.zero >= 2) {
        d->shard_grad = calloc(d->shard ? d->shard : 1, sizeof(float));
        if (!d->shard_grad)
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
    }
    if (d->cfg.zero == 3)
        TUTTI_DDP_CHECK(ddp_zero3_init(d));
    TUTTI_DDP_CHECK(ddp_hook_init(d));
    TUTTI_DDP_CHECK(ddp_optim_init(d));
    rc = tutti_stream_create(&d->stream);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "%s: %s", fn, tutti_last_error());
    d->overlap = d->cfg.overlap;
    if (d->cfg.zero == 3) {
        d->overlap = 1;
    } else if (d->overlap < 0) {
        /* A rank's reduction thread needs a core beside its compute, or every exchange of a
         * reduction waits for the scheduler while backward runs (BENCHMARKS.md, "Overlap
         * without a spare core"). */
        cpu_set_t set;
        int local = 1, cpus = 0;
        tutti_comm_local_size(d->comm, &local);
        if (sched_getaffinity(0, sizeof(set), &set) == 0)
            cpus = CPU_COUNT(&set);
        d->overlap = !(cpus > 0 && 2 * local > cpus);
        ddp_info(d, "overlap %s: %d rank(s) on this host, %d CPU(s) this process may use%s",
                 d->overlap ? "on" : "off", local, cpus,
                 d->overlap ? "" : ": buckets are reduced in tutti_ddp_finish");
    }
    d->initialized = 1;
    return TUTTI_SUCCESS;
}

/* Free what ddp_setup made (on the communicator it made it on), and forget the steps'
 * bookkeeping: the registrations stay. */
void ddp_teardown(struct tutti_ddp *d)
{
    if (d->stream)
        tutti_stream_destroy(d->stream);
    d->stream = NULL;
    if (d->weighted)
        tutti_op_destroy(d->weight_op, d->comm);
    d->weighted = 0;
    ddp_hook_free(d);
    ddp_optim_free(d);
    ddp_zero3_free(d);
    ddp_free_buckets(d->buckets, d->nbuckets);
    ddp_sym_free(d, d->views, d->views_win);
    ddp_sym_free(d, d->staging, d->staging_win);
    free(d->shard_grad);
    free(d->ready_order);
    free(d->build_order);
    free(d->buffer_flat);
    d->buckets = NULL;
    d->nbuckets = 0;
    d->views = d->staging = d->shard_grad = d->buffer_flat = NULL;
    d->views_win = d->staging_win = NULL;
    d->ready_order = d->build_order = NULL;
    d->initialized = d->broken = d->in_step = d->no_sync = 0;
    d->next_launch = d->nready = d->rebuilt = 0;
    d->adapt_cand = d->adapt_steps = d->adapt_started = 0;
    d->joining = 0;
    d->last_active = -1;
    for (int i = 0; i < d->nparams; i++)
        d->params[i].ready = d->params[i].zero_fill = 0;
}

tutti_result_t tutti_ddp_init(tutti_ddp_t d)
{
    int members = 0;

    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_ddp_init: ddp is NULL");
    if (d->initialized)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_init: called twice");
    if (d->nparams == 0)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_init: no parameter is registered");
    TUTTI_DDP_CHECK(ddp_setup(d, "tutti_ddp_init"));
    /* A newcomer (its communicator came from tutti_comm_join): the members are in
     * tutti_ddp_grow, which hands over the optimizer state next. */
    if (tutti_comm_joined(d->comm, &members) == TUTTI_SUCCESS && members > 0 && d->rank >= members)
        return ddp_optim_restore(d, NULL, "tutti_ddp_init");
    return TUTTI_SUCCESS;
}

static tutti_result_t begin_step(struct tutti_ddp *d)
{
    tutti_result_t rc;

    if (d->in_step)
        return TUTTI_SUCCESS;
    d->in_step = 1;
    if (!d->cfg.uneven_inputs || d->joining)
        return TUTTI_SUCCESS;
    rc = ddp_join_round(d, d->rank + 1);
    return rc == TUTTI_SUCCESS ? rc : ddp_break_step(d, rc);
}

/* Queue every bucket that is complete and whose predecessors are queued. */
static tutti_result_t launch_ready(struct tutti_ddp *d)
{
    while (d->next_launch < d->nbuckets && d->buckets[d->next_launch].pending == 0) {
        d->err[0] = 0;
        TUTTI_DDP_CHECK(ddp_launch(d, &d->buckets[d->next_launch]));
        d->next_launch++;
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_grad_ready(tutti_ddp_t d, int index)
{
    struct ddp_param *p;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_grad_ready"));
    if (index < 0 || index >= d->nparams)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_grad_ready: index %d is not a registered parameter (0..%d)",
                        index, d->nparams - 1);
    p = &d->params[index];
    if (p->ready)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_grad_ready: parameter %d '%s' was already marked ready in this "
                        "step",
                        index, p->name);
    p->ready = 1;
    if (d->no_sync)
        return TUTTI_SUCCESS;
    TUTTI_DDP_CHECK(begin_step(d));
    if (!d->rebuilt && d->steps == 0)
        d->ready_order[d->nready++] = index;
    d->buckets[p->bucket].pending--;
    return d->overlap ? launch_ready(d) : TUTTI_SUCCESS; /* (without: in finish) */
}

static void end_step(struct tutti_ddp *d)
{
    for (int i = 0; i < d->nparams; i++) {
        d->params[i].ready = 0;
        d->params[i].zero_fill = 0;
    }
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].pending = d->buckets[b].nparams;
        d->buckets[b].launched = 0;
    }
    d->next_launch = 0;
    d->in_step = 0;
}

/* After the first synchronised step: buckets in the order gradients became ready on rank 0. */
static tutti_result_t rebuild(struct tutti_ddp *d)
{
    int *order = malloc((size_t)d->nparams * sizeof(int)), *seen, n = d->nready, same = 1;
    tutti_result_t rc;

    seen = calloc((size_t)d->nparams, sizeof(int));
    if (!order || !seen) {
        free(order);
        free(seen);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_finish: out of memory");
    }
    memcpy(order, d->ready_order, (size_t)n * sizeof(int));
    for (int k = 0; k < n; k++)
        seen[order[k]] = 1;
    for (int i = d->nparams - 1; i >= 0; i--) /* the unused ones last, as at first */
        if (!seen[i])
            order[n++] = i;
    free(seen);
    rc = tutti_broadcast(order, order, (size_t)d->nparams, TUTTI_INT32, 0, d->comm, NULL);
    if (rc != TUTTI_SUCCESS) {
        free(order);
        return ddp_fail(d, rc, "tutti_ddp_finish: broadcasting the bucket order: %s",
                        tutti_comm_last_error(d->comm));
    }
    for (int k = 0; k < d->nparams; k++)
        same &= order[k] == d->nparams - 1 - k;
    rc = same ? TUTTI_SUCCESS : ddp_build_buckets(d, order);
    free(order);
    d->rebuilt = 1;
    return rc;
}

tutti_result_t tutti_ddp_finish(tutti_ddp_t d)
{
    char names[400];
    int unused = 0, n = 0;
    double t0;
    tutti_result_t rc;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_finish"));
    if (d->no_sync) {
        end_step(d);
        return TUTTI_SUCCESS;
    }
    names[0] = 0;
    for (int i = 0; i < d->nparams; i++)
        if (!d->params[i].ready) {
            if (unused++ < 6)
                n += snprintf(names + n, sizeof(names) - (size_t)n, "%s'%s' (%d)",
                              unused > 1 ? ", " : "", d->params[i].name, i);
        }
    if (unused && !d->cfg.find_unused && !d->joining) {
        ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                 "tutti_ddp_finish: %d parameter(s) got no gradient in this step: %s%s; mark "
                 "them with tutti_ddp_grad_ready, or set find_unused to count them as zero. The "
                 "communicator was aborted so that the other ranks fail instead of waiting",
                 unused, names, unused > 6 ? ", ..." : "");
        end_step(d);
        return ddp_break_step(d, TUTTI_ERR_INVALID_ARG);
    }
    for (int i = 0; i < d->nparams && unused; i++)
        if (!d->params[i].ready) {
            struct ddp_param *p = &d->params[i];
            p->ready = p->zero_fill = 1;
            if (d->cfg.grad_as_bucket_view)
                memset(d->buckets[p->bucket].view + p->bucket_off, 0, p->count * sizeof(float));
            else if (d->cfg.zero == 3 && p->grad) /* (its buffer was asked for) */
                memset(p->grad, 0, p->count * sizeof(float));
            d->buckets[p->bucket].pending--;
        }
    TUTTI_DDP_CHECK(begin_step(d));
    TUTTI_DDP_CHECK(launch_ready(d));
    t0 = ddp_now();
    rc = tutti_stream_sync(d->stream);
    d->exposed_s += ddp_now() - t0;
    end_step(d);
    if (rc != TUTTI_SUCCESS) {
        ddp_fail(d, rc, "tutti_ddp_finish: a bucket reduction failed: %s",
                 tutti_stream_last_error(d->stream));
        return ddp_break_step(d, rc);
    }
    d->steps++;
    if (d->cfg.uneven_inputs) /* the step's round of flags named it, training or joined */
        d->last_active = d->join_max - 1;
    /* The buffers of rank 0, or of the highest rank training in this step. */
    rc = ddp_broadcast_buffers(d, d->cfg.uneven_inputs ? d->join_max - 1 : 0, "tutti_ddp_finish");
    if (rc != TUTTI_SUCCESS)
        return ddp_break_step(d, rc);
    if (d->cfg.rebuild_buckets && !d->rebuilt) {
        rc = rebuild(d);
        if (rc != TUTTI_SUCCESS)
            return ddp_break_step(d, rc);
    } else if (ddp_adapting(d)) { /* (after the rebuild: the trials use its order) */
        rc = ddp_adapt_buckets(d);
        if (rc != TUTTI_SUCCESS)
            return ddp_break_step(d, rc);
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_no_sync(tutti_ddp_t d, int enable)
{
    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_no_sync"));
    if (d->in_step)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_no_sync: a step is in flight (call it between steps)");
    if (enable && d->cfg.zero == 3)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_no_sync: not with zero 3 (accumulating would keep every "
                        "whole gradient between steps)");
    d->no_sync = enable != 0;
    return TUTTI_SUCCESS;
}

/*
 * Every rank's local batch, summed by one all-reduce (collective): the next reductions weight
 * this rank's gradient by local / total instead of 1 / nranks. A bad value on any rank fails
 * the call on every rank (it travels in the all-reduce), so no rank is left waiting.
 */
tutti_result_t tutti_ddp_set_batch(tutti_ddp_t d, long long local_batch)
{
    long long mine[2], all[2];
    tutti_result_t rc;

    TUTTI_DDP_CHECK(ddp_check_live(d, "tutti_ddp_set_batch"));
    if (d->in_step)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_set_batch: a step is in flight (call it between steps, on "
                        "every rank)");
    if (d->cfg.uneven_inputs)
        return ddp_fail(d, TUTTI_ERR_UNSUPPORTED,
                        "tutti_ddp_set_batch: not with uneven_inputs (a rank in tutti_ddp_join "
                        "could not take part in its all-reduce)");
    mine[0] = local_batch > 0 ? local_batch : 0;
    mine[1] = local_batch < 0;
    rc = tutti_all_reduce(mine, all, 2, TUTTI_INT64, TUTTI_SUM, d->comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "tutti_ddp_set_batch: summing the ranks' batches: %s",
                        tutti_last_error());
    if (all[1] > 0)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_set_batch: %lld rank(s) passed a negative batch (this rank: "
                        "%lld)",
                        all[1], local_batch);
    if (all[0] <= 0)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_set_batch: every rank's batch is 0: nothing to weight by");
    float w = (float)((double)local_batch / (double)all[0]);
    tutti_op_t op;
    rc = tutti_op_create_premul_sum(&op, &w, TUTTI_FLOAT32, TUTTI_SCALAR_HOST_IMMEDIATE, d->comm);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "tutti_ddp_set_batch: the weighting operator: %s",
                        tutti_last_error());
    if (d->weighted) /* (calls made with it have returned: no step is in flight) */
        tutti_op_destroy(d->weight_op, d->comm);
    d->weight_op = op;
    d->weight = (double)local_batch / (double)all[0];
    d->weighted = 1;
    return TUTTI_SUCCESS;
}

float *tutti_ddp_grad(tutti_ddp_t d, int index)
{
    const struct ddp_param *p;

    if (!d || !d->initialized || d->broken || index < 0 || index >= d->nparams)
        return NULL;
    if (d->cfg.zero == 3)
        return ddp_zero3_grad(d, &d->params[index]);
    p = &d->params[index];
    return d->cfg.grad_as_bucket_view ? d->buckets[p->bucket].view + p->bucket_off : p->grad;
}

tutti_result_t tutti_ddp_stats(tutti_ddp_t d, tutti_ddp_stats_t *s)
{
    size_t buckets = 0;

    if (!d || !s)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_stats: ddp or stats is NULL");
    memset(s, 0, sizeof(*s));
    for (int b = 0; b < d->nbuckets && d->cfg.grad_as_bucket_view; b++)
        buckets += d->buckets[b].count * sizeof(float);
    buckets += d->staging_count * sizeof(float) + ddp_zero3_arena_bytes(d);
    s->steps = d->steps;
    s->nbuckets = d->nbuckets;
    s->rebuilt = d->rebuilt;
    s->comm_s = d->comm_s;
    s->exposed_s = d->exposed_s;
    s->step_s = d->step_s;
    s->bytes_reduced = d->bytes_reduced;
    s->bucket_bytes = buckets;
    s->hook_bytes = d->initialized ? ddp_hook_bytes(d) : 0;
    s->optim_bytes = d->initialized ? ddp_optim_bytes(d) : 0;
    s->shard_bytes = d->shard_grad ? d->shard * sizeof(float) : 0;
    s->param_bytes = d->cfg.zero == 3 ? d->shard * sizeof(float) : d->total * sizeof(float);
    s->gathered_peak_bytes = d->gathered_peak;
    s->grad_peak_bytes = __atomic_load_n(&d->grad_peak, __ATOMIC_RELAXED);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_destroy(tutti_ddp_t d)
{
    tutti_result_t rc = TUTTI_SUCCESS;
    int broken;

    if (!d)
        return TUTTI_SUCCESS;
    broken = d->broken;
    if (d->stream)
        rc = tutti_stream_destroy(d->stream);
    d->stream = NULL;
    ddp_teardown(d);
    if (d->own_comm) /* made by tutti_ddp_recover or tutti_ddp_grow */
        tutti_comm_destroy(d->comm);
    free(d->params);
    free(d->buffers);
    free(d);
    return broken ? TUTTI_SUCCESS : rc; /* the failure was reported when it happened */
}
