/*
 * sym_arena.h -- the check programs' symmetric memory: one tutti_mem_alloc per rank,
 * registered as one window, from which buffers are carved (a bump pointer, back to the start
 * once every buffer is freed). A buffer that does not fit, or that a mix draw (`mix`: a third
 * of the buffers, drawn per rank, so ranks differ) leaves out, comes from malloc instead.
 */
#ifndef TT_SYM_ARENA_H
#define TT_SYM_ARENA_H

#include "tutti.h"

#include <stdio.h>
#include <stdlib.h>

struct sym_arena {
    char *base;
    size_t len, top;
    int live;
    void *win;
    int mix;
    unsigned seed;
};

/* Allocate and register len bytes on comm (collective). A failure (a peer killed meanwhile,
 * by the faults suite) is the check's failure: "FAIL" and exit status 1, as a failed init. */
static inline void sym_arena_init(struct sym_arena *a, tutti_comm_t comm, size_t len, int mix,
                                  int rank)
{
    void *p = NULL;

    a->len = len;
    a->top = 0;
    a->live = 0;
    a->mix = mix;
    a->seed = 12345u + 7919u * (unsigned)rank;
    if (tutti_mem_alloc(comm, len, &p) != TUTTI_SUCCESS ||
        tutti_comm_window_register(comm, p, len, &a->win) != TUTTI_SUCCESS) {
        printf("FAIL symmetric arena of %zu bytes: %s\n", len, tutti_comm_last_error(comm));
        exit(1);
    }
    a->base = p;
}

static inline void sym_arena_fini(struct sym_arena *a, tutti_comm_t comm)
{
    if (tutti_comm_window_deregister(comm, a->win) != TUTTI_SUCCESS ||
        tutti_mem_free(comm, a->base) != TUTTI_SUCCESS) {
        printf("FAIL symmetric arena: %s\n", tutti_comm_last_error(comm));
        exit(1);
    }
}

/* bytes from the arena (64-byte aligned), or NULL: take it elsewhere. */
static inline void *sym_arena_alloc(struct sym_arena *a, size_t bytes)
{
    size_t need = (bytes + 63) & ~(size_t)63;
    void *p;

    if (!a->base || need > a->len - a->top || (a->mix && rand_r(&a->seed) % 3 == 0))
        return NULL;
    p = a->base + a->top;
    a->top += need;
    a->live++;
    return p;
}

/* Is p the arena's? Then it is given back (the arena starts over once none is live). */
static inline int sym_arena_free(struct sym_arena *a, const void *p)
{
    if (!a->base || (const char *)p < a->base || (const char *)p >= a->base + a->len)
        return 0;
    if (--a->live == 0)
        a->top = 0;
    return 1;
}

#endif
