/*
 * coll_check_p2p.c -- coll_check's point-to-point modes (coll_check.c runs them): ring
 * exchanges, chained sends, all-to-all, gather and scatter, each checked against values
 * computed from (rank, index), and the pieces of them the soak mixes in.
 */
#include "coll_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A ring exchange, an all-to-all in a group, chained sends (coll_check p2p). */
void p2p(void)
{
    size_t sizes[] = {0, 1, 4099, 3000017};
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        int32_t *s = malloc((n + 1) * 4), *r = malloc((n + 1) * 4);
        void *hs = reg_or_die(s, n * 4), *hr = reg_or_die(r, n * 4);
        char what[96];

        /* Ring exchange: everyone sends and receives at once. With --register, twice: the
         * second time the send buffer has a second registration, which finds the first's
         * memory region in net_ib's registration cache (a hit). */
        for (size_t i = 0; i < n; i++)
            s[i] = (int32_t)(rank * 100000 + (int)(i % 99991));
        for (int pass = 0; pass < (reg_on ? 2 : 1); pass++) {
            void *again = pass ? reg_or_die(s, n * 4) : NULL;
            snprintf(what, sizeof(what), "ring exchange of %zu int32 (pass %d)", n, pass);
            memset(r, 0, n * 4);
            tutti_group_start();
            tutti_send(s, n, TUTTI_INT32, next, comm, NULL);
            tutti_recv(r, n, TUTTI_INT32, prev, comm, NULL);
            if (tutti_group_end() != TUTTI_SUCCESS)
                fail(what, "%s", tutti_comm_last_error(comm));
            for (size_t i = 0; i < n; i++)
                if (r[i] != (int32_t)(prev * 100000 + (int)(i % 99991))) {
                    fail(what, "element %zu is %d", i, r[i]);
                    break;
                }
            unreg(again);
        }
        unreg(hs);
        unreg(hr);
        free(s);
        free(r);
    }
    /* All-to-all in one group, self included: block j goes to rank j. */
    {
        size_t blk = 1031;
        int64_t *s = malloc(blk * (size_t)nranks * 8), *r = malloc(blk * (size_t)nranks * 8);
        void *hs = reg_or_die(s, blk * (size_t)nranks * 8);
        for (int j = 0; j < nranks; j++)
            for (size_t i = 0; i < blk; i++)
                s[(size_t)j * blk + i] = (int64_t)rank * 1000000 + j * 1000 + (int64_t)i;
        tutti_group_start();
        for (int j = 0; j < nranks; j++) {
            tutti_send(s + (size_t)j * blk, blk, TUTTI_INT64, j, comm, NULL);
            tutti_recv(r + (size_t)j * blk, blk, TUTTI_INT64, j, comm, NULL);
        }
        if (tutti_group_end() != TUTTI_SUCCESS)
            fail("all-to-all", "%s", tutti_comm_last_error(comm));
        for (int j = 0; j < nranks; j++)
            for (size_t i = 0; i < blk; i++)
                if (r[(size_t)j * blk + i] != (int64_t)j * 1000000 + rank * 1000 + (int64_t)i) {
                    fail("all-to-all", "block %d element %zu", j, i);
                    j = nranks;
                    break;
                }
        unreg(hs);
        free(s);
        free(r);
    }
    /* A chain: rank 0 sends to 1, each passes it on (plain blocking calls). */
    if (nranks > 1) {
        double v[777];
        if (rank == 0) {
            for (int i = 0; i < 777; i++)
                v[i] = i * 0.25;
            tutti_send(v, 777, TUTTI_FLOAT64, 1, comm, NULL);
        } else {
            if (tutti_recv(v, 777, TUTTI_FLOAT64, rank - 1, comm, NULL) != TUTTI_SUCCESS)
                fail("chain", "%s", tutti_comm_last_error(comm));
            if (rank + 1 < nranks)
                tutti_send(v, 777, TUTTI_FLOAT64, rank + 1, comm, NULL);
            for (int i = 0; i < 777; i++)
                if (v[i] != i * 0.25) {
                    fail("chain", "element %d", i);
                    break;
                }
        }
    }
    /* The same exchange before and after a collective, which replaces the plan the
     * point-to-point path keeps between calls of one shape: the second must not reuse it.
     * Unregistered (the ib suite counts this mode's registrations). */
    int was = reg_on;
    reg_on = 0;
    soak_ring(TUTTI_INT32, 3, 5, "before a collective: ");
    run_one(ALL_REDUCE, TUTTI_INT32, TUTTI_SUM, 3, 0, 0);
    soak_ring(TUTTI_INT32, 3, 11, "after a collective: ");
    reg_on = was;
}

/*
 * tutti_gather (gather = 1) or tutti_scatter of count elements per rank, values shifted by
 * first: gathered, block i on the root is rank i's inputs from first; scattered, rank r gets
 * the root's inputs from first + r * count. Non-roots pass NULL for the buffer they do not use.
 */
void check_rooted(int gather, tutti_dtype_t t, size_t count, size_t first, int root,
                  tutti_stream_t stream, const char *tag)
{
    size_t es = tutti_dtype_size(t), n = (size_t)nranks, whole = rank == root ? n * count : 0;
    unsigned char table[VAL_MAX_PERIOD * 8];
    char what[160];
    struct buf sb, rb;
    void *s = buf_alloc(&sb, (gather ? count : whole) * es),
         *r = buf_alloc(&rb, (gather ? whole : count) * es);
    tutti_result_t rc;

    snprintf(what, sizeof(what), "%s%s of %zu %s per rank, root %d%s", tag,
             gather ? "gather" : "scatter", count, tutti_dtype_name(t), root,
             stream ? " on a stream" : "");
    val_fill(t, VAL_NO_OP, rank, s, gather ? count : whole, first);
    rc = gather ? tutti_gather(s, rank == root ? r : NULL, count, t, root, comm, stream)
                : tutti_scatter(rank == root ? s : NULL, r, count, t, root, comm, stream);
    if (rc == TUTTI_SUCCESS && stream)
        rc = tutti_stream_sync(stream);
    if (rc != TUTTI_SUCCESS) {
        fail(what, "returned %s: %s", tutti_strerror(rc), tutti_comm_last_error(comm));
    } else {
        for (int i = 0; gather && rank == root && i < nranks; i++) {
            val_expect_input(t, VAL_NO_OP, i, table);
            check_elems(what, t, VAL_NO_OP, (char *)r + (size_t)i * count * es, count, first,
                        table);
        }
        if (!gather) {
            val_expect_input(t, VAL_NO_OP, root, table);
            check_elems(what, t, VAL_NO_OP, r, count, first + (size_t)rank * count, table);
        }
        if (!guards_ok(&sb) || !guards_ok(&rb))
            fail(what, "wrote outside its buffers");
    }
    buf_free(&sb);
    buf_free(&rb);
}

/*
 * tutti_all_to_all of n x count elements of dtype t, values shifted by first: rank r's block j
 * holds rank r's inputs from index first + j * count, so block i received here must be rank
 * i's inputs from first + rank * count. stream: NULL or a host stream to queue on and sync.
 */
void check_all_to_all(tutti_dtype_t t, size_t count, size_t first, tutti_stream_t stream,
                      const char *tag)
{
    size_t es = tutti_dtype_size(t), n = (size_t)nranks;
    unsigned char table[VAL_MAX_PERIOD * 8];
    char what[160];
    struct buf sb, rb;
    void *s = buf_alloc(&sb, n * count * es), *r = buf_alloc(&rb, n * count * es);
    tutti_result_t rc;

    snprintf(what, sizeof(what), "%sall-to-all of %zu %s per rank%s", tag, count,
             tutti_dtype_name(t), stream ? " on a stream" : "");
    val_fill(t, VAL_NO_OP, rank, s, n * count, first);
    rc = tutti_all_to_all(s, r, count, t, comm, stream);
    if (rc == TUTTI_SUCCESS && stream)
        rc = tutti_stream_sync(stream);
    if (rc != TUTTI_SUCCESS) {
        fail(what, "returned %s: %s", tutti_strerror(rc), tutti_comm_last_error(comm));
    } else {
        for (int i = 0; i < nranks; i++) {
            val_expect_input(t, VAL_NO_OP, i, table);
            check_elems(what, t, VAL_NO_OP, (char *)r + (size_t)i * count * es, count,
                        first + (size_t)rank * count, table);
        }
        if (!guards_ok(&sb) || !guards_ok(&rb))
            fail(what, "wrote outside its buffers");
    }
    buf_free(&sb);
    buf_free(&rb);
}

/* tutti_all_to_all: sizes, a host stream, inside a caller's group, refused overlap. */
void all_to_all(void)
{
    size_t counts[] = {0, 1, 1031, 100003};
    tutti_stream_t stream = NULL;
    int32_t x = rank, y = -1;
    int64_t one[64];

    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        check_all_to_all(TUTTI_INT64, counts[k], k, NULL, "");
        check_all_to_all(TUTTI_FLOAT16, counts[k], k + 3, NULL, "");
    }
    if (tutti_stream_create(&stream) != TUTTI_SUCCESS) {
        fail("all-to-all", "tutti_stream_create: %s", tutti_last_error());
        return;
    }
    check_all_to_all(TUTTI_FLOAT32, 4099, 5, stream, "");
    tutti_stream_destroy(stream);
    /* Inside a group, beside a ring exchange: one batch. */
    if (nranks <= 64) {
        int64_t out[64];
        for (int j = 0; j < nranks; j++)
            one[j] = rank * 1000 + j;
        tutti_group_start();
        tutti_send(&x, 1, TUTTI_INT32, (rank + 1) % nranks, comm, NULL);
        tutti_recv(&y, 1, TUTTI_INT32, (rank + nranks - 1) % nranks, comm, NULL);
        tutti_all_to_all(one, out, 1, TUTTI_INT64, comm, NULL);
        if (tutti_group_end() != TUTTI_SUCCESS)
            fail("all-to-all in a group", "%s", tutti_comm_last_error(comm));
        else {
            if (y != (rank + nranks - 1) % nranks)
                fail("all-to-all in a group", "the ring exchange got %d", y);
            for (int j = 0; j < nranks; j++)
                if (out[j] != j * 1000 + rank) {
                    fail("all-to-all in a group", "block %d is %lld", j, (long long)out[j]);
                    break;
                }
        }
        /* Overlapping buffers: refused on every rank, nothing sent. */
        if (tutti_all_to_all(one, one, 1, TUTTI_INT64, comm, NULL) != TUTTI_ERR_INVALID_ARG ||
            !strstr(tutti_last_error(), "overlap"))
            fail("all-to-all in place", "not refused: %s", tutti_last_error());
    }
}

/* A ring exchange of n elements of dtype t, values shifted by first. */
void soak_ring(tutti_dtype_t t, size_t n, size_t first, const char *tag)
{
    size_t es = tutti_dtype_size(t);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    unsigned char table[VAL_MAX_PERIOD * 8];
    char what[96];
    struct buf sb, rb;
    void *s = buf_alloc(&sb, n * es), *r = buf_alloc(&rb, n * es);

    snprintf(what, sizeof(what), "%sring exchange of %zu %s", tag, n, tutti_dtype_name(t));
    val_fill(t, VAL_NO_OP, rank, s, n, first);
    tutti_group_start();
    tutti_send(s, n, t, next, comm, NULL);
    tutti_recv(r, n, t, prev, comm, NULL);
    if (tutti_group_end() != TUTTI_SUCCESS) {
        fail(what, "%s", tutti_comm_last_error(comm));
    } else {
        val_expect_input(t, VAL_NO_OP, prev, table);
        check_elems(what, t, VAL_NO_OP, r, n, first, table);
        if (!guards_ok(&sb) || !guards_ok(&rb))
            fail(what, "wrote outside its buffers");
    }
    buf_free(&sb);
    buf_free(&rb);
}
