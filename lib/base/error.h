/*
 * error.h -- recording failures: a message per communicator and per thread.
 *
 * tt_fail() is called once, where a failure is first detected: it formats the message into
 * the communicator (if any) and the calling thread's buffer, logs it at WARN and returns the
 * code, so the idiom is `return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "...", ...);`.
 */
#ifndef TT_ERROR_H
#define TT_ERROR_H

#include "tutti.h"

/* The longest message kept (with its NUL): per thread, per communicator, per stream. */
#define TT_ERRMSG_LEN 1024

struct tutti_comm;

tutti_result_t tt_fail(struct tutti_comm *comm, tutti_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like tt_fail but does not log (for argument errors a caller may probe on purpose). */
tutti_result_t tt_fail_quiet(struct tutti_comm *comm, tutti_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copy the thread's last message into comm (a failure found below the communicator layer). */
void tt_error_to_comm(struct tutti_comm *comm);

/* The thread's message buffer. */
const char *tt_thread_error(void);

/* The calling thread keeps its messages to itself from now on: a stream worker's failures
 * are the stream's to report (lib/stream), never written into a communicator's buffer, which
 * belongs to the thread that calls that communicator's functions. */
void tt_error_keep_to_thread(void);

/* Propagate an error code: the one convenience macro that returns. */
#define TT_CHECK(expr)                                                                             \
    do {                                                                                           \
        tutti_result_t tt_rc_ = (expr);                                                            \
        if (tt_rc_ != TUTTI_SUCCESS)                                                               \
            return tt_rc_;                                                                         \
    } while (0)

#endif
