/*
 * tutti_ddp.h -- data-parallel training on top of tutti.h: the job of PyTorch's
 * DistributedDataParallel, in C.
 *
 * Every rank holds a full copy of the model. The application registers its parameters (values
 * and gradient buffers) in forward order, then calls tutti_ddp_init, which checks that every
 * rank registered the same parameters and copies rank 0's values everywhere. Each training
 * step the application's backward pass calls tutti_ddp_grad_ready(ddp, i) as soon as the
 * gradient of parameter i is final; the layer gathers gradients into buckets and starts each
 * bucket's reduction on its own host stream the moment the bucket is complete, so reduction
 * overlaps the rest of backward. tutti_ddp_finish waits for the reductions and leaves every
 * gradient averaged over the ranks; tutti_ddp_step applies the optimizer (optionally sharded
 * across ranks, ZeRO-1/2; with ZeRO-3 the parameters are sharded too: see tutti_ddp_gather).
 *
 * Buckets follow PyTorch's rule: parameters in reverse registration order (backward produces
 * gradients roughly last layer first), the first bucket closed at first_bucket_mb, the others
 * at bucket_cap_mb. After the first synchronised step the buckets are rebuilt once from the
 * order in which gradients actually became ready on rank 0 (broadcast, so every rank agrees).
 * Buckets are reduced in bucket order on every rank: bucket k starts only after bucket k-1
 * has started, whatever order gradients arrive in.
 *
 * Buffers (tutti_ddp_register_buffer: state that is not trained, as BatchNorm's statistics)
 * are rank 0's everywhere after init and after every synchronised step. With uneven_inputs,
 * ranks may run different numbers of steps: a rank out of data calls tutti_ddp_join, which
 * takes part in the others' steps with zero gradients until every rank has joined.
 *
 * This version handles float32 parameters. Thread use: one application thread calls the
 * tutti_ddp_* functions of one ddp; the reductions run on the ddp's stream worker. The
 * communicator passed to tutti_ddp_create must not be used by the application while a step is
 * in flight (between the first tutti_ddp_grad_ready and tutti_ddp_finish).
 *
 * Errors follow tutti.h: a tutti_result_t, with the message in tutti_ddp_last_error(ddp).
 * A failure that leaves peers waiting (this rank cannot take part in a reduction the others
 * started) aborts the communicator so that they fail at once, never hang.
 */
#ifndef TUTTI_DDP_H
#define TUTTI_DDP_H

#include "tutti.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tutti_ddp *tutti_ddp_t;

/* Gradient compression applied to each bucket before it is reduced (a "comm hook"). */
typedef enum {
    TUTTI_DDP_HOOK_NONE = 0, /* all-reduce of float32 values (average) */
    TUTTI_DDP_HOOK_FP16,     /* values rounded to float16, summed in float16, widened back */
    TUTTI_DDP_HOOK_BF16,     /* the same with bfloat16 */
    TUTTI_DDP_HOOK_INT8,     /* int8 with one float32 scale per 256 values, error feedback;
                                all-gathered, each rank sums every rank's part in rank order */
    TUTTI_DDP_HOOK_TOPK,     /* the topk_ratio largest magnitudes as (index, value), error
                                feedback; all-gathered and scattered */
    TUTTI_DDP_HOOK_POWERSGD, /* rank-r factorisation of each matrix parameter (PowerSGD), error
                                feedback, warm start; vectors are all-reduced uncompressed */
    TUTTI_DDP_HOOK_USER,     /* the callback in tutti_ddp_config_t.user_hook */
    TUTTI_DDP_NUM_HOOKS
} tutti_ddp_hook_t;

/* Optimizer applied by tutti_ddp_step. */
typedef enum {
    TUTTI_DDP_OPTIM_NONE = 0, /* the application updates the parameters itself */
    TUTTI_DDP_OPTIM_SGD,      /* SGD with momentum and weight decay (PyTorch's formulation) */
    TUTTI_DDP_OPTIM_ADAM,     /* Adam (Kingma & Ba, bias-corrected, PyTorch's formulation) */
} tutti_ddp_optim_t;

/*
 * A bucket, as a user hook sees it: `count` float32 values in `data`, which hold this rank's
 * gradients already multiplied by its weight (1 / number of ranks, or its share of the global
 * batch after tutti_ddp_set_batch). The hook must arrange that, once the
 * work it queued on `stream` has run, `data` holds the sum over ranks (the average gradient).
 * It runs on the application's thread inside tutti_ddp_grad_ready/finish, and must only queue
 * work (collectives on `comm` with `stream`, host functions with tutti_stream_launch), in the
 * same order on every rank.
 */
typedef struct {
    int index;   /* bucket number, in reduction order */
    float *data; /* the bucket's values */
    size_t count;
    int nparams;       /* parameters in the bucket */
    const int *params; /* their registration indices, in bucket order */
    long long step;    /* synchronised steps finished before this one */
} tutti_ddp_bucket_t;

typedef tutti_result_t (*tutti_ddp_hook_fn)(void *state, const tutti_ddp_bucket_t *bucket,
                                            tutti_comm_t comm, tutti_stream_t stream);

/*
 * Settings. Initialise with TUTTI_DDP_CONFIG_INIT, then change fields; `size` lets the
 * struct grow without breaking callers.
 */
typedef struct {
    size_t size;
    double bucket_cap_mb;    /* buckets after the first close at this size (25) */
    double first_bucket_mb;  /* the first bucket closes at this size (1) */
    int grad_as_bucket_view; /* 1: gradients live inside the buckets (no copies); read the
                                pointers with tutti_ddp_grad after init and after each
                                tutti_ddp_finish (rebuilding moves them). 0: copy in and out */
    int find_unused;         /* 1: a parameter whose gradient was not marked ready by
                                tutti_ddp_finish counts as a zero gradient; 0: that is an error that
                                names it */
    int rebuild_buckets;     /* 1: rebuild once from the observed order (default) */
    tutti_ddp_hook_t hook;
    double topk_ratio;           /* TOPK: fraction of each bucket's values sent (0.01) */
    int powersgd_rank;           /* POWERSGD: rank of the factorisation (4) */
    tutti_ddp_hook_fn user_hook; /* USER */
    void *user_state;
    int zero;                          /* 0: every rank keeps the whole optimizer state; 1: ZeRO-1
                                          (state sharded, gradients all-reduced); 2: ZeRO-2 (state
                                          and reduced gradients sharded: gradients reduce-scattered);
                                          3: ZeRO-3 (parameters sharded too: tutti_ddp_gather) */
    tutti_ddp_optim_t optim;           /* for tutti_ddp_step */
    double lr, momentum, weight_decay; /* SGD (and Adam's lr, weight_decay) */
    double beta1, beta2, eps;          /* Adam (0.9, 0.999, 1e-8) */
    unsigned long long seed;           /* PowerSGD's initial factors (every rank alike) */
    int uneven_inputs;                 /* 1: ranks may run different numbers of steps; each
                                          synchronised step starts with a 4-byte all-reduce
                                          of who still trains, and a rank out of data calls
                                          tutti_ddp_join (0) */
    int adaptive_buckets;              /* 1: the first synchronised steps try bucket caps of
                                          0.25, 1, 4, 16 and 64 MiB (one warm-up and five
                                          timed steps each) and keep the one whose median step
                                          waited least for communication in tutti_ddp_finish, the
                                          same on every rank (the slowest rank's figures);
                                          TUTTI_DEBUG=INFO says what was measured and chosen.
                                          bucket_cap_mb is then that cap (0) */
    int overlap;                       /* 1: a bucket's reduction starts during backward, as
                                          soon as it is complete; 0: every bucket's starts in
                                          tutti_ddp_finish; -1 (auto): 0 where a rank's
                                          reduction thread would have no core of its own (2 x
                                          the ranks on this host > the CPUs this process may
                                          run on), else 1; always 1 with zero 3, whose buckets
                                          hold the only copy of their gradients (-1) */
} tutti_ddp_config_t;

#define TUTTI_DDP_CONFIG_INIT                                                                      \
    {                                                                                              \
        sizeof(tutti_ddp_config_t), 25.0, 1.0, 0, 0, 1, TUTTI_DDP_HOOK_NONE, 0.01, 4, NULL, NULL,  \
            0, TUTTI_DDP_OPTIM_NONE, 0.01, 0.0, 0.0, 0.9, 0.999, 1e-8, 1, 0, 0, -1                 \
    }

/*
 * tutti_ddp_create - a DDP context over comm (which must outlive it) with config (NULL: the
 * defaults). Local: nothing is sent. Errors name the bad field and leave *ddp NULL; read them
 * with tutti_ddp_last_error(NULL).
 */
TUTTI_API tutti_result_t tutti_ddp_create(tutti_ddp_t *ddp, tutti_comm_t comm,
                                          const tutti_ddp_config_t *config);

/*
 * tutti_ddp_register - add a parameter, in forward order: `count` float32 values at `data`
 * (updated by tutti_ddp_step and overwritten by init's broadcast) and its gradient at `grad`
 * (may be NULL with grad_as_bucket_view). `name` (copied, for messages), `ndim` and `shape`
 * (ndim <= 4; product == count; PowerSGD treats a parameter with two dimensions > 1 as a
 * matrix) describe it. Writes the parameter's index to *index (may be NULL). Before init only.
 */
TUTTI_API tutti_result_t tutti_ddp_register(tutti_ddp_t ddp, const char *name, float *data,
                                            float *grad, size_t count, int ndim,
                                            const size_t *shape, int *index);

/*
 * tutti_ddp_register_buffer - add a buffer: state the model keeps that is not trained
 * (BatchNorm's running mean and variance), `count` float32 values at `data`; `name` is copied
 * for messages. Before init only. Init gives every rank rank 0's values, and so does every
 * synchronised tutti_ddp_finish (with uneven_inputs: the values of the highest rank training
 * in that step), so that the next forward pass reads the same values everywhere, as with
 * PyTorch's broadcast_buffers. All buffers travel in one broadcast. Checkpoints hold them.
 */
TUTTI_API tutti_result_t tutti_ddp_register_buffer(tutti_ddp_t ddp, const char *name, float *data,
                                                   size_t count);

/*
 * tutti_ddp_init - collective: check that every rank registered the same parameters (count,
 * names, shapes) and buffers (count, names, sizes) with the same settings (those that decide what a
 * step sends: hook and its ratio, rank and seed, zero, optim, bucket sizes, rebuild_buckets,
 * uneven_inputs); on a mismatch every rank fails with TUTTI_ERR_INVALID_ARG naming the rank and the
 * parameter or setting. Then broadcast rank 0's values (parameters and buffers), build the buckets
 * and the optimizer state.
 */
TUTTI_API tutti_result_t tutti_ddp_init(tutti_ddp_t ddp);

/*
 * tutti_ddp_grad_ready - parameter `index`'s gradient for this step is final. Starts the
 * reductions that became possible. In a no_sync step it only records. Marking a parameter
 * twice in one step is an error naming it.
 */
TUTTI_API tutti_result_t tutti_ddp_grad_ready(tutti_ddp_t ddp, int index);

/*
 * tutti_ddp_finish - end the backward pass: treat unready parameters as find_unused says,
 * wait for every reduction, leave averaged gradients (and, after the first step, rebuild the
 * buckets). In a no_sync step it returns at once and the gradients stay local (the application
 * accumulates into them). Collective in a synchronised step.
 */
TUTTI_API tutti_result_t tutti_ddp_finish(tutti_ddp_t ddp);

/*
 * tutti_ddp_no_sync - 1: the following steps only accumulate locally (no reduction) until it
 * is set back to 0; the next synchronised step reduces the accumulated gradients. Between
 * steps only.
 */
TUTTI_API tutti_result_t tutti_ddp_no_sync(tutti_ddp_t ddp, int enable);

/*
 * tutti_ddp_set_batch - this rank's local batch, when ranks train on batches of different
 * sizes. Collective (every rank, between steps; one small all-reduce on the communicator):
 * from the next synchronised reduction on, rank r's gradient is weighted by b_r / B (B: the
 * sum of every rank's b_r) instead of 1 / nranks, so gradients that are each the mean over
 * their rank's batch combine into the mean over the global batch: any split gives the update
 * one rank with all B samples would make. It applies to the gradient as reduced (with
 * no_sync, the accumulated one) and holds until called again; b_r may be 0 (that rank's
 * gradient counts nothing), not negative; B must be at least 1. A bad value on any rank fails
 * the call on every rank. Not with uneven_inputs (TUTTI_ERR_UNSUPPORTED). Where the weights
 * are not 1 / nranks, each bucket is scaled once more before it is reduced.
 */
TUTTI_API tutti_result_t tutti_ddp_set_batch(tutti_ddp_t ddp, long long local_batch);

/*
 * tutti_ddp_average_params - every rank's parameters replaced by their average over the ranks
 * (collective, between steps; one group of all-reduces): the averaging of local SGD
 * (PyTorch's PeriodicModelAverager). Steps taken with no_sync and tutti_ddp_step in between
 * update each rank's copy from its own gradients; the optimizer state stays each rank's own.
 * Not with zero >= 1 (TUTTI_ERR_UNSUPPORTED: their optimizer steps all-gather the parameters
 * from the shards' owners). A failure part-way leaves the ddp unusable.
 */
TUTTI_API tutti_result_t tutti_ddp_average_params(tutti_ddp_t ddp);

/*
 * tutti_ddp_grad - where parameter index's gradient lives now (the bucket view, or grad).
 * With zero 3, a buffer of the layer's: allocated and zeroed when first asked for in a step,
 * freed once reduced (ask again every step; do not touch it after tutti_ddp_grad_ready).
 * NULL for a bad index, before init, after a failure, or (zero 3) out of memory.
 */
TUTTI_API float *tutti_ddp_grad(tutti_ddp_t ddp, int index);

/*
 * ZeRO-3 (config.zero = 3): each rank keeps 1/n of the parameters, of the reduced gradients
 * and of the optimizer state (a range of the parameters laid end to end in registration
 * order). The values registered are read once, by tutti_ddp_init (rank 0's, as always); the
 * application may free them afterwards, and never reads them again.
 *
 * tutti_ddp_gather - collective: parameters first .. first + count - 1 whole on every rank (one
 * group of broadcasts, each owner sending its run, after the reductions already queued);
 * tutti_ddp_param gives where each one is. Gather a layer before its forward and again before
 * its backward, and release it after each (PyTorch FSDP's units); every rank gathers the
 * same ranges in the same order. The ranks agree first (one small all-reduce): a refusal on any
 * rank (a parameter gathered already, a bad range, no memory) or ranks asking for different
 * ranges fail the call on every rank, naming why, with nothing sent and the ddp usable; a
 * failure while sending aborts the communicator (the peers fail too).
 *
 * tutti_ddp_release - local: free a range gathered by one tutti_ddp_gather (the same first
 * and count).
 *
 * Without zero 3 both only check their arguments (every rank holds the whole model), so one
 * program serves every stage. Zero 3 needs hook none, no no_sync (TUTTI_ERR_UNSUPPORTED), not
 * grad_as_bucket_view nor uneven_inputs; optimizer steps update the shard and send nothing.
 */
TUTTI_API tutti_result_t tutti_ddp_gather(tutti_ddp_t ddp, int first, int count);
TUTTI_API tutti_result_t tutti_ddp_release(tutti_ddp_t ddp, int first, int count);

/* tutti_ddp_param - where parameter index's values are: the registered data, or with zero 3
 * the gathered copy (NULL while it is not gathered). NULL for a bad index or before init. */
TUTTI_API float *tutti_ddp_param(tutti_ddp_t ddp, int index);

/*
 * tutti_ddp_step - one optimizer step with the averaged gradients (after tutti_ddp_finish).
 * With zero 1 or 2 each rank updates its shard and the parameters are all-gathered
 * (collective); with zero 3 each rank updates its shard of the values and sends nothing.
 * The gradients are left as they are (zero them for the next step, or accumulate).
 */
TUTTI_API tutti_result_t tutti_ddp_step(tutti_ddp_t ddp);

/*
 * tutti_ddp_join - uneven inputs (PyTorch's Join), with config.uneven_inputs = 1 on every
 * rank: a rank that has run out of data calls this between steps (after a synchronised
 * tutti_ddp_finish and tutti_ddp_step, not with no_sync on). Collective: until every rank has
 * called it, it takes part in the other ranks' synchronised steps as a rank whose gradients
 * are all zero (so an average is the sum of the training ranks' gradients over the number of
 * ranks, as PyTorch's default divide_by_initial_world_size) and, where config.optim is set,
 * runs tutti_ddp_step after each of them as the training ranks must. Once every rank has
 * joined, every rank takes the parameters and buffers of the highest rank among those that
 * trained in the last step, and the call returns on every rank; training may then go on (the next
 * epoch) and end in another join. A rank that never joins leaves the others waiting until it
 * fails or TUTTI_TIMEOUT.
 */
TUTTI_API tutti_result_t tutti_ddp_join(tutti_ddp_t ddp);

/* tutti_ddp_set_lr - change the optimizer's learning rate (schedules). */
TUTTI_API tutti_result_t tutti_ddp_set_lr(tutti_ddp_t ddp, double lr);

/*
 * tutti_ddp_save - collective: write parameters, optimizer state (gathered from the shards),
 * the hooks' error-feedback state of every rank and `extra` (application bytes, the same on
 * every rank, e.g. epoch and step) to `path`. Rank 0 writes `path`.tmp, fsyncs and renames it,
 * so a crash leaves the old checkpoint or the new one, never half of one.
 */
TUTTI_API tutti_result_t tutti_ddp_save(tutti_ddp_t ddp, const char *path, const void *extra,
                                        size_t extra_len);

/*
 * tutti_ddp_load - collective: rank 0 reads `path` (checking its format, its checksum and
 * that it matches the registered parameters and settings) and sends every rank its state, so
 * all ranks continue exactly where the saved run stood. Up to extra_cap bytes of the saved
 * extra go to `extra`, their length to *extra_len (either may be NULL).
 */
TUTTI_API tutti_result_t tutti_ddp_load(tutti_ddp_t ddp, const char *path, void *extra,
                                        size_t extra_cap, size_t *extra_len);

/* What the layer did and holds; cumulative since init. */
typedef struct {
    long long steps;                  /* synchronised steps finished (joined ones included) */
    int nbuckets;                     /* current buckets */
    int rebuilt;                      /* the buckets were rebuilt from the observed order */
    double comm_s;                    /* seconds the stream spent reducing buckets (wall) */
    double exposed_s;                 /* seconds tutti_ddp_finish waited for reductions */
    double step_s;                    /* seconds in tutti_ddp_step (including its all-gather) */
    unsigned long long bytes_reduced; /* bucket bytes handed to the hooks */
    size_t bucket_bytes;              /* memory: bucket buffers (ZeRO-3: the window of
                                         symmetric memory its gradient buffers are cut from,
                                         where a host holds several ranks) */
    size_t hook_bytes;                /* memory: compression and error-feedback buffers */
    size_t optim_bytes;               /* memory: optimizer state on this rank */
    size_t shard_bytes;               /* memory: sharded gradient buffers (ZeRO-2/3) */
    size_t param_bytes;               /* memory: parameter values this rank keeps (ZeRO-3: its
                                         shard; otherwise the registered parameters) */
    size_t gathered_peak_bytes;       /* ZeRO-3: the most gathered at once */
    size_t grad_peak_bytes;           /* ZeRO-3: the most held at once in gradient buffers */
} tutti_ddp_stats_t;

TUTTI_API tutti_result_t tutti_ddp_stats(tutti_ddp_t ddp, tutti_ddp_stats_t *stats);

/* Names of hooks and optimizers ("fp16", "adam"); "invalid" for bad values. */
TUTTI_API const char *tutti_ddp_hook_name(tutti_ddp_hook_t hook);

/* The message of the last failure of ddp ("" if none); with NULL, the last failure of the
 * calling thread in any ddp call (how a failed tutti_ddp_create, which leaves *ddp NULL,
 * explains itself). */
TUTTI_API const char *tutti_ddp_last_error(tutti_ddp_t ddp);

/*
 * Elastic training (RELIABILITY.md, "Losing a rank and going on").
 * tutti_ddp_recover - after a call of ddp failed because a rank was lost (the step in flight
 * fails on every survivor), every survivor calls it: the ddp's communicator is shrunk
 * (tutti_comm_shrink: the survivors agree on who is gone), buckets, shards and reduction state
 * are made again for the new size, every survivor takes rank 0's parameters and buffers (a
 * step that failed on some ranks and not others may have left them apart), and the optimizer
 * state is handed over to the new shards: whole where every rank held it (rank 0's), and with
 * zero 1 or 2 from each survivor's shard, the lost ranks' shards restarting from zero. Hooks'
 * state (error feedback, PowerSGD) restarts; tutti_ddp_set_batch's weights go back to equal.
 * The ddp then runs over the new communicator (tutti_ddp_comm), which it owns; re-divide the
 * data by its rank and size. Not with zero 3 (TUTTI_ERR_UNSUPPORTED: the lost rank's share of
 * the parameters is gone). Fenced (TUTTI_ERR_FENCED): this rank was left out.
 * tutti_ddp_grow - at a join point (between steps), every member calls it: newcomers waiting
 * at the job's join service (tutti_comm_grow) are admitted, and *added says how many (0: the
 * ddp is unchanged). A newcomer joins with tutti_comm_join (or tutti_comm_init_env under
 * TUTTI_JOINING=1), then tutti_ddp_create, the same registrations and tutti_ddp_init, which
 * receive the parameters, buffers and optimizer state. Both are collective.
 * tutti_ddp_comm - the communicator the ddp runs over now.
 */
TUTTI_API tutti_result_t tutti_ddp_recover(tutti_ddp_t ddp);
TUTTI_API tutti_result_t tutti_ddp_grow(tutti_ddp_t ddp, int *added);
TUTTI_API tutti_comm_t tutti_ddp_comm(tutti_ddp_t ddp);

/* tutti_ddp_destroy - wait for outstanding work, free everything. NULL is a no-op. */
TUTTI_API tutti_result_t tutti_ddp_destroy(tutti_ddp_t ddp);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_DDP_H */
