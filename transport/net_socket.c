/*
 * net_socket.c -- TCP transport between hosts: the data path.
 *
 * A connection is TUTTI_NSOCKS nonblocking TCP sockets. Message k (one FIFO slot: a 64-byte
 * header with its length and tag, then the payload padded to 64 bytes; see WIRE_ALIGN) travels
 * on socket k mod nsocks, so each socket carries its messages in order and consecutive chunks
 * of a large transfer move in parallel.
 *
 * Sender: send_slot() hands out a local staging slot; send_commit() queues it and writes what
 * the socket takes; flush()/progress() write the rest. A slot is reused once its message has
 * been written completely. send_commit_from() sends the bytes from where they lie instead
 * (the user's buffer: the executor then copies nothing, the kernel copies once), the slot only
 * holding the message's place. Receiver: progress() reads a socket's next message only into a
 * free slot, so a slow consumer leaves data in the kernel and TCP's own flow control stops
 * the sender: no credits are needed. recv_peek() returns message `tail` once its socket has
 * read all of it, or (TUTTI_NET_DIRECT) once it has read its header: the payload then waits in
 * the kernel until recv_pull reads it where the executor's step wants it.
 *
 * Setting connections up: net_socket_conn.c; what both files share: net_socket.h.
 */
#include "transport/net_socket.h"

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"
#include "lib/boot/socket.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static const unsigned char wire_zeros[WIRE_ALIGN];

/* Socket sends this process has made, on any connection (TUTTI_NET_WHOLE=auto): a receiver
 * that sees the count move knows its process is sending too. */
static uint64_t sock_sends;

/* Bytes a message of len payload bytes takes on the wire. */
static size_t wire_bytes(size_t len)
{
    return len <= INLINE_MAX ? HDR_LEN : HDR_LEN + (len + WIRE_ALIGN - 1) / WIRE_ALIGN * WIRE_ALIGN;
}

static int msg_written(const struct sock_conn *c, uint64_t m)
{
    return c->next[m % (uint64_t)c->nsocks] > m;
}

/* Message m's slot. */
static char *slot_of(const struct sock_conn *c, uint64_t m)
{
    return c->slots + (m % c->nslots) * c->base.slot_bytes;
}

/* Sender: write what the sockets take. */
static tutti_result_t send_pump(struct sock_conn *c)
{
    for (int s = 0; s < c->nsocks; s++) {
        while (c->next[s] < c->head) {
            uint64_t m = c->next[s];
            size_t len = c->lens[m % c->nslots], total = wire_bytes(len);
            unsigned char hdr[HDR_LEN] = {0};
            const char *base = c->srcs[m % c->nslots];
            struct iovec seg[3], iov[3];
            size_t skip = c->done[s];
            int n = 0;
            ssize_t w;

            tt_put64(hdr, len);
            tt_put32(hdr + 8, c->tags[m % c->nslots]);
            if (!base)
                base = slot_of(c, m);
            seg[0] = (struct iovec){hdr, HDR_LEN};
            seg[1] = seg[2] = (struct iovec){NULL, 0};
            if (len <= INLINE_MAX) {
                memcpy(hdr + HDR_FIELDS, base, len);
            } else {
                seg[1] = (struct iovec){(char *)base, len};
                seg[2] = (struct iovec){(void *)wire_zeros, total - HDR_LEN - len};
            }
            for (int i = 0; i < 3; i++) { /* what is left of the three, past done[s] */
                if (skip >= seg[i].iov_len) {
                    skip -= seg[i].iov_len;
                    continue;
                }
                iov[n++] = (struct iovec){(char *)seg[i].iov_base + skip, seg[i].iov_len - skip};
                skip = 0;
            }
            w = sendmsg(c->fds[s], &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n},
                        MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                    break;
                return sk_fail(c, TUTTI_ERR_REMOTE, "send", errno);
            }
            c->done[s] += (size_t)w;
            __atomic_fetch_add(&sock_sends, 1, __ATOMIC_RELAXED);
            if (c->done[s] < total)
                break;
            c->done[s] = 0;
            c->next[s] += (uint64_t)c->nsocks;
        }
    }
    return TUTTI_SUCCESS;
}

/* Receiver: the next n bytes of socket s's stream into dst (NULL: dropped, at most
 * READ_AHEAD_MAX bytes a call), those read ahead first; with pad, the pad bytes after them
 * dropped in the same call where it reads the socket.
 * What recv returns: > 0 bytes moved (pad ones included), 0 the peer closed, < 0 see errno. */
static ssize_t stream_read(struct sock_conn *c, int s, void *dst, size_t n, size_t pad)
{
    size_t have = c->ahead_len[s] - c->ahead_pos[s];
    char *ahead = c->ahead + (size_t)s * READ_AHEAD_MAX;
    size_t want = c->ahead_want[s];
    unsigned char drop[WIRE_ALIGN];
    struct iovec iov[2];
    int k = 0;
    ssize_t r;

    if (have == 0 && !dst && n + pad >= want) /* dropped: through the empty read-ahead */
        return recv(c->fds[s], ahead, n + pad < READ_AHEAD_MAX ? n + pad : READ_AHEAD_MAX,
                    MSG_DONTWAIT);
    if (have == 0 && n + pad < want) {
        r = recv(c->fds[s], ahead, want, MSG_DONTWAIT);
        if (r <= 0)
            return r;
        c->ahead_pos[s] = 0;
        c->ahead_len[s] = have = (size_t)r;
    }
    if (have > 0) {
        size_t take = have < n ? have : n;
        if (dst)
            memcpy(dst, ahead + c->ahead_pos[s], take);
        c->ahead_pos[s] += take;
        return (ssize_t)take;
    }
    iov[k++] = (struct iovec){dst, n}; /* n + pad >= want: a payload, dst set */
    if (pad)
        iov[k++] = (struct iovec){drop, pad};
    return recvmsg(c->fds[s], &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)k},
                   MSG_DONTWAIT);
}

/*
 * Receiver: may the rest of socket s's payload (rest bytes, its padding included) be read now?
 * Read as its bytes arrive, a payload takes a read per burst that has come (over loopback a
 * 512 KiB message took 3-4 beside its header), and each read that empties the socket sends an
 * acknowledgement, which the sender's kernel handles inside its own send: where this process
 * sends too, both ends' cores are busy and whole reads made all-reduce and all-gather 1.07-1.25x
 * faster over loopback (0.91-0.97x where the two cores share a cache; BENCHMARKS.md,
 * "Whole-payload reads"). So, per TUTTI_NET_WHOLE (auto: while this process
 * has sent on a socket since the connection's last message), the rest is read only once the
 * kernel holds all of it: SO_RCVLOWAT set to it, and poll, which takes no socket lock, asks.
 * Bytes already read ahead go first; a wait longer than WHOLE_WAIT_MAX reads what has come.
 */
static int payload_ready(struct sock_conn *c, int s, size_t rest)
{
    struct pollfd p = {.fd = c->fds[s], .events = POLLIN};
    int want = rest < (size_t)INT_MAX ? (int)rest : INT_MAX;
    double now;

    if (c->whole == WHOLE_NEVER || c->ahead_len[s] > c->ahead_pos[s] ||
        (c->whole == WHOLE_AUTO && __atomic_load_n(&sock_sends, __ATOMIC_RELAXED) == c->sends_seen))
        return 1;
    if (c->lowat[s] != want) {
        if (setsockopt(c->fds[s], SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) != 0) {
            c->whole = WHOLE_NEVER; /* (not Linux's TCP: read as bytes come) */
            return 1;
        }
        c->lowat[s] = want;
    }
    if (poll(&p, 1, 0) != 0) { /* all there, or an error or the peer's close for recv to see */
        if (!(c->whole_logged & 1)) {
            c->whole_logged |= 1;
            TT_TRACE(TT_SUB_NET, "socket: receiving from rank %d (channel %d): payloads read whole",
                     c->base.peer, c->base.channel);
        }
        return 1;
    }
    now = tt_now();
    if (c->whole_since[s] == 0)
        c->whole_since[s] = now;
    if (now - c->whole_since[s] <= WHOLE_WAIT_MAX)
        return 0;
    if (!(c->whole_logged & 2)) {
        c->whole_logged |= 2;
        TT_TRACE(TT_SUB_NET,
                 "socket: receiving from rank %d (channel %d): a payload not all there after "
                 "%.0f ms: read as its bytes come",
                 c->base.peer, c->base.channel, WHOLE_WAIT_MAX * 1e3);
    }
    return 1;
}

/* Receiver: socket s's message (payload len bytes) has been read to its end. */
static void msg_done(struct sock_conn *c, int s, uint64_t len)
{
    uint64_t m = c->next[s];

    if (m >= c->tail) { /* (a message released unread has no slot any more) */
        c->lens[m % c->nslots] = len;
        c->tags[m % c->nslots] = tt_get32(c->hdr[s] + 8);
    }
    c->done[s] = 0;
    c->ahead_want[s] = wire_bytes(len) <= READ_AHEAD_MAX ? READ_AHEAD_MAX : READ_AHEAD_MIN;
    c->whole_since[s] = 0;
    c->sends_seen = __atomic_load_n(&sock_sends, __ATOMIC_RELAXED);
    c->next[s] += (uint64_t)c->nsocks;
}

/* Receiver: the payload of message m is read straight to where the executor wants it
 * (TUTTI_NET_DIRECT, recv_pull): its header has been read, the rest waits in the kernel. */
static int msg_deferred(const struct sock_conn *c, uint64_t m)
{
    int s = (int)(m % (uint64_t)c->nsocks);

    return c->direct && c->next[s] == m && c->done[s] >= HDR_LEN &&
           tt_get64(c->hdr[s]) > INLINE_MAX;
}

/* Receiver: read on socket s into dst (the rest of its payload; NULL: dropped), to its end if
 * it is there; 1 once the message is read, 0 if not yet, -1 an error (failed: set). */
static int payload_read(struct sock_conn *c, int s, char *dst)
{
    uint64_t len = tt_get64(c->hdr[s]);

    while (c->done[s] < wire_bytes(len)) {
        size_t got = c->done[s] - HDR_LEN, padding = wire_bytes(len) - HDR_LEN - len;
        ssize_t r;

        if (dst && !payload_ready(c, s, wire_bytes(len) - c->done[s]))
            return 0;
        if (dst && got < len)
            r = stream_read(c, s, dst + got, len - got, padding);
        else if (got < len)
            r = stream_read(c, s, NULL, len - got, padding);
        else
            r = stream_read(c, s, NULL, padding - (got - len), 0);
        if (r == 0) {
            sk_fail(c, TUTTI_ERR_REMOTE, "connection closed inside a message", ECONNRESET);
            return -1;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            sk_fail(c, TUTTI_ERR_REMOTE, "recv", errno);
            return -1;
        }
        c->done[s] += (size_t)r;
    }
    msg_done(c, s, len);
    return 1;
}

/* Receiver: read messages into free slots; under TUTTI_NET_DIRECT only their headers (and
 * short payloads), the rest left for recv_pull. A message released unread (its payload still
 * in the kernel) is read and dropped. */
static tutti_result_t recv_pump(struct sock_conn *c)
{
    for (int s = 0; s < c->nsocks; s++) {
        while (!c->eof[s] && (int64_t)(c->next[s] - c->tail) < (int64_t)c->nslots) {
            uint64_t m = c->next[s], len;
            ssize_t r;
            int got;

            if (c->done[s] < HDR_LEN) {
                r = stream_read(c, s, c->hdr[s] + c->done[s], HDR_LEN - c->done[s], 0);
                if (r <= 0)
                    goto short_read;
                c->done[s] += (size_t)r;
                if (c->done[s] < HDR_LEN)
                    continue;
                if (tt_get64(c->hdr[s]) > c->msg_max)
                    return sk_fail(c, TUTTI_ERR_REMOTE,
                                   c->msg_max > c->base.slot_bytes
                                       ? "message longer than TUTTI_NET_COPY_MSG"
                                       : "message longer than a slot",
                                   EPROTO);
            }
            len = tt_get64(c->hdr[s]);
            if (len <= INLINE_MAX) {
                if (m >= c->tail)
                    memcpy(slot_of(c, m), c->hdr[s] + HDR_FIELDS, len);
                msg_done(c, s, len);
                continue;
            }
            if (m >= c->tail && c->direct)
                break; /* recv_pull reads it */
            if (m < c->tail && !(c->whole_logged & 8)) {
                c->whole_logged |= 8;
                TT_TRACE(TT_SUB_NET,
                         "socket: receiving from rank %d (channel %d): a message released "
                         "unread: its payload dropped",
                         c->base.peer, c->base.channel);
            }
            got = payload_read(c, s, m >= c->tail ? slot_of(c, m) : NULL);
            if (got < 0)
                return c->failed;
            if (got == 0)
                break;
            continue;
        short_read:
            if (r == 0) {
                /* The peer is done with this socket. An error only if a message was cut short
                 * or one we need is due on it (recv_peek). */
                if (c->done[s] != 0)
                    return sk_fail(c, TUTTI_ERR_REMOTE, "connection closed inside a message",
                                   ECONNRESET);
                c->eof[s] = 1;
                break;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            return sk_fail(c, TUTTI_ERR_REMOTE, "recv", errno);
        }
    }
    return TUTTI_SUCCESS;
}

static tutti_result_t sock_progress(struct tt_conn *conn)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    if (c->failed)
        return c->failed;
    return c->sender ? send_pump(c) : recv_pump(c);
}

static tutti_result_t sock_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    (void)bytes;
    if (c->failed)
        return c->failed;
    if (c->head >= c->nslots && !msg_written(c, c->head - c->nslots)) {
        TT_CHECK(send_pump(c));
        if (!msg_written(c, c->head - c->nslots))
            return TUTTI_IN_PROGRESS;
    }
    *slot = slot_of(c, c->head);
    return TUTTI_SUCCESS;
}

static tutti_result_t sock_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    c->lens[c->head % c->nslots] = bytes;
    c->tags[c->head % c->nslots] = tag;
    c->srcs[c->head % c->nslots] = NULL;
    c->head++;
    return send_pump(c);
}

/* The slot send_slot gave, its bytes read from src instead (any host memory: the kernel
 * copies them as the socket takes them); src stays untouched until sock_sent says so. */
static tutti_result_t sock_send_commit_from(struct tt_conn *conn, const void *src, size_t bytes,
                                            uint32_t tag, struct tt_memreg *reg, uint64_t *ticket)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    (void)reg;
    if (!c->zc_logged) {
        c->zc_logged = 1;
        TT_TRACE(TT_SUB_NET, "socket: sending to rank %d (channel %d) from the caller's memory",
                 c->base.peer, c->base.channel);
    }
    c->lens[c->head % c->nslots] = bytes;
    c->tags[c->head % c->nslots] = tag;
    c->srcs[c->head % c->nslots] = src;
    *ticket = c->head++;
    return send_pump(c);
}

static int sock_sent(struct tt_conn *conn, uint64_t ticket)
{
    return msg_written((struct sock_conn *)conn, ticket);
}

static tutti_result_t sock_flush(struct tt_conn *conn)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    if (!c->sender)
        return TUTTI_SUCCESS;
    TT_CHECK(sock_progress(conn));
    for (int s = 0; s < c->nsocks; s++)
        if (c->next[s] < c->head)
            return TUTTI_IN_PROGRESS;
    return TUTTI_SUCCESS;
}

static tutti_result_t sock_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                     uint32_t *tag)
{
    struct sock_conn *c = (struct sock_conn *)conn;
    int s = (int)(c->tail % (uint64_t)c->nsocks), deferred;

    if (c->failed)
        return c->failed;
    deferred = msg_deferred(c, c->tail);
    if (!deferred && !msg_written(c, c->tail)) {
        TT_CHECK(recv_pump(c));
        deferred = msg_deferred(c, c->tail);
        if (!deferred && !msg_written(c, c->tail)) {
            if (c->eof[s])
                return sk_fail(c, TUTTI_ERR_REMOTE, "connection closed by the peer (did it exit?)",
                               ECONNRESET);
            return TUTTI_IN_PROGRESS;
        }
    }
    *slot = slot_of(c, c->tail);
    if (deferred) { /* the payload is still in the kernel: recv_pull */
        *bytes = tt_get64(c->hdr[s]);
        *tag = tt_get32(c->hdr[s] + 8);
    } else {
        *bytes = c->lens[c->tail % c->nslots];
        *tag = c->tags[c->tail % c->nslots];
    }
    return TUTTI_SUCCESS;
}

/* The message recv_peek gave has its payload still in the kernel (TUTTI_NET_DIRECT). */
static int sock_recv_remote(struct tt_conn *conn)
{
    return msg_deferred((struct sock_conn *)conn, ((struct sock_conn *)conn)->tail);
}

/* The peeked message's payload (bytes, all of it) straight into dst, in one read where the
 * payload reads whole (TUTTI_NET_WHOLE). TUTTI_IN_PROGRESS: not all there yet; the next call,
 * with the same dst, goes on. */
static tutti_result_t sock_recv_pull(struct tt_conn *conn, void *dst, size_t bytes)
{
    struct sock_conn *c = (struct sock_conn *)conn;
    int s = (int)(c->tail % (uint64_t)c->nsocks);
    int r;

    if (c->failed)
        return c->failed;
    if (!msg_deferred(c, c->tail) || tt_get64(c->hdr[s]) != bytes)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL,
                       "socket: receiving from rank %d (channel %d): %zu bytes pulled from a "
                       "message not waiting for it",
                       c->base.peer, c->base.channel, bytes);
    if (!(c->whole_logged & 4)) {
        c->whole_logged |= 4;
        TT_TRACE(TT_SUB_NET, "socket: receiving from rank %d (channel %d): payloads read in place",
                 c->base.peer, c->base.channel);
    }
    if (bytes > c->base.slot_bytes && !(c->whole_logged & 16)) {
        c->whole_logged |= 16;
        TT_TRACE(TT_SUB_NET,
                 "socket: receiving from rank %d (channel %d): messages longer than a slot "
                 "(%zu bytes), read in place",
                 c->base.peer, c->base.channel, bytes);
    }
    r = payload_read(c, s, dst);
    if (r < 0)
        return c->failed;
    if (r == 0)
        return TUTTI_IN_PROGRESS;
    return TUTTI_SUCCESS;
}

/* A message released unread (TUTTI_NET_DIRECT: a call that ends without its bytes) is
 * dropped as it arrives (recv_pump). */
static tutti_result_t sock_recv_release(struct tt_conn *conn)
{
    ((struct sock_conn *)conn)->tail++;
    return TUTTI_SUCCESS;
}

/* Sleep until a socket of this connection is ready, at most ns nanoseconds. */
static void sock_wait(struct tt_conn *conn, long ns)
{
    struct sock_conn *c = (struct sock_conn *)conn;
    struct pollfd p[SOCK_MAX];
    int n = 0;

    for (int s = 0; s < c->nsocks; s++) {
        if (c->fds[s] < 0)
            continue;
        /* A payload left for recv_pull past message tail: nothing to read until it is pulled. */
        if (!c->sender && msg_deferred(c, c->next[s]) && c->next[s] != c->tail)
            continue;
        /* A low-water mark left from a payload must not keep a header waiting. */
        if (!c->sender && c->lowat[s] > 1 && c->done[s] < HDR_LEN) {
            int one = 1;
            setsockopt(c->fds[s], SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
            c->lowat[s] = 1;
        }
        p[n++] = (struct pollfd){.fd = c->fds[s], .events = c->sender ? POLLOUT : POLLIN};
    }
    poll(p, (nfds_t)n, (int)(ns / 1000000) + 1);
}

static void sock_fail(struct tt_conn *conn)
{
    struct sock_conn *c = (struct sock_conn *)conn;

    /* The peer reads end-of-file (or a reset) at once. */
    for (int s = 0; s < c->nsocks; s++)
        if (c->fds[s] >= 0)
            shutdown(c->fds[s], SHUT_RDWR);
    if (!c->failed)
        c->failed = TUTTI_ERR_REMOTE;
}

static void sock_close(struct tt_conn *conn)
{
    if (conn)
        sk_conn_free((struct sock_conn *)conn);
}

/* Any two ranks: another host, or one whose other transports are excluded. */
static int sock_joins(const struct tt_rank_info *a, const struct tt_rank_info *b)
{
    (void)a, (void)b;
    return 1;
}

static void sock_describe(char *buf, size_t size)
{
    snprintf(buf, size, "%d socket(s) per connection", tt_socket_nsocks());
}

const struct tt_transport tt_transport_socket = {
    .joins = sock_joins,
    .cost = 3,
    .describe = sock_describe,
    .size = sizeof(struct tt_transport),
    .name = "socket",
    .recv_setup = sk_recv_setup,
    .send_connect = sk_send_connect,
    .finish = sk_finish,
    .send_slot = sock_send_slot,
    .send_commit = sock_send_commit,
    .flush = sock_flush,
    .recv_peek = sock_recv_peek,
    .recv_release = sock_recv_release,
    .recv_remote = sock_recv_remote,
    .recv_pull = sock_recv_pull,
    .send_commit_from = sock_send_commit_from,
    .sent = sock_sent,
    .sends_from_any = 1,
    .progress = sock_progress,
    .wait = sock_wait,
    .alive = tt_transport_no_alive,
    .fail = sock_fail,
    .close = sock_close,
};
