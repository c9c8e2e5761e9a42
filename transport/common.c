/*
 * common.c -- what several transports share: the ops of transports with nothing to do
 * there, sleeping, and whether a peer's process on this host still lives.
 */
#include "transport/transport.h"
#include "lib/base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Has process pid exited but not been reaped (a zombie: kill(pid, 0) still succeeds)? Its
 * parent may reap it late (a launcher that waits for its ranks in order), and a peer waiting
 * on it must not wait for that. */
static int zombie(int32_t pid)
{
    char path[32], buf[512];
    const char *state;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* no /proc: kill(2) alone decides */
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    state = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces and parentheses */
    return state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X');
}

int tt_transport_pid_gone(int32_t pid)
{
    return pid > 0 && ((kill(pid, 0) != 0 && errno == ESRCH) || zombie(pid));
}

tutti_result_t tt_transport_pid_alive(const struct tt_conn *conn, int32_t pid)
{
    if (tt_transport_pid_gone(pid))
        return tt_fail(NULL, TUTTI_ERR_REMOTE, "%s: rank %d (pid %d) has died", conn->tp->name,
                       conn->peer, (int)pid);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_transport_no_progress(struct tt_conn *conn)
{
    (void)conn;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_transport_no_alive(struct tt_conn *conn)
{
    (void)conn;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_transport_no_finish(struct tt_conn *conn, double deadline)
{
    (void)conn;
    (void)deadline;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_transport_no_flush(struct tt_conn *conn)
{
    (void)conn;
    return TUTTI_SUCCESS;
}

void tt_transport_sleep(struct tt_conn *conn, long ns)
{
    (void)conn;
    nanosleep(&(struct timespec){ns / 1000000000L, ns % 1000000000L}, NULL);
}
