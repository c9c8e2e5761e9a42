/*
 * boot_in.c -- bootstrap's inbound side: accept connections, check each one's hello, read
 * headers and bodies as they arrive into whole messages queued in arrival order, and the
 * fuzzer's entry points into the same reader.
 */
#include "lib/boot/boot_int.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void tt_boot_enqueue(struct tt_boot *b, struct boot_msg *m)
{
    m->next = NULL;
    *b->tailp = m;
    b->tailp = &m->next;
}

void tt_boot_in_drop(struct tt_boot *b, int i)
{
    struct boot_in *c = &b->in[i];

    if (c->peer >= 0) {
        b->peer_closed[c->peer] = 1;
        if (c->state != IN_HDR || c->got != 0)
            TT_WARN(TT_SUB_BOOT, "bootstrap: connection from rank %d ended inside a message",
                    c->peer);
    }
    if (c->msg) {
        free(c->msg->data);
        free(c->msg);
    }
    if (c->fd >= 0)
        close(c->fd);
    b->in[i] = b->in[--b->nin];
}

/* Complete unit (hello / header / body) read on connection i: act on it. 0 ok, -1 dropped. */
static int in_unit(struct tt_boot *b, int i)
{
    struct boot_in *c = &b->in[i];

    if (c->state == IN_HELLO) {
        int from = (int)tt_get32(c->hdr + 36), nranks = (int)tt_get32(c->hdr + 40);
        if (memcmp(c->hdr, "TTBP", 4) != 0 || !tt_secret_equal(c->hdr + 4, b->secret)) {
            TT_WARN(TT_SUB_BOOT, "bootstrap: rejected a connection: wrong secret");
            tt_boot_in_drop(b, i);
            return -1;
        }
        if (nranks != b->nranks || from < 0 || from >= b->nranks) {
            TT_WARN(TT_SUB_BOOT, "bootstrap: rejected a connection claiming rank %d of %d", from,
                    nranks);
            tt_boot_in_drop(b, i);
            return -1;
        }
        c->peer = from;
        c->state = IN_HDR;
        c->got = 0;
        return 0;
    }
    if (c->state == IN_HDR) {
        uint64_t len = tt_get64(c->hdr + 8);
        if (memcmp(c->hdr, "TTBM", 4) != 0 || len > TT_BOOT_MAX_MSG) {
            TT_WARN(TT_SUB_BOOT,
                    "bootstrap: malformed header from rank %d (length %llu); "
                    "connection dropped",
                    c->peer, (unsigned long long)len);
            tt_boot_in_drop(b, i);
            return -1;
        }
        /* Allocate for what has arrived, not for what the header claims. */
        c->msg = calloc(1, sizeof(*c->msg));
        if (c->msg) {
            c->msg->cap = len < BOOT_FIRST_ALLOC ? (len ? len : 1) : BOOT_FIRST_ALLOC;
            c->msg->data = malloc(c->msg->cap);
        }
        if (!c->msg || !c->msg->data) {
            TT_WARN(TT_SUB_BOOT, "bootstrap: out of memory for %llu bytes from rank %d",
                    (unsigned long long)len, c->peer);
            tt_boot_in_drop(b, i);
            return -1;
        }
        c->msg->from = c->peer;
        c->msg->tag = tt_get32(c->hdr + 4);
        c->msg->len = (size_t)len;
        c->state = IN_BODY;
        c->got = 0;
        if (len != 0)
            return 0;
    }
    /* A whole body (possibly empty). */
    tt_boot_enqueue(b, c->msg);
    c->msg = NULL;
    c->state = IN_HDR;
    c->got = 0;
    return 0;
}

/*
 * Run `n` bytes that arrived on incoming connection i through its reader. Returns 0, or -1
 * once the connection has been dropped (bad hello, malformed header, out of memory).
 */
static int in_feed(struct tt_boot *b, int i, const unsigned char *data, size_t n)
{
    while (n > 0) {
        struct boot_in *c = &b->in[i];
        unsigned char *dst;
        size_t want, take;

        if (c->state == IN_BODY) {
            struct boot_msg *m = c->msg;
            want = m->len;
            if (m->cap < want && c->got + n > m->cap) { /* grow, at most to the length */
                size_t cap = m->cap * 2 > c->got + n ? m->cap * 2 : c->got + n;
                unsigned char *g = realloc(m->data, cap < want ? cap : want);
                if (!g) {
                    TT_WARN(TT_SUB_BOOT, "bootstrap: out of memory for a message from rank %d",
                            c->peer);
                    tt_boot_in_drop(b, i);
                    return -1;
                }
                m->data = g;
                m->cap = cap < want ? cap : want;
            }
            dst = m->data;
        } else {
            dst = c->hdr;
            want = c->state == IN_HELLO ? TT_HELLO_PEER_LEN : TT_MSG_HDR_LEN;
        }
        take = want - c->got < n ? want - c->got : n;
        memcpy(dst + c->got, data, take);
        c->got += take;
        data += take;
        n -= take;
        if (c->got == want && in_unit(b, i) != 0)
            return -1;
    }
    return 0;
}

static void in_read(struct tt_boot *b, int i)
{
    unsigned char buf[65536];

    for (;;) {
        ssize_t n = recv(b->in[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            if (in_feed(b, i, buf, (size_t)n) != 0)
                return;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        tt_boot_in_drop(b, i);
        return;
    }
}

static void accept_all(struct tt_boot *b)
{
    for (;;) {
        int fd = accept4(b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), pending = 0;
        int oldest = -1;

        if (fd < 0)
            return;
        for (int i = 0; i < b->nin; i++)
            if (b->in[i].peer < 0) {
                pending++;
                if (oldest < 0 || b->in[i].deadline < b->in[oldest].deadline)
                    oldest = i;
            }
        if (pending >= BOOT_MAX_PENDING) /* the oldest stranger goes, not the newcomer */
            tt_boot_in_drop(b, oldest);
        if (b->nin == b->incap) {
            int cap = b->incap ? 2 * b->incap : 16;
            struct boot_in *g = realloc(b->in, (size_t)cap * sizeof(*g));
            if (!g) {
                close(fd);
                continue;
            }
            b->in = g;
            b->incap = cap;
        }
        b->in[b->nin++] = (struct boot_in){
            .fd = fd, .peer = -1, .state = IN_HELLO, .deadline = tt_now() + BOOT_HELLO_WAIT};
    }
}

/*
 * Wait up to 100 ms (or until deadline) for anything: new connections, incoming data, and
 * writability of wfd (if >= 0). Handles what arrived; returns 1 if wfd is writable.
 */
int tt_boot_poll(struct tt_boot *b, int wfd, double deadline)
{
    int np = 0, writable = 0;
    double left = deadline - tt_now();
    int ms = left <= 0 ? 0 : left > 0.1 ? 100 : (int)(left * 1000) + 1;

    if (b->pfdcap < b->nin + 2) {
        int cap = b->nin + 16;
        struct pollfd *g = realloc(b->pfd, (size_t)cap * sizeof(*g));
        if (!g)
            return 0;
        b->pfd = g;
        b->pfdcap = cap;
    }
    b->pfd[np++] = (struct pollfd){.fd = b->lfd, .events = POLLIN};
    for (int i = 0; i < b->nin; i++)
        b->pfd[np++] = (struct pollfd){.fd = b->in[i].fd, .events = POLLIN};
    if (wfd >= 0)
        b->pfd[np++] = (struct pollfd){.fd = wfd, .events = POLLOUT};
    if (poll(b->pfd, (nfds_t)np, ms) <= 0)
        return 0;
    for (int i = 0; i < b->nin; i++)
        b->in[i].ready = b->pfd[1 + i].revents;
    if (wfd >= 0)
        writable = b->pfd[np - 1].revents != 0;
    /* Downwards: in_drop moves the last entry into the hole. */
    for (int i = b->nin - 1; i >= 0; i--) {
        if (b->in[i].ready)
            in_read(b, i);
        else if (b->in[i].peer < 0 && tt_now() > b->in[i].deadline)
            tt_boot_in_drop(b, i);
    }
    if (b->pfd[0].revents)
        accept_all(b);
    return writable;
}

void tt_boot_drain(struct tt_boot *b)
{
    for (int round = 0, pending = 1; pending && round < 4; round++) {
        tt_boot_poll(b, -1, tt_now());
        pending = 0;
        for (int i = 0; i < b->nin; i++)
            pending |= b->in[i].peer < 0;
    }
}

struct tt_boot *tt_boot_fuzz_new(int nranks, const unsigned char *secret)
{
    struct tt_boot *b = calloc(1, sizeof(*b));

    if (!b)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    b->nranks = nranks;
    b->lfd = -1;
    b->tailp = &b->head;
    memcpy(b->secret, secret, TT_SECRET_BYTES);
    b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
    b->out_fd = malloc((size_t)nranks * sizeof(int));
    b->peer_closed = calloc((size_t)nranks, 1);
    b->in = calloc(1, sizeof(*b->in));
    if (!b->addrs || !b->out_fd || !b->peer_closed || !b->in) {
        tt_boot_close(b);
        return NULL;
    }
    for (int i = 0; i < nranks; i++)
        b->out_fd[i] = -1;
    b->incap = 1;
    b->nin = 1;
    b->in[0] = (struct boot_in){.fd = -1, .peer = -1, .state = IN_HELLO};
    return b;
}

int tt_boot_fuzz_feed(struct tt_boot *b, const void *data, size_t len)
{
    if (b->nin == 0)
        return -1;
    return in_feed(b, 0, data, len);
}

size_t tt_boot_fuzz_queued(const struct tt_boot *b)
{
    size_t n = 0;

    for (const struct boot_msg *m = b->head; m; m = m->next)
        n++;
    return n;
}
