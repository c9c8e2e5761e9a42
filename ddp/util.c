/*
 * util.c -- what every file of the DDP layer uses: the clock, failures (a message per context
 * and per thread), the context's liveness, breaking a step off, and hook names.
 */
#include "ddp_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ddp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ddp_info(const struct tutti_ddp *d, const char *fmt, ...)
{
    const char *lvl = getenv("TUTTI_DEBUG");
    char msg[DDP_ERR_LEN];
    va_list ap;

    if (!lvl || (strcmp(lvl, "INFO") != 0 && strcmp(lvl, "TRACE") != 0))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "tutti DDP INFO rank %d: %s\n", d->rank, msg);
}

/* The last failure of this thread, for calls that have no context to keep it (create). */
static _Thread_local char thread_err[DDP_ERR_LEN];

tutti_result_t ddp_fail(struct tutti_ddp *d, tutti_result_t rc, const char *fmt, ...)
{
    char msg[DDP_ERR_LEN];
    const char *lvl = getenv("TUTTI_DEBUG");
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(thread_err, msg, sizeof(msg));
    if (d)
        memcpy(d->err, msg, sizeof(msg));
    if (!lvl || strcmp(lvl, "NONE") != 0)
        fprintf(stderr, "tutti DDP WARN rank %d: %s (%s)\n", d ? d->rank : -1, msg,
                tutti_strerror(rc));
    return rc;
}

const char *tutti_ddp_last_error(tutti_ddp_t d)
{
    return d ? d->err : thread_err;
}

const char *tutti_ddp_hook_name(tutti_ddp_hook_t hook)
{
    static const char *names[TUTTI_DDP_NUM_HOOKS] = {"none", "fp16",     "bf16", "int8",
                                                     "topk", "powersgd", "user"};
    return (unsigned)hook < TUTTI_DDP_NUM_HOOKS ? names[hook] : "invalid";
}

tutti_result_t ddp_check_live(struct tutti_ddp *d, const char *fn)
{
    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: ddp is NULL", fn);
    if (!d->initialized)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "%s: call tutti_ddp_init first", fn);
    if (d->broken)
        return ddp_fail(d, TUTTI_ERR_ABORTED, "%s: unusable after an earlier failure", fn);
    return TUTTI_SUCCESS;
}

tutti_result_t ddp_break_step(struct tutti_ddp *d, tutti_result_t rc)
{
    char msg[DDP_ERR_LEN];

    memcpy(msg, d->err, sizeof(msg));
    d->broken = 1;
    if (d->nranks > 1)
        tutti_comm_abort(d->comm);
    if (d->stream)
        tutti_stream_sync(d->stream);
    memcpy(d->err, msg, sizeof(msg));
    return rc;
}

tutti_result_t ddp_sym_hosts(struct tutti_ddp *d, const char *fn)
{
    int local = 1, most = 1;
    tutti_result_t rc;

    tutti_comm_local_size(d->comm, &local);
    if (d->nranks > 1 && (rc = tutti_all_reduce(&local, &most, 1, TUTTI_INT32, TUTTI_MAX, d->comm,
                                                NULL)) != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "%s: %s", fn, tutti_comm_last_error(d->comm));
    d->sym_hosts = most > 1;
    return TUTTI_SUCCESS;
}

float *ddp_sym_alloc(struct tutti_ddp *d, size_t count, void **win)
{
    size_t bytes = (count ? count : 1) * sizeof(float);
    void *p = NULL;

    *win = NULL;
    if (d->sym_hosts) {
        if (tutti_mem_alloc(d->comm, bytes, &p) != TUTTI_SUCCESS)
            p = NULL; /* registering NULL fails on every rank alike */
        if (tutti_comm_window_register(d->comm, p, bytes, win) == TUTTI_SUCCESS)
            return p;
        ddp_info(d, "%zu bytes of symmetric memory: %s; the heap instead", bytes,
                 tutti_comm_last_error(d->comm));
        if (p)
            tutti_mem_free(d->comm, p);
        *win = NULL;
    }
    return calloc(count ? count : 1, sizeof(float));
}

void ddp_sym_free(struct tutti_ddp *d, float *p, void *win)
{
    if (!win) {
        free(p);
        return;
    }
    tutti_comm_window_deregister(d->comm, win);
    tutti_mem_free(d->comm, p);
}
