/*
 * group.h -- the group a thread has open between tutti_group_start and tutti_group_end
 * (group.c), for the calls that join it (coll.c, sendrecv.c) and tutti_group_end, which runs
 * it (sendrecv.c). Each thread has its own (thread-local: the hot path looks it up once).
 */
#ifndef TT_GROUP_H
#define TT_GROUP_H

#include "lib/stream/stream.h"

#define GROUP_INLINE 8 /* a group of up to this many calls does not allocate */

struct tt_group {
    int depth;
    struct tutti_comm *comm;
    tutti_stream_t stream;
    struct tt_p2p_op *ops; /* small[], or the heap once the group outgrows it */
    int nops, cap;
    struct tt_call *colls; /* collectives, in call order (coll_group.c runs them) */
    int ncolls, ccap;
    const char *collective; /* the group is this collective's batch (tt_group_collective) */
    tutti_result_t err;
    struct tt_p2p_op small[GROUP_INLINE];
};

extern _Thread_local struct tt_group tt_group;

/* A call on comm and stream joins g (fn: the call, for the message). */
tutti_result_t tt_group_join(struct tt_group *g, struct tutti_comm *comm, tutti_stream_t stream,
                             const char *fn);
/* A checked send or receive joins g. */
tutti_result_t tt_group_add_p2p(struct tt_group *g, struct tutti_comm *comm, tutti_stream_t stream,
                                const char *fn, const struct tt_p2p_op *op);
/* g has been run (or failed): empty it for the next group. */
void tt_group_reset(struct tt_group *g);

#endif
