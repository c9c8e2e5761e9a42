/*
 * shm.c -- shared-memory transport between processes of one host.
 *
 * The receiver creates a POSIX shared-memory segment holding the FIFO (fifo.h) and sends its
 * name as the blob; the sender maps it and unlinks the name at once, so from then on the
 * segment lives only as long as the two mappings: a killed job leaves nothing in /dev/shm.
 * Names are "/tutti-<job tag>-<receiver>-<sender>-<channel>"; tutti-run removes any that a
 * job killed during setup (between create and attach) left behind.
 */
#include "transport/fifo.h"
#include "transport/transport.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/topo/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

struct shm_conn {
    struct tt_conn base;
    struct tt_fifo fifo;
    void *map;
    size_t map_len;
    int owner; /* the receiver, which created the segment */
    int32_t peer_pid;
    int remote;           /* sender: may commit by address; receiver: probe for it */
    uint64_t last_remote; /* sender: ticket of the last message committed by address */
    char name[96];
};

/* Messages sent by address are at least this long: below it a syscall costs more than the
 * copy it saves (2 ranks, 2026-12-02: all-gather of 4 KiB a rank 1.43 us by address against
 * 1.31 through the FIFO; of 8 KiB a rank 1.76 against 2.15). */
#define SHM_REMOTE_MIN ((size_t)8 << 10)

static tutti_result_t gave_up(struct shm_conn *c)
{
    return tt_fail(NULL, TUTTI_ERR_REMOTE,
                   "shm: rank %d gave up on the connection (it failed or was aborted)",
                   c->base.peer);
}

struct shm_blob {
    char name[96];
    uint32_t nslots;
    uint64_t slot_bytes;
};

tutti_result_t tt_shm_map(const char *name, int create, size_t len, void **out)
{
    int fd, flags = create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR;
    void *p;

    fd = shm_open(name, flags, 0600);
    if (fd < 0 && create && errno == EEXIST) {
        /* Left by a killed job that had the same tag: it is ours to replace. */
        shm_unlink(name);
        fd = shm_open(name, flags, 0600);
    }
    if (fd < 0 && !create && errno == ENOENT) /* its maker removes it when it gives up */
        return tt_fail(NULL, TUTTI_ERR_REMOTE,
                       "shm: the segment %s is gone: the rank that offered it gave up or exited",
                       name);
    if (fd < 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "shm: shm_open(%s) failed: %m", name);
    if (create && ftruncate(fd, (off_t)len) != 0) {
        int err = errno;
        close(fd);
        shm_unlink(name);
        errno = err;
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "shm: ftruncate(%s, %zu) failed: %m", name, len);
    }
    /* Take the pages now: on a full /dev/shm (a container's 64 MiB) the first touch of a page
     * ftruncate only promised would kill the process with SIGBUS. */
    if (create) {
        int err = posix_fallocate(fd, 0, (off_t)len);
        if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
            close(fd);
            shm_unlink(name);
            errno = err;
            return tt_fail(NULL, TUTTI_ERR_SYSTEM,
                           "shm: no room for %zu bytes in /dev/shm (%s): %m; free some, give the "
                           "machine or container more (docker run --shm-size), or lower "
                           "TUTTI_BUFFSIZE (each connection's FIFO takes that much)",
                           len, name);
        }
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (create)
            shm_unlink(name);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "shm: mmap of %zu bytes of %s failed: %m", len,
                       name);
    }
    *out = p;
    return TUTTI_SUCCESS;
}

int tt_shm_single_copy(void)
{
    return strcmp(tt_env_str("TUTTI_SHM_SINGLE_COPY"), "0") != 0;
}

/* Receiver: can it read the sender's memory (process_vm_readv: same user, no ptrace
 * restriction, no seccomp filter)? Tried once, when the sender has attached; the sender sends
 * by address only after a yes. */
static void remote_probe(struct shm_conn *c)
{
    struct tt_fifo_ctrl *ctl = c->fifo.ctrl;
    uint32_t magic = 0;
    struct iovec here = {&magic, sizeof(magic)};
    struct iovec there = {
        (void *)(uintptr_t)(ctl->sender_view + offsetof(struct tt_fifo_ctrl, magic)),
        sizeof(magic)};
    int ok;

    if (!atomic_load_explicit(&ctl->sender_attached, memory_order_acquire))
        return;
    c->remote = 0; /* tried */
    ok = c->peer_pid > 0 && ctl->sender_view &&
         process_vm_readv(c->peer_pid, &here, 1, &there, 1, 0) == (ssize_t)sizeof(magic) &&
         magic == TT_FIFO_MAGIC;
    if (!ok)
        TT_INFO(TT_SUB_SHM,
                "single copy from rank %d unavailable (process_vm_readv: %s): two copies",
                c->base.peer, magic == 0 ? strerror(errno) : "wrong bytes");
    atomic_store_explicit(&ctl->remote_ok, ok ? 1 : 2, memory_order_release);
}

static tutti_result_t shm_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                     void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct shm_blob b;
    struct shm_conn *c;
    tutti_result_t rc;

    memset(&b, 0, sizeof(b));
    tt_shm_name(b.name, sizeof(b.name), ctx->job_tag, ctx->rank, peer, channel);
    b.nslots = (uint32_t)ctx->nslots;
    b.slot_bytes = ctx->slot_bytes;
    c = calloc(1, sizeof(*c));
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "shm: out of memory");
    c->map_len = tt_fifo_bytes(b.nslots, b.slot_bytes);
    rc = tt_shm_map(b.name, 1, c->map_len, &c->map);
    if (rc != TUTTI_SUCCESS)
        goto undo_alloc;
    /* Write every page now: the first write to a page faults in each process, and left to the
     * first operations that costs ~20 us per 4 KiB page here (the sender does its half in
     * shm_send_connect). */
    memset(c->map, 0, c->map_len);
    tt_fifo_format(c->map, b.nslots, b.slot_bytes, ctx->sleepy);
    tt_fifo_view(&c->fifo, c->map);
    c->owner = 1;
    c->peer_pid = ctx->pids ? ctx->pids[peer] : 0;
    c->remote = tt_shm_single_copy();
    memcpy(c->name, b.name, sizeof(c->name));
    c->base.tp = &tt_transport_shm;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = b.slot_bytes;
    memcpy(blob, &b, sizeof(b));
    *blob_len = sizeof(b);
    *conn = &c->base;
    TT_TRACE(TT_SUB_SHM, "created %s (%u x %zu bytes) to receive from rank %d", b.name, b.nslots,
             (size_t)b.slot_bytes, peer);
    return TUTTI_SUCCESS;

undo_alloc:
    free(c);
    return rc;
}

static tutti_result_t shm_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                       const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct shm_blob b;
    struct shm_conn *c;
    tutti_result_t rc;

    if (blob_len != sizeof(b))
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "shm: connection blob from rank %d has %zu bytes",
                       peer, blob_len);
    memcpy(&b, blob, sizeof(b));
    b.name[sizeof(b.name) - 1] = '\0';
    if (b.nslots == 0 || b.nslots > TT_MAX_SLOTS || b.slot_bytes == 0)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "shm: bad FIFO shape from rank %d", peer);
    c = calloc(1, sizeof(*c));
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "shm: out of memory");
    c->map_len = tt_fifo_bytes(b.nslots, b.slot_bytes);
    rc = tt_shm_map(b.name, 0, c->map_len, &c->map);
    if (rc != TUTTI_SUCCESS)
        goto undo_alloc;
    /* Both sides have it mapped now: the name is no longer needed. */
    shm_unlink(b.name);
    tt_fifo_view(&c->fifo, c->map);
    if (c->fifo.ctrl->magic != TT_FIFO_MAGIC || c->fifo.nslots != b.nslots) {
        rc = tt_fail(NULL, TUTTI_ERR_INTERNAL, "shm: segment %s from rank %d is not a FIFO", b.name,
                     peer);
        goto undo_map;
    }
    /* Fault in our writable view of the side areas and data slots (see shm_recv_setup); no message
     * is in flight yet, so writing them races with nothing. */
    for (size_t off = 0; off < c->map_len - TT_FIFO_SIDE_OFFSET; off += 4096)
        ((volatile char *)c->fifo.side)[off] = 0;
    c->fifo.ctrl->sender_view = (uint64_t)(uintptr_t)c->map;
    atomic_store(&c->fifo.ctrl->sender_attached, 1);
    c->peer_pid = ctx->pids ? ctx->pids[peer] : 0;
    c->remote = tt_shm_single_copy();
    c->base.tp = &tt_transport_shm;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = b.slot_bytes;
    *conn = &c->base;
    TT_TRACE(TT_SUB_SHM, "attached %s to send to rank %d, channel %d", b.name, peer, channel);
    return TUTTI_SUCCESS;

undo_map:
    munmap(c->map, c->map_len);
undo_alloc:
    free(c);
    return rc;
}

static tutti_result_t shm_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    *slot = tt_fifo_send_slot(&c->fifo, bytes);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_fifo_failed(&c->fifo) ? gave_up(c) : TUTTI_IN_PROGRESS;
}

static tutti_result_t shm_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    tt_fifo_send_commit(&((struct shm_conn *)conn)->fifo, bytes, tag);
    return TUTTI_SUCCESS;
}

static tutti_result_t shm_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                    uint32_t *tag)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    if (c->remote)
        remote_probe(c);
    *slot = tt_fifo_recv_peek(&c->fifo, bytes, tag);
    if (*slot)
        return TUTTI_SUCCESS;
    return tt_fifo_failed(&c->fifo) ? gave_up(c) : TUTTI_IN_PROGRESS;
}

static tutti_result_t shm_send_commit_from(struct tt_conn *conn, const void *src, size_t bytes,
                                           uint32_t tag, struct tt_memreg *reg, uint64_t *ticket)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    (void)reg;
    if (!c->remote || bytes < SHM_REMOTE_MIN ||
        atomic_load_explicit(&c->fifo.ctrl->remote_ok, memory_order_acquire) != 1 ||
        !tt_fifo_remote_fits(&c->fifo, bytes))
        return TUTTI_ERR_UNSUPPORTED;
    *ticket = c->last_remote = tt_fifo_send_commit_remote(&c->fifo, src, bytes, tag);
    return TUTTI_SUCCESS;
}

static int shm_sent(struct tt_conn *conn, uint64_t ticket)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    return atomic_load_explicit(&c->fifo.ctrl->tail, memory_order_acquire) >= ticket;
}

/* Sender: done once the receiver has copied every message sent by address. */
static tutti_result_t shm_flush(struct tt_conn *conn)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    if (!c->last_remote || shm_sent(conn, c->last_remote)) {
        c->last_remote = 0;
        return TUTTI_SUCCESS;
    }
    return tt_fifo_failed(&c->fifo) ? gave_up(c) : TUTTI_IN_PROGRESS;
}

/* Sender: every data slot released (data_tail is stored at each release; tail only now and
 * then). Messages small enough for a queue cell or side area (up to 1 KiB) are not counted:
 * the trials that ask are about messages of SHM_REMOTE_MIN and more, in data slots. A receiver
 * that gave up will release nothing more: drained too (the wait is only for timing; a call
 * that was not timed would have ended already), so a failed or exited peer does not hold a
 * trial call up (its exit may not show while it is a zombie, tt_transport_pid_alive). */
static int shm_drained(struct tt_conn *conn)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    return atomic_load_explicit(&c->fifo.ctrl->data_tail, memory_order_acquire) >=
               c->fifo.data_pos ||
           tt_fifo_failed(&c->fifo);
}

static int shm_recv_remote(struct tt_conn *conn)
{
    return tt_fifo_recv_remote(&((struct shm_conn *)conn)->fifo) != 0;
}

/* A message copied by address after its sender gave up: what arrived is not its message. */
static tutti_result_t pull_lost(struct shm_conn *c, size_t bytes)
{
    return tt_fail(NULL, TUTTI_ERR_REMOTE,
                   "shm: rank %d gave up on the connection (it failed or was aborted) while "
                   "this rank copied %zu bytes out of its memory: they are not its message",
                   c->base.peer, bytes);
}

static tutti_result_t shm_recv_pull(struct tt_conn *conn, void *dst, size_t bytes)
{
    struct shm_conn *c = (struct shm_conn *)conn;
    uint64_t addr = tt_fifo_recv_remote(&c->fifo);

    for (size_t done = 0; done < bytes;) {
        struct iovec here = {(char *)dst + done, bytes - done};
        struct iovec there = {(void *)(uintptr_t)(addr + done), bytes - done};
        ssize_t n = process_vm_readv(c->peer_pid, &here, 1, &there, 1, 0);
        if (n <= 0 && tt_fifo_failed(&c->fifo)) /* its buffer freed meanwhile */
            return pull_lost(c, bytes);
        if (n <= 0)
            return tt_fail(NULL, n < 0 && errno == ESRCH ? TUTTI_ERR_REMOTE : TUTTI_ERR_SYSTEM,
                           "shm: copying %zu bytes out of rank %d (pid %d) failed: %s", bytes,
                           c->base.peer, (int)c->peer_pid, n < 0 ? strerror(errno) : "no bytes");
        done += (size_t)n;
    }
    return tt_fifo_pulled(&c->fifo) ? TUTTI_SUCCESS : pull_lost(c, bytes);
}

static tutti_result_t shm_recv_release(struct tt_conn *conn)
{
    tt_fifo_recv_release(&((struct shm_conn *)conn)->fifo);
    return TUTTI_SUCCESS;
}

static void shm_wait(struct tt_conn *conn, long ns)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    if (c->fifo.ctrl->sleepy && c->owner)
        tt_fifo_recv_wait(&c->fifo, ns);
    else if (c->fifo.ctrl->sleepy)
        tt_fifo_send_wait(&c->fifo, ns);
    else
        tt_transport_sleep(conn, ns);
}

static tutti_result_t shm_alive(struct tt_conn *conn)
{
    return tt_transport_pid_alive(conn, ((struct shm_conn *)conn)->peer_pid);
}

static void shm_fail(struct tt_conn *conn)
{
    tt_fifo_fail(&((struct shm_conn *)conn)->fifo);
}

static void shm_close(struct tt_conn *conn)
{
    struct shm_conn *c = (struct shm_conn *)conn;

    if (!c)
        return;
    /* A sender that never attached never unlinked the name: do it here. */
    if (c->owner && !atomic_load(&c->fifo.ctrl->sender_attached))
        shm_unlink(c->name);
    munmap(c->map, c->map_len);
    free(c);
}

void tt_shm_unlink(const char *name)
{
    shm_unlink(name);
}

void tt_shm_name(char *buf, size_t size, const char *job_tag, int receiver, int sender, int channel)
{
    snprintf(buf, size, "/tutti-%s-%d-%d-%d", job_tag, receiver, sender, channel);
}

/* Ranks of one host (one node, TUTTI_HOSTID) share memory. */
static int shm_joins(const struct tt_rank_info *a, const struct tt_rank_info *b)
{
    return a->host_hash == b->host_hash;
}

const struct tt_transport tt_transport_shm = {
    .joins = shm_joins,
    .cost = 1,
    .size = sizeof(struct tt_transport),
    .name = "shm",
    .shared_slots = 1,
    .recv_setup = shm_recv_setup,
    .send_connect = shm_send_connect,
    .finish = tt_transport_no_finish,
    .send_slot = shm_send_slot,
    .send_commit = shm_send_commit,
    .flush = shm_flush,
    .recv_peek = shm_recv_peek,
    .recv_release = shm_recv_release,
    .progress = tt_transport_no_progress,
    .wait = shm_wait,
    .alive = shm_alive,
    .fail = shm_fail,
    .close = shm_close,
    .send_commit_from = shm_send_commit_from,
    .sent = shm_sent,
    .recv_remote = shm_recv_remote,
    .recv_pull = shm_recv_pull,
    .by_address = 1,
    .drained = shm_drained,
};
