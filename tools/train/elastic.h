/*
 * elastic.h -- tutti-train --elastic: a lost rank is survived (tutti_ddp_recover) and
 * newcomers join at step boundaries (tutti_ddp_grow), each time with every rank taking rank
 * 0's place in the data (elastic.c).
 */
#ifndef TT_TRAIN_ELASTIC_H
#define TT_TRAIN_ELASTIC_H

#include "model.h"

#include <stdint.h>

struct resume_state {
    int64_t epoch, micro; /* where to continue */
    int64_t steps;        /* optimizer steps taken */
};

/* A call failed with rc: a lost rank's doing (recover), rather than a bug (die)? */
int elastic_failure(tutti_result_t rc);
/* The survivors shrink and go on: md moves to the new communicator, and every rank takes rank
 * 0's position into *rs (collective over the survivors). A fenced rank exits 3. */
void elastic_recover(struct model *md, struct resume_state *rs);
/* At a join point: newcomers admitted and given the position (1 if the size changed); a
 * failure here is recovered. */
int elastic_grow(struct model *md, struct resume_state *rs);
/* A newcomer (its communicator from tutti_comm_join): the members' position into *rs; 0 for a
 * rank that started with the job. */
int elastic_newcomer(struct model *md, struct resume_state *rs);
/* After the first step that completed since a recovery or a growth: rank 0 says so, once. */
void elastic_step_done(struct model *md, const struct resume_state *rs);

#endif
