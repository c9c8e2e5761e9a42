/*
 * memreg.h -- memory the user registered with a communicator (tutti_comm_register).
 *
 * A registration is the user's promise that a range stays allocated until it is deregistered.
 * That is what lets a transport send straight from user memory: net_ib registers the range
 * with its HCA on first use (through its registration cache, shared by every communicator of
 * the process) and RDMA-writes from it instead of copying into a staging slot. Transports
 * that cannot use it ignore it; collectives on unregistered memory work as before.
 */
#ifndef TT_MEMREG_H
#define TT_MEMREG_H

#include <stddef.h>
#include <stdint.h>

struct tutti_comm;

struct tt_memreg {
    uint64_t magic;
    struct tutti_comm *comm;
    char *base;
    size_t len;
    struct tt_memreg *next;
    int device; /* CUDA device or managed memory (found at registration: transports must not
                 * ask CUDA themselves, they may run inside a CUDA host function) */
    void *ib;   /* net_ib's registration cache entry, set on first use */
};

/* The registration of comm that holds [p, p + len), NULL if none (or len == 0). Called by
 * the operation that holds comm's run lock. */
struct tt_memreg *tt_memreg_find(struct tutti_comm *comm, const void *p, size_t len);

/* Drop every registration of comm (comm is being destroyed). */
void tt_memreg_free_all(struct tutti_comm *comm);

#endif
