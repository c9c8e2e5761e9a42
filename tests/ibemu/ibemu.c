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
 *   - Fault injection for tests: TUTTI_IBEMU_FAULT=bad_rkey makes the TUTTI_IBEMU_FAULT_AFTER-th
 *     RDMA write (default 1) of the process whose TUTTI_RANK (or RANK) is TUTTI_IBEMU_FAULT_RANK
 *     (default: any) use a corrupted rkey.
 *
 * What it does not model
 *   - Sends/receives with data, RDMA read, atomics, SRQs, UD/UC, memory windows, completion
 *     channels and events (req_notify_cq succeeds and does nothing), async events.
 *   - Timing, packet loss and retransmission, MTU segmentation, PSN checks, partition keys,
 *     path migration, the subnet manager; a remote write is one synchronous copy.
 *   - Processes on other hosts (everything is on this one), and memory that a peer unmaps
 *     after the rkey check (the copy then fails as an access error).
 * Requires that processes of one user may write each other's memory (process_vm_writev:
 * same uid and ptrace access; it asks Yama to allow any process of the user).
 */
#include <infiniband/verbs.h>
/* verbs.h wraps these in macros and inline helpers; here they are the functions. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_get_device_list

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define SEG_MAGIC 0x747574746962656dull
#define MAX_MR 512
#define MAX_QP 256
#define MAX_CQ 64
#define CQ_DEPTH 2048
#define RQ_DEPTH 1024
#define QPN_BASE 0x100
#define MAX_DEV 8

struct seg_mr {
    uint32_t used, lkey, rkey, access;
    uint64_t addr, len;
};

struct seg_qp {
    uint32_t used, qpn;
    _Atomic uint32_t state; /* enum ibv_qp_state */
    uint32_t cq;            /* receive CQ index */
    int32_t rpid;           /* connected peer (RTR) */
    uint32_t rqpn;
    _Atomic uint64_t rq_head, rq_tail; /* posted receives [tail, head) */
    uint64_t rq[RQ_DEPTH];
};

struct seg_cq {
    uint32_t used;
    _Atomic int32_t lock; /* pid of the holder, 0 when free */
    uint64_t head, tail;
    struct ibv_wc ring[CQ_DEPTH];
};

/* Per process, in /dev/shm: what its peers need to reach it. */
struct seg {
    uint64_t magic;
    int32_t pid;
    uint32_t lid;
    struct seg_mr mr[MAX_MR];
    struct seg_qp qp[MAX_QP];
    struct seg_cq cq[MAX_CQ];
};

struct emu_dev {
    struct ibv_device dev;
    int index;
};

struct emu_cq {
    struct ibv_cq cq;
    int idx;
};

struct emu_qp {
    struct ibv_qp qp;
    int idx;
    int sq_sig_all;
    struct emu_cq *send_cq, *recv_cq;
};

struct emu_mr {
    struct ibv_mr mr;
    int idx;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seg *self;
static char self_name[64];
static struct emu_dev devs[MAX_DEV];
static struct ibv_device *dev_list[MAX_DEV + 1];
static int ndevs;
static long writes; /* RDMA writes posted by this process (fault injection) */

/* Remote segments mapped so far. */
static struct {
    int32_t pid;
    struct seg *s;
} peers[256];
static int npeers;

static int link_roce(void)
{
    const char *l = getenv("TUTTI_IBEMU_LINK");
    return !l || strcmp(l, "ib") != 0;
}

static uint16_t lid_of(int32_t pid)
{
    return (uint16_t)(1 + (uint32_t)pid % 0xbffe); /* unicast LIDs */
}

/* GID index 0: fe80::<pid, 32 bits>; index 1 (RoCE): ::ffff:127.<pid, low 24 bits>. */
static void gid_of(int32_t pid, int index, union ibv_gid *g)
{
    memset(g, 0, sizeof(*g));
    if (index == 0) {
        g->raw[0] = 0xfe;
        g->raw[1] = 0x80;
        g->raw[12] = (uint8_t)(pid >> 24);
    } else {
        g->raw[10] = g->raw[11] = 0xff;
        g->raw[12] = 127;
    }
    g->raw[13] = (uint8_t)(pid >> 16);
    g->raw[14] = (uint8_t)(pid >> 8);
    g->raw[15] = (uint8_t)pid;
}

static int32_t pid_of_gid(const union ibv_gid *g)
{
    if (g->raw[0] == 0xfe)
        return (int32_t)((uint32_t)g->raw[12] << 24 | (uint32_t)g->raw[13] << 16 |
                         (uint32_t)g->raw[14] << 8 | g->raw[15]);
    return (int32_t)((uint32_t)g->raw[13] << 16 | (uint32_t)g->raw[14] << 8 | g->raw[15]);
}

static void seg_unlink(void)
{
    if (self_name[0])
        shm_unlink(self_name);
}

static int alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* Remove segments left by processes that died without unlinking theirs. */
static void sweep(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d))) {
        int pid;
        char name[300];
        if (sscanf(e->d_name, "tutti-ibemu-%d", &pid) == 1 && !alive(pid)) {
            snprintf(name, sizeof(name), "/%s", e->d_name);
            shm_unlink(name);
        }
    }
    closedir(d);
}

static int seg_create(void)
{
    int fd;

    if (self)
        return 0;
    sweep();
    snprintf(self_name, sizeof(self_name), "/tutti-ibemu-%d", (int)getpid());
    fd = shm_open(self_name, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, sizeof(struct seg)) != 0) {
        close(fd);
        shm_unlink(self_name);
        return -1;
    }
    self = mmap(NULL, sizeof(struct seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (self == MAP_FAILED) {
        self = NULL;
        shm_unlink(self_name);
        return -1;
    }
    self->pid = (int32_t)getpid();
    self->lid = lid_of(self->pid);
    self->magic = SEG_MAGIC;
    atexit(seg_unlink);
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: peers may write our memory */
#endif
    return 0;
}

/* The segment of process pid (mapped once), NULL if it has none. Called with `lock` held. */
static struct seg *seg_of(int32_t pid)
{
    char name[64];
    struct seg *s;
    int fd;

    if (self && pid == self->pid)
        return self;
    for (int i = 0; i < npeers; i++)
        if (peers[i].pid == pid)
            return peers[i].s;
    snprintf(name, sizeof(name), "/tutti-ibemu-%d", (int)pid);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    s = mmap(NULL, sizeof(struct seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED || s->magic != SEG_MAGIC) {
        if (s != MAP_FAILED)
            munmap(s, sizeof(struct seg));
        return NULL;
    }
    if (npeers < 256) {
        peers[npeers].pid = pid;
        peers[npeers++].s = s;
    }
    return s;
}

/* The pid whose LID is lid: scan the segments of live processes. */
static int32_t pid_of_lid(uint16_t lid)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int32_t found = -1;

    if (!d)
        return -1;
    while ((e = readdir(d))) {
        int pid;
        if (sscanf(e->d_name, "tutti-ibemu-%d", &pid) == 1 && lid_of(pid) == lid && alive(pid)) {
            found = pid;
            break;
        }
    }
    closedir(d);
    return found;
}

static void cq_lock(struct seg_cq *q)
{
    int32_t me = (int32_t)getpid(), free_ = 0;
    for (;;) {
        int32_t holder;
        free_ = 0;
        if (atomic_compare_exchange_weak(&q->lock, &free_, me))
            return;
        holder = atomic_load(&q->lock);
        if (holder && !alive(holder)) /* died holding it */
            atomic_compare_exchange_strong(&q->lock, &holder, 0);
        sched_yield();
    }
}

static void cq_unlock(struct seg_cq *q)
{
    atomic_store(&q->lock, 0);
}

/* Push a completion into a CQ (of any process). 0, or -1 if it is full. */
static int cq_push(struct seg_cq *q, const struct ibv_wc *wc)
{
    int rc = 0;
    cq_lock(q);
    if (q->head - q->tail >= CQ_DEPTH)
        rc = -1;
    else
        q->ring[q->head++ % CQ_DEPTH] = *wc;
    cq_unlock(q);
    return rc;
}

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
    pthread_mutex_lock(&lock);
    devices_init();
    pthread_mutex_unlock(&lock);
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

static int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int emu_req_notify(struct ibv_cq *cq, int solicited)
{
    (void)cq;
    (void)solicited;
    return 0;
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
    struct ibv_context *c;

    pthread_mutex_lock(&lock);
    if (seg_create() != 0) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_unlock(&lock);
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

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    struct emu_mr *m;
    int idx = -1;
    uint32_t salt = (uint32_t)rand() & 0xff;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_MR && idx < 0; i++)
        if (!self->mr[i].used)
            idx = i;
    if (idx < 0) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (!m) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return NULL;
    }
    self->mr[idx] = (struct seg_mr){.used = 1,
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
    m->mr.lkey = self->mr[idx].lkey;
    m->mr.rkey = self->mr[idx].rkey;
    pthread_mutex_unlock(&lock);
    return &m->mr;
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    struct emu_mr *m = (struct emu_mr *)mr;
    pthread_mutex_lock(&lock);
    memset(&self->mr[m->idx], 0, sizeof(self->mr[0]));
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_CQ && idx < 0; i++)
        if (!self->cq[i].used)
            idx = i;
    q = idx >= 0 ? calloc(1, sizeof(*q)) : NULL;
    if (!q) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return NULL;
    }
    memset(&self->cq[idx], 0, sizeof(self->cq[idx]));
    self->cq[idx].used = 1;
    q->idx = idx;
    q->cq.context = c;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    pthread_mutex_unlock(&lock);
    return &q->cq;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct emu_cq *q = (struct emu_cq *)cq;
    pthread_mutex_lock(&lock);
    cq_lock(&self->cq[q->idx]);
    self->cq[q->idx].used = 0;
    cq_unlock(&self->cq[q->idx]);
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_QP && idx < 0; i++)
        if (!self->qp[i].used)
            idx = i;
    q = idx >= 0 ? calloc(1, sizeof(*q)) : NULL;
    if (!q) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return NULL;
    }
    memset(&self->qp[idx], 0, sizeof(self->qp[idx]));
    self->qp[idx].used = 1;
    self->qp[idx].qpn = QPN_BASE + (uint32_t)idx;
    self->qp[idx].state = IBV_QPS_RESET;
    q->send_cq = (struct emu_cq *)ia->send_cq;
    q->recv_cq = (struct emu_cq *)ia->recv_cq;
    self->qp[idx].cq = (uint32_t)q->recv_cq->idx;
    q->idx = idx;
    q->sq_sig_all = ia->sq_sig_all;
    q->qp.context = pd->context;
    q->qp.qp_context = ia->qp_context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_num = self->qp[idx].qpn;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = IBV_QPT_RC;
    pthread_mutex_unlock(&lock);
    return &q->qp;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &self->qp[q->idx];
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
    pthread_mutex_lock(&lock);
    atomic_store(&self->qp[q->idx].state, IBV_QPS_ERR);
    self->qp[q->idx].used = 0;
    pthread_mutex_unlock(&lock);
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

/* ---- data path ---- */

static void qp_error(struct seg_qp *s)
{
    atomic_store(&s->state, IBV_QPS_ERR);
}

static void complete(struct emu_qp *q, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
                     int signaled)
{
    struct ibv_wc wc;
    if (!signaled && st == IBV_WC_SUCCESS)
        return;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.qp_num = q->qp.qp_num;
    if (cq_push(&self->cq[q->send_cq->idx], &wc) != 0)
        qp_error(&self->qp[q->idx]); /* overrun */
}

/* The local bytes of a work request, checked against their lkey; NULL if refused. */
static const void *local_src(const struct ibv_send_wr *wr, size_t *len)
{
    *len = 0;
    if (wr->num_sge == 0)
        return "";
    if (wr->num_sge != 1)
        return NULL;
    *len = wr->sg_list[0].length;
    if (wr->send_flags & IBV_SEND_INLINE)
        return (const void *)(uintptr_t)wr->sg_list[0].addr;
    for (int i = 0; i < MAX_MR; i++) {
        const struct seg_mr *m = &self->mr[i];
        if (m->used && m->lkey == wr->sg_list[0].lkey && wr->sg_list[0].addr >= m->addr &&
            wr->sg_list[0].addr + *len <= m->addr + m->len)
            return (const void *)(uintptr_t)wr->sg_list[0].addr;
    }
    return NULL;
}

static int fault_now(void)
{
    const char *f = getenv("TUTTI_IBEMU_FAULT"), *r = getenv("TUTTI_IBEMU_FAULT_RANK");
    const char *after = getenv("TUTTI_IBEMU_FAULT_AFTER");
    const char *me = getenv("TUTTI_RANK") ? getenv("TUTTI_RANK") : getenv("RANK");
    if (!f || strcmp(f, "bad_rkey") != 0)
        return 0;
    if (r && (!me || atoi(me) != atoi(r)))
        return 0;
    return writes == (after ? atol(after) : 1);
}

/* One RDMA write (with immediate when imm). Returns the completion status. */
static enum ibv_wc_status rdma_write(struct emu_qp *q, const struct ibv_send_wr *wr)
{
    struct seg_qp *s = &self->qp[q->idx];
    struct seg *rs;
    struct seg_qp *rq = NULL;
    const struct seg_mr *m = NULL;
    size_t len;
    const void *src = local_src(wr, &len);
    uint32_t rkey = wr->wr.rdma.rkey;
    uint64_t raddr = wr->wr.rdma.remote_addr;
    int imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

    writes++;
    if (!src)
        return IBV_WC_LOC_PROT_ERR;
    if (fault_now())
        rkey ^= 0x80000000u;
    if (!alive(s->rpid))
        return IBV_WC_RETRY_EXC_ERR;
    pthread_mutex_lock(&lock);
    rs = seg_of(s->rpid);
    pthread_mutex_unlock(&lock);
    if (!rs)
        return IBV_WC_RETRY_EXC_ERR;
    if (s->rqpn >= QPN_BASE && s->rqpn < QPN_BASE + MAX_QP)
        rq = &rs->qp[s->rqpn - QPN_BASE];
    if (!rq || !rq->used || rq->qpn != s->rqpn ||
        (atomic_load(&rq->state) != IBV_QPS_RTR && atomic_load(&rq->state) != IBV_QPS_RTS))
        return IBV_WC_RETRY_EXC_ERR; /* nobody answers at that QP */
    if (len) {
        for (int i = 0; i < MAX_MR && !m; i++)
            if (rs->mr[i].used && rs->mr[i].rkey == rkey)
                m = &rs->mr[i];
        if (!m || !(m->access & IBV_ACCESS_REMOTE_WRITE) || raddr < m->addr ||
            raddr + len > m->addr + m->len) {
            qp_error(rq); /* the responder saw the violation too */
            return IBV_WC_REM_ACCESS_ERR;
        }
        if (rs == self) {
            memmove((void *)(uintptr_t)raddr, src, len);
        } else {
            struct iovec l = {(void *)(uintptr_t)src, len}, r = {(void *)(uintptr_t)raddr, len};
            ssize_t n = process_vm_writev(rs->pid, &l, 1, &r, 1, 0);
            if (n != (ssize_t)len) {
                if (n < 0 && errno == EPERM)
                    fprintf(stderr,
                            "tutti-ibemu: process_vm_writev to pid %d refused (EPERM): processes "
                            "of this user may not write each other's memory here\n",
                            (int)rs->pid);
                if (n < 0 && errno == ESRCH)
                    return IBV_WC_RETRY_EXC_ERR;
                qp_error(rq);
                return IBV_WC_REM_ACCESS_ERR;
            }
        }
    }
    if (imm) {
        struct ibv_wc wc;
        uint64_t t;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        /* RNR: wait for the responder to post a receive, up to a second. */
        while ((t = atomic_load(&rq->rq_tail)) >= atomic_load(&rq->rq_head)) {
            if (atomic_load(&rq->state) == IBV_QPS_ERR)
                return IBV_WC_RETRY_EXC_ERR;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (t1.tv_sec - t0.tv_sec >= 2 || !alive(rs->pid))
                return IBV_WC_RNR_RETRY_EXC_ERR;
            sched_yield();
        }
        if (!atomic_compare_exchange_strong(&rq->rq_tail, &t, t + 1))
            return IBV_WC_GENERAL_ERR; /* two senders on one RC QP: not possible */
        memset(&wc, 0, sizeof(wc));
        wc.wr_id = rq->rq[t % RQ_DEPTH];
        wc.status = IBV_WC_SUCCESS;
        wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = wr->imm_data;
        wc.byte_len = (uint32_t)len;
        wc.qp_num = rq->qpn;
        wc.src_qp = s->qpn;
        if (cq_push(&rs->cq[rq->cq], &wc) != 0) {
            qp_error(rq);
            return IBV_WC_REM_OP_ERR;
        }
    }
    return IBV_WC_SUCCESS;
}

static int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &self->qp[q->idx];

    for (; wr; wr = wr->next) {
        uint32_t st = atomic_load(&s->state);
        int sig = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
        enum ibv_wc_status r;
        if (st == IBV_QPS_ERR) {
            complete(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, 1);
            continue;
        }
        if (st != IBV_QPS_RTS ||
            (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)) {
            *bad = wr;
            return EINVAL;
        }
        r = rdma_write(q, wr);
        if (r != IBV_WC_SUCCESS)
            qp_error(s);
        complete(q, wr->wr_id, r, IBV_WC_RDMA_WRITE, sig);
    }
    return 0;
}

static int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &self->qp[q->idx];

    for (; wr; wr = wr->next) {
        uint64_t h = atomic_load(&s->rq_head);
        if (atomic_load(&s->state) == IBV_QPS_RESET || wr->num_sge > 1) {
            *bad = wr;
            return EINVAL;
        }
        if (h - atomic_load(&s->rq_tail) >= RQ_DEPTH) {
            *bad = wr;
            return ENOMEM;
        }
        s->rq[h % RQ_DEPTH] = wr->wr_id;
        atomic_store(&s->rq_head, h + 1);
    }
    return 0;
}

static int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    struct emu_cq *q = (struct emu_cq *)cq;
    struct seg_cq *s = &self->cq[q->idx];
    int got = 0;

    /* Receives posted on QPs in ERR complete as flushed. */
    for (int i = 0; i < MAX_QP; i++) {
        struct seg_qp *p = &self->qp[i];
        uint64_t t;
        if (!p->used || p->cq != (uint32_t)q->idx || atomic_load(&p->state) != IBV_QPS_ERR)
            continue;
        while ((t = atomic_load(&p->rq_tail)) < atomic_load(&p->rq_head)) {
            struct ibv_wc f;
            if (!atomic_compare_exchange_strong(&p->rq_tail, &t, t + 1))
                continue;
            memset(&f, 0, sizeof(f));
            f.wr_id = p->rq[t % RQ_DEPTH];
            f.status = IBV_WC_WR_FLUSH_ERR;
            f.opcode = IBV_WC_RECV;
            f.qp_num = p->qpn;
            if (cq_push(s, &f) != 0)
                break;
        }
    }
    cq_lock(s);
    while (got < n && s->tail < s->head)
        wc[got++] = s->ring[s->tail++ % CQ_DEPTH];
    cq_unlock(s);
    return got;
}
