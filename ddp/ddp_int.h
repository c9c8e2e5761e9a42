/*
 * ddp_int.h -- the DDP layer's own structures (ddp/ only; built against include/ alone).
 *
 * Index spaces:
 *   - registration index i of a parameter (0 .. nparams-1), forward order;
 *   - the flat space: parameters laid end to end in registration order, N elements; element
 *     `flat_off + j` is element j of its parameter. Ownership for ZeRO, optimizer state,
 *     error-feedback residuals and checkpoints live in this space, so rebuilding buckets
 *     never moves them. Rank r owns [r * shard, min((r + 1) * shard, N)),
 *     shard = ceil(N / nranks);
 *   - a bucket's buffer: its parameters sorted by registration index, end to end, so the
 *     flat indices along a bucket only grow and each owner's elements form one run.
 */
#ifndef DDP_INT_H
#define DDP_INT_H

#include "tutti_ddp.h"

#include <stddef.h>
#include <stdint.h>

#define DDP_NAME_LEN 64
#define DDP_MAX_DIMS 4
#define DDP_ERR_LEN 768

struct ddp_param {
    char name[DDP_NAME_LEN];
    float *data;
    float *grad; /* the application's buffer (NULL with views) */
    size_t count;
    int ndim;
    size_t shape[DDP_MAX_DIMS];
    size_t flat_off;
    int bucket;        /* which bucket */
    size_t bucket_off; /* where in it */
    float *full;       /* zero 3: the gathered values (tutti_ddp_gather), NULL when released */
    int ready;         /* marked in this step */
    int zero_fill;     /* unused this step (find_unused): reduce zeros */
};

/* State the model keeps that is not trained (BatchNorm's running statistics): kept alike on
 * every rank by broadcasts (buffers.c). */
struct ddp_buffer {
    char name[DDP_NAME_LEN];
    float *data;
    size_t count;
    size_t off; /* in buffer_flat */
};

struct tutti_ddp;

struct ddp_bucket {
    int index;
    int *params; /* registration indices, ascending */
    int nparams;
    size_t count;
    float *view;    /* views: the bucket's own memory (the gradients live there) */
    int pending;    /* parameters not yet ready this step */
    int launched;   /* reduction queued this step */
    double t_start; /* set on the stream when its work starts (seconds) */
    struct tutti_ddp *owner;
};

struct ddp_hook_state; /* hooks.c */
struct ddp_optim;      /* optim.c */

#define DDP_ADAPT_N 5     /* adaptive_buckets' candidate caps */
#define DDP_ADAPT_TIMED 5 /* and the steps timed for each */

struct tutti_ddp {
    tutti_comm_t comm;
    int own_comm; /* comm came from tutti_ddp_recover or tutti_ddp_grow: destroyed with d */
    int rank, nranks;
    tutti_ddp_config_t cfg;
    tutti_stream_t stream;
    int initialized;
    int broken; /* a failure aborted the communicator: every call fails */

    struct ddp_param *params;
    int nparams, params_cap;
    size_t total;          /* N */
    size_t shard;          /* ceil(N / nranks) */
    size_t own_lo, own_hi; /* this rank's flat range */

    struct ddp_buffer *buffers;
    int nbuffers, buffers_cap;
    size_t buffer_total; /* values in all buffers */
    float *buffer_flat;  /* the buffers packed for one broadcast (allocated by init) */

    struct ddp_bucket *buckets;
    int nbuckets;
    float *staging; /* without views: one buffer the stream reuses bucket after bucket */
    size_t staging_count;
    void *staging_win; /* its window where it is symmetric memory (ddp_sym_alloc) */
    int sym_hosts;     /* some host holds more than one rank (ddp_setup): ddp_sym_alloc */
    float *views;      /* with views: every bucket's, one block (ddp_sym_alloc) */
    void *views_win;
    int next_launch; /* the next bucket to queue */
    int in_step;     /* a synchronised backward is in flight */
    int no_sync;
    int overlap;   /* reductions start in backward (cfg.overlap, auto resolved by init) */
    double weight; /* this rank's share of the reduced gradient (tutti_ddp_set_batch; 1 / nranks) */
    int weighted;  /* set by tutti_ddp_set_batch: buckets are scaled by weight, not 1 / nranks */
    tutti_op_t weight_op; /* weighted: a premul sum by weight (the hook none's reductions) */
    int *build_order;     /* the order the buckets were built from (bucket 0's parameters first) */
    int *ready_order;     /* registration indices in the order marked during the first step */
    int nready;
    int rebuilt;
    /* adaptive_buckets (buckets.c ddp_adapt_buckets): the candidate on trial, its steps so
     * far, the exposed time when its timing began, each candidate's exposed seconds a step */
    int adapt_cand, adapt_steps, adapt_started;
    double adapt_t0, adapt_exposed[DDP_ADAPT_N], adapt_step_s[DDP_ADAPT_TIMED];
    long long steps;

    struct ddp_hook_state *hook;
    struct ddp_optim *optim;
    float *shard_grad; /* ZeRO-2/3: this rank's reduced gradients, flat [own_lo, own_hi) */

    /* ZeRO-3 (zero3.c): this rank's parameter values, flat [own_lo, own_hi); the ranges
     * gathered now; bytes gathered and in gradient buffers, now and at most (the gradient
     * counters move on both threads: atomics) */
    float *param_shard;
    struct ddp_unit *units;
    int nunits, units_cap;
    size_t gathered_bytes, gathered_peak, grad_bytes, grad_peak;
    /* Where some host holds more than one rank: one window the gradient buffers are cut from
     * (the largest parameter's and a bucket cap; first fit, the live blocks sorted by offset, under
     * a lock: buffers are taken on the application's thread and freed on the stream's), so their
     * reductions take the symmetric path; a buffer that does not fit comes from the heap. */
    struct ddp_arena *garena;

    /* Uneven inputs (join.c): every synchronised step starts with a round of flags. */
    int32_t join_flag, join_max; /* sent: rank + 1 while training, 0 joined; the ranks' max */
    int joining;                 /* in tutti_ddp_join: a step counts every gradient as zero */
    int last_active;             /* the highest rank that trained in the latest round; -1 */

    /* Written on the stream, read after a sync. */
    double comm_s, exposed_s, step_s;
    unsigned long long bytes_reduced;

    char err[DDP_ERR_LEN];
};

/* Propagate a failure (its message is already in ddp->err). */
#define TUTTI_DDP_CHECK(expr)                                                                      \
    do {                                                                                           \
        tutti_result_t ddp_rc_ = (expr);                                                           \
        if (ddp_rc_ != TUTTI_SUCCESS)                                                              \
            return ddp_rc_;                                                                        \
    } while (0)

/* Record a failure: message into ddp->err (and stderr at WARN unless TUTTI_DEBUG=NONE). */
tutti_result_t ddp_fail(struct tutti_ddp *d, tutti_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A note at TUTTI_DEBUG=INFO or TRACE, on stderr. */
/* count floats, zeroed, that every rank allocates alike (collective): where some host holds
 * more than one rank (d->sym_hosts), symmetric memory in a window (*win), so the collectives
 * on it take the symmetric path (across hosts: inside each host, around the hierarchical
 * plans' steps between hosts); else, or where that fails on any rank, the heap (*win NULL). */
float *ddp_sym_alloc(struct tutti_ddp *d, size_t count, void **win);
/* Does some host hold more than one rank (one all-reduce; collective)? Sets d->sym_hosts:
 * then memory the ranks reduce in is symmetric, so one host's collectives, and across hosts
 * the hierarchical plans' stages inside each host, take the symmetric path. */
tutti_result_t ddp_sym_hosts(struct tutti_ddp *d, const char *fn);
void ddp_sym_free(struct tutti_ddp *d, float *p, void *win);
void ddp_info(const struct tutti_ddp *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

double ddp_now(void);

/* ddp.c: fail unless d is initialised and unbroken; fail mid-step (abort the communicator so
 * the peers fail too, keep the first message); rank root's parameters and buffers everywhere. */
tutti_result_t ddp_check_live(struct tutti_ddp *d, const char *fn);
/* ddp.c: what tutti_ddp_init makes over d->comm after the registrations (collective), and
 * freeing it again (registrations kept); elastic.c makes it anew over a new communicator. */
tutti_result_t ddp_setup(struct tutti_ddp *d, const char *fn);
void ddp_teardown(struct tutti_ddp *d);
tutti_result_t ddp_break_step(struct tutti_ddp *d, tutti_result_t rc);
tutti_result_t ddp_broadcast_model(struct tutti_ddp *d, int root, const char *fn);

/* buffers.c: rank root's buffers everywhere (collective; nothing without buffers). */
tutti_result_t ddp_broadcast_buffers(struct tutti_ddp *d, int root, const char *fn);

/* What every rank must agree on about a parameter or a buffer (a buffer has one dimension);
 * checkpoints hold these as they are. */
struct ddp_desc {
    char name[DDP_NAME_LEN];
    uint64_t count, ndim, shape[DDP_MAX_DIMS];
};

/* check_ranks.c: the same parameters, buffers and settings on every rank (collective); the
 * descriptors of the parameters, then of the buffers (nparams + nbuffers of them). */
tutti_result_t ddp_check_ranks(struct tutti_ddp *d);
void ddp_fill_desc(const struct tutti_ddp *d, struct ddp_desc *x);

/* join.c: queue a step's round of flags on the stream (the ranks' max lands in join_max). */
tutti_result_t ddp_join_round(struct tutti_ddp *d, int32_t flag);

/* Rank r's range of the flat space, [*lo, *hi) (empty past its end). */
static inline void ddp_owned(const struct tutti_ddp *d, int r, size_t *lo, size_t *hi)
{
    size_t l = (size_t)r * d->shard, h = l + d->shard;
    *lo = l < d->total ? l : d->total;
    *hi = h < d->total ? h : d->total;
}

/* Where flat [lo, hi) meets parameter p, as flat [*a, *z); 0 where it does not. */
static inline int ddp_param_part(const struct ddp_param *p, size_t lo, size_t hi, size_t *a,
                                 size_t *z)
{
    *a = p->flat_off > lo ? p->flat_off : lo;
    *z = p->flat_off + p->count < hi ? p->flat_off + p->count : hi;
    return *a < *z;
}

/* Element range of bucket b that rank r owns (flat-space ownership), as [*lo, *hi). */
void ddp_owner_run(const struct tutti_ddp *d, const struct ddp_bucket *b, int r, size_t *lo,
                   size_t *hi);

/* Where bucket b's values are during its reduction (its view, or the staging buffer). */
float *ddp_bucket_data(const struct tutti_ddp *d, const struct ddp_bucket *b);

/* hooks.c: state per hook; queue a bucket's reduction on the stream. */
tutti_result_t ddp_hook_init(struct tutti_ddp *d);
void ddp_hook_free(struct tutti_ddp *d);
tutti_result_t ddp_hook_queue(struct tutti_ddp *d, struct ddp_bucket *b);
size_t ddp_hook_bytes(const struct tutti_ddp *d);
/* Checkpointed per-rank state of the hook: size and pointer to its bytes (flat floats). */
size_t ddp_hook_state_size(const struct tutti_ddp *d);
void *ddp_hook_state_ptr(const struct tutti_ddp *d);
/* State the same on every rank (PowerSGD's warm-start factors): size, and copy to/from buf. */
size_t ddp_hook_shared_size(const struct tutti_ddp *d);
void ddp_hook_shared_copy(struct tutti_ddp *d, unsigned char *buf, int save);

/* optim.c */
tutti_result_t ddp_optim_init(struct tutti_ddp *d);
void ddp_optim_free(struct tutti_ddp *d);
size_t ddp_optim_bytes(const struct tutti_ddp *d);
/* Optimizer state in the flat space: slots (m, v) of elements [lo, hi) this rank keeps. */
int ddp_optim_slots(const struct tutti_ddp *d);
float *ddp_optim_slot(const struct tutti_ddp *d, int slot, size_t *lo, size_t *hi);
long long *ddp_optim_t(const struct tutti_ddp *d);
/* The optimizer state as this rank holds it (its flat range and step count), kept across a
 * change of communicator; ddp_optim_restore makes every rank's new range from the ranks'
 * saved ones (collective: an all-reduce per state vector, where ranges that nobody saved
 * restart from zero, and the step count's maximum; saved NULL: a newcomer's, nothing). */
struct ddp_optim_saved {
    float *slot[2];
    int nslots;
    size_t lo, hi;
    long long t;
};
tutti_result_t ddp_optim_save(struct tutti_ddp *d, struct ddp_optim_saved *sv);
tutti_result_t ddp_optim_restore(struct tutti_ddp *d, struct ddp_optim_saved *sv, const char *fn);

/* buckets.c: rebuild buckets from an order of registration indices (first = bucket 0);
 * free an array of n buckets. */
tutti_result_t ddp_build_buckets(struct tutti_ddp *d, const int *order);
/* adaptive_buckets: after each synchronised finish until the choice is made (collective). */
tutti_result_t ddp_adapt_buckets(struct tutti_ddp *d);
int ddp_adapting(const struct tutti_ddp *d);
void ddp_free_buckets(struct ddp_bucket *bk, int n);

/* queue.c: queue bucket b's reduction on the stream (copy in, hook, copy out); a failure
 * breaks the step. */
tutti_result_t ddp_launch(struct tutti_ddp *d, struct ddp_bucket *b);

/* zero3.c: the parameter shard from the registered values (init); the gradient buffer of
 * parameter p (allocated, zeroed, on first use in a step; NULL if out of memory); bucket b's
 * gradients reduced onto their owners (queued) and, once reduced, this rank's runs kept and
 * the buffers freed (on the stream); everything freed. */
tutti_result_t ddp_zero3_init(struct tutti_ddp *d);
float *ddp_zero3_grad(struct tutti_ddp *d, struct ddp_param *p);
tutti_result_t ddp_zero3_queue(struct tutti_ddp *d, struct ddp_bucket *b);
void ddp_zero3_end(struct tutti_ddp *d, struct ddp_bucket *b);
void ddp_zero3_free(struct tutti_ddp *d);
/* Bytes of the window ZeRO-3's gradient buffers are cut from (0: none). */
size_t ddp_zero3_arena_bytes(const struct tutti_ddp *d);

/* Copy floats [lo, hi) of the flat space between `flat` and the parameters' values (to_flat:
 * gather). With zero 3 only this rank's shard holds values: the part of [lo, hi) it owns. */
void ddp_flat_copy(const struct tutti_ddp *d, float *flat, size_t lo, size_t hi, int to_flat);

#endif
