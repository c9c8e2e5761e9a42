/*
 * net_ib.c -- InfiniBand / RoCE transport over verbs RC queue pairs (device: net_ib_dev.c).
 *
 * A connection is TUTTI_IB_QPS reliable-connected QPs and one completion queue per side.
 * The receiver owns the FIFO: nslots slots of slot_bytes, registered for remote write.
 * Message m goes to slot m mod nslots over QP m mod nqps:
 *
 *   sender                                         receiver
 *   send_slot: wait for credit (m < granted)       posts nslots receives per QP (each
 *     and for slot m - nslots's local completion   write-with-immediate consumes one)
 *   fill its own registered staging slot           progress: a RECV_RDMA_WITH_IMM completion
 *   send_commit: RDMA write with immediate           on QP q is that QP's next message
 *     (imm = bytes) into remote slot m mod nslots    (q, q + nqps, ...): mark it, repost
 *   progress: poll completions (local reuse)       recv_release: tail++, RDMA-write
 *                                                    granted = tail + nslots to the sender
 *
 * The credit ("clear to send") lives in the sender's registered 16-byte word: the granted
 * count and its complement-xor, so a reader never acts on a half-written update. Nothing is
 * sent before the receiver's first credit, which it writes once its QPs are ready and its
 * receives posted.
 *
 * Setup: the receiver's blob (over the authenticated bootstrap) carries its QP numbers, LID,
 * GID, slot region address and rkey, and the address of a TCP side channel with a nonce.
 * The sender connects its QPs (RTR, RTS) at once and sends its own QP numbers, addresses and
 * credit word's key over the side channel; the receiver's finish() reads them, connects its
 * QPs and grants the first credits. The side channel then stays open as a liveness signal:
 * a peer that gives up (fail()) writes one byte on it, which the waiting side sees in alive()
 * within milliseconds; a channel that just closes (the peer exited or died) counts after a
 * second without progress, since a peer that finished closes it too.
 *
 * Every error completion becomes a message naming the verbs status, the opcode, the peer
 * rank, its host and GID, and a hint at the likely cause.
 */
#include "transport.h"

#include "net_ib.h"

#include "../lib/config.h"
#include "../lib/error.h"
#include "../lib/id.h"
#include "../lib/log.h"
#include "../lib/socket.h"
#include "../lib/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define QP_MAX 8
#define CREDIT_XOR 0xa5a5a5a55a5a5a5aull
#define IB_PSN 0x1000

struct credit {
    volatile uint64_t granted;
    volatile uint64_t check; /* granted ^ CREDIT_XOR */
};

struct ib_conn {
    struct tt_conn base;
    struct tt_ib_dev *d;
    int sender;
    int nqps;
    uint32_t nslots;
    struct ibv_cq *cq;
    struct ibv_qp *qp[QP_MAX];
    char *ring; /* slots: the receiver's FIFO, or the sender's staging copies */
    size_t ring_len;
    struct ibv_mr *ring_mr;
    struct credit *credit; /* sender: granted by the receiver; receiver: what it sends */
    struct ibv_mr *credit_mr;
    /* remote side */
    uint64_t r_addr;
    uint32_t r_key;
    uint32_t r_qpn[QP_MAX];
    uint16_t r_lid;
    union ibv_gid r_gid;
    uint8_t r_mtu;
    char r_host[32];
    /* side channel */
    int fd, lfd;
    uint64_t nonce;
    /* sender */
    uint64_t head;
    uint64_t granted;        /* last consistent credit seen */
    unsigned char *inflight; /* per slot: a write not yet completed locally */
    uint64_t ninflight;
    uint64_t nzc; /* messages sent zero-copy from registered user memory */
    /* receiver */
    uint64_t tail;
    uint64_t *ready; /* per slot: message number + 1 once it has landed */
    uint32_t *lens;
    uint64_t recv_next[QP_MAX];
    int credit_posted; /* credit writes not yet completed */
    int credit_dirty;
    double closed_at; /* when the side channel was first seen closed (0: open) */
    tutti_result_t failed;
};

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

static const char *peer_gid(const struct ib_conn *c, char *buf, size_t size)
{
    return tt_ib_gid_str(&c->r_gid, buf, size);
}

static tutti_result_t failf(struct ib_conn *c, tutti_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tutti_result_t failf(struct ib_conn *c, tutti_result_t rc, const char *fmt, ...)
{
    char msg[700];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!c->failed)
        c->failed = rc;
    return tt_fail(NULL, rc, "net_ib: %s", msg);
}

/* A hint at the cause of an error completion. */
static const char *hint(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_REM_ACCESS_ERR:
        return "the peer refused the remote key or address: its memory region is gone or the "
               "connection details are stale";
    case IBV_WC_RETRY_EXC_ERR:
        return "no acknowledgement from the peer: it died, or packets cannot reach it (check "
               "the routing, the GID index TUTTI_IB_GID_INDEX and RoCE v2 on both ends, and "
               "that both ports share an MTU)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "the peer had no receive posted: it is stuck or gone";
    case IBV_WC_WR_FLUSH_ERR:
        return "the queue pair had already failed: see the first error on this rank or the "
               "peer's (a refused key, a dead peer)";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR: return "a local buffer is not inside its registered region";
    default: return "see the HCA's counters and the peer's log";
    }
}

static const char *opname(enum ibv_wc_opcode op)
{
    switch (op) {
    case IBV_WC_RDMA_WRITE: return "RDMA write";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "receive of an RDMA write with immediate";
    case IBV_WC_SEND: return "send";
    case IBV_WC_RECV: return "receive";
    default: return "operation";
    }
}

static tutti_result_t wc_error(struct ib_conn *c, const struct ibv_wc *wc)
{
    char g[64];
    /* A flushed completion says nothing of the opcode: name what this side does. */
    const char *op = wc->status == IBV_WC_WR_FLUSH_ERR
                         ? (c->sender ? "RDMA write with immediate" : "receive")
                         : opname(wc->opcode);
    return failf(c, TUTTI_ERR_REMOTE,
                 "%s %s rank %d (host %s, GID %s, QP %u) failed: %s (status %d, vendor error "
                 "0x%x); %s",
                 op, c->sender ? "to" : "from", c->base.peer, c->r_host, peer_gid(c, g, sizeof(g)),
                 wc->qp_num, c->d->v.wc_status_str(wc->status), (int)wc->status, wc->vendor_err,
                 hint(wc->status));
}

static int qp_index(const struct ib_conn *c, uint32_t qpn)
{
    for (int q = 0; q < c->nqps; q++)
        if (c->qp[q]->qp_num == qpn)
            return q;
    return -1;
}

static tutti_result_t post_recv(struct ib_conn *c, int q)
{
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)q, .sg_list = NULL, .num_sge = 0}, *bad;
    int e = ibv_post_recv(c->qp[q], &wr, &bad);
    if (e)
        return failf(c, TUTTI_ERR_SYSTEM, "posting a receive for rank %d: %s", c->base.peer,
                     strerror(e));
    return TUTTI_SUCCESS;
}

/* Receiver: write the credit word to the sender (the latest value; writes coalesce). */
static tutti_result_t post_credit(struct ib_conn *c)
{
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad;
    int e;

    if (c->credit_posted >= 4) {
        c->credit_dirty = 1; /* sent by progress() once a write completes */
        return TUTTI_SUCCESS;
    }
    c->credit->granted = c->tail + c->nslots;
    c->credit->check = (c->tail + c->nslots) ^ CREDIT_XOR;
    sge = (struct ibv_sge){
        .addr = (uintptr_t)c->credit, .length = sizeof(struct credit), .lkey = c->credit_mr->lkey};
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = UINT64_MAX;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    wr.wr.rdma.remote_addr = c->r_addr;
    wr.wr.rdma.rkey = c->r_key;
    e = ibv_post_send(c->qp[0], &wr, &bad);
    if (e)
        return failf(c, TUTTI_ERR_SYSTEM, "posting a credit write to rank %d: %s", c->base.peer,
                     strerror(e));
    c->credit_posted++;
    c->credit_dirty = 0;
    return TUTTI_SUCCESS;
}

static tutti_result_t ib_progress(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ibv_wc wc[16];
    int n;

    if (c->failed)
        return c->failed;
    if (!c->cq)
        return TUTTI_SUCCESS; /* receiver before finish() */
    while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                return wc_error(c, &wc[i]);
            if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
                int q = qp_index(c, wc[i].qp_num);
                uint64_t m;
                if (q < 0)
                    return failf(c, TUTTI_ERR_INTERNAL, "completion for unknown QP %u",
                                 wc[i].qp_num);
                m = c->recv_next[q];
                c->recv_next[q] += (uint64_t)c->nqps;
                c->lens[m % c->nslots] = ntohl(wc[i].imm_data);
                c->ready[m % c->nslots] = m + 1;
                TT_CHECK(post_recv(c, q));
            } else if (wc[i].wr_id == UINT64_MAX) {
                c->credit_posted--;
            } else {
                c->inflight[wc[i].wr_id % c->nslots] = 0;
                c->ninflight--;
            }
        }
    }
    if (n < 0)
        return failf(c, TUTTI_ERR_SYSTEM, "polling completions: error %d", n);
    if (c->credit_dirty)
        TT_CHECK(post_credit(c));
    return TUTTI_SUCCESS;
}

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
        return failf(c, TUTTI_ERR_SYSTEM, "QP %u to INIT: %s", c->qp[q]->qp_num, strerror(e));
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
        return failf(c, TUTTI_ERR_SYSTEM,
                     "QP %u to RTR toward rank %d (host %s, LID %u, GID %s, QP %u): %s; check "
                     "TUTTI_IB_GID_INDEX and that both ports are on one fabric",
                     c->qp[q]->qp_num, c->base.peer, c->r_host, c->r_lid, peer_gid(c, g, sizeof(g)),
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
        return failf(c, TUTTI_ERR_SYSTEM, "QP %u to RTS: %s", c->qp[q]->qp_num, strerror(e));
    return TUTTI_SUCCESS;
}

static void conn_free(struct ib_conn *c)
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
        conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: cannot map %zu bytes of slots",
                       c->ring_len);
    }
    c->credit = aligned_alloc(64, 64);
    c->inflight = calloc(c->nslots, 1);
    c->ready = calloc(c->nslots, sizeof(*c->ready));
    c->lens = calloc(c->nslots, sizeof(*c->lens));
    if (!c->credit || !c->inflight || !c->ready || !c->lens) {
        conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: out of memory");
    }
    memset(c->credit, 0, 64);
    c->credit->check = CREDIT_XOR; /* granted 0: nothing may be sent yet */
    c->ring_mr = d->v.reg_mr(d->pd, c->ring, c->ring_len, sender ? IBV_ACCESS_LOCAL_WRITE : access);
    c->credit_mr = d->v.reg_mr(d->pd, c->credit, sizeof(struct credit), access);
    if (!c->ring_mr || !c->credit_mr) {
        int e = errno;
        conn_free(c);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM,
                       "net_ib: registering %zu bytes with %s: %s (is the locked-memory limit, "
                       "ulimit -l, large enough?)",
                       c->ring_len, d->name, strerror(e));
    }
    c->cq = d->v.create_cq(d->ctx, (int)(c->nslots * 2 + 16) * nqps, NULL, NULL, 0);
    if (!c->cq) {
        int e = errno;
        conn_free(c);
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
            conn_free(c);
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "net_ib: creating an RC queue pair on %s: %s",
                           d->name, strerror(e));
        }
    }
    *out = c;
    return TUTTI_SUCCESS;
}

static int qps_from_env(void)
{
    long long n = tt_env_int("TUTTI_IB_QPS");
    return n < 1 ? 1 : n > QP_MAX ? QP_MAX : (int)n;
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

static tutti_result_t ib_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                    void *blob, size_t *blob_len, struct tt_conn **conn)
{
    struct ib_conn *c;
    struct ib_blob b;
    struct tt_addr at;
    tutti_result_t rc;

    if (!ctx->net_addr)
        return tt_fail(NULL, TUTTI_ERR_INTERNAL, "net_ib: no local address for the side channel");
    TT_CHECK(conn_new(ctx, peer, channel, 0, qps_from_env(), &c));
    at = *(const struct tt_addr *)ctx->net_addr;
    tt_addr_set_port(&at, 0);
    rc = tt_sock_listen(&at, 4, &c->lfd);
    if (rc == TUTTI_SUCCESS)
        rc = tt_random(&c->nonce, sizeof(c->nonce));
    if (rc != TUTTI_SUCCESS) {
        conn_free(c);
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

static tutti_result_t ib_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
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
            conn_free(c);
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
    rc = tt_sock_connect(&to, deadline, &c->fd);
    if (rc == TUTTI_SUCCESS)
        rc = tt_sock_write(c->fd, &h, sizeof(h), deadline);
    if (rc != TUTTI_SUCCESS) {
        char where[80];
        tt_fail(NULL, rc, "net_ib: cannot reach rank %d's side channel at %s: %s", peer,
                tt_addr_str(&to, where, sizeof(where)), tt_thread_error());
        conn_free(c);
        return rc;
    }
    *conn = &c->base;
    return TUTTI_SUCCESS;
}

/* Receiver: take the sender's details, connect the QPs, post receives, grant credits. */
static tutti_result_t ib_finish(struct tt_conn *conn, double deadline)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ib_hello h;

    if (c->sender || c->lfd < 0)
        return TUTTI_SUCCESS;
    while (c->fd < 0) {
        struct pollfd p = {.fd = c->lfd, .events = POLLIN};
        int fd;
        if (tt_now() >= deadline)
            return failf(c, TUTTI_ERR_TIMEOUT,
                         "rank %d did not open its side channel before the deadline", c->base.peer);
        if (poll(&p, 1, 100) <= 0)
            continue;
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
            TT_CHECK(post_recv(c, q));
        c->recv_next[q] = (uint64_t)q;
    }
    return post_credit(c); /* clear to send: the first nslots messages */
}

/* Sender: the latest consistent credit. */
static void read_credit(struct ib_conn *c)
{
    uint64_t g = __atomic_load_n(&c->credit->granted, __ATOMIC_ACQUIRE);
    uint64_t k = __atomic_load_n(&c->credit->check, __ATOMIC_ACQUIRE);
    if ((g ^ CREDIT_XOR) == k && g > c->granted)
        c->granted = g;
}

static tutti_result_t ib_send_slot(struct tt_conn *conn, size_t bytes, void **slot)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    uint32_t s = (uint32_t)(c->head % c->nslots);

    (void)bytes;
    if (c->failed)
        return c->failed;
    read_credit(c);
    if (c->head >= c->granted || c->inflight[s]) {
        TT_CHECK(ib_progress(conn));
        read_credit(c);
        if (c->head >= c->granted || c->inflight[s])
            return TUTTI_IN_PROGRESS;
    }
    *slot = c->ring + (size_t)s * c->base.slot_bytes;
    return TUTTI_SUCCESS;
}

/* RDMA write with immediate of bytes at addr (lkey) into the remote slot of message head. */
static tutti_result_t post_write(struct ib_conn *c, uintptr_t addr, uint32_t lkey, size_t bytes)
{
    uint32_t s = (uint32_t)(c->head % c->nslots);
    int q = (int)(c->head % (uint64_t)c->nqps), e;
    struct ibv_sge sge = {.addr = addr, .length = (uint32_t)bytes, .lkey = lkey};
    struct ibv_send_wr wr, *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id = c->head;
    wr.sg_list = bytes ? &sge : NULL;
    wr.num_sge = bytes ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl((uint32_t)bytes);
    wr.wr.rdma.remote_addr = c->r_addr + (uint64_t)s * c->base.slot_bytes;
    wr.wr.rdma.rkey = c->r_key;
    e = ibv_post_send(c->qp[q], &wr, &bad);
    if (e)
        return failf(c, TUTTI_ERR_SYSTEM, "posting an RDMA write to rank %d: %s", c->base.peer,
                     strerror(e));
    c->inflight[s] = 1;
    c->ninflight++;
    c->head++;
    return TUTTI_SUCCESS;
}

static tutti_result_t ib_send_commit(struct tt_conn *conn, size_t bytes)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    uint32_t s = (uint32_t)(c->head % c->nslots);

    return post_write(c, (uintptr_t)(c->ring + (size_t)s * c->base.slot_bytes), c->ring_mr->lkey,
                      bytes);
}

/* Zero copy: the write reads the user's registered memory instead of the staging slot. */
static tutti_result_t ib_send_commit_from(struct tt_conn *conn, const void *src, size_t bytes,
                                          struct tt_memreg *reg, uint64_t *ticket)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ibv_mr *mr = tt_ib_reg_get(reg);

    if (!mr)
        return TUTTI_ERR_UNSUPPORTED;
    *ticket = c->head;
    TT_CHECK(post_write(c, (uintptr_t)src, mr->lkey, bytes));
    c->nzc++;
    return TUTTI_SUCCESS;
}

/* Has message `ticket` left this process's memory (its write completed locally)? Its slot
 * is reused only after that, so a reused slot also says yes. */
static int ib_sent(struct tt_conn *conn, uint64_t ticket)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    return ticket + c->nslots <= c->head || !c->inflight[ticket % c->nslots];
}

static tutti_result_t ib_flush(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;

    if (!c->sender)
        return c->failed ? c->failed : TUTTI_SUCCESS;
    TT_CHECK(ib_progress(conn));
    return c->ninflight ? TUTTI_IN_PROGRESS : TUTTI_SUCCESS;
}

static tutti_result_t ib_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    uint32_t s = (uint32_t)(c->tail % c->nslots);

    if (c->failed)
        return c->failed;
    if (c->ready[s] != c->tail + 1) {
        TT_CHECK(ib_progress(conn));
        if (c->ready[s] != c->tail + 1)
            return TUTTI_IN_PROGRESS;
    }
    *bytes = c->lens[s];
    *slot = c->ring + (size_t)s * c->base.slot_bytes;
    return TUTTI_SUCCESS;
}

static tutti_result_t ib_recv_release(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;

    c->tail++;
    return post_credit(c);
}

static tutti_result_t ib_alive(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    char byte;

    if (c->fd < 0)
        return TUTTI_SUCCESS;
    if (!c->closed_at && poll(&p, 1, 0) > 0) {
        ssize_t got = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (got == 1 && byte == 'F') { /* the peer failed or was aborted: fail now */
            char g[64];
            return failf(c, TUTTI_ERR_REMOTE,
                         "rank %d (host %s, GID %s) gave up on the connection (it failed or was "
                         "aborted)",
                         c->base.peer, c->r_host, peer_gid(c, g, sizeof(g)));
        }
        if (got == 0 || (p.revents & (POLLHUP | POLLERR)))
            c->closed_at = tt_now();
    }
    /* A peer that finished closes its side of everything: what it wrote before has landed
     * and its completions may still be on their way to us. So a closed channel fails the
     * connection only once a second has passed without this rank getting what it waits for
     * (the caller asks while nothing moves). */
    if (c->closed_at && tt_now() - c->closed_at > 1.0) {
        char g[64];
        return failf(c, TUTTI_ERR_REMOTE,
                     "rank %d (host %s, GID %s) closed its connection: it exited, died or gave up",
                     c->base.peer, c->r_host, peer_gid(c, g, sizeof(g)));
    }
    return TUTTI_SUCCESS;
}

static void ib_fail(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

    if (c->fd >= 0) { /* tell the peer it is a failure, not a finished connection */
        (void)!send(c->fd, "F", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(c->fd, SHUT_RDWR);
    }
    for (int q = 0; q < c->nqps; q++)
        c->d->v.modify_qp(c->qp[q], &a, IBV_QP_STATE);
    if (!c->failed)
        c->failed = TUTTI_ERR_REMOTE;
}

static void ib_close(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;

    if (!c)
        return;
    if (c->nzc)
        TT_INFO(TT_SUB_IB, "net_ib: to rank %d, channel %d: %llu of %llu message(s) zero-copy",
                c->base.peer, c->base.channel, (unsigned long long)c->nzc,
                (unsigned long long)c->head);
    conn_free(c);
}

const struct tt_transport tt_transport_ib = {
    .size = sizeof(struct tt_transport),
    .name = "net_ib",
    .recv_setup = ib_recv_setup,
    .send_connect = ib_send_connect,
    .finish = ib_finish,
    .send_slot = ib_send_slot,
    .send_commit = ib_send_commit,
    .flush = ib_flush,
    .recv_peek = ib_recv_peek,
    .recv_release = ib_recv_release,
    .progress = ib_progress,
    .wait = tt_transport_sleep,
    .alive = ib_alive,
    .fail = ib_fail,
    .close = ib_close,
    .send_commit_from = ib_send_commit_from,
    .sent = ib_sent,
    .unregister = tt_ib_reg_put,
    .can_send_from = tt_ib_can_send_from,
};
