/*
 * coll_check.h -- what coll_check's two files share: the rank's state, buffers with guard
 * bytes, failure reports and the element check (coll_check.c), and the point-to-point checks
 * (coll_check_p2p.c).
 */
#ifndef TT_COLL_CHECK_H
#define TT_COLL_CHECK_H

#include "tutti.h"
#include "values.h"

#include <stddef.h>

#define GUARD 64
#define GUARD_BYTE 0xa5

extern int rank, nranks, failures;
extern tutti_comm_t comm;
extern int reg_on; /* --register */

struct buf {
    unsigned char *base; /* GUARD bytes, data, GUARD bytes */
    size_t bytes;
    void *reg; /* tutti_comm_register handle (--register) */
};

/* Register [p, p + bytes) under --register (exits 2 if it cannot; NULL otherwise), and end it. */
void *reg_or_die(void *p, size_t bytes);
void unreg(void *h);
/* bytes with GUARD guard bytes either side (registered under --register, in the symmetric
 * arena under --symmetric); its data. */
void *buf_alloc(struct buf *b, size_t bytes);
void buf_free(struct buf *b);
/* Are the guard bytes intact? */
int guards_ok(const struct buf *b);
/* One failure line "FAIL what: ...", counted (the first 10 printed). */
void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report the first element of out that differs from the expected table. */
void check_elems(const char *what, tutti_dtype_t t, int op, const void *out, size_t n, size_t first,
                 const unsigned char *table);

enum coll { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, REDUCE, NCOLL };
/* One collective call of collective c, checked (op -1: none). */
void run_one(enum coll c, tutti_dtype_t t, int op, size_t count, int inplace, int root);

/* coll_check_p2p.c: the modes p2p and all_to_all, and the soak's point-to-point pieces. */
void p2p(void);
void all_to_all(void);
void soak_ring(tutti_dtype_t t, size_t n, size_t first, const char *tag);
void check_all_to_all(tutti_dtype_t t, size_t count, size_t first, tutti_stream_t stream,
                      const char *tag);
void check_rooted(int gather, tutti_dtype_t t, size_t count, size_t first, int root,
                  tutti_stream_t stream, const char *tag);

#endif
