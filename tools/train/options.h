/*
 * options.h -- tutti-train's command line.
 */
#ifndef TT_TRAIN_OPTIONS_H
#define TT_TRAIN_OPTIONS_H

#include "tutti_ddp.h"

#include <stddef.h>
#include <stdio.h>

struct opts {
    int epochs, batch, hidden, layers, accum, zero, threads, bench, bench_steps, views, resume;
    int find_unused, quiet;
    int slow_rank;         /* --slow RANK:FACTOR (-1: none) */
    int balance;           /* --balance: every this many steps (0: off) */
    int local_sgd, warmup; /* --local-sgd H (0: off), --warmup W */
    int adaptive_buckets;  /* --bucket-mb auto */
    int overlap;           /* --overlap: 1, 0, -1 auto */
    int elastic;           /* --elastic: survive a lost rank, take newcomers */
    int grow_every;        /* --grow-every K: a join point every K steps (10) */
    int crash_rank;        /* --crash R:S: rank R kills itself at step S (-1: none) */
    long long crash_step;
    double slow_factor;
    double lr, momentum, eps, bucket_mb;
    tutti_ddp_hook_t hook;
    tutti_ddp_optim_t optim;
    unsigned long long seed;
    long long max_steps;
    size_t limit;
    const char *checkpoint, *trace, *data, *save_params, *split;
};

extern int rank; /* this process's rank, for messages (train.c) */

/* "tutti-train: rank R: " and the message on stderr, then exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

void usage(FILE *f);

/* argv into *o (the defaults where not given); dies naming a bad option. nranks: to check
 * what depends on it. */
void parse(int argc, char **argv, struct opts *o, int nranks);

#endif
