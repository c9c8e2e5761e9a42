/* run_elastic.h -- tutti-run --elastic: which failures a job survives, its join service, and
 * the ranks it starts to join (run_elastic.c). */
#ifndef TUTTI_RUN_ELASTIC_H
#define TUTTI_RUN_ELASTIC_H

#include "tutti.h"

struct run_elastic {
    int on;             /* --elastic given */
    int min, max;       /* --elastic MIN:MAX */
    int join;           /* --join K: newcomers started with the job */
    int restart;        /* --restart K: replacements it may start */
    int restarts;       /* started so far */
    int finished;       /* a rank has exited 0: the job is ending */
    tutti_id_t service; /* the join service */
};

/* Parse opt (with its argument arg) if it is one of ours: 1 (the argument used), 0 (not
 * ours), -1 (bad; said on stderr). */
int run_elastic_option(struct run_elastic *e, const char *opt, const char *arg);
/* The options against this host's nlocal ranks: 0, or -1 (said). */
int run_elastic_check(const struct run_elastic *e, int nlocal);
/* Start the join service and set TUTTI_JOIN (one host), or find it beside MASTER_ADDR and serve
 * it on host 0 (--nnodes): 0, or -1 (said). */
int run_elastic_start(struct run_elastic *e, int nhosts, int host_rank);
/* The slots tutti-run needs for n ranks started at once: newcomers and replacements too. */
int run_elastic_slots(const struct run_elastic *e, int n);
/* A rank failed and `live` ranks are left: 1 if the job goes on (said on stderr), 0 if not. */
int run_elastic_survives(const struct run_elastic *e, int rank, int live);
/* May a replacement start now (restarts left, below MAX with `live` ranks)? */
int run_elastic_may_restart(const struct run_elastic *e, int live);
/* After a rank exited 0: are all `live` ranks newcomers still waiting, whom no member will
 * admit now? */
int run_elastic_only_waiting(const struct run_elastic *e, int live);

#endif
