/*
 * ibemu.c -- an emulated verbs provider: a shared library that exports the libibverbs entry
 * points net_ib uses (load it with TUTTI_IBVERBS_LIB=.../libtutti-ibemu.so) and implements
 * reliable-connected semantics between processes of one host, so the InfiniBand transport
 * runs, and fails, here without an HCA.
 *
 * What it models
 *   - Devices emu0..emuN-1 (TUTTI_IBEMU_DEVICES, default 2), one port each, ACTIVE, link layer
 *     InfiniBand or Ethernet/RoCE (TUTTI_IBEMU_LINK=ib|roce, default roce). Each process is
 *     one "node": its LID is derived from its pid, its GID (index 0) is fe80::<pid>; on RoCE,
 *     GID index 1 is an IPv4-mapped one. Addressing: RoCE by GID (GRH required), InfiniBand
 *     by LID.
 *   - Protection domains; memory regions with an lkey and an rkey checked on every access
 *     (bounds, and IBV_ACCESS_REMOTE_WRITE for remote writes).
 *   - RC queue pairs with the state machine RESET -> INIT -> RTR -> RTS and -> ERR (invalid
 *     transitions and missing attributes are refused with EINVAL); posting sends outside RTS
 *     is refused, posting to a QP in ERR completes with IBV_WC_WR_FLUSH_ERR.
 *   - RDMA write and RDMA write with immediate (inline or from a registered region), delivered
 *     in order into the remote process's memory (process_vm_writev) before the completion that
 *     announces them; write with immediate consumes one posted receive of the remote QP
 *     (waits up to a second for one, like an RNR retry, then IBV_WC_RNR_RETRY_EXC_ERR).
 *   - Completion queues shared with other processes through a per-process shared segment
 *     (/dev/shm/tutti-ibemu-<pid>): remote completions are pushed into the owner's CQ.
 *   - Error completions: a bad rkey, an out-of-bounds or unwritable remote range
 *     (IBV_WC_REM_ACCESS_ERR at the sender; the responder's QP goes to ERR, so its posted
 *     receives flush with IBV_WC_WR_FLUSH_ERR), a dead or vanished peer or a peer QP that is
 *     not connected (IBV_WC_RETRY_EXC_ERR), a local buffer outside its lkey's region
 *     (IBV_WC_LOC_PROT_ERR); a failing QP goes to ERR and flushes what it holds.
 *   - The locked-memory limit: with TUTTI_IBEMU_MEMLOCK=BYTES, a registration that would take
 *     the process's registered bytes above it fails with ENOMEM, as ulimit -l makes it.
 *   - A late HCA: with TUTTI_IBEMU_DELAY_US=N a posted write reads its source and lands N
 *     microseconds later (at a poll of the process's CQs or by a timer thread), so a caller
 *     that reuses a source before its completion is caught (ibemu_data.c).
 *   - Fault injection for tests: TUTTI_IBEMU_FAULT=bad_rkey makes the TUTTI_IBEMU_FAULT_AFTER-th
 *     RDMA write (default 1) of the process whose TUTTI_RANK (or RANK) is TUTTI_IBEMU_FAULT_RANK
 *     (default: any) use a corrupted rkey.
 *
 * What it does not model
 *   - Sends/receives with data, RDMA read, atomics, SRQs, UD/UC, memory windows, completion
 *     channels and events (req_notify_cq succeeds and does nothing), async events.
 *   - Timing, packet loss and retransmission, MTU segmentation, PSN checks, partition keys,
 *     path migration, the subnet manager; a remote write is one copy, made at the post or,
 *     in delay mode, later.
 *   - Processes on other hosts (everything is on this one), and memory that a peer unmaps
 *     after the rkey check (the copy then fails as an access error).
 * Requires that processes of one user may write each other's memory (process_vm_writev:
 * same uid and ptrace access; it asks Yama to allow any process of the user).
 *
 * This file is the control path (devices, ports, PDs, MRs, CQs, QPs); the shared segments and
 * addressing are in ibemu_fabric.c, posting and polling in ibemu_data.c (ibemu.h).
 */
#include "ibemu.h"

static struct emu_dev devs[MAX_DEV];
static struct ibv_device *dev_list[MAX_DEV + 1];
static int ndevs;

/* ---- devices ---- */

static void devices_init(void)
{
    const char *n = getenv("TUTTI_IBEMU_DEVICES");
    if (ndevs)
        return;
    ndevs = n ? atoi(n) : 2;
    if (ndevs < 0)
        ndevs = 0;
    if (ndevs > MAX_DEV)
        ndevs = MAX_DEV;
    for (int i = 0; i < ndevs; i++) {
        struct ibv_device *d = &devs[i].dev;
        devs[i].index = i;
        d->node_type = IBV_NODE_CA;
        d->transport_type = IBV_TRANSPORT_IB;
        snprintf(d->name, sizeof(d->name), "emu%d", i);
        snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%d", i);
        snprintf(d->dev_path, sizeof(d->dev_path), "/nonexistent/emu%d", i);
        snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/nonexistent/emu%d", i);
        dev_list[i] = d;
    }
    dev_list[ndevs] = NULL;
}

EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
    pthread_mutex_lock(&emu_lock);
    devices_init();
    pthread_mutex_unlock(&emu_lock);
    if (num)
        *num = ndevs;
    return dev_list;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
    (void)list; /* static */
}

EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
    return d ? d->name : NULL;
}

static int emu_req_notify(struct ibv_cq *cq, int solicited)
{
    (void)cq;
    (void)solicited;
    return 0;
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
    struct ibv_context *c;

    pthread_mutex_lock(&emu_lock);
    if (seg_create() != 0) {
        pthread_mutex_unlock(&emu_lock);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_unlock(&emu_lock);
    c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->device = d;
    c->ops.poll_cq = emu_poll_cq;
    c->ops.post_send = emu_post_send;
    c->ops.post_recv = emu_post_recv;
    c->ops.req_notify_cq = emu_req_notify;
    c->cmd_fd = c->async_fd = -1;
    c->num_comp_vectors = 1;
    pthread_mutex_init(&c->mutex, NULL);
    return c;
}

EXPORT int ibv_close_device(struct ibv_context *c)
{
    free(c);
    return 0;
}

EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    (void)c;
    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "tutti-ibemu");
    a->phys_port_cnt = 1;
    a->max_qp = MAX_QP;
    a->max_qp_wr = RQ_DEPTH;
    a->max_cq = MAX_CQ;
    a->max_cqe = CQ_DEPTH;
    a->max_mr = MAX_MR;
    a->max_sge = 1;
    a->max_pd = 64;
    a->max_mr_size = UINT64_MAX;
    return 0;
}

/* The exported symbol fills the old ABI's struct, the prefix of struct ibv_port_attr that
 * ends before port_cap_flags2 (verbs.h declares but does not define it). */
EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *out)
{
    struct ibv_port_attr a;

    (void)c;
    if (port != 1)
        return EINVAL;
    memset(&a, 0, sizeof(a));
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = IBV_MTU_4096;
    a.gid_tbl_len = link_roce() ? 2 : 1;
    a.max_msg_sz = 1u << 31;
    a.pkey_tbl_len = 1;
    a.lid = link_roce() ? 0 : lid_of((int32_t)getpid());
    a.sm_lid = 1;
    a.max_vl_num = 1;
    a.active_width = 2;  /* 4x */
    a.active_speed = 32; /* EDR */
    a.phys_state = 5;    /* LinkUp */
    a.link_layer = link_roce() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    memcpy(out, &a, offsetof(struct ibv_port_attr, port_cap_flags2));
    return 0;
}

EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *g)
{
    (void)c;
    if (port != 1 || index < 0 || index >= (link_roce() ? 2 : 1))
        return EINVAL;
    gid_of((int32_t)getpid(), index, g);
    return 0;
}

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));
    if (pd)
        pd->context = c;
    return pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
    free(pd);
    return 0;
}

/*
 * Under emu_lock: the first free entry of one of the segment's tables (every entry begins
 * with `uint32_t used`), zeroed and marked used, its index in *idx, and a zeroed handle of
 * handle_size bytes. NULL with errno ENOMEM when the table is full or memory is short.
 */
static void *claim(void *table, size_t entry_size, int n, size_t handle_size, int *idx)
{
    for (int i = 0; i < n; i++) {
        uint32_t *used = (uint32_t *)((char *)table + (size_t)i * entry_size);
        void *h;
        if (*used)
            continue;
        h = calloc(1, handle_size);
        if (!h)
            break;
        memset(used, 0, entry_size);
        *used = 1;
        *idx = i;
        return h;
    }
    errno = ENOMEM;
    return NULL;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    struct emu_mr *m;
    int idx = -1;
    uint32_t salt = (uint32_t)rand() & 0xff;

    pthread_mutex_lock(&emu_lock);
    if (getenv("TUTTI_IBEMU_MEMLOCK")) { /* the locked-memory limit (ulimit -l) */
        unsigned long long held = len, limit = strtoull(getenv("TUTTI_IBEMU_MEMLOCK"), NULL, 0);
        for (int i = 0; i < MAX_MR; i++)
            if (emu_self->mr[i].used)
                held += emu_self->mr[i].len;
        if (held > limit) {
            pthread_mutex_unlock(&emu_lock);
            errno = ENOMEM;
            return NULL;
        }
    }
    m = claim(emu_self->mr, sizeof(emu_self->mr[0]), MAX_MR, sizeof(*m), &idx);
    if (!m) {
        pthread_mutex_unlock(&emu_lock);
        errno = ENOMEM;
        return NULL;
    }
    emu_self->mr[idx] = (struct seg_mr){.used = 1,
                                        .lkey = (uint32_t)(idx + 1) << 8 | salt,
                                        .rkey = (uint32_t)(idx + 1) << 8 | (salt ^ 0x5a),
                                        .access = (uint32_t)access,
                                        .addr = (uintptr_t)addr,
                                        .len = len};
    m->idx = idx;
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = len;
    m->mr.lkey = emu_self->mr[idx].lkey;
    m->mr.rkey = emu_self->mr[idx].rkey;
    pthread_mutex_unlock(&emu_lock);
    return &m->mr;
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    struct emu_mr *m = (struct emu_mr *)mr;
    pthread_mutex_lock(&emu_lock);
    memset(&emu_self->mr[m->idx], 0, sizeof(emu_self->mr[0]));
    pthread_mutex_unlock(&emu_lock);
    free(m);
    return 0;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
                                    struct ibv_comp_channel *channel, int vector)
{
    struct emu_cq *q;
    int idx = -1;

    (void)vector;
    if (cqe > CQ_DEPTH || channel) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&emu_lock);
    q = claim(emu_self->cq, sizeof(emu_self->cq[0]), MAX_CQ, sizeof(*q), &idx);
    if (!q) {
        pthread_mutex_unlock(&emu_lock);
        return NULL;
    }
    q->idx = idx;
    q->cq.context = c;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    pthread_mutex_unlock(&emu_lock);
    return &q->cq;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct emu_cq *q = (struct emu_cq *)cq;
    pthread_mutex_lock(&emu_lock);
    cq_lock(&emu_self->cq[q->idx]);
    emu_self->cq[q->idx].used = 0;
    cq_unlock(&emu_self->cq[q->idx]);
    pthread_mutex_unlock(&emu_lock);
    free(q);
    return 0;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
    struct emu_qp *q;
    int idx = -1;

    if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || !ia->recv_cq || ia->srq ||
        ia->cap.max_recv_wr > RQ_DEPTH || ia->cap.max_send_sge > 1 || ia->cap.max_recv_sge > 1) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&emu_lock);
    q = claim(emu_self->qp, sizeof(emu_self->qp[0]), MAX_QP, sizeof(*q), &idx);
    if (!q) {
        pthread_mutex_unlock(&emu_lock);
        return NULL;
    }
    emu_self->qp[idx].qpn = QPN_BASE + (uint32_t)idx;
    emu_self->qp[idx].state = IBV_QPS_RESET;
    q->send_cq = (struct emu_cq *)ia->send_cq;
    q->recv_cq = (struct emu_cq *)ia->recv_cq;
    emu_self->qp[idx].cq = (uint32_t)q->recv_cq->idx;
    q->idx = idx;
    q->sq_sig_all = ia->sq_sig_all;
    q->qp.context = pd->context;
    q->qp.qp_context = ia->qp_context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_num = emu_self->qp[idx].qpn;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = IBV_QPT_RC;
    pthread_mutex_unlock(&emu_lock);
    return &q->qp;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &emu_self->qp[q->idx];
    uint32_t from = atomic_load(&s->state);

    if (!(mask & IBV_QP_STATE))
        return 0; /* attribute changes without a transition: accepted, not modelled */
    switch (a->qp_state) {
    case IBV_QPS_RESET:
        atomic_store(&s->rq_head, 0);
        atomic_store(&s->rq_tail, 0);
        break;
    case IBV_QPS_INIT:
        if ((from != IBV_QPS_RESET && from != IBV_QPS_INIT) ||
            (from == IBV_QPS_RESET &&
             (mask & (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) !=
                 (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) ||
            ((mask & IBV_QP_PORT) && a->port_num != 1))
            return EINVAL;
        break;
    case IBV_QPS_RTR: {
        int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        int32_t pid;
        if (from != IBV_QPS_INIT || (mask & need) != need)
            return EINVAL;
        if (link_roce()) {
            if (!a->ah_attr.is_global) /* RoCE needs a GRH */
                return EINVAL;
            pid = pid_of_gid(&a->ah_attr.grh.dgid);
        } else {
            pid = pid_of_lid(a->ah_attr.dlid);
        }
        if (pid <= 0)
            return EINVAL; /* no such address on the fabric */
        s->rpid = pid;
        s->rqpn = a->dest_qp_num;
        break;
    }
    case IBV_QPS_RTS: {
        int need = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                   IBV_QP_MAX_QP_RD_ATOMIC;
        if (from != IBV_QPS_RTR || (mask & need) != need)
            return EINVAL;
        break;
    }
    case IBV_QPS_ERR: break;
    default: return EINVAL;
    }
    atomic_store(&s->state, a->qp_state);
    qp->state = a->qp_state;
    return 0;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    emu_forget_qp(q);
    pthread_mutex_lock(&emu_lock);
    atomic_store(&emu_self->qp[q->idx].state, IBV_QPS_ERR);
    emu_self->qp[q->idx].used = 0;
    pthread_mutex_unlock(&emu_lock);
    free(q);
    return 0;
}

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_GENERAL_ERR: return "general error";
    default: return "unknown";
    }
}
