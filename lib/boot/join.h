/*
 * join.h -- the join service's clients (boot_join.c; the service is tutti_join_serve): how
 * many newcomers wait, admitting them into a communicator, and a newcomer's wait.
 */
#ifndef TT_JOIN_H
#define TT_JOIN_H

#include "lib/boot/id.h"

/* How many newcomers wait at the service now. */
tutti_result_t tt_join_count(const struct tt_id_info *svc, double deadline, int *count);
/* Admit up to max of them, oldest first, as ranks base, base + 1, ... of a communicator of
 * base + *admitted ranks whose rendezvous is id. */
tutti_result_t tt_join_admit(const struct tt_id_info *svc, int max, int base, const tutti_id_t *id,
                             double deadline, int *admitted);
/* A newcomer: wait until admitted; the rendezvous id, its rank, the new size and how many
 * of its ranks were members before. */
tutti_result_t tt_join_wait(const struct tt_id_info *svc, double deadline, tutti_id_t *id,
                            int *rank, int *nranks, int *members);

#endif
