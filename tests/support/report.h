/*
 * report.h -- what the multi-rank check programs (stream_check, ddp_check, gpu_check) share:
 * their rank, size and failure count, fail(), which prints one "FAIL rank R: ..." line and
 * counts it, and joining and leaving the job (report_join sets rank and nranks). Exit status
 * 0 means no fail() on this rank.
 */
#ifndef TT_TESTS_REPORT_H
#define TT_TESTS_REPORT_H

#include "tutti.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* REPORT_THREADS: ranks as threads of one process, each with its own (thread-local). */
#ifdef REPORT_THREADS
static _Thread_local int rank, nranks, failures;
#else
static int rank, nranks, failures;
#endif

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void fail(const char *fmt, ...)
{
    va_list ap;
    failures++;
    printf("FAIL rank %d: ", rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* Join the job tutti-run started; rank and nranks are set (exits 1 if it cannot). */
static tutti_comm_t report_join(const char *prog) __attribute__((unused));
static tutti_comm_t report_join(const char *prog)
{
    tutti_comm_t comm;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "%s: %s\n", prog, tutti_last_error());
        exit(1);
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    return comm;
}

/* Leave the job (comm may be NULL); the exit status: 0 when this rank saw no failure (then it
 * says so). */
static int report_end(tutti_comm_t comm, const char *prog, const char *mode)
    __attribute__((unused));
static int report_end(tutti_comm_t comm, const char *prog, const char *mode)
{
    if (comm)
        tutti_comm_destroy(comm);
    if (!failures)
        printf("%s %s: rank %d ok\n", prog, mode, rank);
    return failures ? 1 : 0;
}

#endif
