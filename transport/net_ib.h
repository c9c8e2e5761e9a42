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

#endif
