/*
 * net_ib.c -- InfiniBand / RoCE transport over verbs RC queue pairs: the protocol and the data
 * path (the HCA: net_ib_dev.c; connection set-up: net_ib_conn.c; registration cache for
 * zero-copy sends from registered user memory: net_ib_reg.c).
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
 *     (imm = tag) into remote slot m mod nslots      (q, q + nqps, ...): mark it (its length:
 *                                                    the completion's byte_len), repost
 *   progress: poll completions (local reuse)       recv_release: tail++, RDMA-write
 *                                                    granted = tail + nslots to the sender
 *
 * Zero copy (send_commit_from): the same write, read from the user's registered memory
 * (the lkey of its region in the registration cache) instead of the staging slot; the
 * message's ticket is its number, done once its write has completed locally.
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
#include "transport/transport.h"

#include "transport/net_ib.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/boot/id.h"
#include "lib/base/log.h"
#include "lib/boot/socket.h"
#include "lib/base/wait.h"
#include "lib/topo/topo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *tt_ib_peer_gid(const struct ib_conn *c, char *buf, size_t size)
{
    return tt_ib_gid_str(&c->r_gid, buf, size);
}

tutti_result_t tt_ib_failf(struct ib_conn *c, tutti_result_t rc, const char *fmt, ...)
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
    return tt_ib_failf(c, TUTTI_ERR_REMOTE,
                       "%s %s rank %d (host %s, GID %s, QP %u) failed: %s (status %d, vendor error "
                       "0x%x); %s",
                       op, c->sender ? "to" : "from", c->base.peer, c->r_host,
                       tt_ib_peer_gid(c, g, sizeof(g)), wc->qp_num,
                       c->d->v.wc_status_str(wc->status), (int)wc->status, wc->vendor_err,
                       hint(wc->status));
}

static int qp_index(const struct ib_conn *c, uint32_t qpn)
{
    for (int q = 0; q < c->nqps; q++)
        if (c->qp[q]->qp_num == qpn)
            return q;
    return -1;
}

tutti_result_t tt_ib_post_recv(struct ib_conn *c, int q)
{
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)q, .sg_list = NULL, .num_sge = 0}, *bad;
    int e = ibv_post_recv(c->qp[q], &wr, &bad);
    if (e)
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "posting a receive for rank %d: %s", c->base.peer,
                           strerror(e));
    return TUTTI_SUCCESS;
}

/* Receiver: write the credit word to the sender (the latest value; writes coalesce). */
tutti_result_t tt_ib_post_credit(struct ib_conn *c)
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
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "posting a credit write to rank %d: %s",
                           c->base.peer, strerror(e));
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
                    return tt_ib_failf(c, TUTTI_ERR_INTERNAL, "completion for unknown QP %u",
                                       wc[i].qp_num);
                m = c->recv_next[q];
                c->recv_next[q] += (uint64_t)c->nqps;
                c->lens[m % c->nslots] = wc[i].byte_len;
                c->tags[m % c->nslots] = ntohl(wc[i].imm_data);
                c->ready[m % c->nslots] = m + 1;
                TT_CHECK(tt_ib_post_recv(c, q));
            } else if (wc[i].wr_id == UINT64_MAX) {
                c->credit_posted--;
            } else {
                c->inflight[wc[i].wr_id % c->nslots] = 0;
                c->ninflight--;
            }
        }
    }
    if (n < 0)
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "polling completions: error %d", n);
    if (c->credit_dirty)
        TT_CHECK(tt_ib_post_credit(c));
    return TUTTI_SUCCESS;
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

/* RDMA write with immediate (the tag) of bytes at addr (lkey) into the remote slot of message
 * head. */
static tutti_result_t post_write(struct ib_conn *c, uintptr_t addr, uint32_t lkey, size_t bytes,
                                 uint32_t tag)
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
    wr.imm_data = htonl(tag);
    wr.wr.rdma.remote_addr = c->r_addr + (uint64_t)s * c->base.slot_bytes;
    wr.wr.rdma.rkey = c->r_key;
    e = ibv_post_send(c->qp[q], &wr, &bad);
    if (e)
        return tt_ib_failf(c, TUTTI_ERR_SYSTEM, "posting an RDMA write to rank %d: %s",
                           c->base.peer, strerror(e));
    c->inflight[s] = 1;
    c->ninflight++;
    c->head++;
    return TUTTI_SUCCESS;
}

static tutti_result_t ib_send_commit(struct tt_conn *conn, size_t bytes, uint32_t tag)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    uint32_t s = (uint32_t)(c->head % c->nslots);

    return post_write(c, (uintptr_t)(c->ring + (size_t)s * c->base.slot_bytes), c->ring_mr->lkey,
                      bytes, tag);
}

/* Zero copy: the write reads the user's registered memory instead of the staging slot. */
static tutti_result_t ib_send_commit_from(struct tt_conn *conn, const void *src, size_t bytes,
                                          uint32_t tag, struct tt_memreg *reg, uint64_t *ticket)
{
    struct ib_conn *c = (struct ib_conn *)conn;
    struct ibv_mr *mr = tt_ib_reg_get(reg);

    if (!mr)
        return TUTTI_ERR_UNSUPPORTED;
    *ticket = c->head;
    TT_CHECK(post_write(c, (uintptr_t)src, mr->lkey, bytes, tag));
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

static tutti_result_t ib_recv_peek(struct tt_conn *conn, const void **slot, size_t *bytes,
                                   uint32_t *tag)
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
    *tag = c->tags[s];
    *slot = c->ring + (size_t)s * c->base.slot_bytes;
    return TUTTI_SUCCESS;
}

static tutti_result_t ib_recv_release(struct tt_conn *conn)
{
    struct ib_conn *c = (struct ib_conn *)conn;

    c->tail++;
    return tt_ib_post_credit(c);
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
            return tt_ib_failf(
                c, TUTTI_ERR_REMOTE,
                "rank %d (host %s, GID %s) gave up on the connection (it failed or was "
                "aborted)",
                c->base.peer, c->r_host, tt_ib_peer_gid(c, g, sizeof(g)));
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
        return tt_ib_failf(
            c, TUTTI_ERR_REMOTE,
            "rank %d (host %s, GID %s) closed its connection: it exited, died or gave up",
            c->base.peer, c->r_host, tt_ib_peer_gid(c, g, sizeof(g)));
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
    tt_ib_conn_free(c);
}

/* Both ranks published a verbs HCA port (tt_transport_probe_hca). */
static int ib_joins(const struct tt_rank_info *a, const struct tt_rank_info *b)
{
    return a->hca[0] && b->hca[0];
}

static void ib_describe(char *buf, size_t size)
{
    snprintf(buf, size, "%d QP(s) per connection", tt_ib_nqps());
}

const struct tt_transport tt_transport_ib = {
    .joins = ib_joins,
    .cost = 2,
    .describe = ib_describe,
    .hca = 1,
    .size = sizeof(struct tt_transport),
    .name = "net_ib",
    .recv_setup = tt_ib_recv_setup,
    .send_connect = tt_ib_send_connect,
    .finish = tt_ib_finish,
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
