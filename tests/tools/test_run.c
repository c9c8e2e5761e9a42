/*
 * test_run.c -- tutti-run: exit status of the first failing rank, stopping the others,
 * signal forwarding, no processes and no shared memory left behind, output prefixes,
 * usage errors. Paths come from the environment meson sets (TUTTI_RUN, RANK_HELPER).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tutti-run-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

/* Start tutti-run with args (NULL-terminated); stdout+stderr to DIR/out. */
static pid_t launch(const char *const *args)
{
    char out[128];
    const char *argv[32];
    int n = 0;
    pid_t pid;

    argv[n++] = getenv("TUTTI_RUN");
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    cr_assert_not_null(argv[0], "TUTTI_RUN is not set");
    snprintf(out, sizeof(out), "%s/out", dir);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(126);
    }
    return pid;
}

/* Wait for pid; fail after limit seconds. Returns the exit code (128+sig for signals). */
static int wait_exit(pid_t pid, double limit, double *took)
{
    double t0 = now();
    int st;

    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (now() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            cr_assert_fail("tutti-run still running after %.0f s", limit);
        }
        usleep(10000);
    }
    if (took)
        *took = now() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *name)
{
    static char buf[65536];
    char path[128];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "r");
    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Wait until n ranks wrote their pid files; return the pids. */
static void wait_pids(int n, pid_t *pids)
{
    double t0 = now();

    for (int r = 0; r < n; r++) {
        char name[32], *s;
        snprintf(name, sizeof(name), "pid.%d", r);
        while (!(s = slurp(name)) || !*s) {
            cr_assert(now() - t0 < 20, "rank %d never started; output: %s", r, slurp("out"));
            usleep(10000);
        }
        pids[r] = (pid_t)atoi(s);
    }
}

static void assert_gone(int n, const pid_t *pids)
{
    for (int r = 0; r < n; r++) {
        int alive = kill(pids[r], 0) == 0;
        cr_assert(!alive, "rank %d (pid %d) is still running", r, (int)pids[r]);
    }
}

static void assert_no_shm(pid_t launcher)
{
    char prefix[64];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    snprintf(prefix, sizeof(prefix), "tutti-r%d-", (int)launcher);
    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL)
        cr_assert(strncmp(e->d_name, prefix, strlen(prefix)) != 0, "left in /dev/shm: %s",
                  e->d_name);
    closedir(d);
}

Test(launcher, failing_rank_sets_exit_status_and_stops_the_rest, .timeout = 60)
{
    pid_t pids[3];
    double took;

    make_dir();
    const char *args[] = {"-n", "3", getenv("RANK_HELPER"), dir, "exit", "1", "3", NULL};
    pid_t p = launch(args);
    wait_pids(3, pids);
    int code = wait_exit(p, 20, &took);
    cr_assert_eq(code, 3, "exit status %d; output:\n%s", code, slurp("out"));
    cr_assert(took < 5.0, "took %.1f s", took);
    assert_gone(3, pids);
    assert_no_shm(p);
    cr_assert(strstr(slurp("out"), "rank 1") && strstr(slurp("out"), "status 3"), "%s",
              slurp("out"));
}

Test(launcher, rank_killed_by_signal, .timeout = 60)
{
    pid_t pids[4];
    double took;

    make_dir();
    const char *args[] = {"-n", "4", getenv("RANK_HELPER"), dir, "kill", "2", NULL};
    pid_t p = launch(args);
    wait_pids(4, pids);
    int code = wait_exit(p, 20, &took);
    cr_assert_eq(code, 128 + SIGKILL, "exit %d; output:\n%s", code, slurp("out"));
    cr_assert(took < 5.0, "took %.1f s", took);
    assert_gone(4, pids);
    assert_no_shm(p);
    cr_assert(strstr(slurp("out"), "rank 2") && strstr(slurp("out"), "Killed"), "%s", slurp("out"));
}

static void forwards(int sig)
{
    pid_t pids[2];
    double took;

    make_dir();
    const char *args[] = {"-n", "2", getenv("RANK_HELPER"), dir, "wait", NULL};
    pid_t p = launch(args);
    wait_pids(2, pids);
    kill(p, sig);
    int code = wait_exit(p, 20, &took);
    cr_assert_eq(code, 128 + sig, "exit %d; output:\n%s", code, slurp("out"));
    cr_assert(took < 5.0, "took %.1f s", took);
    assert_gone(2, pids);
    assert_no_shm(p);
}

Test(launcher, forwards_sigterm, .timeout = 60)
{
    forwards(SIGTERM);
}
Test(launcher, forwards_sigint, .timeout = 60)
{
    forwards(SIGINT);
}

Test(launcher, killed_launcher_takes_ranks_with_it, .timeout = 60)
{
    pid_t pids[3];

    make_dir();
    const char *args[] = {"-n", "3", getenv("RANK_HELPER"), dir, "wait", NULL};
    pid_t p = launch(args);
    wait_pids(3, pids);
    kill(p, SIGKILL);
    wait_exit(p, 5, NULL);
    for (int tries = 0; tries < 200; tries++) {
        int alive = 0;
        for (int r = 0; r < 3; r++)
            alive += kill(pids[r], 0) == 0;
        if (!alive)
            break;
        usleep(10000);
    }
    assert_gone(3, pids);
}

Test(launcher, clean_run_exits_zero_and_prefixes_lines, .timeout = 60)
{
    pid_t pids[2];

    make_dir();
    const char *args[] = {"-n", "2", getenv("RANK_HELPER"), dir, "ok", NULL};
    pid_t p = launch(args);
    cr_assert_eq(wait_exit(p, 30, NULL), 0, "%s", slurp("out"));
    wait_pids(2, pids);
    assert_gone(2, pids);
    assert_no_shm(p);
    cr_assert(strstr(slurp("out"), "[0] rank 0 ready"), "%s", slurp("out"));
    cr_assert(strstr(slurp("out"), "[1] rank 1 ready"), "%s", slurp("out"));
}

Test(launcher, partial_last_line_is_printed, .timeout = 30)
{
    make_dir();
    const char *args[] = {"-n", "2", "/bin/sh", "-c", "printf 'no newline %s' $TUTTI_RANK", NULL};
    pid_t p = launch(args);
    cr_assert_eq(wait_exit(p, 20, NULL), 0);
    cr_assert(strstr(slurp("out"), "[0] no newline 0\n"), "%s", slurp("out"));
    cr_assert(strstr(slurp("out"), "[1] no newline 1\n"), "%s", slurp("out"));
}

Test(launcher, usage_errors, .timeout = 30)
{
    make_dir();
    const char *a1[] = {"-n", "0", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(a1), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "-n 0"), "%s", slurp("out"));
    const char *a2[] = {"-n", "2", NULL};
    cr_assert_eq(wait_exit(launch(a2), 10, NULL), 2);
    const char *a3[] = {"--bogus", "-n", "2", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(a3), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "--bogus"), "%s", slurp("out"));
    const char *a4[] = {"-n", "2", "/nonexistent/program", NULL};
    cr_assert_eq(wait_exit(launch(a4), 10, NULL), 127);
    cr_assert(strstr(slurp("out"), "cannot run /nonexistent/program"), "%s", slurp("out"));
}
