/* bootstrap.c -- the rank side of bootstrap (bootstrap.h): rendezvous, connections out,
 * sending, receiving in order, telling and hearing that a rank gave up. What arrives is read
 * by boot_in.c. */
#include "lib/boot/boot_int.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void tt_boot_set_abort(struct tt_boot *b, const volatile int *flag)
{
    b->abort = flag;
}

void tt_boot_set_gone(struct tt_boot *b, int (*gone)(void *arg, int peer), void *arg)
{
    b->gone = gone;
    b->gone_arg = arg;
}

static int aborted(const struct tt_boot *b)
{
    return b->abort && __atomic_load_n(b->abort, __ATOMIC_ACQUIRE);
}

/* Seconds a rank waits past its own deadline for the rendezvous's answer: the service times
 * out at the same moment (rank 0 started it just before joining), and its answer names the
 * missing ranks, where a rank that gave up first would only know that nothing came. */
#define ROOT_ANSWER_GRACE 2.0

static tutti_result_t rendezvous(struct tt_boot *b, const struct tt_id_info *id, double deadline)
{
    unsigned char hello[TT_HELLO_ROOT_LEN] = {0}, reply[TT_REPLY_HDR_LEN];
    char where[80];
    struct tt_addr local = {.len = sizeof(local.ss)};
    int fd, tries = 0;
    tutti_result_t rc;
    uint32_t status, count;

    tt_addr_str(&id->root, where, sizeof(where));
    for (;;) {
        rc = tt_sock_connect(&id->root, deadline, &fd);
        if (rc != TUTTI_SUCCESS)
            return tt_fail(NULL, rc, "rank %d: cannot reach the rendezvous at %s: %s", b->rank,
                           where, tt_thread_error());
        if (b->lfd < 0) { /* listen on the interface that faces the root */
            getsockname(fd, (struct sockaddr *)&local.ss, &local.len);
            tt_addr_set_port(&local, 0);
            b->self = local;
            rc = tt_sock_listen(&b->self, 1024, &b->lfd);
            if (rc != TUTTI_SUCCESS)
                goto undo_fd;
            memcpy(hello, "TTBH", 4);
            memcpy(hello + 4, b->secret, TT_SECRET_BYTES);
            tt_put32(hello + 36, (uint32_t)b->rank);
            tt_put32(hello + 40, (uint32_t)b->nranks);
            tt_addr_pack(&b->self, hello + 44);
        }
        rc = tt_sock_write(fd, hello, sizeof(hello), deadline);
        if (rc == TUTTI_SUCCESS)
            rc = tt_sock_read(fd, reply, sizeof(reply), deadline + ROOT_ANSWER_GRACE);
        /* Closed before any answer: the service dropped us unheard (a flood of strangers had
         * its budget full); connect again while the deadline allows. */
        if (rc != TUTTI_ERR_REMOTE || tt_now() >= deadline)
            break;
        close(fd);
        if (tries++ == 0)
            TT_INFO(TT_SUB_BOOT,
                    "rank %d: the rendezvous at %s closed the connection before answering; "
                    "connecting again",
                    b->rank, where);
        nanosleep(&(struct timespec){0, (20 + 10 * (tries < 20 ? tries : 20)) * 1000 * 1000}, NULL);
    }
    if (rc != TUTTI_SUCCESS) {
        rc = tt_fail(NULL, rc, "rank %d: rendezvous at %s failed: %s (%s)", b->rank, where,
                     tt_thread_error(),
                     rc == TUTTI_ERR_REMOTE
                         ? "it closed the connection without an answer: did the process "
                           "serving it (rank 0's, with MASTER_ADDR) exit?"
                         : "no answer within TUTTI_TIMEOUT: is it served, and reachable from "
                           "here?");
        goto undo_fd;
    }
    status = tt_get32(reply + 4);
    count = tt_get32(reply + 8);
    if (memcmp(reply, "TTBR", 4) != 0) {
        rc = tt_fail(NULL, TUTTI_ERR_REMOTE, "rank %d: %s is not a tutti rendezvous", b->rank,
                     where);
        goto undo_fd;
    }
    if (status != TUTTI_SUCCESS) {
        char msg[1024] = {0};
        size_t n = count < sizeof(msg) - 1 ? count : sizeof(msg) - 1;
        tt_sock_read(fd, msg, n, deadline + ROOT_ANSWER_GRACE);
        rc = tt_fail(NULL, status < TUTTI_NUM_RESULTS ? (tutti_result_t)status : TUTTI_ERR_REMOTE,
                     "rank %d: rendezvous at %s refused: %s", b->rank, where, msg);
        goto undo_fd;
    }
    if ((int)count != b->nranks) {
        rc = tt_fail(NULL, TUTTI_ERR_REMOTE, "rank %d: rendezvous answered %u ranks, not %d",
                     b->rank, count, b->nranks);
        goto undo_fd;
    }
    unsigned char *table = malloc((size_t)count * TT_ADDR_PACKED);
    if (!table) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "rank %d: out of memory", b->rank);
        goto undo_fd;
    }
    rc = tt_sock_read(fd, table, (size_t)count * TT_ADDR_PACKED, deadline + ROOT_ANSWER_GRACE);
    for (uint32_t k = 0; rc == TUTTI_SUCCESS && k < count; k++)
        if (tt_addr_unpack(table + k * TT_ADDR_PACKED, &b->addrs[k]) != 0)
            rc = tt_fail(NULL, TUTTI_ERR_REMOTE, "rendezvous sent a bad address for rank %u", k);
    free(table);
    if (rc != TUTTI_SUCCESS)
        goto undo_fd;
    close(fd);
    return TUTTI_SUCCESS;

undo_fd:
    close(fd);
    return rc;
}

tutti_result_t tt_boot_init(const struct tt_id_info *id, int rank, int nranks, double timeout_s,
                            struct tt_boot **out)
{
    struct tt_boot *b = calloc(1, sizeof(*b));
    tutti_result_t rc;

    if (!b)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory");
    pthread_mutex_init(&b->lock, NULL);
    b->rank = rank;
    b->nranks = nranks;
    b->timeout = timeout_s;
    b->stall = tt_env_double("TUTTI_STALL_WARN");
    b->lfd = -1;
    b->tailp = &b->head;
    memcpy(b->secret, id->secret, TT_SECRET_BYTES);
    b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
    b->out_fd = malloc((size_t)nranks * sizeof(int));
    b->peer_closed = calloc((size_t)nranks, 1);
    if (!b->addrs || !b->out_fd || !b->peer_closed) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory for %d ranks", nranks);
        goto undo_boot;
    }
    for (int i = 0; i < nranks; i++)
        b->out_fd[i] = -1;
    rc = rendezvous(b, id, tt_now() + timeout_s);
    if (rc != TUTTI_SUCCESS)
        goto undo_boot;
    *out = b;
    return TUTTI_SUCCESS;

undo_boot:
    tt_boot_close(b);
    return rc;
}

/* A queued TT_TAG_GAVE_UP message from any rank: its sender, the reason in why; else -1.
 * Where several ranks told, the first whose reason is its own (not "rank R gave up" or "had
 * failed", a failure that followed another's): the root cause. */
static int peer_gave_up(const struct tt_boot *b, char *why, size_t size)
{
    const struct boot_msg *first = NULL;

    for (const struct boot_msg *m = b->head; m; m = m->next) {
        char text[512];
        size_t n;
        if (m->tag != TT_TAG_GAVE_UP)
            continue;
        n = m->len < sizeof(text) - 1 ? m->len : sizeof(text) - 1;
        memcpy(text, m->data, n);
        text[n] = '\0';
        if (!first)
            first = m;
        if (!strstr(text, "gave up") && !strstr(text, "had failed")) {
            first = m;
            break;
        }
    }
    if (!first)
        return -1;
    size_t n = first->len < size - 1 ? first->len : size - 1;
    memcpy(why, first->data, n);
    why[n] = '\0';
    return first->from;
}

/* A rank told us it gave up: fail with its reason, and do not tell the others again (it did). */
static tutti_result_t told_by(struct tt_boot *b, int who, const char *why)
{
    b->told = 1;
    return tt_fail(NULL, TUTTI_ERR_REMOTE, "bootstrap: rank %d gave up: %s", who, why);
}

static tutti_result_t out_connect(struct tt_boot *b, int peer, double deadline)
{
    unsigned char hello[TT_HELLO_PEER_LEN];
    tutti_result_t rc;
    int fd;

    /* Every rank listened before it joined the rendezvous: a refusal means it is gone. */
    rc = tt_sock_connect_up(&b->addrs[peer], deadline, &fd);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(NULL, rc, "bootstrap: cannot connect to rank %d: %s", peer,
                       tt_thread_error());
    memcpy(hello, "TTBP", 4);
    memcpy(hello + 4, b->secret, TT_SECRET_BYTES);
    tt_put32(hello + 36, (uint32_t)b->rank);
    tt_put32(hello + 40, (uint32_t)b->nranks);
    rc = tt_sock_write(fd, hello, sizeof(hello), deadline);
    if (rc != TUTTI_SUCCESS) {
        close(fd);
        return tt_fail(NULL, rc, "bootstrap: hello to rank %d failed: %s", peer, tt_thread_error());
    }
    b->out_fd[peer] = fd;
    return TUTTI_SUCCESS;
}

/* Write all of buf to the peer, serving incoming traffic whenever the socket is full. */
static tutti_result_t out_write(struct tt_boot *b, int peer, const void *buf, size_t len,
                                double deadline)
{
    const char *p = buf;
    int fd = b->out_fd[peer];

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return tt_fail(NULL, TUTTI_ERR_REMOTE, "bootstrap: send to rank %d failed: %m", peer);
        if (aborted(b))
            return tt_fail(NULL, TUTTI_ERR_ABORTED, "bootstrap: aborted while sending to rank %d",
                           peer);
        if (!b->told) {
            char why[512];
            int who = peer_gave_up(b, why, sizeof(why));
            if (who >= 0)
                return told_by(b, who, why);
        }
        if (tt_now() >= deadline)
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT,
                           "bootstrap: rank %d did not take our message within %.0f s", peer,
                           b->timeout);
        tt_boot_poll(b, fd, deadline);
    }
    return TUTTI_SUCCESS;
}

/*
 * This rank gives up on a bootstrap exchange: tell every other rank (once, best effort, within
 * about 2 s), so ranks waiting for data that would have passed through this one fail now
 * instead of at TUTTI_TIMEOUT. Ranks that fail because they were told do not tell again.
 */
static void tell_peers(struct tt_boot *b, const char *why)
{
    double deadline = tt_now() + 2.0;
    size_t len = strlen(why);
    unsigned char hdr[TT_MSG_HDR_LEN];

    if (b->told)
        return;
    b->told = 1;
    memcpy(hdr, "TTBM", 4);
    tt_put32(hdr + 4, TT_TAG_GAVE_UP);
    tt_put64(hdr + 8, len);
    for (int p = 0; p < b->nranks && tt_now() < deadline; p++) {
        double dl = tt_now() + 0.5 < deadline ? tt_now() + 0.5 : deadline;
        if (p == b->rank || (b->out_fd[p] < 0 && out_connect(b, p, dl) != TUTTI_SUCCESS))
            continue;
        if (out_write(b, p, hdr, sizeof(hdr), dl) == TUTTI_SUCCESS)
            out_write(b, p, why, len, dl);
    }
}

/* Fail with rc (already recorded and logged by tt_fail) and tell the others; the thread's
 * message is put back as it was (telling may have failed and written its own). */
static tutti_result_t give_up(struct tt_boot *b, tutti_result_t rc)
{
    char why[512], told[512];
    int who;

    snprintf(why, sizeof(why), "%s", tt_thread_error());
    /* A rank that failed first may be why (a send to it broke): name it, and tell nobody: it
     * told them. */
    if (!b->told) {
        tt_boot_poll(b, -1, tt_now() + 0.05);
        if ((who = peer_gave_up(b, told, sizeof(told))) >= 0) {
            b->told = 1;
            return tt_fail_quiet(NULL, rc, "%s (rank %d had failed: %s)", why, who, told);
        }
    }
    tell_peers(b, why);
    return tt_fail_quiet(NULL, rc, "%s", why);
}

static tutti_result_t send_msg(struct tt_boot *b, int peer, uint32_t tag, const void *data,
                               size_t len)
{
    double deadline = tt_now() + b->timeout;
    unsigned char hdr[TT_MSG_HDR_LEN];

    if (peer < 0 || peer >= b->nranks || len > TT_BOOT_MAX_MSG)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "bootstrap: bad send to %d of %zu bytes", peer,
                       len);
    if (peer == b->rank) {
        struct boot_msg *m = calloc(1, sizeof(*m));
        if (!m || !(m->data = malloc(len ? len : 1))) {
            free(m);
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory");
        }
        memcpy(m->data, data, len);
        m->from = peer;
        m->tag = tag;
        m->len = len;
        tt_boot_enqueue(b, m);
        return TUTTI_SUCCESS;
    }
    if (b->out_fd[peer] < 0)
        TT_CHECK(out_connect(b, peer, deadline));
    memcpy(hdr, "TTBM", 4);
    tt_put32(hdr + 4, tag);
    tt_put64(hdr + 8, len);
    TT_CHECK(out_write(b, peer, hdr, sizeof(hdr), deadline));
    return out_write(b, peer, data, len, deadline);
}

tutti_result_t tt_boot_send(struct tt_boot *b, int peer, uint32_t tag, const void *data, size_t len)
{
    tutti_result_t rc;

    pthread_mutex_lock(&b->lock);
    rc = send_msg(b, peer, tag, data, len);
    if (rc != TUTTI_SUCCESS)
        rc = give_up(b, rc);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/*
 * While this rank waits for peer: has peer gone? Its process has exited (the communicator's
 * own test, b->gone: ranks of this machine), our connection to it was closed at its end, or,
 * at most every half second, its listener refuses a new one (it exited, or left the
 * communicator): a peer that died before it ever connected to us would otherwise be waited
 * for until the deadline.
 */
static int peer_gone(struct tt_boot *b, int peer, double *next_probe)
{
    double now = tt_now();

    if (b->gone && b->gone(b->gone_arg, peer))
        return 1;
    if (now < *next_probe)
        return 0;
    *next_probe = now + 0.5;
    if (b->out_fd[peer] >= 0)
        return tt_sock_closed(b->out_fd[peer]);
    /* (a connection that is made stays: a later send to peer uses it) */
    return out_connect(b, peer, now + 0.2) == TUTTI_ERR_REMOTE;
}

static tutti_result_t recv_msg(struct tt_boot *b, int peer, uint32_t tag, void *data, size_t len)
{
    double start = tt_now(), deadline = start + b->timeout, next_probe = start + 0.5;
    int warned = 0, who, drained = 0;
    char why[512];

    for (;;) {
        for (struct boot_msg **pp = &b->head; *pp; pp = &(*pp)->next) {
            struct boot_msg *m = *pp;
            if (m->from != peer || m->tag != tag)
                continue;
            if (m->len != len)
                return tt_fail(NULL, TUTTI_ERR_REMOTE,
                               "bootstrap: rank %d sent %zu bytes with tag %u; expected %zu", peer,
                               m->len, tag, len);
            memcpy(data, m->data, len);
            *pp = m->next;
            if (b->tailp == &m->next)
                b->tailp = pp;
            free(m->data);
            free(m);
            return TUTTI_SUCCESS;
        }
        if ((who = peer_gave_up(b, why, sizeof(why))) >= 0)
            return told_by(b, who, why);
        if (b->peer_closed[peer]) {
            int open = 0;
            for (int i = 0; i < b->nin; i++)
                open |= b->in[i].peer == peer;
            if (!open)
                return tt_fail(NULL, TUTTI_ERR_REMOTE,
                               "bootstrap: rank %d closed its connection (did it exit or fail?)",
                               peer);
        }
        if (aborted(b))
            return tt_fail(NULL, TUTTI_ERR_ABORTED, "bootstrap: aborted while waiting for rank %d",
                           peer);
        if (peer != b->rank && peer_gone(b, peer, &next_probe)) {
            if (!drained) { /* what it sent before it went may not have been read yet */
                drained = 1;
                tt_boot_drain(b);
                continue;
            }
            return tt_fail(NULL, TUTTI_ERR_REMOTE,
                           "bootstrap: rank %d is gone while this rank waited for it (its process "
                           "exited, or its bootstrap listener refuses connections)",
                           peer);
        }
        if (tt_now() >= deadline)
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT,
                           "bootstrap: nothing from rank %d (tag %u) for %.0f s (TUTTI_TIMEOUT)",
                           peer, tag, b->timeout);
        if (!warned && b->stall > 0 && tt_now() - start > b->stall) {
            warned = 1;
            TT_WARN(TT_SUB_BOOT,
                    "bootstrap: rank %d has waited %.0f s for rank %d (tag %u); it fails after "
                    "%.0f s (TUTTI_TIMEOUT) unless rank %d sends or gives up (TUTTI_STALL_WARN)",
                    b->rank, tt_now() - start, peer, tag, b->timeout, peer);
        }
        tt_boot_poll(b, -1, deadline);
    }
}

tutti_result_t tt_boot_recv(struct tt_boot *b, int peer, uint32_t tag, void *data, size_t len)
{
    tutti_result_t rc;

    pthread_mutex_lock(&b->lock);
    rc = recv_msg(b, peer, tag, data, len);
    if (rc != TUTTI_SUCCESS)
        rc = give_up(b, rc);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void tt_boot_tell(struct tt_boot *b, const char *why)
{
    char was[1024], told[512];

    if (!b || pthread_mutex_trylock(&b->lock) != 0)
        return; /* busy in a set-up wait: the connections' failure still tells the peers */
    snprintf(was, sizeof(was), "%s", tt_thread_error());
    tt_boot_poll(b, -1, tt_now()); /* a peer that told us first: no need to tell it back */
    if (peer_gave_up(b, told, sizeof(told)) >= 0)
        b->told = 1;
    tell_peers(b, why);
    tt_fail_quiet(NULL, TUTTI_ERR_REMOTE, "%s", was); /* telling may have written its own */
    pthread_mutex_unlock(&b->lock);
}

int tt_boot_told(struct tt_boot *b, double wait_s, char *why, size_t size)
{
    double deadline = tt_now() + wait_s;
    int who = -1;

    if (!b || pthread_mutex_trylock(&b->lock) != 0)
        return -1;
    tt_boot_poll(b, -1, tt_now()); /* what has arrived, also when wait_s is 0 */
    while ((who = peer_gave_up(b, why, size)) < 0 && tt_now() < deadline)
        tt_boot_poll(b, -1, deadline);
    if (who >= 0)
        b->told = 1;
    pthread_mutex_unlock(&b->lock);
    return who;
}

tutti_result_t tt_boot_allgather(struct tt_boot *b, void *data, size_t each)
{
    int n = b->nranks, next = (b->rank + 1) % n, prev = (b->rank + n - 1) % n;
    char *d = data;

    for (int k = 0; k < n - 1; k++) {
        int sblk = (b->rank - k + n) % n, rblk = (b->rank - k - 1 + n) % n;
        TT_CHECK(tt_boot_send(b, next, TT_TAG_ALLGATHER, d + (size_t)sblk * each, each));
        TT_CHECK(tt_boot_recv(b, prev, TT_TAG_ALLGATHER, d + (size_t)rblk * each, each));
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_boot_barrier(struct tt_boot *b)
{
    char *tmp = calloc((size_t)b->nranks, 1);
    tutti_result_t rc;

    if (!tmp)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory");
    rc = tt_boot_allgather(b, tmp, 1);
    free(tmp);
    return rc;
}

const struct tt_addr *tt_boot_self_addr(const struct tt_boot *b)
{
    return &b->self;
}

void tt_boot_close(struct tt_boot *b)
{
    if (!b)
        return;
    while (b->nin > 0) {
        b->in[b->nin - 1].peer = -1; /* not a failure: we are leaving */
        tt_boot_in_drop(b, b->nin - 1);
    }
    for (int i = 0; b->out_fd && i < b->nranks; i++)
        if (b->out_fd[i] >= 0)
            close(b->out_fd[i]);
    while (b->head) {
        struct boot_msg *m = b->head;
        b->head = m->next;
        free(m->data);
        free(m);
    }
    if (b->lfd >= 0)
        close(b->lfd);
    free(b->in);
    free(b->pfd);
    free(b->addrs);
    free(b->out_fd);
    free(b->peer_closed);
    pthread_mutex_destroy(&b->lock);
    free(b);
}
