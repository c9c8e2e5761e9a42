/*
 * boot_join.c -- the join service (tutti_join_serve) and its clients: newcomers wait at it
 * until a running communicator admits them (tutti_comm_join, tutti_comm_grow).
 *
 * Every request is one fixed-size message that opens with the service's secret (JOIN_REQ
 * bytes: "TTJ" and a kind, the secret, two numbers, an id). A newcomer ('W') keeps its
 * connection open and waits; a member asks how many wait ('Q': the answer is a count) or
 * admits up to a number of them ('A': with the rendezvous id of the new communicator and the
 * rank the first newcomer gets; each admitted newcomer is sent "TTJR", its rank, the new size,
 * the members' count and the id, in the order they arrived, and the member gets the count
 * admitted). A newcomer whose connection closed (it died, or gave up) is dropped before it is
 * counted. As at the rendezvous, a connection gets JOIN_HELLO_WAIT seconds to say its request, and
 * at most JOIN_MAX_PENDING wait to say it (the oldest goes first); a wrong secret is dropped.
 */
#include "lib/boot/join.h"
#include "lib/boot/bootstrap.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"
#include "lib/boot/socket.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define JOIN_REQ (4 + TT_SECRET_BYTES + 8 + TUTTI_ID_BYTES)
#define JOIN_ANSWER (16 + TUTTI_ID_BYTES)
#define JOIN_MAX_PENDING 256
#define JOIN_HELLO_WAIT 3.0

struct join_conn {
    int fd;
    int waiting; /* a newcomer that said its request: waits to be admitted */
    unsigned long order;
    size_t got;
    double deadline;
    unsigned char req[JOIN_REQ];
};

struct join_service {
    int lfd;
    unsigned char secret[TT_SECRET_BYTES];
    struct join_conn *c;
    int nc, cap;
    unsigned long arrivals;
};

static void conn_drop(struct join_service *s, int i)
{
    close(s->c[i].fd);
    s->c[i] = s->c[--s->nc];
}

/* Drop the waiting newcomers whose connection has closed. */
static void prune(struct join_service *s)
{
    for (int i = s->nc - 1; i >= 0; i--)
        if (s->c[i].waiting && tt_sock_closed(s->c[i].fd))
            conn_drop(s, i);
}

static int waiting_count(const struct join_service *s)
{
    int n = 0;

    for (int i = 0; i < s->nc; i++)
        n += s->c[i].waiting;
    return n;
}

/* Admit up to max of the waiting newcomers, oldest first: ranks base, base + 1, ...; the
 * number admitted. */
static uint32_t admit(struct join_service *s, uint32_t max, uint32_t base, const unsigned char *id)
{
    uint32_t k = (uint32_t)waiting_count(s);

    k = k < max ? k : max;
    for (uint32_t n = 0; n < k; n++) {
        int oldest = -1;
        unsigned char a[JOIN_ANSWER];
        for (int i = 0; i < s->nc; i++)
            if (s->c[i].waiting && (oldest < 0 || s->c[i].order < s->c[oldest].order))
                oldest = i;
        memcpy(a, "TTJR", 4);
        tt_put32(a + 4, base + n);
        tt_put32(a + 8, base + k);
        tt_put32(a + 12, base);
        memcpy(a + 16, id, TUTTI_ID_BYTES);
        tt_sock_write(s->c[oldest].fd, a, sizeof(a), tt_now() + 1.0);
        conn_drop(s, oldest);
    }
    return k;
}

static void request(struct join_service *s, int i)
{
    struct join_conn *c = &s->c[i];
    unsigned char out[4];
    uint32_t a = tt_get32(c->req + 4 + TT_SECRET_BYTES), b = tt_get32(c->req + 8 + TT_SECRET_BYTES);

    if (memcmp(c->req, "TTJ", 3) != 0 || !tt_secret_equal(c->req + 4, s->secret)) {
        TT_WARN(TT_SUB_BOOT, "join service: dropped a connection without its secret");
        conn_drop(s, i);
        return;
    }
    switch (c->req[3]) {
    case 'W':
        c->waiting = 1;
        c->order = s->arrivals++;
        return;
    case 'Q':
        prune(s);
        tt_put32(out, (uint32_t)waiting_count(s));
        break;
    case 'A': {
        unsigned char id[TUTTI_ID_BYTES];
        memcpy(id, c->req + 12 + TT_SECRET_BYTES, sizeof(id));
        prune(s);
        tt_put32(out, admit(s, a, b, id));
        break;
    }
    default: conn_drop(s, i); return;
    }
    /* Pruning and admitting move entries: find the asker again (the one whole request that
     * is not a waiting newcomer's). */
    for (int k = 0; k < s->nc; k++)
        if (!s->c[k].waiting && s->c[k].got == JOIN_REQ) {
            tt_sock_write(s->c[k].fd, out, sizeof(out), tt_now() + 1.0);
            conn_drop(s, k);
            break;
        }
}

static void conn_read(struct join_service *s, int i)
{
    struct join_conn *c = &s->c[i];
    ssize_t n;

    if (c->waiting) { /* a newcomer says nothing more: data or end means it is gone */
        conn_drop(s, i);
        return;
    }
    n = recv(c->fd, c->req + c->got, JOIN_REQ - c->got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        conn_drop(s, i);
        return;
    }
    if (n > 0 && (c->got += (size_t)n) == JOIN_REQ)
        request(s, i);
}

static void service_accept(struct join_service *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), pending = 0, old = -1;
        if (fd < 0)
            return;
        for (int i = 0; i < s->nc; i++)
            if (!s->c[i].waiting) {
                pending++;
                if (old < 0 || s->c[i].deadline < s->c[old].deadline)
                    old = i;
            }
        if (pending >= JOIN_MAX_PENDING)
            conn_drop(s, old);
        if (s->nc == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            struct join_conn *g = realloc(s->c, (size_t)cap * sizeof(*g));
            if (!g) {
                close(fd);
                continue;
            }
            s->c = g;
            s->cap = cap;
        }
        s->c[s->nc++] = (struct join_conn){.fd = fd, .deadline = tt_now() + JOIN_HELLO_WAIT};
    }
}

static void *service_main(void *arg)
{
    struct join_service *s = arg;
    struct pollfd *p = NULL;
    int pcap = 0;

    for (;;) {
        int np = 0;
        if (pcap < s->nc + 1) {
            struct pollfd *g = realloc(p, (size_t)(s->nc + 16) * sizeof(*g));
            if (!g) {
                nanosleep(&(struct timespec){0, 100000000}, NULL);
                continue;
            }
            p = g;
            pcap = s->nc + 16;
        }
        p[np++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int i = 0; i < s->nc; i++)
            p[np++] = (struct pollfd){.fd = s->c[i].fd, .events = POLLIN};
        if (poll(p, (nfds_t)np, 500) < 0 && errno != EINTR)
            continue;
        for (int i = s->nc - 1; i >= 0; i--) {
            if (p[1 + i].revents)
                conn_read(s, i);
            else if (!s->c[i].waiting && tt_now() > s->c[i].deadline)
                conn_drop(s, i);
        }
        if (p[0].revents)
            service_accept(s);
    }
    return NULL;
}

static int id_is_set(const tutti_id_t *id)
{
    for (int i = 0; i < TUTTI_ID_BYTES; i++)
        if (id->internal[i])
            return 1;
    return 0;
}

tutti_result_t tutti_join_serve(tutti_id_t *id)
{
    struct join_service *s;
    struct tt_id_info info;
    pthread_t t;
    char ifname[64], where[80];

    tt_base_init();
    if (!id)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_join_serve: id is NULL");
    if (id_is_set(id)) { /* serve there, with its secret */
        if (tt_id_decode(id, &info) != 0)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_join_serve: %s", tutti_last_error());
        snprintf(ifname, sizeof(ifname), "given");
    } else {
        TT_CHECK(tt_if_pick(&info.root, ifname, sizeof(ifname)));
        TT_CHECK(tt_random(info.secret, sizeof(info.secret)));
        tt_addr_set_port(&info.root, 0);
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_join_serve: out of memory");
    memcpy(s->secret, info.secret, sizeof(s->secret));
    if (tt_sock_listen(&info.root, 1024, &s->lfd) != TUTTI_SUCCESS) {
        free(s);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_join_serve: %s", tt_thread_error());
    }
    if (pthread_create(&t, NULL, service_main, s) != 0) {
        close(s->lfd);
        free(s);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_join_serve: cannot start its thread");
    }
    pthread_detach(t);
    TT_INFO(TT_SUB_BOOT, "join service at %s (interface %s)",
            tt_addr_str(&info.root, where, sizeof(where)), ifname);
    tt_id_encode(&info, id);
    return TUTTI_SUCCESS;
}

/* One request: connect, send, and read `answer` bytes back (0: none). */
static tutti_result_t ask(const struct tt_id_info *svc, char kind, uint32_t a, uint32_t b,
                          const tutti_id_t *id, void *answer, size_t len, double deadline)
{
    unsigned char req[JOIN_REQ] = {0};
    char where[80];
    tutti_result_t rc;
    int fd;

    memcpy(req, "TTJ", 3);
    req[3] = (unsigned char)kind;
    memcpy(req + 4, svc->secret, TT_SECRET_BYTES);
    tt_put32(req + 4 + TT_SECRET_BYTES, a);
    tt_put32(req + 8 + TT_SECRET_BYTES, b);
    if (id)
        memcpy(req + 12 + TT_SECRET_BYTES, id->internal, TUTTI_ID_BYTES);
    tt_addr_str(&svc->root, where, sizeof(where));
    rc = tt_sock_connect_up(&svc->root, deadline, &fd);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(NULL, rc, "the join service at %s (TUTTI_JOIN) cannot be reached: %s", where,
                       tt_thread_error());
    rc = tt_sock_write(fd, req, sizeof(req), deadline);
    if (rc == TUTTI_SUCCESS && len)
        rc = tt_sock_read(fd, answer, len, deadline);
    close(fd);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(NULL, rc, "the join service at %s (TUTTI_JOIN): %s", where,
                       rc == TUTTI_ERR_TIMEOUT ? "no answer before the deadline"
                                               : "it closed the connection (did the job end?)");
    return TUTTI_SUCCESS;
}

tutti_result_t tt_join_count(const struct tt_id_info *svc, double deadline, int *count)
{
    unsigned char a[4];

    TT_CHECK(ask(svc, 'Q', 0, 0, NULL, a, sizeof(a), deadline));
    *count = (int)tt_get32(a);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_join_admit(const struct tt_id_info *svc, int max, int base, const tutti_id_t *id,
                             double deadline, int *admitted)
{
    unsigned char a[4];

    TT_CHECK(ask(svc, 'A', (uint32_t)max, (uint32_t)base, id, a, sizeof(a), deadline));
    *admitted = (int)tt_get32(a);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_join_wait(const struct tt_id_info *svc, double deadline, tutti_id_t *id,
                            int *rank, int *nranks, int *members)
{
    unsigned char a[JOIN_ANSWER];

    TT_CHECK(ask(svc, 'W', 0, 0, NULL, a, sizeof(a), deadline));
    if (memcmp(a, "TTJR", 4) != 0)
        return tt_fail(NULL, TUTTI_ERR_REMOTE, "the join service (TUTTI_JOIN) answered garbage");
    *rank = (int)tt_get32(a + 4);
    *nranks = (int)tt_get32(a + 8);
    *members = (int)tt_get32(a + 12);
    memcpy(id->internal, a + 16, TUTTI_ID_BYTES);
    return TUTTI_SUCCESS;
}
