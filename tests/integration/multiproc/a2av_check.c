/*
 * a2av_check -- run under tutti-run: tutti_all_to_allv against blocks computed here.
 *
 * Rank i sends rank j a block of c(i, j) elements (zero for some pairs, 100,003 for others),
 * whose bytes are a function of (i, j, byte index), so a block from the wrong rank, for the
 * wrong rank or shifted shows. Send blocks lie in reverse peer order with gaps; receive blocks
 * in peer order with gaps of another size, filled beforehand with a guard byte that must
 * survive, as must the bytes past the last block. Cases: 1-, 2-, 4- and 8-byte elements; a
 * host stream; inside a caller's group beside a ring exchange; and last, as it leaves the
 * communicator failed, a rank that sends one element more than its peer expects (the peer
 * must fail naming it, and no rank may hang). Exit status 0: every check on this rank passed.
 */
#include "check.h"
#include "tutti.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTE 0x5a
#define MAXR 64

static int rank, nranks, failures;
static tutti_comm_t comm;

/* Elements rank i sends rank j: 0 for a fifth of the pairs, large for one pair in seven. */
static size_t count(int i, int j, size_t unit)
{
    int k = (i * 7 + j * 3) % 5;
    if (k == 0)
        return 0;
    return (i + 2 * j) % 7 == 3 ? 100003 : (size_t)k * unit;
}

static unsigned char byte(int i, int j, size_t b)
{
    return (unsigned char)(i * 31 + j * 7 + b * 13 + b / 256 + 1);
}

/* Layout of one side: block j of counts[j] elements at displs[j], gaps of `gap` elements
 * before each; reverse: the blocks in peer order n-1 .. 0. Returns the elements spanned. */
static size_t lay_out(const size_t *counts, size_t *displs, size_t gap, int reverse)
{
    size_t at = 0;
    for (int k = 0; k < nranks; k++) {
        int j = reverse ? nranks - 1 - k : k;
        at += gap;
        displs[j] = at;
        at += counts[j];
    }
    return at;
}

/* One all_to_allv of `es`-byte elements; stream: NULL or a host stream; in_group: inside a
 * caller's group beside a ring exchange. */
static void check(tutti_dtype_t t, size_t unit, tutti_stream_t stream, int in_group)
{
    size_t es = tutti_dtype_size(t), sc[MAXR], sd[MAXR], rc[MAXR], rd[MAXR], slen, rlen;
    unsigned char *s, *r;
    char what[128];
    int32_t x = rank, y = -1;
    tutti_result_t res;

    snprintf(what, sizeof(what), "all_to_allv of %s, unit %zu%s%s", tutti_dtype_name(t), unit,
             stream ? ", on a stream" : "", in_group ? ", in a group" : "");
    for (int j = 0; j < nranks; j++) {
        sc[j] = count(rank, j, unit);
        rc[j] = count(j, rank, unit);
    }
    slen = lay_out(sc, sd, 3, 1) + 5;
    rlen = lay_out(rc, rd, 2, 0) + 5;
    s = malloc(slen * es);
    r = malloc(rlen * es);
    if (!s || !r) {
        CHECK(0, "%s: out of memory", what);
        free(s);
        free(r);
        return;
    }
    memset(s, 0, slen * es);
    for (int j = 0; j < nranks; j++)
        for (size_t b = 0; b < sc[j] * es; b++)
            s[sd[j] * es + b] = byte(rank, j, b);
    memset(r, GUARD_BYTE, rlen * es);
    if (in_group) {
        tutti_group_start();
        tutti_send(&x, 1, TUTTI_INT32, (rank + 1) % nranks, comm, NULL);
        tutti_recv(&y, 1, TUTTI_INT32, (rank + nranks - 1) % nranks, comm, NULL);
    }
    res = tutti_all_to_allv(s, sc, sd, r, rc, rd, t, comm, stream);
    if (in_group) {
        tutti_result_t end = tutti_group_end();
        res = res != TUTTI_SUCCESS ? res : end;
    }
    if (res == TUTTI_SUCCESS && stream)
        res = tutti_stream_sync(stream);
    CHECK(res == TUTTI_SUCCESS, "%s: %s", what, tutti_comm_last_error(comm));
    if (res == TUTTI_SUCCESS) {
        size_t at = 0;
        int bad = 0;
        CHECK(!in_group || y == (rank + nranks - 1) % nranks, "%s: the ring exchange got %d", what,
              (int)y);
        /* peer order: gap, block, gap, block ... then the tail */
        for (int i = 0; i < nranks && !bad; i++) {
            for (; at < rd[i] * es && !bad; at++)
                if (r[at] != GUARD_BYTE) {
                    CHECK(0, "%s: gap byte %zu before block %d written", what, at, i);
                    bad = 1;
                }
            for (size_t b = 0; b < rc[i] * es && !bad; b++, at++)
                if (r[at] != byte(i, rank, b)) {
                    CHECK(0, "%s: block from rank %d (%zu elements), byte %zu is %d, expected %d",
                          what, i, rc[i], b, r[at], byte(i, rank, b));
                    bad = 1;
                }
        }
        for (; at < rlen * es && !bad; at++)
            if (r[at] != GUARD_BYTE) {
                CHECK(0, "%s: byte %zu past the last block written", what, at);
                bad = 1;
            }
    }
    free(s);
    free(r);
}

/* Rank 0 sends rank 1 one element more than rank 1 expects: rank 1 must fail naming rank 0
 * and the 16 bytes (with TUTTI_CHECK_COLL=1, before anything moves); the others fail as the failure
 * reaches them or finish (what they received was whole): no rank may hang. */
static void check_mismatch(void)
{
    size_t sc[MAXR], sd[MAXR], rc[MAXR], rd[MAXR];
    int64_t s[MAXR + 1] = {0}, r[MAXR + 1];
    tutti_result_t res;

    for (int j = 0; j < nranks; j++) {
        sc[j] = rc[j] = 1;
        sd[j] = rd[j] = (size_t)j;
    }
    if (rank == 0) { /* two elements for rank 1, at the end of the buffer */
        sc[1] = 2;
        sd[1] = (size_t)nranks - 1;
        sd[nranks - 1] = 1;
    }
    res = tutti_all_to_allv(s, sc, sd, r, rc, rd, TUTTI_INT64, comm, NULL);
    if (rank == 1)
        CHECK(res != TUTTI_SUCCESS && strstr(tutti_comm_last_error(comm), "rank 0") &&
                  strstr(tutti_comm_last_error(comm), "16 bytes"),
              "a block of 2 elements where 1 was expected: %s (%s)", tutti_strerror(res),
              tutti_comm_last_error(comm));
    printf("rank %d: after the mismatch: %s %s\n", rank, tutti_strerror(res),
           res != TUTTI_SUCCESS ? tutti_comm_last_error(comm) : "");
}

int main(void)
{
    tutti_stream_t stream = NULL;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (nranks > MAXR) {
        printf("a2av_check: at most %d ranks\n", MAXR);
        return 1;
    }
    check(TUTTI_INT64, 1, NULL, 0);
    check(TUTTI_UINT8, 1031, NULL, 0);
    check(TUTTI_FLOAT16, 17, NULL, 0);
    CHECK(tutti_stream_create(&stream) == TUTTI_SUCCESS, "stream: %s", tutti_last_error());
    if (stream) {
        check(TUTTI_FLOAT32, 4099, stream, 0);
        tutti_stream_destroy(stream);
    }
    check(TUTTI_INT64, 5, NULL, 1);
    if (nranks > 1)
        check_mismatch();
    tutti_comm_destroy(comm);
    if (failures == 0)
        printf("rank %d: all_to_allv checks passed\n", rank);
    return failures ? 1 : 0;
}
