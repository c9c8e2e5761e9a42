/*
 * coll_check.c -- what a call is checked for before it runs, and what a refusal does: the
 * communicator's health, the arguments (every rank checks what it passes, used or not), where
 * the buffers live, TUTTI_CHECK_COLL's comparison across ranks; a call refused for this
 * rank's own buffers runs refused (exec.h poison) or puts the communicator in the error state.
 */
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/cuda/cuda.h"
#include "lib/base/error.h"
#include "lib/core/redop.h"
#include "lib/stream/stream.h"
#include "lib/exec/tag.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Is comm healthy? Also turns a pending abort into the error state. */
tutti_result_t tt_coll_check_health(struct tutti_comm *comm, const char *fn)
{
    if (tt_comm_error(comm) == TUTTI_SUCCESS &&
        __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE))
        return tt_comm_set_error(
            comm, tt_fail(comm, TUTTI_ERR_ABORTED,
                          "%s: the communicator was aborted (tutti_comm_abort)", fn));
    if (tt_comm_error(comm) != TUTTI_SUCCESS)
        return tt_fail_quiet(comm, tt_comm_error(comm),
                             "%s: the communicator is unusable after an earlier error: %s", fn,
                             comm->fatal);
    return TUTTI_SUCCESS;
}

/* Checks shared by every call: handle, health, stream. */
tutti_result_t tt_coll_check_comm(struct tutti_comm *comm, tutti_stream_t stream, const char *fn)
{
    TT_CHECK(tt_comm_check(comm, fn));
    TT_CHECK(tt_coll_check_health(comm, fn));
    return tt_stream_check(stream, comm, fn);
}

tutti_result_t tt_coll_check_dtype_op(struct tutti_comm *comm, const struct tt_call *c, int has_op)
{
    if ((unsigned)c->dtype >= TUTTI_NUM_DTYPES)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: dtype %d is not a tutti_dtype_t", c->fn,
                       (int)c->dtype);
    if (has_op && (unsigned)c->op >= TUTTI_NUM_OPS && !tt_redop_is_custom(c->op))
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: op %d is not a tutti_op_t", c->fn,
                       (int)c->op);
    return TUTTI_SUCCESS;
}

/* Do [a, a+alen) and [b, b+blen) overlap? */
static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}

/*
 * A refusal this rank may make alone, where its peers cannot run the call with it (a
 * point-to-point batch, a device-path or CUDA-stream call): the communicator enters
 * the error state and tells them (comm.c), so they fail now, naming this refusal, instead of
 * waiting for it or succeeding with a message that their next call would read.
 */
tutti_result_t tt_coll_refuse_alone(struct tutti_comm *comm, tutti_result_t rc)
{
    if (comm->nranks == 1)
        return rc;
    tt_fail_quiet(comm, rc,
                  "%s (rank %d alone can tell: the communicator is unusable now, and its "
                  "other ranks' calls fail)",
                  tt_thread_error(), comm->rank);
    return tt_comm_set_error(comm, rc);
}

/*
 * Validate a collective and say whether it is in place. Every rank makes the same checks of
 * what it passes, used or not (a leaf's unused buffer too), so ranks that pass alike refuse
 * alike. *own says a refusal is of this rank's own buffers (its reason, enum tt_refusal), which
 * its peers may not share: the caller then runs the call refused (refused_call); other
 * refusals (dtype, op, root, count) are of what every rank must pass alike.
 */
tutti_result_t tt_coll_check_args(struct tutti_comm *comm, const struct tt_call *c, int *inplace,
                                  unsigned *own)
{
    size_t es, n = (size_t)comm->nranks, elems = c->count, send_elems, recv_elems, total;
    int me = comm->rank, uses_send = 1, uses_recv = 1;
    const char *s = c->sendbuf;
    char *r = c->recvbuf;

    *own = 0;
    TT_CHECK(tt_coll_check_dtype_op(comm, c,
                                    c->coll != TT_COLL_ALL_GATHER && c->coll != TT_COLL_BROADCAST));
    es = tutti_dtype_size(c->dtype);
    if (c->coll == TT_COLL_BROADCAST || c->coll == TT_COLL_REDUCE) {
        if (c->root < 0 || c->root >= comm->nranks)
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: root %d is out of range [0, %d)",
                           c->fn, c->root, comm->nranks);
        uses_send = c->coll == TT_COLL_REDUCE || me == c->root;
        uses_recv = c->coll == TT_COLL_BROADCAST || me == c->root;
    }
    if (__builtin_mul_overflow(elems, 2 * es * n, &total)) /* no divisions: 5% of a call */
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: count %zu of %s overflows the address space with %d ranks", c->fn,
                       elems, tutti_dtype_name(c->dtype), comm->nranks);
    send_elems = c->coll == TT_COLL_REDUCE_SCATTER ? elems * n : elems;
    recv_elems = c->coll == TT_COLL_ALL_GATHER ? elems * n : elems;
    switch (c->coll) {
    case TT_COLL_ALL_GATHER: *inplace = s == r + (size_t)me * elems * es; break;
    case TT_COLL_REDUCE_SCATTER: *inplace = r == s + (size_t)me * elems * es; break;
    default: *inplace = s == r; break;
    }
    if (elems > 0 && uses_send && !s) {
        *own = TT_REFUSED_SENDBUF_NULL;
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: sendbuf is NULL with count %zu", c->fn,
                       elems);
    }
    if (elems > 0 && uses_recv && !r) {
        *own = TT_REFUSED_RECVBUF_NULL;
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: recvbuf is NULL with count %zu", c->fn,
                       elems);
    }
    if (!*inplace && overlaps(s, send_elems * es, r, recv_elems * es)) {
        *own = TT_REFUSED_OVERLAP;
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: sendbuf and recvbuf overlap but the call is not in place (see "
                       "tutti.h for the in-place layout of each collective; every rank checks "
                       "what it passes, used or not)",
                       c->fn);
    }
    if (!uses_send || !uses_recv)
        *inplace = 0;
    if (c->coll == TT_COLL_BROADCAST && me == c->root && s == r)
        *inplace = 1;
    if (c->coll == TT_COLL_REDUCE && me == c->root && s == r)
        *inplace = 1;
    return TUTTI_SUCCESS;
}

static const char *mem_name(enum tt_mem k)
{
    return k == TT_MEM_DEVICE ? "CUDA device" : k == TT_MEM_MANAGED ? "CUDA managed" : "host";
}

/*
 * Where the buffers live (with CUDA): both on the host, or both on a device (managed memory
 * counts as device: the GPU may be using it); a mix is refused. Sets c->device.
 */
tutti_result_t tt_coll_check_memory(struct tutti_comm *comm, struct tt_call *c)
{
    enum tt_mem ks, kr;

    c->device = 0;
    if (c->count == 0 || !tt_cuda_ready())
        return TUTTI_SUCCESS;
    ks = c->sendbuf ? tt_cuda_kind(c->sendbuf) : TT_MEM_HOST;
    kr = c->recvbuf ? tt_cuda_kind(c->recvbuf) : TT_MEM_HOST;
    if (c->sendbuf && c->recvbuf && (ks == TT_MEM_HOST) != (kr == TT_MEM_HOST))
        return c->refusal = TT_REFUSED_MEMORY,
               tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: sendbuf is %s memory and recvbuf is %s memory: pass both on the "
                       "host or both on a device",
                       c->fn, mem_name(ks), mem_name(kr));
    c->device = ks != TT_MEM_HOST || kr != TT_MEM_HOST;
    return TUTTI_SUCCESS;
}

/* What TUTTI_CHECK_COLL compares across ranks. */
struct coll_desc {
    uint32_t coll, dtype, op;
    int32_t root;
    uint32_t device; /* on the device path: device buffers (every rank must agree) */
    uint32_t pad;
    uint64_t count, seq;
};

static int desc_str(const struct coll_desc *d, char *buf, size_t size)
{
    return snprintf(buf, size, "%s #%llu count %llu %s %s root %d%s",
                    tt_coll_name((enum tt_coll)d->coll), (unsigned long long)d->seq,
                    (unsigned long long)d->count, tutti_dtype_name((tutti_dtype_t)d->dtype),
                    d->op == TUTTI_NUM_OPS ? "premul_sum" : tutti_op_name((tutti_op_t)d->op),
                    d->root, d->device ? " on device memory" : "");
}

/*
 * TUTTI_CHECK_COLL: all-gather every rank's description of the call (over the ring, as data)
 * and compare with rank 0's. Every rank sees the same table, so a mismatch fails the call
 * identically everywhere, before anything of it is sent; the communicator stays usable.
 */
tutti_result_t tt_coll_check_match(struct tutti_comm *comm, const struct tt_call *c)
{
    struct coll_desc me = {.coll = (uint32_t)c->coll,
                           .dtype = (uint32_t)c->dtype,
                           .root = -1,
                           .device = c->engine == TT_ENGINE_DEVPATH,
                           .count = c->count,
                           .seq = comm->seq};
    struct coll_desc *all = calloc((size_t)comm->nranks, sizeof(*all));
    char msg[TT_ERRMSG_LEN], one[128];
    int n = 0, bad = 0;
    tutti_result_t rc;

    if (!all)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory for TUTTI_CHECK_COLL", c->fn);
    if (c->coll == TT_COLL_ALL_REDUCE || c->coll == TT_COLL_REDUCE_SCATTER ||
        c->coll == TT_COLL_REDUCE)
        me.op = c->premul.on ? TUTTI_NUM_OPS : (uint32_t)c->op;
    if (c->coll == TT_COLL_BROADCAST || c->coll == TT_COLL_REDUCE)
        me.root = c->root;
    rc = tt_coll_allgather_own(comm, "collective check", 0, &me, sizeof(me), all);
    if (rc != TUTTI_SUCCESS) {
        free(all);
        return rc;
    }
    desc_str(&all[0], one, sizeof(one));
    n = snprintf(msg, sizeof(msg), "%s: TUTTI_CHECK_COLL: ranks disagree with rank 0 (%s):", c->fn,
                 one);
    for (int r = 1; r < comm->nranks; r++) {
        if (memcmp(&all[r], &all[0], sizeof(all[0])) == 0)
            continue;
        bad++;
        desc_str(&all[r], one, sizeof(one));
        if (n < (int)sizeof(msg) - 32)
            n += snprintf(msg + n, sizeof(msg) - (size_t)n, " rank %d: %s;", r, one);
    }
    free(all);
    if (bad)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s", msg);
    return TUTTI_SUCCESS;
}
