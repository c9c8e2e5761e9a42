/*
 * comm_init.c -- making a communicator (rendezvous over bootstrap, the peers' records, FIFO
 * size, rings, the ring's connections and the device path's) and destroying one; the state
 * it makes is lib/core's (comm.h).
 */
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/trace.h"
#include "lib/core/comm.h"
#include "lib/init/comm_init.h"
#include "lib/init/net_measure.h"
#include "lib/core/redop.h"
#include "lib/cuda/cuda.h"
#include "lib/gpu/gpu.h"

#include "transport/fifo.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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
    tt_sym_free_all(c);
    unlink_unattached(c);
    tt_comm_each_conn(c, 1);
    tt_redop_free(c);
    tt_comm_streams_free(c); /* after comm_destroy's wait for queued work */
    tt_cuda_comm_free(c);    /* after the p2p connections, which use its stream */
    tt_boot_close(c->boot);
    tt_plan_free(&c->plan);
    tt_exec_mem_free(&c->exec_mem);
    free(c->p2p.msgs);
    free(c->p2p.perm);
    free(c->p2p.work);
    free(c->scratch);
    free(c->conns.send);
    free(c->conns.recv);
    free(c->cuda.conns.send);
    free(c->cuda.conns.recv);
    free(c->tp_of);
    free(c->rings);
    tt_topo_free(&c->topo);
    tt_board_free(&c->board);
    free(c->pids);
    free(c->shrink_failed);
    free(c->peers);
    pthread_cond_destroy(&c->work_cv);
    pthread_mutex_destroy(&c->work_lock);
    pthread_mutex_destroy(&c->run_lock);
    pthread_mutex_destroy(&c->redop_lock);
    pthread_mutex_destroy(&c->streams_lock);
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
 * A broadcast's and an all-gather's messages over sockets alone (fit_net): their steps only
 * copy, so where every receiver reads payloads straight into place (TUTTI_NET_DIRECT) and every
 * sender sends from the caller's buffer, a message need not fit a slot. Messages of up to
 * 4 MiB, against 2 slots of 512 KiB, made 2 emulated hosts' broadcast 1.06-1.16x faster at
 * 2-32 MiB and all-gather 1.01-1.09x at 16-64 MiB; smaller all-gathers, whose receivers also
 * send, gained nothing (0.89-1.02x at 2-8 MiB), so they keep their slots (pick.c;
 * BENCHMARKS.md, "Broadcasts in larger messages"). A size every rank names alike, or a slot
 * everywhere: every rank of a socket agrees on how long a message may be.
 */
static void fit_net_copy(struct tutti_comm *c)
{
    uint32_t kib = c->peers[0].net_copy_kib;

    for (int r = 1; r < c->nranks; r++)
        if (c->peers[r].net_copy_kib != kib)
            kib = 0;
    if (((size_t)kib << 10) > c->slot_bytes)
        c->net_copy_bytes = (size_t)kib << 10;
}

/*
 * The slot shape of a communicator that runs over sockets alone: every rank alone on its host
 * and no rank with an InfiniBand/RoCE port (every rank sees the same records, so every rank
 * decides the same). Unless TUTTI_BUFFSIZE or TUTTI_STEPS is set, its FIFOs keep their bytes
 * but as 2 slots, not 8: each chunk is one message of 512 KiB on a socket instead of four of
 * 128 KiB. On 2 emulated hosts that made all-reduce, all-gather, reduce-scatter and broadcast
 * 1.5-1.8x faster at 1-4 MiB and 1.2-1.5x at 16 MiB, with 64-256 KiB within the VM's noise;
 * 8 slots of 512 KiB were slower than 2 and take 4x the memory (BENCHMARKS.md, "Sockets
 * at wire speed"). Where a host has several ranks the same chunks also shape the shared-memory
 * stages: on 2 hosts x 2 ranks they gained at 1-16 MiB but lost at 64-256 KiB (broadcast
 * 0.79-0.86x), so those keep the knobs' defaults.
 */
static void fit_net(struct tutti_comm *c)
{
    size_t buff = (size_t)c->nslots * c->slot_bytes;
    int fits = c->nranks >= 2 && c->topo.nnodes == c->nranks;

    for (int r = 0; r < c->nranks && fits; r++)
        fits = !c->peers[r].hca[0];
    /* The net chunk picker (TUTTI_NET_CHUNK) is for these communicators alone: elsewhere a
     * message is a whole slot. */
    if (!fits)
        c->pick_net.forced = 0;
    if (!fits)
        return;
    if (!tt_env_is_set("TUTTI_BUFFSIZE") && !tt_env_is_set("TUTTI_STEPS")) {
        c->nslots = 2;
        c->slot_bytes = (buff / 2) & ~(size_t)63;
        if (c->rank == 0)
            TT_INFO(TT_SUB_INIT,
                    "every rank alone on its host, over sockets: %zu KiB FIFOs as 2 slots of %zu "
                    "KiB (set TUTTI_STEPS or TUTTI_BUFFSIZE to choose)",
                    buff >> 10, c->slot_bytes >> 10);
    }
    fit_net_copy(c);
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

/* Does another rank of c live in this process (threads as ranks, NCCL's one process driving
 * several GPUs)? */
static int peers_in_process(const struct tutti_comm *c)
{
    for (int r = 0; r < c->nranks; r++)
        if (r != c->rank && c->pids[r] == (int32_t)getpid() &&
            c->topo.node_of[r] == c->topo.node_of[c->rank])
            return 1;
    return 0;
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

/* A peer's process on this machine has exited (for bootstrap waits; nothing before the
 * ranks' records are in). */
static int boot_peer_gone(void *arg, int peer)
{
    return tt_comm_peer_exited(arg, peer);
}

/* boot: already joined (tutti_comm_shrink), or NULL to join the rendezvous of info. */
static tutti_result_t comm_setup(struct tutti_comm *c, const struct tt_id_info *info,
                                 struct tt_boot *boot, int local_rank_hint)
{
    /* Connection tables hold two channels per data channel (the double tree's trees). */
    size_t n = (size_t)c->nranks, nconn = n * 2 * (size_t)c->nchannels;
    int pos = 0;

    c->peers = calloc(n, sizeof(*c->peers));
    c->rings = calloc((size_t)c->nchannels, sizeof(*c->rings));
    c->tp_of = calloc(n, sizeof(*c->tp_of));
    c->conns.send = calloc(nconn, sizeof(*c->conns.send));
    c->conns.recv = calloc(nconn, sizeof(*c->conns.recv));
    c->cuda.conns.send = calloc(nconn, sizeof(*c->cuda.conns.send));
    c->cuda.conns.recv = calloc(nconn, sizeof(*c->cuda.conns.recv));
    if (!c->peers || !c->rings || !c->tp_of || !c->conns.send || !c->conns.recv ||
        !c->cuda.conns.send || !c->cuda.conns.recv)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for a communicator of %d ranks",
                       c->nranks);
    c->conns.nranks = c->cuda.conns.nranks = c->nranks;
    c->conns.nchannels = c->cuda.conns.nchannels = 2 * c->nchannels;
    if (boot)
        c->boot = boot;
    else
        TT_CHECK(tt_boot_init(info, c->rank, c->nranks, c->timeout_s, &c->boot));
    tt_boot_set_abort(c->boot, &c->abort_flag);
    tt_boot_set_gone(c->boot, boot_peer_gone, c);

    TT_CHECK(tt_topo_self(&c->peers[c->rank], local_rank_hint, c->rank));
    /* (recorded in its published record, so that both ends of a pair agree on the transport) */
    tt_transport_probe_hca(c->peers[c->rank].nic, local_rank_hint, c->peers[c->rank].hca,
                           sizeof(c->peers[c->rank].hca), c->ib_why, sizeof(c->ib_why));
    tt_cuda_self(c, &c->peers[c->rank]);
    if (!tt_transport_device() || !tt_transport_allowed(tt_transport_device()))
        /* no device published: the device path is off for all */
        c->peers[c->rank].cuda_bus[0] = '\0';
    c->single_copy = tt_shm_single_copy();
    tt_pick_init(&c->pick, "TUTTI_STREAM_STORES", TT_PICK_FIRST, TT_PICK_MIN_STREAM);
    /* its trials start where the first's end: the two never time the same calls */
    tt_pick_init(&c->pick_sc, "TUTTI_SHM_SINGLE_COPY", TT_PICK_FIRST + 2 * TT_PICK_TRIAL,
                 TT_PICK_MIN_SINGLE);
    /* (after both: fit_net turns it off where it does not apply, alike on every rank) */
    tt_pick_init(&c->pick_net, "TUTTI_NET_CHUNK", TT_PICK_FIRST + 4 * TT_PICK_TRIAL,
                 TT_PICK_MIN_NET);
    c->pick_net.blocks = 1;
    c->peers[c->rank].net_copy_kib =
        tt_env_flag("TUTTI_NET_DIRECT") ? (uint32_t)(tt_env_size("TUTTI_NET_COPY_MSG") >> 10) : 0;
    c->peers[c->rank].picks =
        (uint32_t)(c->pick.forced + 1) | (uint32_t)(c->pick_sc.forced + 1) << 2 |
        (uint32_t)c->single_copy << 4 | (uint32_t)(c->pick_net.forced + 1) << 5;
    TT_CHECK(tt_boot_allgather(c->boot, c->peers, sizeof(*c->peers)));
    /* Ranks whose knobs match run the same trials in the same calls of a collective, so they
     * can decide each trial together (lib/engine/pick.c); a rank with other knobs decides alone. */
    c->pick_agree = 1;
    for (size_t r = 0; r < n; r++)
        c->pick_agree &= c->peers[r].picks == c->peers[c->rank].picks;
    /* Unlike the other choices, the message size must be the same at both ends of a socket:
     * its trials only where the ranks vote, a forced size only where every rank forces it;
     * otherwise (knobs that differ) a whole slot everywhere, as every rank concludes alike. */
    for (size_t r = 0; r < n && !c->pick_agree; r++)
        if (c->peers[r].picks >> 5 != c->peers[0].picks >> 5 || c->pick_net.forced < 0)
            c->pick_net.forced = 0;
    TT_CHECK(tt_topo_derive(c->peers, c->nranks, c->rank, &c->topo));
    TT_CHECK(tt_cuda_dev_setup(c));
    c->pids = malloc(n * sizeof(*c->pids));
    if (!c->pids)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for a communicator");
    for (size_t r = 0; r < n; r++)
        c->pids[r] = c->peers[r].pid;
    fit_shm(c);
    fit_net(c);
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
    if (c->cuda.dev_path) /* its stream and kernels first (cuda_dev.c) */
        TT_CHECK(tt_comm_connect_device_mesh(c, tt_cuda_dev_prepare(c)));
    else if (tt_cuda_ready() && peers_in_process(c))
        TT_CHECK(tt_cuda_runner_prepare(c));
    c->stall_s = tt_env_double("TUTTI_STALL_WARN");
    c->check_coll = tt_env_flag("TUTTI_CHECK_COLL");
    /* Nobody has traced into the shared trace file before this communicator's barrier. */
    tt_trace_comm_ready(c->local_rank);
    /* Its barriers also make sure everyone is connected before anyone sends data. */
    return tt_board_init(c);
}

static tutti_result_t comm_make(tutti_comm_t *comm, int nranks, int rank,
                                const struct tt_id_info *info, struct tt_boot *boot,
                                const char *tag, const tutti_config_t *config);

tutti_result_t tutti_comm_init(tutti_comm_t *comm, int nranks, const tutti_id_t *id, int rank,
                               const tutti_config_t *config)
{
    struct tt_id_info info;
    char tag[64];

    tt_base_init();
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
    tt_id_tag(&info, tag, sizeof(tag));
    return comm_make(comm, nranks, rank, &info, NULL, tag, config);
}

static tutti_result_t comm_make(tutti_comm_t *comm, int nranks, int rank,
                                const struct tt_id_info *info, struct tt_boot *boot,
                                const char *tag, const tutti_config_t *config)
{
    struct tutti_comm *c;
    tutti_result_t rc;

    c = calloc(1, sizeof(*c));
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_comm_init: out of memory");
    c->magic = TT_COMM_MAGIC;
    pthread_mutex_init(&c->run_lock, NULL);
    pthread_mutex_init(&c->work_lock, NULL);
    pthread_mutex_init(&c->redop_lock, NULL);
    pthread_mutex_init(&c->streams_lock, NULL);
    pthread_cond_init(&c->work_cv, NULL);
    c->rank = rank;
    c->nranks = nranks;
    tt_log_set_rank(rank);
    rc = read_config(c, config);
    if (rc != TUTTI_SUCCESS) {
        comm_free(c);
        return rc;
    }
    snprintf(c->job_tag, sizeof(c->job_tag), "%s", tag);
    memcpy(c->secret, info->secret, sizeof(c->secret));
    rc = comm_setup(c, info, boot, config ? config->local_rank : -1);
    if (rc != TUTTI_SUCCESS)
        goto undo_comm;
    if (!tt_comm_registry_add(c)) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_comm_init: out of memory");
        goto undo_comm;
    }
    if (nranks > 1 && c->topo.nnodes > 1 && tt_tune_links_measured()) {
        rc = tt_comm_measure_net(c); /* collectives: c must be live */
        if (rc != TUTTI_SUCCESS) {
            tt_comm_registry_remove(c);
            goto undo_comm;
        }
    }
    TT_INFO(TT_SUB_INIT,
            "rank %d of %d ready (local rank %d of %d, %d channel(s), %d x %zu-byte "
            "slots per connection)",
            rank, nranks, c->local_rank, c->local_size, c->nchannels, c->nslots, c->slot_bytes);
    *comm = c;
    return TUTTI_SUCCESS;

undo_comm:
    tt_fail(NULL, rc, "tutti_comm_init: rank %d of %d: %s", rank, nranks, tt_thread_error());
    if (boot) { /* the caller's again */
        tt_boot_set_abort(boot, NULL);
        tt_boot_set_gone(boot, NULL, NULL);
        c->boot = NULL;
    }
    comm_free(c);
    return rc;
}

tutti_result_t tt_comm_init_boot(tutti_comm_t *comm, struct tt_boot *boot, int rank, int nranks,
                                 const unsigned char *secret, const tutti_config_t *config)
{
    struct tt_id_info info;
    char tag[64];

    memset(&info, 0, sizeof(info));
    memcpy(info.secret, secret, TT_SECRET_BYTES);
    tt_id_tag(&info, tag, sizeof(tag));
    return comm_make(comm, nranks, rank, &info, boot, tag, config);
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
    if (!tt_comm_registry_remove(comm))
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_destroy: comm is not a live communicator (destroyed twice?)");
    comm_free(comm);
    return TUTTI_SUCCESS;
}
