/*
 * redop.c -- reduction operators made at run time: tutti_op_create_premul_sum (NCCL's
 * ncclRedOpCreatePreMulSum), and the pre-pass that runs them.
 *
 * A premul-sum op is a slot in its communicator's table. Its handle is a tutti_op_t value
 * outside the built-in range that says which slot and which generation of it, so a handle of
 * a destroyed op is refused by name even once its slot has been reused (PyTorch makes and
 * destroys one per call). A call binds the op when it is made (tt_redop_bind): the scalar
 * (host residence) or its device address travels with the call, so the op may be destroyed as
 * soon as the call has returned, queued or not.
 *
 * The call then runs as a SUM. On the host the executor multiplies the caller's input as it
 * reads it (exec.h premul), fused into the copy or reduction that reads it: every read through
 * sendbuf is of an original value, out of place (no step writes the input) and in place
 * (every algorithm reads an input element through sendbuf before any step writes it, and
 * never reads one through recvbuf before: test_sim's in_place_plans_read_input_first).
 * Otherwise (in place on one rank, whose plan reads nothing, and on the device path) each
 * rank's input is scaled once before any of it moves (tt_redop_run_pre): into recvbuf where
 * the result lands on this rank (all-reduce, the root of a reduce), else into a buffer of the
 * communicator's (reduce-scatter, a reduce's other ranks), never into the caller's send
 * buffer.
 */
#include "lib/core/comm.h"
#include "lib/gpu/gpu.h"
#include "lib/base/error.h"
#include "lib/core/redop.h"
#include "lib/kern/reduce.h"
#include "lib/stream/stream.h"

#include <stdlib.h>
#include <string.h>

tutti_result_t tutti_op_create_premul_sum(tutti_op_t *op, const void *scalar, tutti_dtype_t dtype,
                                          tutti_scalar_residence_t residence, tutti_comm_t comm)
{
    static const char fn[] = "tutti_op_create_premul_sum";
    struct tt_redop *r;
    unsigned slot;

    TT_CHECK(tt_comm_check(comm, fn));
    if (!op)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: op is NULL", fn);
    if (!scalar)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: scalar is NULL", fn);
    if ((unsigned)dtype >= TUTTI_NUM_DTYPES)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: dtype %d is not a tutti_dtype_t", fn,
                       (int)dtype);
    if (residence != TUTTI_SCALAR_HOST_IMMEDIATE && residence != TUTTI_SCALAR_DEVICE)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: residence %d is neither TUTTI_SCALAR_HOST_IMMEDIATE nor "
                       "TUTTI_SCALAR_DEVICE",
                       fn, (int)residence);
    if (residence == TUTTI_SCALAR_DEVICE) {
        if (!tt_cuda_ready())
            return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                           "%s: residence TUTTI_SCALAR_DEVICE needs CUDA, and this process has "
                           "no usable device",
                           fn);
        if (tt_cuda_kind(scalar) == TT_MEM_HOST)
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                           "%s: scalar %p is host memory, but residence is TUTTI_SCALAR_DEVICE", fn,
                           scalar);
    }
    pthread_mutex_lock(&comm->redop_lock);
    for (slot = 0; slot < (unsigned)comm->nredops && comm->redops[slot].live; slot++)
        ;
    if (slot == (unsigned)comm->nredops) {
        if (slot == TT_REDOP_SLOTS) {
            pthread_mutex_unlock(&comm->redop_lock);
            return tt_fail(comm, TUTTI_ERR_SYSTEM,
                           "%s: %u operators are live on this communicator, the most there may "
                           "be (tutti_op_destroy frees them)",
                           fn, TT_REDOP_SLOTS);
        }
        if (comm->nredops == comm->redops_cap) {
            int cap = comm->redops_cap ? 2 * comm->redops_cap : 8;
            struct tt_redop *grown = realloc(comm->redops, (size_t)cap * sizeof(*grown));
            if (!grown) {
                pthread_mutex_unlock(&comm->redop_lock);
                return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
            }
            comm->redops = grown;
            comm->redops_cap = cap;
        }
        comm->redops[comm->nredops++] = (struct tt_redop){.gen = 0};
    }
    r = &comm->redops[slot];
    r->gen = r->gen % TT_REDOP_GENS + 1; /* 1..TT_REDOP_GENS: no handle is the bare tag */
    r->live = 1;
    r->dtype = dtype;
    r->dev = residence == TUTTI_SCALAR_DEVICE ? scalar : NULL;
    memset(r->value, 0, sizeof(r->value));
    if (!r->dev)
        memcpy(r->value, scalar, tutti_dtype_size(dtype));
    *op = (tutti_op_t)(TT_REDOP_TAG | (unsigned)r->gen << 16 | slot);
    pthread_mutex_unlock(&comm->redop_lock);
    return TUTTI_SUCCESS;
}

/* The live op that handle `op` names, or NULL with the reason in why; redop_lock is held. */
static struct tt_redop *lookup(struct tutti_comm *comm, tutti_op_t op, char *why, size_t size)
{
    unsigned slot = (unsigned)op & (TT_REDOP_SLOTS - 1), gen = ((unsigned)op >> 16) & TT_REDOP_GENS;
    struct tt_redop *r;

    if (!tt_redop_is_custom(op)) {
        snprintf(why, size, "op %d is not a tutti_op_t", (int)op);
        return NULL;
    }
    if (slot >= (unsigned)comm->nredops) {
        snprintf(why, size, "op %#x was not made on this communicator", (unsigned)op);
        return NULL;
    }
    r = &comm->redops[slot];
    if (r->gen != gen || !r->live) {
        snprintf(why, size, "op %#x was destroyed (or made on another communicator)", (unsigned)op);
        return NULL;
    }
    return r;
}

tutti_result_t tutti_op_destroy(tutti_op_t op, tutti_comm_t comm)
{
    struct tt_redop *r;
    char why[96];

    TT_CHECK(tt_comm_check(comm, "tutti_op_destroy"));
    if ((unsigned)op < TUTTI_NUM_OPS)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_op_destroy: op %s is built in: only operators made by "
                       "tutti_op_create_premul_sum are destroyed",
                       tutti_op_name(op));
    pthread_mutex_lock(&comm->redop_lock);
    r = lookup(comm, op, why, sizeof(why));
    if (r)
        r->live = 0;
    pthread_mutex_unlock(&comm->redop_lock);
    return r ? TUTTI_SUCCESS : tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_op_destroy: %s", why);
}

tutti_result_t tt_redop_bind(struct tutti_comm *comm, struct tt_call *c)
{
    struct tt_redop *r;
    char why[96];
    tutti_result_t rc = TUTTI_SUCCESS;

    pthread_mutex_lock(&comm->redop_lock);
    r = lookup(comm, c->op, why, sizeof(why));
    if (!r)
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: %s", c->fn, why);
    else if (r->dtype != c->dtype)
        rc = tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                     "%s: op %#x was made for %s, and the call's dtype is %s", c->fn,
                     (unsigned)c->op, tutti_dtype_name(r->dtype), tutti_dtype_name(c->dtype));
    if (rc == TUTTI_SUCCESS) {
        c->premul.on = 1;
        c->premul.dev = r->dev;
        memcpy(c->premul.value, r->value, sizeof(c->premul.value));
        c->op = TUTTI_SUM;
    }
    pthread_mutex_unlock(&comm->redop_lock);
    return rc;
}

void tt_redop_free(struct tutti_comm *comm)
{
    free(comm->redops);
    comm->redops = NULL;
    comm->nredops = comm->redops_cap = 0;
    free(comm->premul_buf);
    comm->premul_buf = NULL;
    comm->premul_bytes = 0;
    tt_cuda_free_scratch(&comm->premul_dev, &comm->premul_dev_bytes);
}

tutti_result_t tt_redop_prepare(struct tutti_comm *comm, const struct tt_call *c, int device,
                                void **bufs, int *inplace, struct tt_pre *pre)
{
    size_t es = tutti_dtype_size(c->dtype);
    int lands_here = c->coll == TT_COLL_ALL_REDUCE || comm->rank == c->root;

    *pre = (struct tt_pre){.src = c->sendbuf, .n = c->count, .dtype = c->dtype};
    if (c->coll == TT_COLL_REDUCE_SCATTER) {
        pre->n = c->count * (size_t)comm->nranks;
        lands_here = 0;
    }
    memcpy(pre->value, c->premul.pinned ? c->premul.pinned : c->premul.value, es);
    if (c->premul.dev && device) {
        pre->dev = c->premul.dev;
    } else if (c->premul.dev) {
        tutti_result_t rc = tt_cuda_read(pre->value, c->premul.dev, es);
        if (rc != TUTTI_SUCCESS)
            return tt_comm_set_error(
                comm, tt_fail(comm, rc, "%s: reading the premul-sum scalar from the device: %s",
                              c->fn, tt_thread_error()));
    }
    /* Scaled as it is read: out of place no step writes the caller's input, and in place every
     * plan reads it through sendbuf before writing it (test_sim checks), but on one rank an
     * in-place plan reads nothing */
    if (!device && (!c->inplace || comm->nranks > 1)) {
        pre->fused = 1;
        return TUTTI_SUCCESS;
    }
    if (lands_here) { /* scaled into recvbuf, then reduced there in place */
        pre->dst = c->recvbuf;
        *inplace = 1;
    } else {
        size_t bytes = pre->n * es;
        void **buf = device ? &comm->premul_dev : &comm->premul_buf;
        size_t *cap = device ? &comm->premul_dev_bytes : &comm->premul_bytes;
        tutti_result_t rc = TUTTI_SUCCESS;
        if (device)
            rc = tt_cuda_scratch(buf, cap, bytes, comm->cuda.stream);
        else if (tt_buffer_grow(buf, cap, bytes) != 0)
            rc = tt_fail_quiet(comm, TUTTI_ERR_SYSTEM, "out of memory");
        if (rc != TUTTI_SUCCESS)
            return tt_comm_set_error(comm,
                                     tt_fail(comm, rc,
                                             "%s: no %zu-byte buffer for the scaled input (premul "
                                             "sum): %s",
                                             c->fn, bytes, tt_thread_error()));
        pre->dst = *buf;
        *inplace = 0;
    }
    bufs[TT_BUF_SEND] = pre->dst;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_redop_run_pre(struct tutti_comm *comm, const struct tt_pre *pre, int device)
{
    if (device)
        return comm->cuda.mover.scale(comm->cuda.mover.ctx, pre->dst, pre->src, pre->n, pre->dtype,
                                      pre->value, pre->dev);
    tt_premul(pre->dtype, pre->dst, pre->src, pre->n, pre->value);
    return TUTTI_SUCCESS;
}
