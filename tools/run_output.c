/*
 * run_output.c -- tutti-run's copy of its ranks' output: whole lines, each prefixed with the
 * rank ("[3] ") unless --no-prefix.
 */
#include "run_output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void run_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void emit_line(int rank, int prefix, int out, const char *line, size_t len)
{
    char head[32];
    int h = prefix ? snprintf(head, sizeof(head), "[%d] ", rank) : 0;
    char *buf = malloc((size_t)h + len + 1);

    if (!buf)
        return;
    memcpy(buf, head, (size_t)h);
    memcpy(buf + h, line, len);
    buf[(size_t)h + len] = '\n';
    run_write_all(out, buf, (size_t)h + len + 1);
    free(buf);
}

int run_pump(int rank, struct stream *s, int prefix)
{
    ssize_t n = read(s->fd, s->buf + s->len, LINE_MAX_BYTES - s->len);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0) {
        if (s->len > 0)
            emit_line(rank, prefix, s->out, s->buf, s->len);
        s->len = 0;
        close(s->fd);
        s->fd = -1;
        return 0;
    }
    s->len += (size_t)n;
    char *start = s->buf, *end = s->buf + s->len, *nl;
    while ((nl = memchr(start, '\n', (size_t)(end - start))) != NULL) {
        emit_line(rank, prefix, s->out, start, (size_t)(nl - start));
        start = nl + 1;
    }
    s->len = (size_t)(end - start);
    memmove(s->buf, start, s->len);
    if (s->len == LINE_MAX_BYTES) { /* a very long line: print what we have */
        emit_line(rank, prefix, s->out, s->buf, s->len);
        s->len = 0;
    }
    return 1;
}
