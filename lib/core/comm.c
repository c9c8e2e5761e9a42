/*
 * comm.c -- communicator lifecycle: init (rendezvous, peer records, FIFO size, rings; the
 * connections themselves: connect.c), destroy, queries, and the registry that makes stale
 * handles detectable.
 */
#include "lib/core/comm.h"
#include "lib/base/config.h"
#include "lib/cuda/cuda.h"
#include "lib/base/error.h"
#include "lib/core/redop.h"
#include "lib/base/trace.h"
#include "lib/base/log.h"

#include "transport/fifo.h"
#include "tutti_build.h"

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

static int reg_add(struct tutti_comm *c)
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

static int reg_remove(struct tutti_comm *c)
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
static void each_conn(struct tutti_comm *c, int close)
{
    size_t n = (size_t)c->nranks * (size_t)c->conns.nchannels;

    for (int side = 0; side < 2; side++)
        for (int d = 0; d < 2; d++) {
            struct tt_exec_conns *t = d ? &c->dconns : &c->conns;
            struct tt_conn **v = side ? t->recv : t->send;
            for (size_t i = 0; v && i < n; i++) {
                if (v[i] && close)
                    v[i]->tp->close(v[i]);
                else if (v[i])
                    v[i]->tp->fail(v[i]);
            }
        }
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
        int who = tt_boot_told(comm->boot, rc == TUTTI_ERR_REMOTE ? 0.3 : 0.05, why, sizeof(why));
        if (who >= 0 && !strstr(tt_thread_error(), why))
            tt_fail_quiet(comm, rc, "%s (rank %d had failed: %s)", tt_thread_error(), who, why);
    }
    snprintf(comm->fatal, sizeof(comm->fatal), "%s", tt_thread_error());
    __atomic_store_n(&comm->error, rc, __ATOMIC_RELEASE);
    /* Tell every peer we are connected to: their waits on us end now, not at their deadline,
     * and the error spreads through the whole communicator in a few hops. Then every rank,
     * over bootstrap: one waiting to connect to us fails now too, and all can say why. */
    each_conn(comm, 0);
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

/*
 * Remove the FIFO names this node's peers made for messages from this rank that it never
 * attached to, and so never unlinked: a peer that died while the connection was being made
 * leaves its name behind (a connection is made at the first call that needs it). A healthy
 * communicator has none left: a few unlink calls that find nothing.
 */
static void unlink_unattached(struct tutti_comm *c)
{
    char name[160];

    if (!c->topo.node_of || !c->conns.send)
        return;
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank || c->topo.node_of[p] != c->topo.node_of[c->rank])
            continue;
        for (int ch = 0; ch < c->conns.nchannels; ch++) {
            if (c->conns.send[ch * c->nranks + p])
                continue; /* attached: the name went then */
            tt_shm_name(name, sizeof(name), c->job_tag, p, c->rank, ch);
            tt_shm_unlink(name);
        }
    }
}

static void comm_free(struct tutti_comm *c)
{
    tt_memreg_free_all(c);
    unlink_unattached(c);
    each_conn(c, 1);
    tt_redop_free(c);
    tt_cuda_comm_free(c); /* after the p2p connections, which use its stream */
    tt_boot_close(c->boot);
    tt_plan_free(&c->plan);
    tt_exec_mem_free(&c->exec_mem);
    free(c->p2p.msgs);
    free(c->p2p.perm);
    free(c->p2p.work);
    free(c->scratch);
    free(c->conns.send);
    free(c->conns.recv);
    free(c->dconns.send);
    free(c->dconns.recv);
    free(c->tp_of);
    free(c->rings);
    tt_topo_free(&c->topo);
    tt_board_free(&c->board);
    free(c->pids);
    free(c->peers);
    pthread_cond_destroy(&c->work_cv);
    pthread_mutex_destroy(&c->work_lock);
    pthread_mutex_destroy(&c->run_lock);
    pthread_mutex_destroy(&c->redop_lock);
    c->magic = 0;
    free(c);
}

static tutti_result_t read_config(struct tutti_comm *c, const tutti_config_t *cfg)
{
    size_t buff = tt_env_size("TUTTI_BUFFSIZE");
    long long steps = tt_env_int("TUTTI_STEPS"), nch = tt_env_int("TUTTI_NCHANNELS");

    c->timeout_s = tt_env_double("TUTTI_TIMEOUT");
    if (cfg && cfg->timeout_s != 0) { /* NaN too: only 0 (and below) means "the knob's" */
        if (!(cfg->timeout_s > 0 || cfg->timeout_s <= 0) || cfg->timeout_s > 1e6)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "config->timeout_s is %g: must be a finite number of seconds up to "
                           "1e6 (<= 0: TUTTI_TIMEOUT)",
                           cfg->timeout_s);
        if (cfg->timeout_s > 0)
            c->timeout_s = cfg->timeout_s;
    }
    if (cfg && cfg->nchannels > 0)
        nch = cfg->nchannels;
    if (nch < 1 || nch > 32)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "channel count %lld must be within 1..32", nch);
    if (buff / (size_t)steps < 4096)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_BUFFSIZE=%zu must give slots of at least 4 KiB (TUTTI_STEPS=%lld)",
                       buff, steps);
    c->nchannels = (int)nch;
    c->nslots = (int)steps;
    c->slot_bytes = (buff / (size_t)steps) & ~(size_t)63;
    return tt_cuda_read_config(c);
}

/*
 * TUTTI_BUFFSIZE's default on a small /dev/shm (a container's 64 MiB): every rank's FIFOs
 * are files there, and the algorithms that connect every pair of a node (direct, flat, det)
 * make node_ranks x node_ranks x channels of them. Unless TUTTI_BUFFSIZE is set, the FIFOs
 * shrink (by halves, to TUTTI_STEPS slots of 4 KiB at least) until that worst case takes at
 * most half of the smallest /dev/shm of the job (its other users need room too); computed
 * from every rank's record, so every rank picks the same slot size.
 */
static void fit_shm(struct tutti_comm *c)
{
    size_t buff = (size_t)c->nslots * c->slot_bytes, was = buff;
    size_t floor = (size_t)c->nslots * 4096;
    int tight = -1;

    if (tt_env_is_set("TUTTI_BUFFSIZE"))
        return;
    for (int r = 0; r < c->nranks; r++) {
        unsigned long long room = (unsigned long long)c->peers[r].shm_mib << 19; /* half */
        unsigned long long fifos = 0;
        if (c->peers[r].shm_mib <= 0)
            continue;
        for (int s = 0; s < c->nranks; s++) /* nodes emulated on one machine share its tmpfs */
            fifos += c->peers[s].machine_hash == c->peers[r].machine_hash;
        fifos *= (unsigned long long)c->topo.node_size[c->topo.node_of[r]] * c->nchannels;
        while (buff > floor &&
               fifos * tt_fifo_bytes((uint32_t)c->nslots, buff / (size_t)c->nslots) > room) {
            buff /= 2;
            tight = r;
        }
    }
    if (buff == was)
        return;
    c->slot_bytes = (buff / (size_t)c->nslots) & ~(size_t)63;
    if (c->rank == 0)
        TT_INFO(TT_SUB_INIT,
                "TUTTI_BUFFSIZE: %zu KiB FIFOs, not the default %zu KiB: /dev/shm of rank %d is %d "
                "MiB (set TUTTI_BUFFSIZE to choose)",
                buff >> 10, was >> 10, tight, c->peers[tight].shm_mib);
}

/*
 * Should waits block in the kernel? TUTTI_WAIT, or: do the ranks on this physical machine
 * (emulated nodes included) outnumber the cores they may use together (topo.h)?
 */
static int oversubscribed(int machine_ranks, int cores)
{
    const char *mode = tt_env_str("TUTTI_WAIT");

    if (strcmp(mode, "block") == 0)
        return 1;
    if (strcmp(mode, "poll") == 0)
        return 0;
    return machine_ranks > cores;
}

/*
 * Polls before a wait yields. Spinning pays when the awaited rank runs on another core; when
 * ranks outnumber cores, the awaited rank may need our core, so yield at once.
 */
static unsigned wait_spin(int sleepy)
{
    if (strcmp(tt_env_str("TUTTI_SPIN"), "auto") != 0) {
        return (unsigned)tt_env_int("TUTTI_SPIN");
    }
    return sleepy ? 0 : 2000;
}

/*
 * Seconds a wait without progress yields before it sleeps. Where waits block, a woken rank
 * waits its turn for a core: on 2026-12-02's 2-vCPU machine, 4 ranks blocking after three
 * yields took 16-24 us a ring exchange of 64 bytes and 33-35 us a 4 KiB reduce, where yielding
 * for 100 us first took 1.3-1.5 and 1.2-1.8 (BENCHMARKS.md, "Blocking waits").
 */
static double wait_yield(int sleepy)
{
    if (strcmp(tt_env_str("TUTTI_YIELD_US"), "auto") != 0) {
        return (double)tt_env_int("TUTTI_YIELD_US") * 1e-6;
    }
    return sleepy ? 100e-6 : 1e-3;
}

static tutti_result_t comm_setup(struct tutti_comm *c, const struct tt_id_info *info,
                                 int local_rank_hint)
{
    /* Connection tables hold two channels per data channel (the double tree's trees). */
    size_t n = (size_t)c->nranks, nconn = n * 2 * (size_t)c->nchannels;
    int pos = 0;

    c->peers = calloc(n, sizeof(*c->peers));
    c->rings = calloc((size_t)c->nchannels, sizeof(*c->rings));
    c->tp_of = calloc(n, sizeof(*c->tp_of));
    c->conns.send = calloc(nconn, sizeof(*c->conns.send));
    c->conns.recv = calloc(nconn, sizeof(*c->conns.recv));
    c->dconns.send = calloc(nconn, sizeof(*c->dconns.send));
    c->dconns.recv = calloc(nconn, sizeof(*c->dconns.recv));
    if (!c->peers || !c->rings || !c->tp_of || !c->conns.send || !c->conns.recv ||
        !c->dconns.send || !c->dconns.recv)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for a communicator of %d ranks",
                       c->nranks);
    c->conns.nranks = c->dconns.nranks = c->nranks;
    c->conns.nchannels = c->dconns.nchannels = 2 * c->nchannels;
    TT_CHECK(tt_boot_init(info, c->rank, c->nranks, c->timeout_s, &c->boot));
    tt_boot_set_abort(c->boot, &c->abort_flag);

    TT_CHECK(tt_topo_self(&c->peers[c->rank], local_rank_hint, c->rank));
    tt_comm_probe_ib(c, &c->peers[c->rank], local_rank_hint);
    tt_cuda_self(c, &c->peers[c->rank]);
    if (!tt_comm_transport_allowed("p2p")) /* no device published: the device path is off for all */
        c->peers[c->rank].cuda_bus[0] = '\0';
    c->single_copy = tt_shm_single_copy();
    tt_pick_init(&c->pick, "TUTTI_STREAM_STORES", TT_PICK_FIRST, TT_PICK_MIN_STREAM);
    /* its trials start where the first's end: the two never time the same calls */
    tt_pick_init(&c->pick_sc, "TUTTI_SHM_SINGLE_COPY", TT_PICK_FIRST + 2 * TT_PICK_TRIAL,
                 TT_PICK_MIN_SINGLE);
    c->peers[c->rank].picks = (uint32_t)(c->pick.forced + 1) |
                              (uint32_t)(c->pick_sc.forced + 1) << 2 |
                              (uint32_t)c->single_copy << 4;
    TT_CHECK(tt_boot_allgather(c->boot, c->peers, sizeof(*c->peers)));
    /* Ranks whose knobs match run the same trials in the same calls of a collective, so they
     * can decide each trial together (coll_pick.c); a rank with other knobs decides alone. */
    c->pick_agree = 1;
    for (size_t r = 0; r < n; r++)
        c->pick_agree &= c->peers[r].picks == c->peers[c->rank].picks;
    TT_CHECK(tt_topo_derive(c->peers, c->nranks, c->rank, &c->topo));
    TT_CHECK(tt_cuda_direct_setup(c));
    c->pids = malloc(n * sizeof(*c->pids));
    if (!c->pids)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for a communicator");
    for (size_t r = 0; r < n; r++)
        c->pids[r] = c->peers[r].pid;
    fit_shm(c);
    c->local_rank = local_rank_hint >= 0 ? local_rank_hint : c->topo.local_of[c->rank];
    c->local_size = c->topo.node_size[c->topo.node_of[c->rank]];
    c->sleepy = oversubscribed(c->topo.machine_ranks, c->topo.machine_cores);
    c->spin = wait_spin(c->sleepy);
    c->yield_s = wait_yield(c->sleepy);
    c->view = (struct tt_topo_view){.nnodes = c->topo.nnodes,
                                    .node_of = c->topo.node_of,
                                    .local_of = c->topo.local_of,
                                    .node_size = c->topo.node_size,
                                    .uniform = c->topo.uniform};
    TT_CHECK(tt_tune_init(&c->tuner, c->nranks, c->nchannels, &c->view, c->slot_bytes, c->sleepy));
    /* Where ranks outnumber cores the cores are what every call waits for, and from 64 KiB
     * (the picker's size: an all-gather's or broadcast's whole buffer, a batch's largest
     * message) one copy, which does half the copying, wins or ties: start there, and leave it
     * only for two copies 30% faster. A leaf of a gather, timing its own send, cannot see that the
     * root's copying is the whole call, and the scheduler's noise is larger than 15% (4 ranks on 2
     * cores, 2026-12-02: gather of 4 MiB 250-270 us by one copy, 370-420 us by two, and a
     * trial from two copies kept two; from one copy with a 15% margin, one rank in three runs
     * of a 256 KiB ring exchange left it for two copies, 50 against 64 us). Smaller calls
     * start on two copies: there a sender that need not wait for its receiver's copy wins
     * (scatter of 8-16 KiB messages: 2.5-3.2 us by two copies, 5.0-6.7 by one). Not for
     * broadcast: its plans forward what they receive (chain, tree), and a message forwarded by
     * address goes whole, one hop after the other, where two copies pipeline it in slots (4
     * ranks, 4 MiB: 400-620 us by two copies, about 1300 by one; BENCHMARKS.md, "Trials
     * decided together"). The prior is one machine's: on 12-02's afternoon machine two copies
     * won gather, scatter and all-to-all as well (same section), and a batch's trial, which
     * its ranks cannot vote on, did not find it. */
    if (c->sleepy)
        tt_pick_prefer(&c->pick_sc, 1, 0.7, (size_t)64 << 10,
                       1u << TT_COLL_ALL_GATHER | 1u << (TT_PICK_KINDS - 1));
    for (int k = 0; k < c->nranks; k++)
        if (c->topo.ring[k] == c->rank)
            pos = k;
    for (int ch = 0; ch < c->nchannels; ch++)
        c->rings[ch] = (struct tt_ring){.nranks = c->nranks, .pos = pos, .order = c->topo.ring};
    TT_INFO(TT_SUB_TOPO, "rank %d: node %d of %d (%d rank(s) there), ring position %d%s", c->rank,
            c->topo.node_of[c->rank], c->topo.nnodes, c->local_size, pos,
            c->sleepy ? "; ranks outnumber cores: waits block" : "");

    if (c->nranks > 1)
        TT_CHECK(tt_comm_connect_ring(c, tt_ring_at(&c->rings[0], pos - 1),
                                      tt_ring_at(&c->rings[0], pos + 1)));
    if (c->cuda_direct)
        TT_CHECK(tt_comm_connect_device_mesh(c));
    c->stall_s = tt_env_double("TUTTI_STALL_WARN");
    c->check_coll = tt_env_flag("TUTTI_CHECK_COLL");
    /* Nobody has traced into the shared trace file before this communicator's barrier. */
    tt_trace_comm_ready(c->local_rank);
    /* Its barriers also make sure everyone is connected before anyone sends data. */
    return tt_board_init(c);
}

tutti_result_t tutti_comm_init(tutti_comm_t *comm, int nranks, const tutti_id_t *id, int rank,
                               const tutti_config_t *config)
{
    struct tt_id_info info;
    struct tutti_comm *c;
    tutti_result_t rc;

    tt_log_init();
    if (!comm)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init: comm is NULL");
    if (!id)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init: id is NULL");
    if (nranks < 1)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init: nranks is %d; must be >= 1",
                       nranks);
    if (rank < 0 || rank >= nranks)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_init: rank %d is out of range for nranks %d", rank, nranks);
    if (config && (config->size < sizeof(size_t) || config->size > sizeof(tutti_config_t)))
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_init: config->size is %zu; initialise with TUTTI_CONFIG_INIT",
                       config->size);
    if (tt_id_decode(id, &info) != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init: %s", tutti_last_error());
    TT_CHECK(tt_env_validate("tutti_comm_init"));

    c = calloc(1, sizeof(*c));
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_comm_init: out of memory");
    c->magic = TT_COMM_MAGIC;
    pthread_mutex_init(&c->run_lock, NULL);
    pthread_mutex_init(&c->work_lock, NULL);
    pthread_mutex_init(&c->redop_lock, NULL);
    pthread_cond_init(&c->work_cv, NULL);
    c->rank = rank;
    c->nranks = nranks;
    tt_log_set_rank(rank);
    rc = read_config(c, config);
    if (rc != TUTTI_SUCCESS) {
        comm_free(c);
        return rc;
    }
    tt_id_tag(&info, c->job_tag, sizeof(c->job_tag));
    rc = comm_setup(c, &info, config ? config->local_rank : -1);
    if (rc != TUTTI_SUCCESS)
        goto undo_comm;
    if (!reg_add(c)) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_comm_init: out of memory");
        goto undo_comm;
    }
    TT_INFO(TT_SUB_INIT,
            "rank %d of %d ready (local rank %d of %d, %d channel(s), %d x %zu-byte "
            "slots per connection)",
            rank, nranks, c->local_rank, c->local_size, c->nchannels, c->nslots, c->slot_bytes);
    *comm = c;
    return TUTTI_SUCCESS;

undo_comm:
    tt_fail(NULL, rc, "tutti_comm_init: rank %d of %d: %s", rank, nranks, tt_thread_error());
    comm_free(c);
    return rc;
}

tutti_result_t tutti_comm_destroy(tutti_comm_t comm)
{
    if (!comm)
        return TUTTI_SUCCESS;
    if (tt_comm_check(comm, "tutti_comm_destroy") != TUTTI_SUCCESS)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_destroy: comm is not a live communicator (destroyed twice?)");
    /* Work queued on streams still uses comm: each item ends within the deadline. */
    tt_comm_wait_idle(comm);
    if (!reg_remove(comm))
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_destroy: comm is not a live communicator (destroyed twice?)");
    comm_free(comm);
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
