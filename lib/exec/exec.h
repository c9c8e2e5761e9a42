/*
 * exec.h -- the executor: walks a plan's lanes over connections, chunk by chunk.
 *
 * tt_exec_progress() does as much as it can without waiting and reports whether it moved;
 * it never blocks, so the same code serves the blocking path (tt_exec_run: progress, back
 * off, check the deadline), several lanes at once, and the in-process simulator (which
 * round-robins the executors of all ranks and calls a round without movement a deadlock).
 */
#ifndef TT_EXEC_H
#define TT_EXEC_H

#include "algorithms/plan.h"
#include "transport/transport.h"
#include "lib/kern/reduce.h"

/* Connections by [channel * nranks + peer]; NULL where none. */
struct tt_exec_conns {
    int nranks;
    int nchannels;
    struct tt_conn **send;
    struct tt_conn **recv;
};

struct tt_lane_state {
    size_t chunk;   /* current chunk index */
    size_t nchunks; /* chunks of the phase's longest step */
    size_t step;    /* index within the lane */
    size_t phase;   /* index within the lane of the phase's first step */
    size_t end;     /* index within the lane one past the phase's last step */
    double t0;      /* TUTTI_TRACE: when the phase started (microseconds) */
};

/* A zero-copy send whose source the transport may still be reading. */
struct tt_zc {
    const char *lo, *hi; /* bytes [lo, hi) */
    struct tt_conn *conn;
    uint64_t ticket;
};

/* An executor's working memory, kept by its owner from one operation to the next. */
struct tt_exec_mem {
    struct tt_lane_state *lanes;
    size_t lanes_cap;
    struct tt_conn **pend;
    size_t pend_cap;
    struct tt_zc *zc;
    size_t zc_cap;
    size_t *ahead;
    size_t ahead_cap;
    void *bounce; /* a premul-sum send's scaled chunk, on its way into the slot */
    size_t bounce_cap;
};

void tt_exec_mem_free(struct tt_exec_mem *m);

/* *buf (64-byte aligned, *cap bytes, freed with free()) grown, never shrunk, to at least
 * `bytes`: 0, or -1 if out of memory (*buf left as it was). */
int tt_buffer_grow(void **buf, size_t *cap, size_t bytes);

/*
 * How an executor moves and reduces bytes. NULL (the default): host memory, memcpy and the
 * kernels of lib/kern/reduce.c. The device path (cuda_dev.c) queues copies and CUDA kernels on
 * one stream instead; its transport (p2p) publishes a commit or a release only once the
 * stream has passed it, so the executor keeps receive connections in its flush list too.
 * Each returns TUTTI_SUCCESS or an error with its message set.
 */
struct tt_mover {
    tutti_result_t (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* dst[i] = a[i] op b[i], also into dst2 when not NULL (AVG combines as SUM); with
     * divisor > 1, divided by it first (the step that ends an AVG, as divide would) */
    tutti_result_t (*reduce)(void *ctx, void *dst, void *dst2, const void *a, const void *b,
                             size_t n, tutti_dtype_t dtype, tutti_op_t op, int divisor);
    tutti_result_t (*divide)(void *ctx, void *buf, size_t n, tutti_dtype_t dtype, int divisor);
    /* dst[i] = src[i] * scalar: the value's bytes, or read from `dev` when it is not NULL */
    tutti_result_t (*scale)(void *ctx, void *dst, const void *src, size_t n, tutti_dtype_t dtype,
                            const void *value, const void *dev);
    void *ctx;
};

/* tt_exec_init sets every field by name (no memset): a new field needs its line there. */
struct tt_exec {
    const struct tt_plan *plan;
    void *const *bufs; /* buffers named by steps' src/dst */
    size_t esize;
    tutti_dtype_t dtype;
    tutti_op_t op;
    int avg_divisor; /* ranks, for AVG's POSTOP */
    tt_reduce_fn kernel;
    size_t chunk_elems;
    const struct tt_exec_conns *conns;
    /* Zero-copy sends (transport.h send_commit_from): per buffer, the registration holding
     * it or NULL; the whole array NULL if none. Set after tt_exec_init. A step that would
     * write bytes a zero-copy send may still read waits until the transport is done. */
    struct tt_memreg *const *regs;
    /* Single copy (tt_exec_single_copy): per step, elements received and sent ahead of the
     * chunk walk (2 per step), or NULL. */
    size_t *ahead;
    int single_send; /* tt_exec_single_copy: this rank sends by address where it can */
    /* The tag every message of the call carries (tag.h); a point-to-point batch's messages
     * (tag_steps) carry their operation's instead (tt_tag_p2p of its step's count). A received
     * message of another tag fails the call naming both. Set after tt_exec_init (0: none). */
    uint32_t tag;
    int tag_steps;
    const struct tt_label *label; /* what the call is, for that message (NULL: not named) */
    /* Poison (tag.h): run the plan without touching any buffer, every message sent empty and
     * tagged refused (by rank refused_by, reason `refusal`). Set by the caller for a rank that
     * refused its own arguments, or here when a refused message arrives. The call then ends
     * like any other, every message consumed. */
    int poison;
    int refused_by;
    unsigned refusal;
    /* The call is timed to choose between one copy and two (copy_pick.h): it ends only once
     * the receivers have taken every message it sent (transport.h drained), either way, so
     * that two copies' early return (the last slots still in the FIFO) does not flatter them. */
    int drain;
    const struct tt_mover *mover; /* NULL: host memory; set after tt_exec_init */
    /* Write slots that another process reads (transport.h shared_slots) with streaming
     * stores (lib/kern/copy.h tt_copy_nt; copy_pick.h says when); set after tt_exec_init. */
    int nt_slots;
    /* A premul-sum call out of place on the host (redop.c): every read of TT_BUF_SEND, the
     * caller's input, which no step writes, is multiplied by the scalar at premul as it is
     * read (pm_kernel for reductions, tt_premul for copies); NULL otherwise. Set after
     * tt_exec_init, with no zero-copy registration for TT_BUF_SEND. */
    const void *premul;
    tt_premul_fn pm_kernel;
    struct tt_exec_mem *mem;
    size_t nzc;                  /* entries of mem->zc in use */
    struct tt_lane_state *lanes; /* plan->nlanes entries, in the caller's tt_exec_mem */
    int lanes_left;
    /* Send connections holding committed messages not yet handed to the network (flush). */
    struct tt_conn **pend;
    size_t npend;
    int moved; /* set by tt_exec_progress when anything advanced */
    /* Where the last wait was: the connection (to block on) and, for messages, the peer
     * and direction ('s' or 'r'). */
    struct tt_conn *wait_conn;
    int wait_peer;
    char wait_dir;
};

/*
 * Prepare x to run plan, growing mem as needed (TUTTI_ERR_SYSTEM if it cannot). chunk_bytes
 * is the slot size of the connections (every connection of a communicator has the same).
 */
tutti_result_t tt_exec_init(struct tt_exec *x, const struct tt_plan *plan, void *const *bufs,
                            tutti_dtype_t dtype, tutti_op_t op, int avg_divisor, size_t chunk_bytes,
                            const struct tt_exec_conns *conns, struct tt_exec_mem *mem);

/*
 * After tt_exec_init, for an operation whose every receive only copies its bytes out
 * (all-gather, broadcast, point-to-point batches; no reduction): over a single-copy transport (shm,
 * transport.h recv_pull) a send whose bytes are final goes whole, by address, at its first chunk,
 * from any host memory, and the receiver copies it straight into place; the operation ends once its
 * receivers have copied. `send` 0: this rank sends its own bytes through the FIFO as usual but
 * still takes whole what a peer sends by address (each rank picks for itself, copy_pick.h).
 * TUTTI_ERR_SYSTEM if out of memory.
 */
tutti_result_t tt_exec_single_copy(struct tt_exec *x, int send);

/*
 * TUTTI_SUCCESS when every lane is done and every committed message has left this process
 * (network transports), TUTTI_IN_PROGRESS, or an error (message set).
 */
tutti_result_t tt_exec_progress(struct tt_exec *x);

/* tt_label.coll of a point-to-point batch */
#define TT_LABEL_P2P 0xffu

/* What an operation is, for messages (formatted only when something fails). */
struct tt_label {
    const char *name; /* "all_reduce" */
    unsigned coll;    /* enum tt_coll, or TT_LABEL_P2P */
    unsigned long long seq;
    size_t count;        /* elements, or operations for point-to-point */
    tutti_dtype_t dtype; /* TUTTI_NUM_DTYPES: count is operations */
    uint32_t tag;        /* its messages' tag (tag.h) */
    int refused;         /* this rank (refused_by) refused its part (exec.h poison) ... */
    unsigned refusal;    /* ... for this reason (enum tt_refusal) */
    int refused_by;
};

/* "all_reduce #12 (1000 x float32)" */
void tt_label_format(const struct tt_label *l, char *buf, size_t size);

/* How tt_exec_run waits. */
struct tt_wait_policy {
    double timeout_s; /* fail when nothing moves this long */
    unsigned spin;    /* polls before a wait yields */
    double yield_s;   /* then how long it yields before it sleeps (sleepy: blocks) */
    int sleepy;       /* ranks outnumber cores: yield for yield_s, then block on the connection */
    const volatile int *abort_flag;
    double stall_s; /* after this long without progress, call stall() once (0: never) */
    void (*stall)(void *arg, const struct tt_exec *x, double waited);
    void *stall_arg;
    /* Every 100 ms of waiting: has a rank said it gave up (its rank, its reason in why; -1 if
     * none)? A rank that failed before it connected to the one we wait on can tell no
     * connection of ours; NULL: never asked. */
    int (*gave_up)(void *arg, char *why, size_t size);
    void *gave_up_arg;
};

/*
 * Run to completion. Fails with TUTTI_ERR_TIMEOUT when nothing moves for timeout_s seconds,
 * TUTTI_ERR_ABORTED when *abort_flag becomes non-zero, TUTTI_ERR_REMOTE when the peer waited
 * on is gone (checked every 20 ms) or any rank gave up (w->gave_up, every 100 ms). `what`
 * names the operation in messages.
 */
tutti_result_t tt_exec_run(struct tt_exec *x, const struct tt_wait_policy *w,
                           const struct tt_label *what);

/* A lane enters its phase at step `first` (exec.c; the walk, exec_chunk.c, moves it on). */
void tt_exec_phase_begin(struct tt_exec *x, const struct tt_lane *lane, struct tt_lane_state *ls,
                         size_t first);

/*
 * A chunk's byte moves (exec_move.c), on the host or through x->mover. The step's source is
 * scaled as it is read where a premul-sum call reads the caller's input (src == sendbuf).
 *   tt_mv_copy          dst = src
 *   tt_mv_copy_out      into send connection sc's slot (streaming stores where x says)
 *   tt_mv_copy_src      the step's source into dst (a slot of sc when sc != NULL), scaled
 *   tt_mv_reduce_src    dst (and dst2) = a op b, b the step's source, scaled
 *   tt_mv_postop        AVG's division of a step's final values (others: nothing)
 *   tt_mv_reduce_final  tt_mv_reduce_src into dst and slot, then AVG's division when the step
 *                       is final, a block at a time on the host
 */
tutti_result_t tt_mv_copy(struct tt_exec *x, void *dst, const void *src, size_t bytes);
tutti_result_t tt_mv_copy_out(struct tt_exec *x, const struct tt_conn *sc, void *slot,
                              const void *src, size_t bytes);
tutti_result_t tt_mv_copy_src(struct tt_exec *x, const struct tt_step *s, const struct tt_conn *sc,
                              void *dst, const void *src, size_t n);
tutti_result_t tt_mv_reduce_src(struct tt_exec *x, const struct tt_step *s, void *dst, void *dst2,
                                const void *a, const void *b, size_t n);
tutti_result_t tt_mv_postop(struct tt_exec *x, const struct tt_step *s, void *d, size_t n);
tutti_result_t tt_mv_reduce_final(struct tt_exec *x, const struct tt_step *s,
                                  const struct tt_conn *sc, char *dst, char *slot, const char *a,
                                  const char *b, size_t n);

#endif
