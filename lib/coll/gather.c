/*
 * gather.c -- tutti_gather and tutti_scatter (tutti.h): the rooted personalized exchanges, one
 * batch of point-to-point operations like tutti_all_to_all (all_to_all.c), a group nested in
 * the caller's if one is open. Gather: every rank sends its block to the root, which receives
 * block j from rank j; scatter: the reverse. The root's own block stays where it is in place,
 * moves by memcpy once the batch is done where the call runs at once on host memory, and
 * otherwise goes through the root's own connection like any other block.
 */
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/base/error.h"

#include <stdint.h>

/* The names a message uses for the root's n blocks and for every rank's one block. */
struct sides {
    const char *fn, *whole, *one;
};

static tutti_result_t check_rooted(struct tutti_comm *comm, const struct sides *sd,
                                   const char *whole, const char *one, size_t count,
                                   tutti_dtype_t dtype, int root, int *inplace)
{
    struct tt_call c = {.fn = sd->fn, .dtype = dtype};
    size_t es, n = (size_t)comm->nranks, bytes, all;

    TT_CHECK(tt_coll_check_dtype_op(comm, &c, 0));
    es = tutti_dtype_size(dtype);
    if (root < 0 || root >= comm->nranks)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: root %d is out of range [0, %d)", sd->fn,
                       root, comm->nranks);
    if (__builtin_mul_overflow(count, es, &bytes) || __builtin_mul_overflow(bytes, n, &all) ||
        all > SIZE_MAX / 2)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: count %zu x %d ranks overflows", sd->fn,
                       count, comm->nranks);
    *inplace = 0;
    if (count == 0)
        return TUTTI_SUCCESS;
    if (!one)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", sd->fn,
                       sd->one, count);
    if (comm->rank != root)
        return TUTTI_SUCCESS;
    /* The root's own buffer: only it can refuse it (tt_coll_refuse_alone). */
    if (!whole)
        return tt_coll_refuse_alone(comm, tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                                                  "%s: %s is NULL on the root with count %zu",
                                                  sd->fn, sd->whole, count));
    *inplace = one == whole + (size_t)root * bytes;
    if (!*inplace && (uintptr_t)one < (uintptr_t)whole + all &&
        (uintptr_t)whole < (uintptr_t)one + bytes)
        return tt_coll_refuse_alone(
            comm, tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                          "%s: %s and %s overlap on the root but the call is not in place (in "
                          "place: %s == %s + root * count elements)",
                          sd->fn, sd->whole, sd->one, sd->one, sd->whole));
    return TUTTI_SUCCESS;
}

/*
 * One rooted exchange. gather: `one` (count elements, every rank) goes to block r of the root's
 * `whole` (n * count); scatter: block r of the root's `whole` comes to rank r's `one`.
 */
static tutti_result_t rooted(const struct sides *sd, int gather, char *whole, char *one,
                             size_t count, tutti_dtype_t dtype, int root, struct tutti_comm *comm,
                             tutti_stream_t stream)
{
    size_t bytes;
    int me, inplace = 0, own_copy = 0;
    tutti_result_t rc = TUTTI_SUCCESS, end;

    TT_CHECK(tt_coll_check_comm(comm, stream, sd->fn));
    TT_CHECK(check_rooted(comm, sd, whole, one, count, dtype, root, &inplace));
    me = comm->rank;
    bytes = count * tutti_dtype_size(dtype);
    if (me == root && !inplace)
        own_copy = tt_own_copy_ok(stream, gather ? one : whole + (size_t)me * bytes,
                                  gather ? whole + (size_t)me * bytes : one, bytes);
    tutti_group_start();
    tt_group_collective(sd->fn);
    if (me != root) {
        rc = gather ? tutti_send(one, count, dtype, root, comm, stream)
                    : tutti_recv(one, count, dtype, root, comm, stream);
    } else {
        for (int j = 0; j < comm->nranks && rc == TUTTI_SUCCESS; j++) {
            char *block = count ? whole + (size_t)j * bytes : NULL;
            if (j == me && (inplace || own_copy))
                continue;
            rc = gather ? tutti_recv(block, count, dtype, j, comm, stream)
                        : tutti_send(block, count, dtype, j, comm, stream);
            if (rc == TUTTI_SUCCESS && j == me) /* the own block through the own connection */
                rc = gather ? tutti_send(one, count, dtype, me, comm, stream)
                            : tutti_recv(one, count, dtype, me, comm, stream);
        }
    }
    end = tutti_group_end(); /* runs the batch, or (failed) discards it */
    if (rc != TUTTI_SUCCESS || end != TUTTI_SUCCESS)
        return rc != TUTTI_SUCCESS ? rc : end;
    if (own_copy)
        return gather ? tt_own_copy(comm, sd->fn, whole + (size_t)me * bytes, one, bytes)
                      : tt_own_copy(comm, sd->fn, one, whole + (size_t)me * bytes, bytes);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_gather(const void *sendbuf, void *recvbuf, size_t count, tutti_dtype_t dtype,
                            int root, tutti_comm_t comm, tutti_stream_t stream)
{
    static const struct sides sd = {"tutti_gather", "recvbuf", "sendbuf"};
    return rooted(&sd, 1, recvbuf, (char *)sendbuf, count, dtype, root, comm, stream);
}

tutti_result_t tutti_scatter(const void *sendbuf, void *recvbuf, size_t count, tutti_dtype_t dtype,
                             int root, tutti_comm_t comm, tutti_stream_t stream)
{
    static const struct sides sd = {"tutti_scatter", "sendbuf", "recvbuf"};
    return rooted(&sd, 0, (char *)sendbuf, recvbuf, count, dtype, root, comm, stream);
}
