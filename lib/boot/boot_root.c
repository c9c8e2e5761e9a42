/*
 * boot_root.c -- the rendezvous service: collects one hello per rank and answers each with
 * the table of listener addresses. See bootstrap.h for the protocol and its guarantees.
 *
 * Strangers cannot block it. A connection that has not said a valid hello (unauthenticated)
 * gets ROOT_HELLO_WAIT seconds to say it, and at most ROOT_MAX_PENDING of them are kept: when
 * that budget is full the oldest is dropped, never the newcomer (which may be a real rank; a
 * rank whose connection is dropped before any answer connects again). A hello with a wrong
 * secret is answered "wrong secret" and dropped. What was dropped and refused is logged (at
 * most once a second) and named when the rendezvous times out, with the missing ranks.
 */
#include "lib/boot/bootstrap.h"
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
#include <unistd.h>

#define ROOT_MAX_PENDING 256
#define ROOT_HELLO_WAIT 3.0 /* seconds a connection may take to say hello */

struct root_conn {
    int fd;
    int rank; /* -1 until a valid hello */
    size_t got;
    double since, deadline;
    unsigned char hello[TT_HELLO_ROOT_LEN];
    char peer[80];
};

/* What the rendezvous turned away, for its log and its failure's message. */
struct refusals {
    unsigned long idle, evicted, garbage, secret, refused, no_fd; /* counts */
    char last_secret[80];    /* where the last wrong secret came from */
    char first_refused[200]; /* the first refused hello of the right secret, and why */
    unsigned long logged;    /* the total when last logged */
    double log_at;           /* not before this */
};

struct root {
    int lfd;
    unsigned char secret[TT_SECRET_BYTES];
    double deadline;
    double timeout;
    struct root_conn *c;
    int nc, cap;
    int nranks; /* -1 until the first valid hello */
    int joined;
    int left;     /* a rank that joined and then closed its connection (-1: none) */
    double stall; /* TUTTI_STALL_WARN: after this long, say who is missing */
    struct refusals why;
    unsigned char *addrs;
    char where[80];
};

int tt_secret_equal(const unsigned char *a, const unsigned char *b)
{
    unsigned char diff = 0;

    for (int i = 0; i < TT_SECRET_BYTES; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

static void conn_drop(struct root *r, int i)
{
    if (r->c[i].rank >= 0)
        r->joined--;
    close(r->c[i].fd);
    r->c[i] = r->c[--r->nc];
}

static void reply_error(struct root_conn *c, tutti_result_t status, const char *msg, double dl)
{
    unsigned char hdr[TT_REPLY_HDR_LEN];
    size_t len = strlen(msg);

    memcpy(hdr, "TTBR", 4);
    tt_put32(hdr + 4, (uint32_t)status);
    tt_put32(hdr + 8, (uint32_t)len);
    if (tt_sock_write(c->fd, hdr, sizeof(hdr), dl) == TUTTI_SUCCESS)
        tt_sock_write(c->fd, msg, len, dl);
}

static int rank_joined(const struct root *r, int rank)
{
    for (int i = 0; i < r->nc; i++)
        if (r->c[i].rank == rank)
            return 1;
    return 0;
}

static unsigned long refusal_total(const struct refusals *w)
{
    return w->idle + w->evicted + w->garbage + w->secret + w->refused + w->no_fd;
}

/* "; turned away: 3 with a wrong secret (the last from ...), ..." into msg at n. */
static int list_refusals(const struct root *r, char *msg, int n, int size)
{
    const struct refusals *w = &r->why;

    if (refusal_total(w) == 0 || n >= size - 1)
        return n;
    n += snprintf(msg + n, (size_t)(size - n), "; turned away meanwhile:");
    if (w->secret && n < size - 1)
        n += snprintf(msg + n, (size_t)(size - n),
                      " %lu hello(s) with a wrong secret (the last from %s: another job's "
                      "TUTTI_ID or TUTTI_SECRET?)",
                      w->secret, w->last_secret);
    if (w->garbage && n < size - 1)
        n += snprintf(msg + n, (size_t)(size - n), " %lu connection(s) that sent no tutti hello",
                      w->garbage);
    if (w->refused && n < size - 1)
        n += snprintf(msg + n, (size_t)(size - n), " %lu refused hello(s) (the first: %s)",
                      w->refused, w->first_refused);
    if (w->idle + w->evicted && n < size - 1)
        n += snprintf(msg + n, (size_t)(size - n),
                      " %lu connection(s) that said no hello within %.0f s, %lu dropped to keep "
                      "at most %d waiting",
                      w->idle, ROOT_HELLO_WAIT, w->evicted, ROOT_MAX_PENDING);
    if (w->no_fd && n < size - 1)
        n += snprintf(msg + n, (size_t)(size - n),
                      " %lu connection(s) not accepted: this process is out of file descriptors "
                      "(ulimit -n)",
                      w->no_fd);
    return n;
}

/* Log what was turned away since the last time, at most once a second. */
static void log_refusals(struct root *r, int force)
{
    struct refusals *w = &r->why;
    unsigned long total = refusal_total(w);
    char msg[700];
    int n;

    if (total == w->logged || (!force && tt_now() < w->log_at))
        return;
    n = snprintf(msg, sizeof(msg), "rendezvous %s: %lu connection(s) turned away so far", r->where,
                 total);
    list_refusals(r, msg, n, (int)sizeof(msg));
    TT_WARN(TT_SUB_BOOT, "%s", msg);
    w->logged = total;
    w->log_at = tt_now() + 1.0;
}

/* A complete hello from conn i: accept it, or answer/drop. Returns 1 if dropped. */
static int hello_check(struct root *r, int i)
{
    struct root_conn *c = &r->c[i];
    int rank = (int)tt_get32(c->hello + 36), nranks = (int)tt_get32(c->hello + 40);
    char msg[160];
    struct tt_addr a;

    if (memcmp(c->hello, "TTBH", 4) != 0 || !tt_secret_equal(c->hello + 4, r->secret)) {
        /* Said so: a rank of another job (or with another TUTTI_SECRET) learns why. */
        if (memcmp(c->hello, "TTBH", 4) != 0) {
            r->why.garbage++;
        } else {
            r->why.secret++;
            snprintf(r->why.last_secret, sizeof(r->why.last_secret), "%s", c->peer);
            reply_error(c, TUTTI_ERR_INVALID_ARG,
                        "wrong secret: this rank's TUTTI_ID (or TUTTI_SECRET, which must be the "
                        "same on every rank) is not this rendezvous's",
                        tt_now() + 0.2);
        }
        log_refusals(r, 0);
        conn_drop(r, i);
        return 1;
    }
    if (nranks <= 0 || rank < 0 || rank >= nranks)
        snprintf(msg, sizeof(msg), "rank %d of %d is out of range", rank, nranks);
    else if (r->nranks > 0 && nranks != r->nranks)
        snprintf(msg, sizeof(msg), "nranks mismatch: this rank says %d, earlier ranks said %d",
                 nranks, r->nranks);
    else if (rank_joined(r, rank))
        snprintf(msg, sizeof(msg), "rank %d has already joined this communicator", rank);
    else if (tt_addr_unpack(c->hello + 44, &a) != 0)
        snprintf(msg, sizeof(msg), "rank %d sent no valid listener address", rank);
    else
        msg[0] = '\0';
    if (msg[0]) {
        TT_WARN(TT_SUB_BOOT, "rendezvous %s: refused %s: %s", r->where, c->peer, msg);
        if (r->why.refused++ == 0)
            snprintf(r->why.first_refused, sizeof(r->why.first_refused), "from %s: %s", c->peer,
                     msg);
        reply_error(c, TUTTI_ERR_INVALID_ARG, msg, tt_now() + 1.0);
        conn_drop(r, i);
        return 1;
    }
    if (r->nranks < 0) {
        r->nranks = nranks;
        r->addrs = calloc((size_t)nranks, TT_ADDR_PACKED);
        if (!r->addrs) {
            conn_drop(r, i);
            return 1;
        }
    }
    memcpy(r->addrs + (size_t)rank * TT_ADDR_PACKED, c->hello + 44, TT_ADDR_PACKED);
    c->rank = rank;
    r->joined++;
    TT_TRACE(TT_SUB_BOOT, "rendezvous %s: rank %d joined from %s (%d of %d)", r->where, rank,
             c->peer, r->joined, r->nranks);
    return 0;
}

static void conn_read(struct root *r, int i)
{
    struct root_conn *c = &r->c[i];

    while (c->rank < 0 && c->got < TT_HELLO_ROOT_LEN) {
        ssize_t n = recv(c->fd, c->hello + c->got, TT_HELLO_ROOT_LEN - c->got, MSG_DONTWAIT);
        if (n > 0) {
            c->got += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        conn_drop(r, i); /* closed or broken before its hello was complete */
        return;
    }
    if (c->rank < 0) {
        hello_check(r, i);
        return;
    }
    /* A joined rank should be silent until the reply; EOF means it exited or gave up, and the
     * communicator cannot form: the others are told at once (root_give_up). */
    char byte;
    ssize_t n = recv(c->fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        r->left = c->rank;
        conn_drop(r, i);
    } else if (n > 0) {
        TT_WARN(TT_SUB_BOOT, "rendezvous %s: rank %d sent unexpected data; dropped", r->where,
                c->rank);
        conn_drop(r, i);
    }
}

/* Drop the unauthenticated connection that has waited longest: room for a newcomer. */
static int evict_oldest(struct root *r)
{
    int old = -1;

    for (int i = 0; i < r->nc; i++)
        if (r->c[i].rank < 0 && (old < 0 || r->c[i].since < r->c[old].since))
            old = i;
    if (old < 0)
        return 0;
    conn_drop(r, old);
    r->why.evicted++;
    return 1;
}

static void root_accept(struct root *r)
{
    for (;;) {
        struct tt_addr a = {.len = sizeof(a.ss)};
        int fd = accept4(r->lfd, (struct sockaddr *)&a.ss, &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        int pending = 0;

        if (fd < 0) {
            /* Out of descriptors: make room by the oldest stranger, else say so and stop
             * accepting for this round (the listener stays readable; poll comes back). */
            if ((errno == EMFILE || errno == ENFILE) && (r->why.no_fd++, evict_oldest(r)))
                continue;
            return;
        }
        for (int i = 0; i < r->nc; i++)
            pending += r->c[i].rank < 0;
        if (pending >= ROOT_MAX_PENDING)
            evict_oldest(r);
        if (r->nc == r->cap) {
            struct root_conn *grown = realloc(r->c, 2 * (size_t)r->cap * sizeof(*grown));
            if (!grown) {
                close(fd);
                continue;
            }
            r->c = grown;
            r->cap *= 2;
        }
        struct root_conn *c = &r->c[r->nc++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->rank = -1;
        c->since = tt_now();
        c->deadline = c->since + ROOT_HELLO_WAIT;
        tt_addr_str(&a, c->peer, sizeof(c->peer));
    }
}

static void root_finish(struct root *r)
{
    double dl = tt_now() + r->timeout;
    unsigned char hdr[TT_REPLY_HDR_LEN];

    memcpy(hdr, "TTBR", 4);
    tt_put32(hdr + 4, TUTTI_SUCCESS);
    tt_put32(hdr + 8, (uint32_t)r->nranks);
    for (int i = 0; i < r->nc; i++) {
        if (r->c[i].rank < 0)
            continue;
        if (tt_sock_write(r->c[i].fd, hdr, sizeof(hdr), dl) != TUTTI_SUCCESS ||
            tt_sock_write(r->c[i].fd, r->addrs, (size_t)r->nranks * TT_ADDR_PACKED, dl) !=
                TUTTI_SUCCESS)
            TT_WARN(TT_SUB_BOOT, "rendezvous %s: could not answer rank %d: %s", r->where,
                    r->c[i].rank, tt_thread_error());
    }
    TT_INFO(TT_SUB_BOOT, "rendezvous %s: all %d ranks joined", r->where, r->nranks);
}

/* "; missing ranks: 1 3" into msg at n; returns the new length. */
static int list_missing(const struct root *r, char *msg, int n, int size)
{
    if (r->nranks <= 0)
        return n;
    n += snprintf(msg + n, (size_t)(size - n), "; missing ranks:");
    for (int k = 0; k < r->nranks && n < size - 16; k++)
        if (!rank_joined(r, k))
            n += snprintf(msg + n, (size_t)(size - n), " %d", k);
    return n;
}

/* "; ranks 0 1 joined from 10.0.0.1" (their hosts: where the missing ones are not) into msg. */
static int list_joined(const struct root *r, char *msg, int n, int size)
{
    int first = 1;

    for (int i = 0; i < r->nc && n < size - 32; i++) {
        char host[80];
        const char *colon;
        int seen = 0;
        if (r->c[i].rank < 0)
            continue;
        colon = strrchr(r->c[i].peer, ':');
        snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - r->c[i].peer) : 79,
                 r->c[i].peer);
        for (int k = 0; k < i && !seen; k++) /* one entry per host */
            seen = r->c[k].rank >= 0 && strncmp(r->c[k].peer, host, strlen(host)) == 0 &&
                   r->c[k].peer[strlen(host)] == ':';
        if (seen)
            continue;
        n += snprintf(msg + n, (size_t)(size - n), "%s", first ? "; joined: ranks" : "; ranks");
        first = 0;
        for (int k = i; k < r->nc && n < size - 24; k++)
            if (r->c[k].rank >= 0 && strncmp(r->c[k].peer, host, strlen(host)) == 0 &&
                r->c[k].peer[strlen(host)] == ':')
                n += snprintf(msg + n, (size_t)(size - n), " %d", r->c[k].rank);
        n += snprintf(msg + n, (size_t)(size - n), " from %s", host);
    }
    return n;
}

static void root_give_up(struct root *r)
{
    char msg[1000];
    tutti_result_t status = r->left >= 0 ? TUTTI_ERR_REMOTE : TUTTI_ERR_TIMEOUT;
    int n = r->left >= 0
                ? snprintf(msg, sizeof(msg),
                           "rank %d joined the rendezvous and then closed its connection (it "
                           "exited or failed) before all %d ranks joined",
                           r->left, r->nranks)
            : r->nranks > 0
                ? snprintf(msg, sizeof(msg),
                           "rendezvous timed out after %.0f s (TUTTI_TIMEOUT): %d of %d ranks "
                           "joined",
                           r->timeout, r->joined, r->nranks)
                : snprintf(msg, sizeof(msg),
                           "rendezvous timed out after %.0f s (TUTTI_TIMEOUT): no rank joined",
                           r->timeout);

    if (r->left < 0) {
        n = list_missing(r, msg, n, (int)sizeof(msg));
        n = list_joined(r, msg, n, (int)sizeof(msg));
        list_refusals(r, msg, n, (int)sizeof(msg));
    }
    TT_WARN(TT_SUB_BOOT, "%s (%s)", msg, r->where);
    /* Rank 0 last: with MASTER_ADDR this service runs in its process, which exits once it has
     * its answer, and the others must have theirs by then. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->nc; i++)
            if (r->c[i].rank >= 0 && (r->c[i].rank == 0) == pass)
                reply_error(&r->c[i], status, msg, tt_now() + 1.0);
}

static void *root_main(void *arg)
{
    struct root *r = arg;
    struct pollfd *p = NULL;
    int pcap = 0, warned = 0;
    double start = tt_now();

    while ((r->nranks < 0 || r->joined < r->nranks) && r->left < 0 && tt_now() < r->deadline) {
        int np = 0;

        if (pcap < r->nc + 1) {
            struct pollfd *grown = realloc(p, (size_t)(r->cap + 1) * sizeof(*p));
            if (!grown)
                break;
            p = grown;
            pcap = r->cap + 1;
        }
        p[np++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        for (int i = 0; i < r->nc; i++)
            p[np++] = (struct pollfd){.fd = r->c[i].fd, .events = POLLIN};
        if (poll(p, (nfds_t)np, 100) < 0 && errno != EINTR)
            break;
        /* Walk downwards: conn_drop moves the last entry into the hole. */
        for (int i = r->nc - 1; i >= 0; i--) {
            if (p[1 + i].revents)
                conn_read(r, i);
            else if (r->c[i].rank < 0 && tt_now() > r->c[i].deadline) {
                conn_drop(r, i);
                r->why.idle++;
            }
        }
        if (p[0].revents)
            root_accept(r);
        if (!warned && r->stall > 0 && tt_now() - start > r->stall) {
            char msg[1000];
            int n = snprintf(msg, sizeof(msg),
                             "rendezvous %s: %d of %d ranks joined in %.0f s; it fails after "
                             "%.0f s (TUTTI_TIMEOUT)",
                             r->where, r->joined, r->nranks, tt_now() - start, r->timeout);
            warned = 1;
            n = list_missing(r, msg, n, (int)sizeof(msg));
            list_refusals(r, msg, n, (int)sizeof(msg));
            TT_WARN(TT_SUB_BOOT, "%s (TUTTI_STALL_WARN)", msg);
        }
        log_refusals(r, 0);
    }
    log_refusals(r, 1);
    if (r->nranks > 0 && r->joined == r->nranks)
        root_finish(r);
    else
        root_give_up(r);
    for (int i = 0; i < r->nc; i++)
        close(r->c[i].fd);
    close(r->lfd);
    free(p);
    free(r->c);
    free(r->addrs);
    free(r);
    return NULL;
}

tutti_result_t tt_boot_root_start(struct tt_addr *addr, const unsigned char *secret,
                                  double timeout_s)
{
    struct root *r = calloc(1, sizeof(*r));
    pthread_t t;
    pthread_attr_t attr;
    tutti_result_t rc;

    if (!r)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "rendezvous: out of memory");
    r->cap = 64;
    r->c = calloc((size_t)r->cap, sizeof(*r->c));
    if (!r->c) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "rendezvous: out of memory");
        goto undo_root;
    }
    rc = tt_sock_listen(addr, 1024, &r->lfd);
    if (rc != TUTTI_SUCCESS)
        goto undo_conns;
    memcpy(r->secret, secret, TT_SECRET_BYTES);
    r->timeout = timeout_s;
    r->deadline = tt_now() + timeout_s;
    r->nranks = -1;
    r->left = -1;
    r->stall = tt_env_double("TUTTI_STALL_WARN");
    tt_addr_str(addr, r->where, sizeof(r->where));
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, root_main, r) != 0) {
        pthread_attr_destroy(&attr);
        close(r->lfd);
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "rendezvous: cannot start thread");
        goto undo_conns;
    }
    pthread_attr_destroy(&attr);
    return TUTTI_SUCCESS;

undo_conns:
    free(r->c);
undo_root:
    free(r);
    return rc;
}
