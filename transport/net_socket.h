/*
 * net_socket.h -- what the socket transport's two files share: the wire format, a
 * connection, and the setup calls (net_socket_conn.c) the ops table (net_socket.c) names.
 */
#ifndef TT_NET_SOCKET_H
#define TT_NET_SOCKET_H

#include "transport/transport.h"

#include <stddef.h>
#include <stdint.h>

#define SOCK_MAX 16
#define HELLO_LEN 16 /* "TTNS", index, nonce */
/* On the wire a message is a header of HDR_LEN bytes (length, 64 bit; tag; 4 zero bytes; up
 * to INLINE_MAX bytes of payload), then a payload too long for it followed by zeros up to a
 * multiple of WIRE_ALIGN. Every payload outside the header thus starts at a multiple of 64
 * bytes of the stream: the kernel's copies into and out of its socket buffers keep the cache
 * line alignment of slots and user buffers on both ends, which halves their cost (with a
 * 12-byte header the payloads drifted off it by 12 bytes a message: 2x slower from 32 KiB up,
 * BENCHMARKS.md "Sockets at wire speed"). A payload that fits in the header takes
 * one receive call, not two. */
#define WIRE_ALIGN 64
#define HDR_LEN WIRE_ALIGN
#define HDR_FIELDS 16
#define INLINE_MAX (HDR_LEN - HDR_FIELDS)

/* A receiver reads a message's start with one call into a buffer per socket (copied out from
 * there): a small message, header and payload, takes one call, and so may the ones after it on
 * the socket; the rest of a larger one goes straight to its place. The call asks for
 * READ_AHEAD_MAX bytes after a message that fitted in them (a whole message a call: one call
 * where a 4-32 KiB payload took up to four, its header's, SO_RCVLOWAT's, poll's and the rest's,
 * and all-reduce, all-gather and reduce-scatter of 8-32 KiB ran 1.2x faster), else
 * READ_AHEAD_MIN (after a larger one: of a 256 KiB message 32 KiB read twice, once by the
 * kernel and once copied out, made all-reduce 4% slower); BENCHMARKS.md, "Whole small
 * messages a call". */
#define READ_AHEAD_MIN (((size_t)4 << 10) + HDR_LEN)  /* a 4 KiB payload with its header */
#define READ_AHEAD_MAX (((size_t)32 << 10) + HDR_LEN) /* a 32 KiB one */

/* TUTTI_NET_WHOLE: when a receiver reads the rest of a payload (net_socket.c payload_ready). */
enum { WHOLE_AUTO = -1, WHOLE_NEVER, WHOLE_ALWAYS }; /* tt_env_auto01's values */
/* A whole-payload wait that lasts longer gives up and reads what has come (a slow link, where
 * the receiver's reads cost the sender nothing that matters; or a kernel whose poll never
 * reports the low-water mark): seconds. */
#define WHOLE_WAIT_MAX 1e-3

struct sock_conn {
    struct tt_conn base;
    int sender;
    int nsocks;
    int fds[SOCK_MAX];
    int lfd; /* receiver: listener, until every socket is accepted */
    uint64_t nonce;
    uint32_t nslots;
    char *slots;
    uint64_t *lens;
    uint32_t *tags;
    const char **srcs; /* sender: where message m's bytes lie (send_commit_from), else NULL */
    int zc_logged;
    uint64_t head;           /* sender: messages committed */
    uint64_t tail;           /* receiver: messages released */
    uint64_t next[SOCK_MAX]; /* per socket: next message it carries (== s mod nsocks) */
    size_t done[SOCK_MAX];   /* bytes of that message moved, header included */
    unsigned char hdr[SOCK_MAX][HDR_LEN];
    char *ahead; /* receiver: per socket, READ_AHEAD_MAX bytes: read, not yet used */
    size_t ahead_pos[SOCK_MAX], ahead_len[SOCK_MAX];
    size_t ahead_want[SOCK_MAX]; /* receiver: what the socket's next read-ahead asks for */
    char eof[SOCK_MAX];  /* receiver: the peer closed this socket (no more messages on it) */
    int whole;           /* receiver: TUTTI_NET_WHOLE (WHOLE_*) */
    int lowat[SOCK_MAX]; /* receiver: SO_RCVLOWAT as last set (0: never, the kernel's 1) */
    double whole_since[SOCK_MAX]; /* receiver: when this payload's whole wait began (0: not) */
    uint64_t sends_seen; /* receiver: the process's socket sends when its last message ended */
    int whole_logged;    /* receiver: traced once: 1 a whole read, 2 a give-up, 4 a read in place,
                            8 a payload dropped, 16 one longer than a slot */
    int direct;     /* receiver: TUTTI_NET_DIRECT: a payload waits in the kernel for recv_pull */
    size_t msg_max; /* receiver: the longest payload it takes, read in place (>= slot_bytes) */
    tutti_result_t failed; /* sticky */
};

/* A connection's failure, sticky: "socket: sending to / receiving from rank R (channel C):
 * what: strerror(err)"; returns rc. */
tutti_result_t sk_fail(struct sock_conn *c, tutti_result_t rc, const char *what, int err);
void sk_conn_free(struct sock_conn *c);
tutti_result_t sk_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel, void *blob,
                             size_t *blob_len, struct tt_conn **conn);
tutti_result_t sk_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                               const void *blob, size_t blob_len, struct tt_conn **conn);
tutti_result_t sk_finish(struct tt_conn *conn, double deadline);

#endif
