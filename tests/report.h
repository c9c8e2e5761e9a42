/*
 * report.h -- what the multi-rank check programs (stream_check, ddp_check, gpu_check) share:
 * their rank, size and failure count, and fail(), which prints one "FAIL rank R: ..." line
 * and counts it. The program sets rank and nranks after joining; exit status 0 means no
 * fail() on this rank.
 */
#ifndef TT_TESTS_REPORT_H
#define TT_TESTS_REPORT_H

#include <stdarg.h>
#include <stdio.h>

static int rank, nranks, failures;

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

#endif
