/* run_output.h -- tutti-run's copy of its ranks' output (run_output.c). */
#ifndef TUTTI_RUN_OUTPUT_H
#define TUTTI_RUN_OUTPUT_H

#include <stddef.h>

#define LINE_MAX_BYTES 65536

struct stream {
    int fd;     /* read end, -1 once closed */
    int out;    /* 1 = stdout, 2 = stderr */
    size_t len; /* bytes of an unfinished line */
    char *buf;
};

/* Write all of p to fd (async-signal-safe: a forked child may call it). */
void run_write_all(int fd, const char *p, size_t n);
/* Read what a rank wrote to s; print its whole lines (prefix: "[rank] " first). 0 at its end. */
int run_pump(int rank, struct stream *s, int prefix);

#endif
