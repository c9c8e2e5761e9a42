/*
 * net_ib.h -- the InfiniBand / RoCE verbs transport's internals, shared by net_ib_dev.c
 * (libibverbs loaded at run time, device and port discovery, the HCA of this process) and
 * net_ib.c (connections and the data path).
 *
 * libibverbs is opened with dlopen (TUTTI_IBVERBS_LIB, default libibverbs.so.1), so libtutti
 * loads and runs on hosts without rdma-core; only its headers are needed at build time. The
 * inline verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq) dispatch through the context's
 * ops table, which the provider fills, so they need no symbol.
 */
#ifndef TT_NET_IB_H
#define TT_NET_IB_H

#include "tutti.h"

#include "transport/transport.h"

#include <infiniband/verbs.h>
#include <stdint.h>

/* The entry points of libibverbs the transport calls. */
struct tt_ibv {
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    /* Optional (NULL before rdma-core 34): GPUDirect RDMA registrations. */
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access);
};

/* This process's HCA port, opened once and kept for the life of the process. */
struct tt_ib_dev {
    struct tt_ibv v;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char name[64]; /* "mlx5_0:1" */
    uint8_t port;
    uint8_t link_layer; /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET (RoCE) */
    uint8_t mtu;        /* enum ibv_mtu, active */
    uint16_t lid;
    int gid_index; /* -1: none (InfiniBand without a GRH) */
    union ibv_gid gid;
};

/*
 * tt_ib_probe - find this process's HCA port (once per process; later calls return the
 * first answer): loads libibverbs, lists devices, applies TUTTI_IB_HCA, keeps active ports,
 * picks the one named by `nearest` (the topology's nearest OpenFabrics device, "" if none)
 * or else the local_rank-th, chooses the GID index. On success fills name (e.g.
 * "mlx5_0:1") and returns 1; otherwise writes why not to `why` and returns 0.
 */
int tt_ib_probe(const char *nearest, int local_rank, char *name, size_t name_size, char *why,
                size_t why_size);

/* The device tt_ib_probe chose (NULL if none). */
struct tt_ib_dev *tt_ib_device(void);

/*
 * The registration cache (net_ib_reg.c): the memory region holding a registration's range
 * on this process's HCA, registered on first use and shared by every registration on the
 * same pages; NULL if the HCA refused it (said once at WARN; the caller copies instead).
 * tt_ib_reg_put drops reg's use of its region, deregistering it when no other remains.
 */
struct tt_memreg;
struct ibv_mr *tt_ib_reg_get(struct tt_memreg *reg);
void tt_ib_reg_put(struct tt_memreg *reg);
/* tt_ib_reg_get(reg) != NULL: the transport's can_send_from. */
int tt_ib_can_send_from(struct tt_memreg *reg);

/* "fe80::1" style text of a GID. */
const char *tt_ib_gid_str(const union ibv_gid *gid, char *buf, size_t size);

/* ---- connections: the data path in net_ib.c, set-up in net_ib_conn.c ---- */

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
    uint32_t *tags; /* each slot's message tag (its write's immediate) */
    uint64_t recv_next[QP_MAX];
    int credit_posted; /* credit writes not yet completed */
    int credit_dirty;
    double closed_at; /* when the side channel was first seen closed (0: open) */
    tutti_result_t failed;
};

/* "fe80::1"-style GID of the peer, for messages. */
const char *tt_ib_peer_gid(const struct ib_conn *c, char *buf, size_t size);
/* Mark c failed (first error wins) and set the thread's message, "net_ib: ..."; returns rc. */
tutti_result_t tt_ib_failf(struct ib_conn *c, tutti_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Receiver: post one receive on QP q (each write with immediate consumes one). */
tutti_result_t tt_ib_post_recv(struct ib_conn *c, int q);
/* Receiver: write the credit word to the sender (writes coalesce). */
tutti_result_t tt_ib_post_credit(struct ib_conn *c);

/* Set-up (net_ib_conn.c): the transport.h entry points, and freeing a connection. */
tutti_result_t tt_ib_recv_setup(const struct tt_transport_ctx *ctx, int peer, int channel,
                                void *blob, size_t *blob_len, struct tt_conn **conn);
tutti_result_t tt_ib_send_connect(const struct tt_transport_ctx *ctx, int peer, int channel,
                                  const void *blob, size_t blob_len, struct tt_conn **conn);
tutti_result_t tt_ib_finish(struct tt_conn *conn, double deadline);
void tt_ib_conn_free(struct ib_conn *c);

#endif
