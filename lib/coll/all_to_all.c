/*
 * all_to_all.c -- tutti_all_to_all and tutti_all_to_allv (tutti.h): one batch of point-to-point
 * operations, a group nested in the caller's if one is open. This rank's block for rank j goes
 * to rank j, rank i's block for this rank into recvbuf; the own block goes through this rank's
 * own connection like any other or, where the batch runs at once on host memory, by memcpy
 * once the batch is done. Built on the public point-to-point calls; a block size that differs
 * between sender and receiver fails the batch like any mismatched send and receive.
 */
#include "lib/coll/coll.h"
#include "lib/core/comm.h"
#include "lib/kern/copy.h"
#include "lib/gpu/gpu.h"
#include "lib/base/error.h"
#include "lib/stream/stream.h"

#include <stdint.h>
#include <string.h>

/* Where the blocks lie, in elements: per-peer arrays (all_to_allv), or where they are NULL,
 * blocks of `count` one after another (all_to_all). */
struct layout {
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    size_t count;
};

static size_t count_of(const size_t *counts, size_t count, size_t j)
{
    return counts ? counts[j] : count;
}

static size_t displ_of(const size_t *displs, size_t count, size_t j)
{
    return displs ? displs[j] : j * count;
}

/* One side's blocks: each in range, and the hull [*lo, *hi) of the non-empty ones, in bytes. */
static tutti_result_t check_side(struct tutti_comm *comm, const char *fn, const char *cname,
                                 const char *dname, const size_t *counts, const size_t *displs,
                                 size_t count, size_t es, size_t *lo, size_t *hi)
{
    *lo = SIZE_MAX;
    *hi = 0;
    for (size_t j = 0; j < (size_t)comm->nranks; j++) {
        size_t c = count_of(counts, count, j), d = 0, end, b0, b1;
        int bad = displs ? (d = displs[j], 0) : __builtin_mul_overflow(j, count, &d);

        if (bad || __builtin_add_overflow(d, c, &end) || __builtin_mul_overflow(end, es, &b1) ||
            b1 > SIZE_MAX / 2) {
            if (!counts)
                return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: count %zu x %d ranks overflows",
                               fn, count, comm->nranks);
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                           "%s: %s[%zu] + %s[%zu] (%zu + %zu elements) overflows", fn, dname, j,
                           cname, j, d, c);
        }
        b0 = d * es;
        if (c > 0 && b0 < *lo)
            *lo = b0;
        if (c > 0 && b1 > *hi)
            *hi = b1;
    }
    return TUTTI_SUCCESS;
}

static tutti_result_t check_layout(struct tutti_comm *comm, const char *fn, const void *sendbuf,
                                   void *recvbuf, const struct layout *l, size_t es)
{
    size_t slo, shi, rlo, rhi, me = (size_t)comm->rank, sc, rc;

    TT_CHECK(check_side(comm, fn, "sendcounts", "sdispls", l->scounts, l->sdispls, l->count, es,
                        &slo, &shi));
    TT_CHECK(check_side(comm, fn, "recvcounts", "rdispls", l->rcounts, l->rdispls, l->count, es,
                        &rlo, &rhi));
    if (shi > 0 && !sendbuf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: sendbuf is NULL with %zu bytes to send",
                       fn, shi - slo);
    if (rhi > 0 && !recvbuf)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: recvbuf is NULL with %zu bytes to receive",
                       fn, rhi - rlo);
    if (shi > 0 && rhi > 0 && (const char *)sendbuf + slo < (const char *)recvbuf + rhi &&
        (const char *)recvbuf + rlo < (const char *)sendbuf + shi)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: sendbuf and recvbuf overlap (the spans of their blocks, %zu and %zu "
                       "bytes); all-to-all has no in-place form: use separate buffers",
                       fn, shi - slo, rhi - rlo);
    sc = count_of(l->scounts, l->count, me);
    rc = count_of(l->rcounts, l->count, me);
    if (sc != rc)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: sendcounts[%zu] is %zu but recvcounts[%zu] is %zu: this rank's block "
                       "to itself must be received whole",
                       fn, me, sc, me, rc);
    return TUTTI_SUCCESS;
}

static tutti_result_t exchange(const char *fn, const void *sendbuf, void *recvbuf,
                               const struct layout *l, tutti_dtype_t dtype, struct tutti_comm *comm,
                               tutti_stream_t stream)
{
    struct tt_call c = {.fn = fn, .dtype = dtype};
    size_t es, n, me, own;
    tutti_result_t rc = TUTTI_SUCCESS, end;
    int self_copy;

    TT_CHECK(tt_coll_check_comm(comm, stream, fn));
    TT_CHECK(tt_coll_check_dtype_op(comm, &c, 0));
    es = tutti_dtype_size(dtype);
    n = (size_t)comm->nranks;
    me = (size_t)comm->rank;
    TT_CHECK(check_layout(comm, fn, sendbuf, recvbuf, l, es));
    own = count_of(l->scounts, l->count, me) * es;
    self_copy = tt_own_copy_ok(stream, sendbuf, recvbuf, own);
    tutti_group_start();
    tt_group_collective(fn);
    for (size_t j = 0; j < n && rc == TUTTI_SUCCESS; j++) {
        size_t sc = count_of(l->scounts, l->count, j), rcnt = count_of(l->rcounts, l->count, j);
        const char *s = sc ? (const char *)sendbuf + displ_of(l->sdispls, l->count, j) * es : NULL;
        char *r = rcnt ? (char *)recvbuf + displ_of(l->rdispls, l->count, j) * es : NULL;
        if (self_copy && j == me)
            continue;
        rc = tutti_send(s, sc, dtype, (int)j, comm, stream);
        if (rc == TUTTI_SUCCESS)
            rc = tutti_recv(r, rcnt, dtype, (int)j, comm, stream);
    }
    end = tutti_group_end(); /* runs the batch, or (failed) discards it */
    if (rc != TUTTI_SUCCESS || end != TUTTI_SUCCESS)
        return rc != TUTTI_SUCCESS ? rc : end;
    if (self_copy)
        return tt_own_copy(comm, fn, (char *)recvbuf + displ_of(l->rdispls, l->count, me) * es,
                           (const char *)sendbuf + displ_of(l->sdispls, l->count, me) * es, own);
    return TUTTI_SUCCESS;
}

int tt_own_copy_ok(tutti_stream_t stream, const void *src, const void *dst, size_t bytes)
{
    return !stream && !tt_group_open() && bytes > 0 && tt_cuda_kind(src) == TT_MEM_HOST &&
           tt_cuda_kind(dst) == TT_MEM_HOST;
}

tutti_result_t tt_own_copy(struct tutti_comm *comm, const char *fn, void *dst, const void *src,
                           size_t bytes)
{
    /* The batch may have been empty (one rank): it then neither waited nor looked at comm. */
    if (!tt_stream_in_worker())
        tt_comm_wait_idle(comm);
    TT_CHECK(tt_coll_check_health(comm, fn));
    tt_copy(dst, src, bytes);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                tutti_dtype_t dtype, tutti_comm_t comm, tutti_stream_t stream)
{
    struct layout l = {.count = count};
    return exchange("tutti_all_to_all", sendbuf, recvbuf, &l, dtype, comm, stream);
}

tutti_result_t tutti_all_to_allv(const void *sendbuf, const size_t *sendcounts,
                                 const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                 const size_t *rdispls, tutti_dtype_t dtype, tutti_comm_t comm,
                                 tutti_stream_t stream)
{
    const char *fn = "tutti_all_to_allv";
    struct layout l = {sendcounts, sdispls, recvcounts, rdispls, 0};
    const char *missing = !sendcounts   ? "sendcounts"
                          : !sdispls    ? "sdispls"
                          : !recvcounts ? "recvcounts"
                          : !rdispls    ? "rdispls"
                                        : NULL;

    if (missing) {
        TT_CHECK(tt_coll_check_comm(comm, stream, fn));
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: %s is NULL (an array of one per rank)", fn,
                       missing);
    }
    return exchange(fn, sendbuf, recvbuf, &l, dtype, comm, stream);
}
