/*
 * net_socket_conn.c -- setting the socket transport's connections up (net_socket.h).
 *
 * The receiver listens on the interface its bootstrap uses and sends the address and a random
 * 64-bit nonce in the blob (which travels over the authenticated bootstrap); the sender
 * connects nsocks sockets and presents the nonce and the socket's index; finish() accepts them,
 * dropping any connection that does not present the nonce.
 */
#include "transport/net_socket.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/boot/id.h"
#include "lib/boot/socket.h"
#include "lib/base/wait.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct sock_blob {
    unsigned char addr[TT_ADDR_PACKED];
    unsigned char nonce[8];
    unsigned char nsocks[4];
};

static struct sock_conn *conn_new(const struct tt_transport_ctx *ctx, int peer, int channel,
                                  int sender)
{
    struct sock_conn *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->base.tp = &tt_transport_socket;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = ctx->slot_bytes;
    c->sender = sender;
    c->lfd = -1;
    c->nslots = (uint32_t)ctx->nslots;
    for (int s = 0; s < SOCK_MAX; s++) {
        c->fds[s] = -1;
        c->next[s] = (uint64_t)s;
    }
    c->slots = malloc((size_t)c->nslots * ctx->slot_bytes);
    c->lens = calloc(c->nslots, sizeof(*c->lens));
    c->tags = calloc(c->nslots, sizeof(*c->tags));
    c->srcs = calloc(c->nslots, sizeof(*c->srcs));
    if (!c->slots || !c->lens || !c->tags || !c->srcs) {
        free(c->slots);
        free(c->lens);
        free(c->tags);
        free(c->srcs);
        free(c);
        return NULL;
    }
    memset(c->slots, 0, (size_t)c->nslots * ctx->slot_bytes); /* fault the pages in now */
    return c;
}

void sk_conn_free(struct sock_conn *c)
{
    for (int s = 0; s < SOCK_MAX; s++)
        if (c->fds[s] >= 0)
            close(c->fds[s]);
    if (c->lfd >= 0)
        close(c->lfd);
    free(c->slots);
    free(c->lens);
    free(c->tags);
    free(c->srcs);
    free(c->ahead);
    free(c);
}

tutti_result_t sk_fail(struct sock_conn *c, tutti_result_t rc, const char *what, int err)
{
    errno = err;
    c->failed =
        tt_fail(NULL, rc, "socket: %s rank %d (channel %d): %s: %m",
                c->sender ? "sending to" : "receiving from", c->base.peer, c->base.channel, what);
    return c->failed;
}

int tt_socket_nsocks(void)
{
    return (int)tt_env_int("TUTTI_NSOCKS");
}

tutti_result_t sk_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel, void *blob,
                             size_t *blob_len, struct tt_conn **conn)
{
    struct sock_conn *c = conn_new(ctx, peer, channel, 0);
    struct sock_blob b;
    struct tt_addr at;
    tutti_result_t rc;

    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "socket: out of memory");
    if (!ctx->net_addr) {
        sk_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "socket: no local address to listen on");
    }
    at = *(const struct tt_addr *)ctx->net_addr;
    tt_addr_set_port(&at, 0);
    rc = tt_sock_listen(&at, SOCK_MAX, &c->lfd);
    if (rc != TUTTI_SUCCESS) {
        sk_conn_free(c);
        return rc;
    }
    rc = tt_random(&c->nonce, sizeof(c->nonce));
    if (rc != TUTTI_SUCCESS) {
        sk_conn_free(c);
        return rc;
    }
    c->nsocks = tt_socket_nsocks();
    c->whole = tt_env_auto01("TUTTI_NET_WHOLE");
    c->direct = tt_env_flag("TUTTI_NET_DIRECT");
    c->msg_max = c->direct && ctx->msg_max > ctx->slot_bytes ? ctx->msg_max : ctx->slot_bytes;
    c->ahead = aligned_alloc(WIRE_ALIGN, (size_t)c->nsocks * READ_AHEAD_MAX);
    for (int s = 0; s < SOCK_MAX; s++)
        c->ahead_want[s] = READ_AHEAD_MIN;
    if (!c->ahead) {
        sk_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "socket: out of memory");
    }
    tt_addr_pack(&at, b.addr);
    tt_put64(b.nonce, c->nonce);
    tt_put32(b.nsocks, (uint32_t)c->nsocks);
    memcpy(blob, &b, sizeof(b));
    *blob_len = sizeof(b);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

/*
 * No Nagle delay; and a link that goes silent is declared dead after TUTTI_NET_TIMEOUT
 * seconds instead of TCP's minutes: keepalive probes on idle sockets (a receiver has nothing
 * to send), a user timeout on unacknowledged data.
 */
static void tune_socket(int fd)
{
    int one = 1, t = (int)tt_env_int("TUTTI_NET_TIMEOUT");
    int idle = t / 2 > 0 ? t / 2 : 1, count = t - idle > 0 ? t - idle : 1, intvl = 1;
    unsigned user_ms = (unsigned)(t > 0 ? t : 1) * 1000u;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
}

tutti_result_t sk_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                               const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct sock_conn *c;
    struct sock_blob b;
    struct tt_addr to;
    double deadline = tt_now() + ctx->timeout_s;
    char where[80];

    if (blob_len != sizeof(b))
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "socket: blob from rank %d has %zu bytes", peer,
                       blob_len);
    memcpy(&b, blob, sizeof(b));
    if (tt_addr_unpack(b.addr, &to) != 0 || tt_get32(b.nsocks) < 1 || tt_get32(b.nsocks) > SOCK_MAX)
        return tt_fail(NULL, TUTTI_ERR_REMOTE, "socket: bad connection blob from rank %d", peer);
    c = conn_new(ctx, peer, channel, 1);
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "socket: out of memory");
    c->nsocks = (int)tt_get32(b.nsocks);
    c->nonce = tt_get64(b.nonce);
    for (int s = 0; s < c->nsocks; s++) {
        unsigned char hello[HELLO_LEN];
        /* Its listener was up before its blob was sent: a refusal means it is gone (not a
         * listener still to come), so it fails now rather than at the deadline. */
        tutti_result_t rc = tt_sock_connect_up(&to, deadline, &c->fds[s]);

        memcpy(hello, "TTNS", 4);
        tt_put32(hello + 4, (uint32_t)s);
        tt_put64(hello + 8, c->nonce);
        if (rc == TUTTI_SUCCESS)
            rc = tt_sock_write(c->fds[s], hello, sizeof(hello), deadline);
        if (rc != TUTTI_SUCCESS) {
            tt_fail(NULL, rc, "socket: cannot connect to rank %d at %s: %s", peer,
                    tt_addr_str(&to, where, sizeof(where)), tt_thread_error());
            sk_conn_free(c);
            return rc;
        }
        tune_socket(c->fds[s]);
    }
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

/* Receiver: accept the sender's sockets (it has connected by now, or will shortly). */
tutti_result_t sk_finish(struct tt_conn *conn, double deadline)
{
    struct sock_conn *c = (struct sock_conn *)conn;
    int have = 0;

    if (c->sender || c->lfd < 0)
        return TUTTI_SUCCESS;
    while (have < c->nsocks) {
        struct pollfd p = {.fd = c->lfd, .events = POLLIN};
        unsigned char hello[HELLO_LEN];
        int fd, idx;

        if (tt_now() >= deadline)
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT,
                           "socket: rank %d connected %d of %d sockets before the deadline",
                           c->base.peer, have, c->nsocks);
        if (poll(&p, 1, 100) <= 0) { /* (a sender that connected and then went is accepted) */
            if (c->base.gone && c->base.gone(c->base.gone_arg, c->base.peer))
                return tt_fail(NULL, TUTTI_ERR_REMOTE,
                               "socket: rank %d died, or a rank gave up, before it connected",
                               c->base.peer);
            continue;
        }
        fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (tt_sock_read(fd, hello, sizeof(hello), tt_now() + 5.0) != TUTTI_SUCCESS ||
            memcmp(hello, "TTNS", 4) != 0 || tt_get64(hello + 8) != c->nonce ||
            (idx = (int)tt_get32(hello + 4)) < 0 || idx >= c->nsocks || c->fds[idx] >= 0) {
            TT_WARN(TT_SUB_NET,
                    "socket: dropped a connection that did not present the nonce "
                    "of the connection from rank %d",
                    c->base.peer);
            close(fd);
            continue;
        }
        tune_socket(fd);
        c->fds[idx] = fd;
        have++;
    }
    close(c->lfd);
    c->lfd = -1;
    return TUTTI_SUCCESS;
}
