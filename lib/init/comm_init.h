/*
 * comm_init.h -- making a communicator inside lib/init: over a bootstrap already joined
 * (tutti_comm_shrink's, whose ranks agreed on their membership without a rendezvous).
 */
#ifndef TT_COMM_INIT_H
#define TT_COMM_INIT_H

#include "tutti.h"

struct tt_boot;

/* A communicator of nranks over boot, which it owns once this succeeds (on failure boot is
 * the caller's again); secret names its objects (shared-memory FIFOs) as an id's would. */
tutti_result_t tt_comm_init_boot(tutti_comm_t *comm, struct tt_boot *boot, int rank, int nranks,
                                 const unsigned char *secret, const tutti_config_t *config);

/* env_init.c: the join service a MASTER_ADDR job keeps (tutti-run --nnodes --elastic, host 0):
 * MASTER_ADDR, the port after MASTER_PORT, a secret derived from TUTTI_SECRET and both. */
struct tt_id_info;
tutti_result_t tt_join_from_master(struct tt_id_info *svc);

#endif
