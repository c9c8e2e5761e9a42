/* error.c -- result strings and failure messages; see error.h. */
#include "lib/base/error.h"
#include "lib/core/comm.h"
#include "lib/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char thread_msg[TT_ERRMSG_LEN];
static _Thread_local int keep_to_thread; /* tt_error_keep_to_thread */

const char *tutti_strerror(tutti_result_t result)
{
    switch (result) {
#define TT_RESULT_CASE(name, desc)                                                                 \
    case TUTTI_##name: return desc;
        TUTTI_RESULT_MAP(TT_RESULT_CASE)
#undef TT_RESULT_CASE
    default: return "unknown result code";
    }
}

static tutti_result_t record(struct tutti_comm *comm, tutti_result_t rc, int loud, const char *fmt,
                             va_list ap)
{
    char msg[TT_ERRMSG_LEN];

    /* Format aside first: the arguments may point into thread_msg itself. */
    vsnprintf(msg, sizeof(msg), fmt, ap);
    memcpy(thread_msg, msg, sizeof(msg));
    if (comm && !keep_to_thread)
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", thread_msg);
    if (loud)
        TT_WARN(TT_SUB_ALL, "%s (%s)", thread_msg, tutti_strerror(rc));
    return rc;
}

tutti_result_t tt_fail(struct tutti_comm *comm, tutti_result_t rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record(comm, rc, 1, fmt, ap);
    va_end(ap);
    return rc;
}

tutti_result_t tt_fail_quiet(struct tutti_comm *comm, tutti_result_t rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record(comm, rc, 0, fmt, ap);
    va_end(ap);
    return rc;
}

void tt_error_to_comm(struct tutti_comm *comm)
{
    if (comm && !keep_to_thread)
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", thread_msg);
}

const char *tt_thread_error(void)
{
    return thread_msg;
}

const char *tutti_last_error(void)
{
    return thread_msg;
}

const char *tutti_comm_last_error(tutti_comm_t comm)
{
    if (!comm)
        return thread_msg;
    return comm->last_error;
}

void tt_error_keep_to_thread(void)
{
    keep_to_thread = 1;
}
