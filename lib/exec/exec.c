/* exec.c -- the executor (exec.h): its memory, setting up a run, and running it to the end
 * under a wait policy. The chunk-major walk itself (algorithms/plan.h) and one chunk of one
 * step: exec_chunk.c. */
#include "lib/exec/exec.h"
#include "lib/kern/copy.h"
#include "lib/base/error.h"
#include "lib/exec/tag.h"
#include "lib/base/trace.h"
#include "lib/base/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tt_exec_mem_free(struct tt_exec_mem *m)
{
    free(m->lanes);
    free(m->pend);
    free(m->zc);
    free(m->ahead);
    free(m->bounce);
    memset(m, 0, sizeof(*m));
}

int tt_buffer_grow(void **buf, size_t *cap, size_t bytes)
{
    void *p = NULL;

    if (bytes <= *cap)
        return 0;
    if (posix_memalign(&p, 64, bytes) != 0)
        return -1;
    free(*buf);
    *buf = p;
    *cap = bytes;
    return 0;
}

static int mem_reserve(struct tt_exec_mem *m, size_t nlanes, size_t nsteps)
{
    if (nlanes > m->lanes_cap) {
        struct tt_lane_state *g = realloc(m->lanes, nlanes * sizeof(*g));
        if (!g)
            return -1;
        m->lanes = g;
        m->lanes_cap = nlanes;
    }
    if (nsteps > m->pend_cap) {
        struct tt_conn **g = realloc(m->pend, nsteps * sizeof(*g));
        if (!g)
            return -1;
        m->pend = g;
        m->pend_cap = nsteps;
    }
    return 0;
}

/*
 * Start the phase at lane step `first`: find its end and its chunk count. Phases with nothing
 * to move are skipped; at the end of the lane, chunk == nchunks == 0.
 */
void tt_exec_phase_begin(struct tt_exec *x, const struct tt_lane *lane, struct tt_lane_state *ls,
                         size_t first)
{
    const struct tt_step *steps = x->plan->steps + lane->first;
    double t0 = ls->t0;

    for (;;) {
        size_t most = 0, end = first;

        if (first >= lane->nsteps) {
            *ls = (struct tt_lane_state){.phase = first, .end = first, .t0 = t0};
            return;
        }
        do {
            most = steps[end].count > most ? steps[end].count : most;
            end++;
        } while (end < lane->nsteps && !(steps[end].flags & TT_STEP_PHASE));
        *ls = (struct tt_lane_state){.chunk = 0,
                                     /* no division for the common one-chunk phase */
                                     .nchunks = most <= x->chunk_elems
                                                    ? most > 0
                                                    : (most + x->chunk_elems - 1) / x->chunk_elems,
                                     .step = first,
                                     .phase = first,
                                     .end = end,
                                     .t0 = t0};
        if (ls->nchunks > 0)
            return;
        first = end;
    }
}

tutti_result_t tt_exec_init(struct tt_exec *x, const struct tt_plan *plan, void *const *bufs,
                            tutti_dtype_t dtype, tutti_op_t op, int avg_divisor, size_t chunk_bytes,
                            const struct tt_exec_conns *conns, struct tt_exec_mem *mem)
{
    size_t esize = tutti_dtype_size(dtype);

    if (mem_reserve(mem, (size_t)plan->nlanes, 2 * plan->nsteps) != 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
    /* Every field, one by one: a small call is a fraction of a microsecond, and zeroing the
     * struct first (a string store) was 8% of a one-rank broadcast. */
    x->plan = plan;
    x->bufs = bufs;
    x->esize = esize;
    x->dtype = dtype;
    x->op = op;
    x->avg_divisor = avg_divisor;
    x->kernel = tt_reduce_kernel(dtype, op);
    x->chunk_elems = chunk_bytes >> __builtin_ctzl(esize); /* esize: a power of two */
    x->conns = conns;
    x->regs = NULL;
    x->ahead = NULL;
    x->single_send = 0;
    x->tag = 0;
    x->tag_steps = 0;
    x->label = NULL;
    x->poison = 0;
    x->refused_by = -1;
    x->refusal = 0;
    x->drain = 0;
    x->mover = NULL;
    x->nt_slots = 0;
    x->premul = NULL;
    x->pm_kernel = NULL;
    x->mem = mem;
    x->nzc = 0;
    x->lanes = mem->lanes;
    x->lanes_left = plan->nlanes;
    x->pend = mem->pend;
    x->npend = 0;
    x->moved = 0;
    x->wait_conn = NULL;
    x->wait_peer = -1;
    x->wait_dir = 0;
    for (int l = 0; l < plan->nlanes; l++) {
        tt_exec_phase_begin(x, &plan->lanes[l], &x->lanes[l], 0);
        x->lanes[l].t0 = tt_trace_on ? tt_trace_us() : 0;
        if (x->lanes[l].chunk >= x->lanes[l].nchunks)
            x->lanes_left--;
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_exec_single_copy(struct tt_exec *x, int send)
{
    struct tt_exec_mem *m = x->mem;
    size_t need = 2 * x->plan->nsteps;

    if (need == 0) /* nothing moves (one rank) */
        return TUTTI_SUCCESS;
    if (need > m->ahead_cap) {
        size_t *g = realloc(m->ahead, need * sizeof(*g));
        if (!g)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
        m->ahead = g;
        m->ahead_cap = need;
    }
    memset(m->ahead, 0, need * sizeof(*m->ahead));
    x->ahead = m->ahead;
    x->single_send = send;
    return TUTTI_SUCCESS;
}

/* A failed run clears the queued mark of the sends it still had pending. */
static void unqueue(struct tt_exec *x)
{
    for (size_t i = 0; i < x->npend; i++)
        x->pend[i]->queued = 0;
}

tutti_result_t tt_exec_run(struct tt_exec *x, const struct tt_wait_policy *w,
                           const struct tt_label *what)
{
    struct tt_backoff b;
    /* Set at the first wait: most calls never wait. */
    double last_move = 0, last_alive = 0, last_told = 0;
    int stalled = 0;
    char name[96];

    x->label = what;
    tt_backoff_init(&b, w->spin, w->yield_s);
    for (;;) {
        tutti_result_t r = tt_exec_progress(x);
        double now;

        if (r != TUTTI_IN_PROGRESS) {
            if (r != TUTTI_SUCCESS)
                unqueue(x);
            return r;
        }
        if (x->moved) {
            tt_backoff_reset(&b);
            last_move = 0;
            continue;
        }
        if (w->sleepy) {
            /* Yields hand the core to a peer queued on it; after yield_s without progress,
             * block until woken (a woken rank waits its turn for a core: comm_init.c wait_yield).
             */
            now = tt_now();
            if (b.yield_until == 0)
                b.yield_until = now + b.yield_s;
            if (now < b.yield_until || !x->wait_conn)
                sched_yield();
            else if (x->npend > 0) /* our sends need pumping: never sleep past the network */
                x->pend[0]->tp->wait(x->pend[0], 200 * 1000);
            else
                x->wait_conn->tp->wait(x->wait_conn, 200 * 1000);
            now = tt_now();
        } else {
            now = tt_backoff_wait(&b);
            if (now == 0)
                continue;
        }
        if (last_move == 0)
            last_move = now;
        if (last_alive == 0)
            last_alive = last_told = now;
        /* Every 20 ms of waiting, ask whether the peer we wait for is still there. */
        if (x->wait_conn && now - last_alive > 0.02) {
            tutti_result_t a = x->wait_conn->tp->alive(x->wait_conn);
            last_alive = now;
            if (a != TUTTI_SUCCESS) {
                /* A peer that finished may exit right after its last write, between our poll
                 * and this check: what it wrote is still there, so look once more. */
                r = tt_exec_progress(x);
                if (r == TUTTI_SUCCESS)
                    return r;
                if (r == TUTTI_IN_PROGRESS && x->moved) {
                    tt_backoff_reset(&b);
                    last_move = 0;
                    continue;
                }
                tt_label_format(what, name, sizeof(name));
                unqueue(x);
                return tt_fail(NULL, a, "%s: %s", name, tt_thread_error());
            }
        }
        if (w->abort_flag && __atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE)) {
            tt_label_format(what, name, sizeof(name));
            return tt_fail(NULL, TUTTI_ERR_ABORTED, "%s: aborted", name);
        }
        if (w->gave_up && now - last_told > 0.1) {
            char why[512];
            int who = w->gave_up(w->gave_up_arg, why, sizeof(why));
            last_told = now;
            if (who >= 0) {
                /* (it may have given up after it sent us all it had to: look once more) */
                r = tt_exec_progress(x);
                if (r == TUTTI_SUCCESS)
                    return r;
                tt_label_format(what, name, sizeof(name));
                unqueue(x);
                return tt_fail(NULL, TUTTI_ERR_REMOTE, "%s: rank %d gave up: %s", name, who, why);
            }
        }
        if (w->stall_s > 0 && !stalled && now - last_move > w->stall_s) {
            stalled = 1; /* once per operation */
            w->stall(w->stall_arg, x, now - last_move);
        }
        if (now - last_move > w->timeout_s) {
            tt_label_format(what, name, sizeof(name));
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT,
                           "%s: no progress for %.0f s while %s rank %d (TUTTI_TIMEOUT)", name,
                           w->timeout_s, x->wait_dir == 's' ? "sending to" : "receiving from",
                           x->wait_peer);
        }
    }
}

void tt_label_format(const struct tt_label *l, char *buf, size_t size)
{
    if (l->dtype == TUTTI_NUM_DTYPES)
        snprintf(buf, size, "%s #%llu (%zu op(s))", l->name, l->seq, l->count);
    else
        snprintf(buf, size, "%s #%llu (%zu x %s)", l->name, l->seq, l->count,
                 tutti_dtype_name(l->dtype));
}
