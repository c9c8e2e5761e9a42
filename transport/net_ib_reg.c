/*
 * net_ib_reg.c -- the verbs registration cache: memory regions for user memory registered
 * with a communicator (tutti_comm_register, lib/core/memreg.h), so net_ib can RDMA-write straight
 * from it.
 *
 * Registering memory with an HCA pins its pages and costs microseconds to milliseconds, so
 * it is done once per range, on the first zero-copy send from it, and the region is kept
 * while any registration lies on it. Regions cover whole pages; a registration whose pages
 * an existing region already covers shares it (another communicator registering the same
 * buffer, a sub-range, a neighbour on the same pages). A region goes when its last user
 * deregisters: a region that outlived the user's promise could pin pages the allocator has
 * since given back, and a later buffer at the same address would then be sent from stale
 * memory. One cache per process (the HCA's protection domain is per process), under a lock.
 *
 * Device memory (GPUDirect RDMA): the whole CUDA allocation is exported as a dma-buf
 * (cuMemGetHandleForAddressRange, lib/cuda/cuda.c) and registered with ibv_reg_dmabuf_mr at the
 * allocation's device address, so the HCA reads the GPU's memory directly. Where either side
 * lacks it (an rdma-core older than 34, a driver without dma-buf export) the registration is
 * refused once, with the reason at WARN, and the sends from it are staged through host memory.
 */
#include "transport/net_ib.h"

#include "lib/gpu/gpu.h"
#include "lib/base/log.h"
#include "lib/core/memreg.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct region {
    uintptr_t lo, hi; /* whole pages */
    struct ibv_mr *mr;
    int users;
    struct region *next;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static unsigned long long hits, misses;
static struct region refused; /* reg->ib of a registration the HCA would not take */

/* reg cannot be sent from where it lies: say why once, copy from now on. */
static struct ibv_mr *refuse(struct tt_memreg *reg, const char *what, const char *why)
{
    reg->ib = &refused;
    TT_WARN(TT_SUB_IB, "net_ib: %s [%p, +%zu): %s; sends from it are copied", what,
            (void *)reg->base, reg->len, why);
    return NULL;
}

struct ibv_mr *tt_ib_reg_get(struct tt_memreg *reg)
{
    struct tt_ib_dev *d = tt_ib_device();
    struct region *r;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;
    int n = 0, fd = -1, device;

    if (reg->ib) /* the hot path: this registration has its region */
        return reg->ib == &refused ? NULL : ((struct region *)reg->ib)->mr;
    if (!d)
        return NULL;
    device = reg->device;
    if (device) { /* GPUDirect RDMA: the HCA reads the GPU's memory through a dma-buf */
        char why[256];
        size_t size;
        if (!d->v.reg_dmabuf_mr)
            return refuse(reg, "no GPUDirect RDMA for",
                          "libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or later has it)");
        if (tt_cuda_dmabuf(reg->base, &fd, &lo, &size, why, sizeof(why)) != 0)
            return refuse(reg, "no GPUDirect RDMA for", why);
        hi = lo + size;
    } else {
        lo = (uintptr_t)reg->base & ~(page - 1);
        hi = ((uintptr_t)reg->base + reg->len + page - 1) & ~(page - 1);
    }
    pthread_mutex_lock(&cache_lock);
    for (r = regions; r; r = r->next, n++)
        if (r->lo <= lo && hi <= r->hi)
            break;
    if (r) {
        r->users++;
        hits++;
        TT_TRACE(TT_SUB_IB, "net_ib: registration cache hit for [%p, +%zu) (%llu hits)",
                 (void *)reg->base, reg->len, hits);
    } else {
        r = calloc(1, sizeof(*r));
        if (r && device)
            r->mr = d->v.reg_dmabuf_mr(d->pd, 0, hi - lo, lo, fd, IBV_ACCESS_LOCAL_WRITE);
        else if (r)
            r->mr = d->v.reg_mr(d->pd, (void *)lo, hi - lo, 0);
        if (!r || !r->mr) {
            int e = errno;
            free(r);
            pthread_mutex_unlock(&cache_lock);
            if (fd >= 0)
                close(fd);
            return refuse(reg, device ? "cannot register device memory" : "cannot register",
                          strerror(e));
        }
        r->lo = lo;
        r->hi = hi;
        r->users = 1;
        r->next = regions;
        regions = r;
        misses++;
        TT_INFO(TT_SUB_IB,
                "net_ib: registered %s[%p, +%zu) with %s for zero-copy sends (registration "
                "cache: %d region(s), %llu miss(es), %llu hit(s))",
                device ? "device memory (GPUDirect RDMA, dma-buf) " : "", (void *)lo,
                (size_t)(hi - lo), d->name, n + 1, misses, hits);
    }
    if (fd >= 0)
        close(fd); /* the region holds the dma-buf */
    reg->ib = r;
    pthread_mutex_unlock(&cache_lock);
    return r->mr;
}

int tt_ib_can_send_from(struct tt_memreg *reg)
{
    return tt_ib_reg_get(reg) != NULL;
}

void tt_ib_reg_put(struct tt_memreg *reg)
{
    struct region *r = reg->ib, **p;

    reg->ib = NULL;
    if (!r || r == &refused)
        return;
    pthread_mutex_lock(&cache_lock);
    if (--r->users == 0) {
        for (p = &regions; *p && *p != r; p = &(*p)->next)
            ;
        if (*p)
            *p = r->next;
        tt_ib_device()->v.dereg_mr(r->mr);
        TT_TRACE(TT_SUB_IB, "net_ib: deregistered [%p, +%zu)", (void *)r->lo,
                 (size_t)(r->hi - r->lo));
        free(r);
    }
    pthread_mutex_unlock(&cache_lock);
}
