/*
 * run_elastic.c -- tutti-run --elastic MIN:MAX [--join K] [--restart K]: a rank that fails no
 * longer stops the job while MIN ranks are left (the survivors shrink their communicator,
 * tutti_comm_shrink; with --nnodes, MIN and MAX count each host's own ranks); tutti-run serves
 * the job's join service (tutti_join_serve, TUTTI_JOIN in every rank's environment; with
 * --nnodes host 0 serves it beside MASTER_ADDR, the port after its own), starts K newcomers with
 * the job (--join) and a replacement for a failed rank, up to K times (--restart), each with
 * TUTTI_JOINING=1 so its tutti_comm_init_env waits to be admitted at the members' next
 * tutti_comm_grow; the job never grows past MAX.
 */
#include "run_elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count(const char *opt, const char *arg, int *out)
{
    char *end;
    long v = arg ? strtol(arg, &end, 10) : -1;

    if (!arg || !*arg || *end || v < 0 || v > 4096) {
        fprintf(stderr, "tutti-run: %s %s: need a number within 0..4096\n", opt, arg ? arg : "");
        return -1;
    }
    *out = (int)v;
    return 1;
}

int run_elastic_option(struct run_elastic *e, const char *opt, const char *arg)
{
    if (strcmp(opt, "--join") == 0)
        return count(opt, arg, &e->join);
    if (strcmp(opt, "--restart") == 0)
        return count(opt, arg, &e->restart);
    if (strcmp(opt, "--elastic") != 0)
        return 0;
    char junk;
    if (!arg || sscanf(arg, "%d:%d%c", &e->min, &e->max, &junk) != 2 || e->min < 1 ||
        e->max < e->min || e->max > 4096) {
        fprintf(stderr, "tutti-run: --elastic %s: want MIN:MAX, 1 <= MIN <= MAX <= 4096\n",
                arg ? arg : "");
        return -1;
    }
    e->on = 1;
    return 1;
}

int run_elastic_check(const struct run_elastic *e, int nlocal)
{
    if (!e->on && (e->join || e->restart)) {
        fprintf(stderr, "tutti-run: --join and --restart need --elastic MIN:MAX\n");
        return -1;
    }
    if (e->on && (nlocal < e->min || nlocal + e->join > e->max)) {
        fprintf(stderr,
                "tutti-run: %d rank(s) here with --join %d does not fit --elastic %d:%d (MIN <= "
                "ranks, ranks + joining <= MAX)\n",
                nlocal, e->join, e->min, e->max);
        return -1;
    }
    return 0;
}

int run_elastic_start(struct run_elastic *e, int nhosts, int host_rank)
{
    char s[TUTTI_ID_STRLEN];

    if (!e->on)
        return 0;
    if (nhosts > 1) { /* beside MASTER_ADDR (set by now): host 0 serves, every rank finds it */
        if (tutti_join_env_id(&e->service) != TUTTI_SUCCESS ||
            (host_rank == 0 && tutti_join_serve(&e->service) != TUTTI_SUCCESS)) {
            fprintf(stderr, "tutti-run: the join service beside --master: %s\n",
                    tutti_last_error());
            return -1;
        }
        return 0;
    }
    if (tutti_join_serve(&e->service) != TUTTI_SUCCESS ||
        tutti_id_to_string(&e->service, s, sizeof(s)) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-run: cannot start the join service: %s\n", tutti_last_error());
        return -1;
    }
    setenv("TUTTI_JOIN", s, 1);
    return 0;
}

int run_elastic_slots(const struct run_elastic *e, int n)
{
    return n + (e->on ? e->join + e->restart : 0);
}

int run_elastic_survives(const struct run_elastic *e, int rank, int live)
{
    if (!e->on)
        return 0;
    if (live < e->min) {
        fprintf(stderr,
                "tutti-run: rank %d failed and %d rank(s) are left, fewer than --elastic's "
                "MIN %d: stopping the job\n",
                rank, live, e->min);
        return 0;
    }
    fprintf(stderr, "tutti-run: %d rank(s) go on without rank %d (--elastic %d:%d)\n", live, rank,
            e->min, e->max);
    return 1;
}

int run_elastic_may_restart(const struct run_elastic *e, int live)
{
    return e->on && e->restarts < e->restart && live < e->max;
}

int run_elastic_only_waiting(const struct run_elastic *e, int live)
{
    int waiting = 0;

    return e->on && e->finished && live > 0 &&
           tutti_join_waiting(&e->service, &waiting) == TUTTI_SUCCESS && waiting == live;
}
