/*
 * late_alive -- an LD_PRELOAD shim for tests: once armed (the program calls late_alive_arm,
 * found with dlsym), asking with kill(pid, 0) whether another process is there returns only
 * once that process has exited (at most 2 s). A rank asking whether a peer is alive then
 * looks as if it lost its core between its last look at the peer's flags and the question:
 * the peer finished the call meanwhile, and exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int armed;

#define SHIM_API __attribute__((visibility("default"))) /* (the build hides symbols) */

SHIM_API void late_alive_arm(void);
SHIM_API void late_alive_arm(void)
{
    armed = 1;
}

/* Has pid exited (no such process, or a zombie)? */
static int exited(pid_t pid)
{
    char path[64], buf[512];
    const char *state;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    state = strrchr(buf, ')');
    return state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X');
}

SHIM_API int kill(pid_t pid, int sig)
{
    if (armed && sig == 0 && pid > 0 && pid != getpid())
        for (int i = 0; i < 400 && !exited(pid); i++)
            nanosleep(&(struct timespec){0, 5000000}, NULL);
    return (int)syscall(SYS_kill, pid, sig);
}
