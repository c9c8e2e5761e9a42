/*
 * net_ib_conn.c -- setting up and tearing down net_ib connections (the protocol and the data
 * path: net_ib.c): the CQ, the RC queue pairs and their RESET -> INIT -> RTR -> RTS
 * transitions, the registered slot region and credit word, the receiver's blob (over
 * bootstrap) and the sender's hello over the TCP side channel.
 */
#include "transport/transport.h"

#include "transport/net_ib.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/boot/id.h"
#include "lib/base/log.h"
#include "lib/boot/socket.h"
#include "lib/base/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

struct ib_blob {
    unsigned char addr[TT_ADDR_PACKED];
    unsigned char nonce[8];
    unsigned char nqps[4], nslots[4], slot_bytes[8];
    unsigned char lid[2], mtu, link;
    unsigned char gid[16];
    unsigned char ring_addr[8], ring_key[4];
    unsigned char qpn[QP_MAX][4];
    char host[32];
};

/* What the sender tells the receiver over the side channel. */
struct ib_hello {
    char magic[4]; /* "TTIB" */
    unsigned char nonce[8];
    unsigned char lid[2], mtu, pad;
    unsigned char gid[16];
    unsigned char credit_addr[8], credit_key[4];
    unsigned char qpn[QP_MAX][4];
    char host[32];
};

/* QP state transitions of RC (INIT, RTR, RTS). */
static tutti_result_t qp_connect(struct ib_conn *c, int q)
{
    struct tt_ib_dev *d = c->d;
    struct ibv_qp_attr a;
    int e;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    e = d->v.modify_qp(c->qp[q], &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (e)
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "QP %u to INIT: %s", c->qp[q]->qp_num, strerror(e));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(d->mtu < c->r_mtu ? d->mtu : c->r_mtu);
    a.dest_qp_num = c->r_qpn[q];
    a.rq_psn = IB_PSN;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = d->port;
    a.ah_attr.dlid = c->r_lid;
    if (d->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = c->r_gid;
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    e = d->v.modify_qp(c->qp[q], &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (e) {
        char g[64];
        return tt_ib_failf(
            c, TUTTI_ERR_SYSTEM,
            "QP %u to RTR toward rank %d (host %s, LID %u, GID %s, QP %u): %s; check "
            "TUTTI_IB_GID_INDEX and that both ports are on one fabric",
            c->qp[q]->qp_num, c->base.peer, c->r_host, c->r_lid, tt_ib_peer_gid(c, g, sizeof(g)),
            c->r_qpn[q], strerror(e));
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = IB_PSN;
    a.max_rd_atomic = 1;
    e = d->v.modify_qp(c->qp[q], &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (e)
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "QP %u to RTS: %s", c->qp[q]->qp_num, strerror(e));
    return TUTTI_SUCCESS;
}

void tt_ib_conn_free(struct ib_conn *c)
{
    struct tt_ib_dev *d = c->d;

    for (int q = 0; q < c->nqps; q++)
        if (c->qp[q])
            d->v.destroy_qp(c->qp[q]);
    if (c->cq)
        d->v.destroy_cq(c->cq);
    if (c->ring_mr)
        d->v.dereg_mr(c->ring_mr);
    if (c->credit_mr)
        d->v.dereg_mr(c->credit_mr);
    if (c->ring)
        munmap(c->ring, c->ring_len);
    free(c->credit);
    free(c->inflight);
    free(c->ready);
    free(c->lens);
    free(c->tags);
    if (c->fd >= 0)
        close(c->fd);
    if (c->lfd >= 0)
        close(c->lfd);
    free(c);
}

/* The parts both sides have: CQ, QPs (RESET), the slot region and the credit word. */
static tutti_result_t conn_new(const struct tt_transport_ctx *ctx, int peer, int channel,
                               int sender, int nqps, struct ib_conn **out)
{
    struct tt_ib_dev *d = tt_ib_device();
    struct ib_conn *c;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    if (!d)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "net_ib: no HCA was chosen for this process");
    c = calloc(1, sizeof(*c));
    if (!c)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: out of memory");
    c->base.tp = &tt_transport_ib;
    c->base.peer = peer;
    c->base.channel = channel;
    c->base.slot_bytes = ctx->slot_bytes;
    c->d = d;
    c->sender = sender;
    c->nqps = nqps;
    c->nslots = (uint32_t)ctx->nslots;
    c->fd = c->lfd = -1;
    c->ring_len = (size_t)c->nslots * ctx->slot_bytes;
    c->ring = mmap(NULL, c->ring_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->ring == MAP_FAILED) {
        c->ring = NULL;
        tt_ib_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: cannot map %zu bytes of slots",
                       c->ring_len);
    }
    c->credit = aligned_alloc(64, 64);
    c->inflight = calloc(c->nslots, 1);
    c->ready = calloc(c->nslots, sizeof(*c->ready));
    c->lens = calloc(c->nslots, sizeof(*c->lens));
    c->tags = calloc(c->nslots, sizeof(*c->tags));
    if (!c->credit || !c->inflight || !c->ready || !c->lens || !c->tags) {
        tt_ib_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: out of memory");
    }
    memset(c->credit, 0, 64);
    c->credit->check = CREDIT_XOR; /* granted 0: nothing may be sent yet */
    c->ring_mr = d->v.reg_mr(d->pd, c->ring, c->ring_len, sender ? IBV_ACCESS_LOCAL_WRITE : access);
    c->credit_mr = d->v.reg_mr(d->pd, c->credit, sizeof(struct credit), access);
    if (!c->ring_mr || !c->credit_mr) {
        int e = errno;
        tt_ib_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM,
                       "net_ib: registering %zu bytes with %s: %s (is the locked-memory limit, "
                       "ulimit -l, large enough?)",
                       c->ring_len, d->name, strerror(e));
    }
    c->cq = d->v.create_cq(d->ctx, (int)(c->nslots * 2 + 16) * nqps, NULL, NULL, 0);
    if (!c->cq) {
        int e = errno;
        tt_ib_conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: creating a completion queue on %s: %s",
                       d->name, strerror(e));
    }
    for (int q = 0; q < nqps; q++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof(ia));
        ia.send_cq = c->cq;
        ia.recv_cq = c->cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = c->nslots + 8;
        ia.cap.max_recv_wr = c->nslots + 8;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = sizeof(struct credit);
        c->qp[q] = d->v.create_qp(d->pd, &ia);
        if (!c->qp[q]) {
            int e = errno;
            tt_ib_conn_free(c);
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: creating an RC queue pair on %s: %s",
                           d->name, strerror(e));
        }
    }
    *out = c;
    return TUTTI_SUCCESS;
}

int tt_ib_nqps(void)
{
    return (int)tt_env_int("TUTTI_IB_QPS");
}

static void own_host(char *out, size_t size)
{
    const char *h = tt_env_str("TUTTI_HOSTID");
    if (*h)
        snprintf(out, size, "%s", h);
    else if (gethostname(out, size) != 0)
        snprintf(out, size, "?");
    out[size - 1] = '\0';
}

tutti_result_t tt_ib_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct ib_conn *c;
    struct ib_blob b;
    struct tt_addr at;
    tutti_result_t rc;

    if (!ctx->net_addr)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "net_ib: no local address for the side channel");
    TT_CHECK(conn_new(ctx, peer, channel, 0, tt_ib_nqps(), &c));
    at = *(const struct tt_addr *)ctx->net_addr;
    tt_addr_set_port(&at, 0);
    rc = tt_sock_listen(&at, 4, &c->lfd);
    if (rc == TUTTI_SUCCESS)
        rc = tt_random(&c->nonce, sizeof(c->nonce));
    if (rc != TUTTI_SUCCESS) {
        tt_ib_conn_free(c);
        return rc;
    }
    memset(&b, 0, sizeof(b));
    tt_addr_pack(&at, b.addr);
    tt_put64(b.nonce, c->nonce);
    tt_put32(b.nqps, (uint32_t)c->nqps);
    tt_put32(b.nslots, c->nslots);
    tt_put64(b.slot_bytes, ctx->slot_bytes);
    b.lid[0] = (unsigned char)(c->d->lid >> 8);
    b.lid[1] = (unsigned char)c->d->lid;
    b.mtu = c->d->mtu;
    b.link = c->d->link_layer;
    memcpy(b.gid, c->d->gid.raw, 16);
    tt_put64(b.ring_addr, (uintptr_t)c->ring);
    tt_put32(b.ring_key, c->ring_mr->rkey);
    for (int q = 0; q < c->nqps; q++)
        tt_put32(b.qpn[q], c->qp[q]->qp_num);
    own_host(b.host, sizeof(b.host));
    memcpy(blob, &b, sizeof(b));
    *blob_len = sizeof(b);
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_ib_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                  const void *blob, size_t blob_len, struct tt_conn **conn)
{
    struct ib_conn *c;
    struct ib_blob b;
    struct ib_hello h;
    struct tt_addr to;
    double deadline = tt_now() + ctx->timeout_s;
    tutti_result_t rc;
    int nqps;

    if (blob_len != sizeof(b))
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "net_ib: blob from rank %d has %zu bytes", peer,
                       blob_len);
    memcpy(&b, blob, sizeof(b));
    nqps = (int)tt_get32(b.nqps);
    if (tt_addr_unpack(b.addr, &to) != 0 || nqps < 1 || nqps > QP_MAX ||
        tt_get32(b.nslots) != (uint32_t)ctx->nslots || tt_get64(b.slot_bytes) != ctx->slot_bytes)
        return tt_fail(NULL, TUTTI_ERR_REMOTE, "net_ib: bad connection blob from rank %d", peer);
    if (b.link != tt_ib_device()->link_layer)
        return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED,
                       "net_ib: rank %d's port is %s, this rank's %s: they cannot connect", peer,
                       b.link == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                       tt_ib_device()->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
                                                                             : "InfiniBand");
    TT_CHECK(conn_new(ctx, peer, channel, 1, nqps, &c));
    c->r_lid = (uint16_t)(b.lid[0] << 8 | b.lid[1]);
    c->r_mtu = b.mtu;
    memcpy(c->r_gid.raw, b.gid, 16);
    c->r_addr = tt_get64(b.ring_addr);
    c->r_key = tt_get32(b.ring_key);
    for (int q = 0; q < nqps; q++)
        c->r_qpn[q] = tt_get32(b.qpn[q]);
    memcpy(c->r_host, b.host, sizeof(c->r_host));
    c->r_host[sizeof(c->r_host) - 1] = '\0';
    c->nonce = tt_get64(b.nonce);
    for (int q = 0; q < nqps; q++) {
        rc = qp_connect(c, q);
        if (rc != TUTTI_SUCCESS) {
            tt_ib_conn_free(c);
            return rc;
        }
    }
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, "TTIB", 4);
    tt_put64(h.nonce, c->nonce);
    h.lid[0] = (unsigned char)(c->d->lid >> 8);
    h.lid[1] = (unsigned char)c->d->lid;
    h.mtu = c->d->mtu;
    memcpy(h.gid, c->d->gid.raw, 16);
    tt_put64(h.credit_addr, (uintptr_t)c->credit);
    tt_put32(h.credit_key, c->credit_mr->rkey);
    for (int q = 0; q < nqps; q++)
        tt_put32(h.qpn[q], c->qp[q]->qp_num);
    own_host(h.host, sizeof(h.host));
    /* Its listener was up before its blob was sent: a refusal means it is gone. */
    rc = tt_sock_connect_up(&to, deadline, &c->fd);
    if (rc == TUTTI_SUCCESS)
        rc = tt_sock_write(c->fd, &h, sizeof(h), deadline);
    if (rc != TUTTI_SUCCESS) {
        char where[80];
        tt_fail(NULL, rc, "net_ib: cannot reach rank %d's side channel at %s: %s", peer,
                tt_addr_str(&to, where, sizeof(where)), tt_thread_error());
        tt_ib_conn_free(c);
        return rc;
    }
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

/* Receiver: take the sender's details, connect the QPs, post receives, grant credits. */
tutti_result_t tt_ib_finish(struct tt_conn *conn, double deadline)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ib_hello h;

    if (c->sender || c->lfd < 0)
        return TUTTI_SUCCESS;
    while (c->fd < 0) {
        struct pollfd p = {.fd = c->lfd, .events = POLLIN};
        int fd;
        if (tt_now() >= deadline)
            return tt_ib_failf(c, TUTTI_ERR_TIMEOUT,
                               "rank %d did not open its side channel before the deadline",
                               c->base.peer);
        if (poll(&p, 1, 100) <= 0) { /* (a sender that connected and then went is accepted) */
            if (c->base.gone && c->base.gone(c->base.gone_arg, c->base.peer))
                return tt_ib_failf(
                    c, TUTTI_ERR_REMOTE,
                    "rank %d died, or a rank gave up, before it opened its side channel",
                    c->base.peer);
            continue;
        }
        fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (tt_sock_read(fd, &h, sizeof(h), tt_now() + 5.0) != TUTTI_SUCCESS ||
            memcmp(h.magic, "TTIB", 4) != 0 || tt_get64(h.nonce) != c->nonce) {
            TT_WARN(TT_SUB_IB,
                    "net_ib: dropped a side-channel connection that did not present the nonce "
                    "of the connection from rank %d",
                    c->base.peer);
            close(fd);
            continue;
        }
        c->fd = fd;
    }
    close(c->lfd);
    c->lfd = -1;
    c->r_lid = (uint16_t)(h.lid[0] << 8 | h.lid[1]);
    c->r_mtu = h.mtu;
    memcpy(c->r_gid.raw, h.gid, 16);
    c->r_addr = tt_get64(h.credit_addr);
    c->r_key = tt_get32(h.credit_key);
    memcpy(c->r_host, h.host, sizeof(c->r_host));
    c->r_host[sizeof(c->r_host) - 1] = '\0';
    for (int q = 0; q < c->nqps; q++) {
        c->r_qpn[q] = tt_get32(h.qpn[q]);
        TT_CHECK(qp_connect(c, q));
        for (uint32_t i = 0; i < c->nslots; i++)
            TT_CHECK(tt_ib_post_recv(c, q));
        c->recv_next[q] = (uint64_t)q;
    }
    return tt_ib_post_credit(c); /* clear to send: the first nslots messages */
}
