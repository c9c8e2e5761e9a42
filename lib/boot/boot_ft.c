/*
 * boot_ft.c -- bootstrap messaging that outlives failed ranks, for tutti_comm_shrink
 * (bootstrap.h): a bootstrap whose listener exists before its ranks are known, sends that
 * report a gone peer instead of giving up, messages taken without waiting, and whether a peer
 * is gone. Nothing here tells other ranks anything, or looks at give-up notices or the abort
 * flag: the caller decides what a gone peer means.
 */
#include "lib/boot/boot_int.h"
#include "lib/base/error.h"
#include "lib/base/wait.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

tutti_result_t tt_boot_open(const struct tt_addr *facing, double timeout_s, struct tt_boot **out)
{
    struct tt_boot *b = calloc(1, sizeof(*b));
    tutti_result_t rc;

    if (!b)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory");
    pthread_mutex_init(&b->lock, NULL);
    b->timeout = timeout_s;
    b->lfd = -1;
    b->tailp = &b->head;
    b->self = *facing;
    tt_addr_set_port(&b->self, 0);
    rc = tt_sock_listen(&b->self, 1024, &b->lfd);
    if (rc != TUTTI_SUCCESS) {
        tt_boot_close(b);
        return rc;
    }
    *out = b;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_boot_join(struct tt_boot *b, const unsigned char *secret, int rank, int nranks,
                            const struct tt_addr *addrs)
{
    b->rank = rank;
    b->nranks = nranks;
    memcpy(b->secret, secret, TT_SECRET_BYTES);
    b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
    b->out_fd = malloc((size_t)nranks * sizeof(int));
    b->peer_closed = calloc((size_t)nranks, 1);
    if (!b->addrs || !b->out_fd || !b->peer_closed)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bootstrap: out of memory for %d ranks", nranks);
    for (int i = 0; i < nranks; i++) {
        b->out_fd[i] = -1;
        b->addrs[i] = addrs[i];
    }
    return TUTTI_SUCCESS;
}

void tt_boot_set_timeout(struct tt_boot *b, double timeout_s)
{
    b->timeout = timeout_s;
}

static void out_close(struct tt_boot *b, int peer)
{
    if (b->out_fd[peer] >= 0)
        close(b->out_fd[peer]);
    b->out_fd[peer] = -1;
}

static tutti_result_t ft_write(struct tt_boot *b, int peer, const void *buf, size_t len,
                               double deadline)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(b->out_fd[peer], p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return tt_fail_quiet(NULL, TUTTI_ERR_REMOTE, "send to rank %d failed: %m", peer);
        if (tt_now() >= deadline)
            return tt_fail_quiet(NULL, TUTTI_ERR_TIMEOUT, "rank %d took nothing for %.1f s", peer,
                                 b->timeout);
        tt_boot_poll(b, b->out_fd[peer], deadline);
    }
    return TUTTI_SUCCESS;
}

tutti_result_t tt_boot_ft_send(struct tt_boot *b, int peer, uint32_t tag, const void *data,
                               size_t len, double deadline)
{
    unsigned char hdr[TT_MSG_HDR_LEN], hello[TT_HELLO_PEER_LEN];
    tutti_result_t rc = TUTTI_SUCCESS;

    if (peer < 0 || peer >= b->nranks || peer == b->rank || len > TT_BOOT_MAX_MSG)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "bootstrap: bad send to %d of %zu bytes", peer,
                       len);
    pthread_mutex_lock(&b->lock);
    if (b->out_fd[peer] < 0) {
        /* Its listener was up before any of this: a refusal means it is gone. */
        rc = tt_sock_connect_up(&b->addrs[peer], deadline, &b->out_fd[peer]);
        if (rc != TUTTI_SUCCESS)
            b->out_fd[peer] = -1;
        memcpy(hello, "TTBP", 4);
        memcpy(hello + 4, b->secret, TT_SECRET_BYTES);
        tt_put32(hello + 36, (uint32_t)b->rank);
        tt_put32(hello + 40, (uint32_t)b->nranks);
        if (rc == TUTTI_SUCCESS)
            rc = ft_write(b, peer, hello, sizeof(hello), deadline);
    }
    memcpy(hdr, "TTBM", 4);
    tt_put32(hdr + 4, tag);
    tt_put64(hdr + 8, len);
    if (rc == TUTTI_SUCCESS)
        rc = ft_write(b, peer, hdr, sizeof(hdr), deadline);
    if (rc == TUTTI_SUCCESS)
        rc = ft_write(b, peer, data, len, deadline);
    if (rc != TUTTI_SUCCESS && b->out_fd[peer] >= 0)
        out_close(b, peer); /* a message cut short: nothing more may follow it */
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int tt_boot_ft_take(struct tt_boot *b, int peer, uint32_t tag, void *data, size_t cap, size_t *len)
{
    int found = 0;

    pthread_mutex_lock(&b->lock);
    tt_boot_drain(b);
    for (struct boot_msg **pp = &b->head; *pp; pp = &(*pp)->next) {
        struct boot_msg *m = *pp;
        if (m->from != peer || m->tag != tag)
            continue;
        memcpy(data, m->data, m->len < cap ? m->len : cap);
        *len = m->len;
        *pp = m->next;
        if (b->tailp == &m->next)
            b->tailp = pp;
        free(m->data);
        free(m);
        found = 1;
        break;
    }
    pthread_mutex_unlock(&b->lock);
    return found;
}

void tt_boot_ft_wait(struct tt_boot *b, double wait_s)
{
    pthread_mutex_lock(&b->lock);
    tt_boot_poll(b, -1, tt_now() + wait_s);
    pthread_mutex_unlock(&b->lock);
}

int tt_boot_ft_gone(struct tt_boot *b, int peer)
{
    int gone = 0;

    pthread_mutex_lock(&b->lock);
    tt_boot_drain(b);
    if (b->peer_closed[peer]) { /* its connection to us ended, and it opened no other */
        gone = 1;
        for (int i = 0; i < b->nin; i++)
            gone &= b->in[i].peer != peer && b->in[i].peer >= 0;
    }
    if (!gone && b->out_fd[peer] >= 0) /* ours to it was closed at its end */
        gone = tt_sock_closed(b->out_fd[peer]);
    pthread_mutex_unlock(&b->lock);
    return gone;
}
