/*
 * board.h -- a node's status board: where each of its ranks is, for the stall inspector.
 *
 * One small shared segment per node and communicator (created by the node's first rank,
 * mapped by the others, unlinked once all have it). Each rank writes its own 64-byte line at
 * the start and end of every operation (two stores); a rank that has waited TUTTI_STALL_WARN
 * seconds reads the lines of its node and logs which ranks have not reached the operation
 * it is in. Ranks on other nodes are not visible on the board.
 */
#ifndef TT_BOARD_H
#define TT_BOARD_H

#include <stdatomic.h>
#include <stdint.h>

struct tt_board_line {
    _Alignas(64) _Atomic uint64_t seq; /* operations started */
    _Atomic uint32_t active;           /* inside an operation */
    _Atomic uint32_t what;             /* enum tt_coll, or 0xff for point-to-point */
};

struct tt_comm_board {
    struct tt_board_line *lines; /* one per local index */
    int nlines;
    void *map;
    unsigned long map_len;
};

struct tutti_comm;

/* Set up the board of comm's node (collective among the node's ranks, over bootstrap). */
int tt_board_init(struct tutti_comm *c);
void tt_board_free(struct tt_comm_board *b);

static inline void tt_board_enter(struct tt_comm_board *b, int local, uint64_t seq, uint32_t what)
{
    if (!b->lines)
        return;
    atomic_store_explicit(&b->lines[local].what, what, memory_order_relaxed);
    atomic_store_explicit(&b->lines[local].seq, seq, memory_order_relaxed);
    atomic_store_explicit(&b->lines[local].active, 1, memory_order_release);
}

static inline void tt_board_leave(struct tt_comm_board *b, int local)
{
    if (b->lines)
        atomic_store_explicit(&b->lines[local].active, 0, memory_order_release);
}

#endif
