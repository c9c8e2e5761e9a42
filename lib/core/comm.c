/*
 * comm.c -- a live communicator's state: the registry that makes stale handles detectable,
 * the error state (set once, told to every peer), abort, the count of its queued work, and
 * the queries. Making and destroying one: lib/init/comm_init.c; its connections: connect.c.
 */
#include "lib/core/comm.h"
#include "lib/base/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Live communicators, so a destroyed or foreign handle is refused instead of used. Every call
 * checks its handle, so the check takes no lock: the registry is a chain of blocks of slots
 * that are never freed; a writer (under reg_lock) fills a slot, then raises its block's
 * high-water mark with release; a reader loads the mark, then the slots below it. A removed
 * communicator's slot goes back to NULL and is reused.
 */
#define REG_BLOCK 32

struct reg_block {
    _Atomic(struct tutti_comm *) slot[REG_BLOCK];
    _Atomic size_t used; /* slots [0, used) may be live */
    struct reg_block *_Atomic next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg_block reg;

int tt_comm_registry_add(struct tutti_comm *c)
{
    struct reg_block *b = &reg;

    pthread_mutex_lock(&reg_lock);
    for (;;) {
        size_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
        for (size_t i = 0; i < used; i++)
            if (!atomic_load_explicit(&b->slot[i], memory_order_relaxed)) {
                atomic_store_explicit(&b->slot[i], c, memory_order_release);
                pthread_mutex_unlock(&reg_lock);
                return 1;
            }
        if (used < REG_BLOCK) {
            atomic_store_explicit(&b->slot[used], c, memory_order_relaxed);
            atomic_store_explicit(&b->used, used + 1, memory_order_release);
            pthread_mutex_unlock(&reg_lock);
            return 1;
        }
        struct reg_block *next = atomic_load_explicit(&b->next, memory_order_relaxed);
        if (!next) {
            if (!(next = calloc(1, sizeof(*next)))) {
                pthread_mutex_unlock(&reg_lock);
                return 0;
            }
            atomic_store_explicit(&b->next, next, memory_order_release);
        }
        b = next;
    }
}

int tt_comm_registry_remove(struct tutti_comm *c)
{
    int found = 0;

    pthread_mutex_lock(&reg_lock);
    for (struct reg_block *b = &reg; b && !found; b = atomic_load(&b->next))
        for (size_t i = 0; i < atomic_load(&b->used) && !found; i++)
            if (atomic_load(&b->slot[i]) == c) {
                atomic_store(&b->slot[i], NULL);
                found = 1;
            }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

tutti_result_t tt_comm_check(struct tutti_comm *comm, const char *fn)
{
    if (!comm)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    for (struct reg_block *b = &reg; b; b = atomic_load_explicit(&b->next, memory_order_acquire)) {
        size_t used = atomic_load_explicit(&b->used, memory_order_acquire);
        for (size_t i = 0; i < used; i++)
            if (atomic_load_explicit(&b->slot[i], memory_order_acquire) == comm)
                return TUTTI_SUCCESS;
    }
    return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                   "%s: comm is not a live communicator (destroyed, or never initialised)", fn);
}

/* Fail (close = 0) or close every connection, host and device path, senders first: an
 * in-process (mem) receiver owns the memory its sender writes. */
void tt_comm_each_conn(struct tutti_comm *c, int close)
{
    size_t n = (size_t)c->nranks * (size_t)c->conns.nchannels;

    for (int side = 0; side < 2; side++)
        for (int d = 0; d < 2; d++) {
            struct tt_exec_conns *t = d ? &c->cuda.conns : &c->conns;
            struct tt_conn **v = side ? t->recv : t->send;
            for (size_t i = 0; v && i < n; i++) {
                if (v[i] && close)
                    v[i]->tp->close(v[i]);
                else if (v[i])
                    v[i]->tp->fail(v[i]);
            }
        }
}

int tt_comm_peer_exited(const struct tutti_comm *c, int r)
{
    return r != c->rank && c->pids && c->peers &&
           c->peers[r].machine_hash == c->peers[c->rank].machine_hash &&
           tt_transport_pid_gone(c->pids[r]);
}

/* Has the process of a rank on this machine exited? */
static int local_death(const struct tutti_comm *c)
{
    for (int r = 0; r < c->nranks; r++)
        if (tt_comm_peer_exited(c, r))
            return 1;
    return 0;
}

tutti_result_t tt_comm_set_error(struct tutti_comm *comm, tutti_result_t rc)
{
    int unclaimed = 0;

    tt_error_to_comm(comm);
    /* First error wins, also between a stream worker and the caller's thread; the winner
     * writes the message, then publishes `error`: readers on other threads
     * (tutti_comm_get_error) look at `error`, then at `fatal`. */
    if (!__atomic_compare_exchange_n(&comm->error_claimed, &unclaimed, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return rc;
    /* A peer gave up (its connection failed, or it said so over bootstrap; a system call
     * that failed may be its doing too): the reason it gave there, which its connections
     * cannot carry, names the root cause here too. */
    if ((rc == TUTTI_ERR_REMOTE || rc == TUTTI_ERR_SYSTEM) && comm->nranks > 1 && comm->boot) {
        char why[512];
        /* Where a rank of this machine has died, that is the cause, and it tells nobody: take
         * only the notices that have arrived (the survivors shrink that much sooner). */
        double wait = local_death(comm) ? 0 : rc == TUTTI_ERR_REMOTE ? 0.3 : 0.05;
        int who = tt_boot_told(comm->boot, wait, why, sizeof(why));
        if (who >= 0 && !strstr(tt_thread_error(), why))
            tt_fail_quiet(comm, rc, "%s (rank %d had failed: %s)", tt_thread_error(), who, why);
    }
    snprintf(comm->fatal, sizeof(comm->fatal), "%s", tt_thread_error());
    __atomic_store_n(&comm->error, rc, __ATOMIC_RELEASE);
    /* Tell every peer we are connected to: their waits on us end now, not at their deadline,
     * and the error spreads through the whole communicator in a few hops. Then every rank,
     * over bootstrap: one waiting to connect to us fails now too, and all can say why. */
    tt_comm_each_conn(comm, 0);
    if (comm->nranks > 1 && comm->boot)
        tt_boot_tell(comm->boot, comm->fatal);
    return rc;
}

tutti_result_t tutti_comm_get_error(tutti_comm_t comm, tutti_result_t *error, char *msg,
                                    size_t size)
{
    tutti_result_t rc;
    const char *text = "";

    /* Arguments fail on this thread only: comm's last error belongs to the thread using comm. */
    if (tt_comm_check(comm, "tutti_comm_get_error") != TUTTI_SUCCESS)
        return TUTTI_ERR_INVALID_ARG;
    if (!error)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_get_error: error is NULL");
    rc = tt_comm_error(comm);
    if (rc != TUTTI_SUCCESS)
        text = comm->fatal;
    else if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) {
        /* Aborted; the thread inside comm has not turned it into the error state yet. */
        rc = TUTTI_ERR_ABORTED;
        text = "the communicator was aborted (tutti_comm_abort)";
    }
    *error = rc;
    if (msg && size)
        snprintf(msg, size, "%s", text);
    return TUTTI_SUCCESS;
}

/* work_pending changes under work_lock; wait_idle's first look is a lock-free read, so a
 * communicator without queued work (every NULL-stream call) takes no lock for it. */
void tt_comm_work_queued(struct tutti_comm *comm)
{
    pthread_mutex_lock(&comm->work_lock);
    __atomic_add_fetch(&comm->work_pending, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&comm->work_lock);
}

void tt_comm_work_done(struct tutti_comm *comm)
{
    pthread_mutex_lock(&comm->work_lock);
    if (__atomic_sub_fetch(&comm->work_pending, 1, __ATOMIC_RELEASE) == 0)
        pthread_cond_broadcast(&comm->work_cv);
    pthread_mutex_unlock(&comm->work_lock);
}

void tt_comm_wait_idle(struct tutti_comm *comm)
{
    if (__atomic_load_n(&comm->work_pending, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&comm->work_lock);
    while (__atomic_load_n(&comm->work_pending, __ATOMIC_RELAXED) > 0)
        pthread_cond_wait(&comm->work_cv, &comm->work_lock);
    pthread_mutex_unlock(&comm->work_lock);
}

tutti_result_t tutti_comm_abort(tutti_comm_t comm)
{
    TT_CHECK(tt_comm_check(comm, "tutti_comm_abort"));
    /* Only the flag: the thread inside the communicator sees it within milliseconds, fails
     * with TUTTI_ERR_ABORTED and tells the peers. */
    __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_RELEASE);
    return TUTTI_SUCCESS;
}

#define TT_QUERY(fn, field)                                                                        \
    tutti_result_t fn(tutti_comm_t comm, int *out)                                                 \
    {                                                                                              \
        TT_CHECK(tt_comm_check(comm, #fn));                                                        \
        if (!out)                                                                                  \
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG, #fn ": output pointer is NULL");           \
        *out = comm->field;                                                                        \
        return TUTTI_SUCCESS;                                                                      \
    }

TT_QUERY(tutti_comm_rank, rank)
TT_QUERY(tutti_comm_size, nranks)
TT_QUERY(tutti_comm_local_rank, local_rank)
TT_QUERY(tutti_comm_local_size, local_size)

int tutti_version(void)
{
    return TUTTI_VERSION_CODE;
}
