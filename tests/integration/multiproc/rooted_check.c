/*
 * rooted_check -- run under tutti-run: tutti_gather and tutti_scatter against blocks computed
 * here.
 *
 * Gather: rank i's block is a function of (i, byte index); the root's receive buffer, filled
 * with a guard byte beforehand, must hold block i at i * count with the guard intact past
 * the end. Scatter: the root's block j is a function of (j, byte index) and rank j must get
 * exactly it, its guard intact. The other ranks pass NULL for the buffer they do not use.
 * Cases: every root of up to 4 ranks (first, middle and last beyond), 1-, 2-, 4- and 8-byte
 * elements, counts 0 to 100,003, out of place and in place, a host stream, inside a caller's
 * group beside a ring exchange; and last, as it leaves the root failed, a rank whose count
 * differs from the root's (the root must fail naming it; no rank may hang).
 * Exit status 0: every check on this rank passed.
 */
#include "check.h"
#include "tutti.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTE 0xa5
#define TAIL 7 /* guard elements past the blocks */

static int rank, nranks, failures;
static tutti_comm_t comm;

static unsigned char byte(int who, size_t b)
{
    return (unsigned char)(who * 29 + b * 11 + b / 256 + 3);
}

struct how {
    int inplace, in_group;
    tutti_stream_t stream;
};

/* Run one call (gather or scatter) as `how` says; its result. */
static tutti_result_t call(int gather, void *s, void *r, size_t count, tutti_dtype_t t, int root,
                           const struct how *h)
{
    int32_t x = rank, y = -1;
    tutti_result_t res, end;

    if (h->in_group) {
        tutti_group_start();
        tutti_send(&x, 1, TUTTI_INT32, (rank + 1) % nranks, comm, NULL);
        tutti_recv(&y, 1, TUTTI_INT32, (rank + nranks - 1) % nranks, comm, NULL);
    }
    res = gather ? tutti_gather(s, r, count, t, root, comm, h->stream)
                 : tutti_scatter(s, r, count, t, root, comm, h->stream);
    if (h->in_group) {
        end = tutti_group_end();
        res = res != TUTTI_SUCCESS ? res : end;
        if (res == TUTTI_SUCCESS && y != (rank + nranks - 1) % nranks)
            CHECK(0, "the ring exchange beside the call got %d", (int)y);
    }
    if (res == TUTTI_SUCCESS && h->stream)
        res = tutti_stream_sync(h->stream);
    return res;
}

/* Do bytes [0, len) of p hold block `who` (byte()), then the guard up to `all`? */
static void expect(const char *what, const unsigned char *p, size_t len, size_t all, int who)
{
    for (size_t b = 0; b < all; b++) {
        int want = b < len ? byte(who, b) : GUARD_BYTE;
        if (p[b] != want) {
            CHECK(0, "%s: byte %zu (%s) is %d, expected %d", what, b,
                  b < len ? "of the block" : "past it", p[b], want);
            return;
        }
    }
}

/* The root's n blocks with TAIL guard elements after them (NULL on the other ranks) and this
 * rank's one block with its own TAIL, all guard bytes; `what` names the call. 0: out of
 * memory (counted as a failure). */
static int setup(int gather, tutti_dtype_t t, size_t count, int root, const struct how *h,
                 unsigned char **whole, unsigned char **mine, char *what, size_t len)
{
    size_t es = tutti_dtype_size(t), all = (count * (size_t)nranks + TAIL) * es,
           one = (count + TAIL) * es;

    snprintf(what, len, "%s of %zu %s %s root %d%s%s%s", gather ? "gather" : "scatter", count,
             tutti_dtype_name(t), gather ? "to" : "from", root, h->inplace ? ", in place" : "",
             h->stream ? ", on a stream" : "", h->in_group ? ", in a group" : "");
    *whole = rank == root ? malloc(all) : NULL;
    *mine = malloc(one);
    if ((rank == root && !*whole) || !*mine) {
        CHECK(0, "%s: out of memory", what);
        free(*whole);
        free(*mine);
        return 0;
    }
    if (*whole)
        memset(*whole, GUARD_BYTE, all);
    memset(*mine, GUARD_BYTE, one);
    return 1;
}

/* On the root: block i of its n blocks is block `i` (byte()), the guard after them intact. */
static void expect_blocks(const char *what, const unsigned char *whole, size_t bytes, size_t es)
{
    for (int i = 0; i < nranks; i++) {
        char blk[192];
        snprintf(blk, sizeof(blk), "%s, block %d", what, i);
        expect(blk, whole + (size_t)i * bytes, bytes, i + 1 < nranks ? bytes : bytes + TAIL * es,
               i);
    }
}

static void check_gather(tutti_dtype_t t, size_t count, int root, const struct how *h)
{
    size_t es = tutti_dtype_size(t), bytes = count * es;
    unsigned char *whole, *mine, *s;
    char what[128];

    if (!setup(1, t, count, root, h, &whole, &mine, what, sizeof(what)))
        return;
    for (size_t b = 0; b < bytes; b++)
        mine[b] = byte(rank, b);
    s = mine;
    if (h->inplace && rank == root) { /* the root's block already where it belongs */
        s = whole + (size_t)root * bytes;
        memcpy(s, mine, bytes);
    }
    tutti_result_t res = call(1, s, whole, count, t, root, h);
    CHECK(res == TUTTI_SUCCESS, "%s: %s", what, tutti_comm_last_error(comm));
    if (res == TUTTI_SUCCESS && rank == root)
        expect_blocks(what, whole, bytes, es);
    free(whole);
    free(mine);
}

static void check_scatter(tutti_dtype_t t, size_t count, int root, const struct how *h)
{
    size_t es = tutti_dtype_size(t), bytes = count * es;
    unsigned char *whole, *mine, *r;
    char what[128];

    if (!setup(0, t, count, root, h, &whole, &mine, what, sizeof(what)))
        return;
    for (int j = 0; whole && j < nranks; j++)
        for (size_t b = 0; b < bytes; b++)
            whole[(size_t)j * bytes + b] = byte(j, b);
    r = h->inplace && rank == root ? whole + (size_t)root * bytes : mine;
    tutti_result_t res = call(0, whole, r, count, t, root, h);
    CHECK(res == TUTTI_SUCCESS, "%s: %s", what, tutti_comm_last_error(comm));
    if (res == TUTTI_SUCCESS)
        expect(what, r, bytes, r == mine ? bytes + TAIL * es : bytes, rank);
    if (res == TUTTI_SUCCESS && whole) /* the root's blocks are its input: untouched */
        expect_blocks(what, whole, bytes, es);
    free(whole);
    free(mine);
}

/* Rank 1 gathers one element more than root 0 expects: the root must fail naming rank 1;
 * the others finish (or, TUTTI_CHECK_COLL=1, rank 1 fails too, before anything moves). */
static void check_mismatch(void)
{
    int64_t s[2] = {1, 2}, r[64];
    tutti_result_t res =
        tutti_gather(s, rank == 0 ? r : NULL, rank == 1 ? 2 : 1, TUTTI_INT64, 0, comm, NULL);

    if (rank == 0)
        CHECK(res != TUTTI_SUCCESS && strstr(tutti_comm_last_error(comm), "rank 1"),
              "a block of 2 elements where 1 was expected: %s (%s)", tutti_strerror(res),
              tutti_comm_last_error(comm));
    printf("rank %d: after the mismatch: %s %s\n", rank, tutti_strerror(res),
           res != TUTTI_SUCCESS ? tutti_comm_last_error(comm) : "");
}

int main(void)
{
    static const struct {
        tutti_dtype_t t;
        size_t count;
    } cases[] = {{TUTTI_INT8, 1031},
                 {TUTTI_FLOAT16, 17},
                 {TUTTI_FLOAT32, 0},
                 {TUTTI_INT32, 100003},
                 {TUTTI_FLOAT64, 1}};
    tutti_stream_t stream = NULL;
    int roots[4], nroots = 0;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (nranks <= 4)
        for (int r = 0; r < nranks; r++)
            roots[nroots++] = r;
    else
        roots[nroots++] = 0, roots[nroots++] = nranks / 2, roots[nroots++] = nranks - 1;
    for (int k = 0; k < nroots; k++)
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            for (int inplace = 0; inplace < 2; inplace++) {
                struct how h = {inplace, 0, NULL};
                check_gather(cases[i].t, cases[i].count, roots[k], &h);
                check_scatter(cases[i].t, cases[i].count, roots[k], &h);
            }
    CHECK(tutti_stream_create(&stream) == TUTTI_SUCCESS, "stream: %s", tutti_last_error());
    if (stream) {
        struct how h = {0, 0, stream};
        check_gather(TUTTI_FLOAT32, 4099, nranks - 1, &h);
        check_scatter(TUTTI_FLOAT32, 4099, 0, &h);
        tutti_stream_destroy(stream);
    }
    struct how grouped = {0, 1, NULL};
    check_gather(TUTTI_INT64, 5, 0, &grouped);
    check_scatter(TUTTI_UINT8, 3, nranks - 1, &grouped);
    if (nranks > 1)
        check_mismatch();
    tutti_comm_destroy(comm);
    if (failures == 0)
        printf("rank %d: gather and scatter checks passed\n", rank);
    return failures ? 1 : 0;
}
