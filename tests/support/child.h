/*
 * child.h -- processes the multi-process tests start (ranks, launchers) and what they wrote:
 * start one with its output in a file, wait for it within a bound, read the file back.
 */
#ifndef TT_TESTS_CHILD_H
#define TT_TESTS_CHILD_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double child_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run argv (argv[0] a path) with stdout and stderr into the file `out`; -1 if fork failed.
 * The child only opens, dups and execs: a forked child of a process with threads must not
 * allocate before exec. */
static inline pid_t child_start(const char *out, const char *const *argv)
{
    pid_t pid = fork();

    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(126);
    }
    return pid;
}

/* Wait for pid at most `limit` seconds: its exit code (128 + signal), or -1 once the limit
 * passed (it is killed and reaped then). *took (if not NULL): how long it ran. */
static inline int child_wait(pid_t pid, double limit, double *took)
{
    double t0 = child_now();
    int st;

    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (child_now() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(5000);
    }
    if (took)
        *took = child_now() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The file at path, into buf (NUL-terminated, cut to size); "" if it cannot be read. */
static inline const char *child_read(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;

    if (f) {
        n = fread(buf, 1, size - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

#endif
