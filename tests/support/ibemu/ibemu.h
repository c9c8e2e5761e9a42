/*
 * ibemu.h -- internals of the emulated verbs provider (what it models: ibemu.c). Three files:
 * ibemu_fabric.c (per-process shared segments, addressing, completion queues shared between
 * processes), ibemu.c (the verbs control path: devices, ports, PDs, MRs, CQs, QPs and their
 * states) and ibemu_data.c (posting and polling: RDMA writes into a peer, receives, errors).
 */
#ifndef TT_IBEMU_H
#define TT_IBEMU_H

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

/* The fabric (ibemu_fabric.c). */
extern pthread_mutex_t emu_lock; /* guards the segment tables and the peer map */
extern struct seg *emu_self;     /* this process's segment (after seg_create) */
/* Delay mode (ibemu_data.c): drop the pending writes of a QP being destroyed. */
void emu_forget_qp(struct emu_qp *q);
extern long emu_writes; /* RDMA writes posted by this process (fault injection) */
int link_roce(void);
uint16_t lid_of(int32_t pid);
void gid_of(int32_t pid, int index, union ibv_gid *g);
int32_t pid_of_gid(const union ibv_gid *g);
int32_t pid_of_lid(uint16_t lid);
int alive(int32_t pid);
int seg_create(void);
struct seg *seg_of(int32_t pid);
void cq_lock(struct seg_cq *q);
void cq_unlock(struct seg_cq *q);
int cq_push(struct seg_cq *q, const struct ibv_wc *wc);

/* The data path (ibemu_data.c): the context ops. */
int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

#endif
