/*
 * memreg.c -- tutti_comm_register / tutti_comm_deregister: the communicator's list of
 * registered ranges (memreg.h), which collectives look up to let transports send straight
 * from user memory.
 */
#include "lib/core/memreg.h"

#include "lib/core/comm.h"
#include "lib/gpu/gpu.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <stdlib.h>

#define MEMREG_MAGIC 0x7475747469726567ull /* "tuttireg" */

static pthread_mutex_t memreg_lock = PTHREAD_MUTEX_INITIALIZER;

/* What a transport keeps for r goes (its memory may be freed next). */
static void release(struct tt_memreg *r)
{
    tt_transport_unregister(r);
    r->magic = 0;
    free(r);
}

tutti_result_t tutti_comm_register(tutti_comm_t comm, void *buf, size_t bytes, void **handle)
{
    struct tt_memreg *r;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_register"));
    if (!handle)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_register: handle is NULL");
    *handle = NULL;
    if (!buf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_register: buf is NULL");
    if (bytes == 0)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_register: bytes is 0");
    if ((uintptr_t)buf + bytes < (uintptr_t)buf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_register: buf + bytes (%p + %zu) wraps around", buf, bytes);
    r = calloc(1, sizeof(*r));
    if (!r)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_register: out of memory");
    r->magic = MEMREG_MAGIC;
    r->comm = comm;
    r->base = buf;
    r->len = bytes;
    r->device = tt_cuda_kind(buf) != TT_MEM_HOST;
    pthread_mutex_lock(&memreg_lock);
    r->next = comm->memregs;
    comm->memregs = r;
    pthread_mutex_unlock(&memreg_lock);
    TT_TRACE(TT_SUB_COLL, "registered [%p, +%zu) with the communicator", buf, bytes);
    *handle = r;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_deregister(tutti_comm_t comm, void *handle)
{
    struct tt_memreg **p, *r = NULL;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_deregister"));
    if (!handle)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_deregister: handle is NULL");
    /* The operation running now may be using it: wait for it to end. */
    pthread_mutex_lock(&comm->run_lock);
    pthread_mutex_lock(&memreg_lock);
    for (p = &comm->memregs; *p; p = &(*p)->next)
        if (*p == handle) {
            r = *p;
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&memreg_lock);
    if (r)
        release(r);
    pthread_mutex_unlock(&comm->run_lock);
    if (!r)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_deregister: handle %p is not a registration of this "
                       "communicator (deregistered twice, or from another communicator?)",
                       handle);
    return TUTTI_SUCCESS;
}

struct tt_memreg *tt_memreg_find(struct tutti_comm *comm, const void *p, size_t len)
{
    struct tt_memreg *found = NULL;
    const char *lo = p;

    if (!p || len == 0 || !comm->memregs)
        return NULL;
    pthread_mutex_lock(&memreg_lock);
    for (struct tt_memreg *r = comm->memregs; r && !found; r = r->next)
        if (lo >= r->base && len <= r->len && (size_t)(lo - r->base) <= r->len - len)
            found = r;
    pthread_mutex_unlock(&memreg_lock);
    return found;
}

void tt_memreg_free_all(struct tutti_comm *comm)
{
    while (comm->memregs) {
        struct tt_memreg *r = comm->memregs;
        comm->memregs = r->next;
        release(r);
    }
}
