/* ibemu_data.c -- the emulated data path: RDMA writes, receives, completions (ibemu.h). */
#include "ibemu.h"

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
    if (cq_push(&emu_self->cq[q->send_cq->idx], &wc) != 0)
        qp_error(&emu_self->qp[q->idx]); /* overrun */
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
        const struct seg_mr *m = &emu_self->mr[i];
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
    return emu_writes == (after ? atol(after) : 1);
}

/* One RDMA write (with immediate when imm). Returns the completion status. */
static enum ibv_wc_status rdma_write(struct emu_qp *q, const struct ibv_send_wr *wr)
{
    struct seg_qp *s = &emu_self->qp[q->idx];
    struct seg *rs;
    struct seg_qp *rq = NULL;
    const struct seg_mr *m = NULL;
    size_t len;
    const void *src = local_src(wr, &len);
    uint32_t rkey = wr->wr.rdma.rkey;
    uint64_t raddr = wr->wr.rdma.remote_addr;
    int imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

    emu_writes++;
    if (!src)
        return IBV_WC_LOC_PROT_ERR;
    if (fault_now())
        rkey ^= 0x80000000u;
    if (!alive(s->rpid))
        return IBV_WC_RETRY_EXC_ERR;
    pthread_mutex_lock(&emu_lock);
    rs = seg_of(s->rpid);
    pthread_mutex_unlock(&emu_lock);
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
        if (rs == emu_self) {
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

/* Carry out one posted work request (now, or later in delay mode). */
static void execute(struct emu_qp *q, const struct ibv_send_wr *wr)
{
    struct seg_qp *s = &emu_self->qp[q->idx];
    int sig = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    enum ibv_wc_status r;

    if (atomic_load(&s->state) == IBV_QPS_ERR) {
        complete(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, 1);
        return;
    }
    r = rdma_write(q, wr);
    if (r != IBV_WC_SUCCESS)
        qp_error(s);
    complete(q, wr->wr_id, r, IBV_WC_RDMA_WRITE, sig);
}

/*
 * Delay mode (TUTTI_IBEMU_DELAY_US > 0): a posted write is carried out that long after it
 * was posted, by the first poll of a CQ of this process after that or by a timer thread,
 * the way an HCA reads the source by DMA some time after the post. A caller that changes
 * the source before the write's completion sends the changed bytes, as it would on an HCA.
 * Writes run in the order they were posted; inline data is copied at the post.
 */
#define PEND_MAX 4096

struct pending {
    struct emu_qp *q; /* NULL: its QP was destroyed */
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    unsigned char inl[64];
    uint64_t due_ns;
};

static struct pending pend[PEND_MAX];
static uint64_t pend_head, pend_tail;
static pthread_mutex_t pend_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t timer_once = PTHREAD_ONCE_INIT;
static long delay_ns = -1;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static long delay(void)
{
    if (delay_ns < 0) {
        const char *d = getenv("TUTTI_IBEMU_DELAY_US");
        delay_ns = d ? atol(d) * 1000 : 0;
    }
    return delay_ns;
}

/* Run the pending writes that are due (all of them if `all`). */
static void run_due(int all)
{
    uint64_t now = now_ns();

    pthread_mutex_lock(&pend_lock);
    while (pend_tail < pend_head && (all || pend[pend_tail % PEND_MAX].due_ns <= now)) {
        struct pending *p = &pend[pend_tail % PEND_MAX];
        if (p->q)
            execute(p->q, &p->wr);
        pend_tail++;
    }
    pthread_mutex_unlock(&pend_lock);
}

static void *timer(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec t = {0, delay() / 2 + 1000};
        nanosleep(&t, NULL);
        run_due(0);
    }
    return NULL;
}

static void timer_start(void)
{
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all); /* signals go to the application's threads */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, timer, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void defer(struct emu_qp *q, const struct ibv_send_wr *wr)
{
    struct pending *p;

    pthread_once(&timer_once, timer_start);
    pthread_mutex_lock(&pend_lock);
    if (pend_head - pend_tail == PEND_MAX) { /* full: the oldest goes now */
        struct pending *o = &pend[pend_tail % PEND_MAX];
        if (o->q)
            execute(o->q, &o->wr);
        pend_tail++;
    }
    p = &pend[pend_head % PEND_MAX];
    p->q = q;
    p->wr = *wr;
    p->wr.next = NULL;
    p->wr.sg_list = wr->num_sge ? &p->sge : NULL;
    if (wr->num_sge)
        p->sge = wr->sg_list[0];
    if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge && p->sge.length <= sizeof(p->inl)) {
        memcpy(p->inl, (const void *)(uintptr_t)p->sge.addr, p->sge.length);
        p->sge.addr = (uintptr_t)p->inl;
    }
    p->due_ns = now_ns() + (uint64_t)delay();
    pend_head++;
    pthread_mutex_unlock(&pend_lock);
}

void emu_forget_qp(struct emu_qp *q)
{
    pthread_mutex_lock(&pend_lock);
    for (uint64_t i = pend_tail; i < pend_head; i++)
        if (pend[i % PEND_MAX].q == q)
            pend[i % PEND_MAX].q = NULL;
    pthread_mutex_unlock(&pend_lock);
}

int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &emu_self->qp[q->idx];

    for (; wr; wr = wr->next) {
        uint32_t st = atomic_load(&s->state);
        if (st != IBV_QPS_ERR &&
            (st != IBV_QPS_RTS ||
             (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) ||
             wr->num_sge > 1)) {
            *bad = wr;
            return EINVAL;
        }
        if (delay() > 0)
            defer(q, wr);
        else
            execute(q, wr);
    }
    return 0;
}

int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct emu_qp *q = (struct emu_qp *)qp;
    struct seg_qp *s = &emu_self->qp[q->idx];

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

int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    struct emu_cq *q = (struct emu_cq *)cq;
    struct seg_cq *s = &emu_self->cq[q->idx];
    int got = 0;

    if (delay() > 0)
        run_due(0);

    /* Receives posted on QPs in ERR complete as flushed. */
    for (int i = 0; i < MAX_QP; i++) {
        struct seg_qp *p = &emu_self->qp[i];
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
