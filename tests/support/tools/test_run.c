/*
 * test_run.c -- tutti-run: exit status of the first failing rank, stopping the others,
 * signal forwarding, no processes and no shared memory left behind, output prefixes,
 * usage errors; one launcher per host (--nnodes, --node-rank, --master), two of them here
 * posing as two hosts. Paths come from the environment meson sets (TUTTI_RUN, RANK_HELPER).
 */
#include "../child.h"
#include "../scratch_dir.h"
#include "../free_port.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define now child_now

static char dir[64];

static void make_dir(void)
{
    const char *d = scratch_dir("tutti-run-test");

    cr_assert_not_null(d, "cannot make a directory under /tmp");
    snprintf(dir, sizeof(dir), "%s", d);
}

/* Start tutti-run with args (NULL-terminated); stdout+stderr to DIR/OUT_NAME. */
static pid_t launch_to(const char *const *args, const char *out_name)
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
    snprintf(out, sizeof(out), "%s/%s", dir, out_name);
    pid = child_start(out, argv);
    cr_assert(pid >= 0);
    return pid;
}

static pid_t launch(const char *const *args)
{
    return launch_to(args, "out");
}

/* Wait for pid; fail after limit seconds. Returns the exit code (128+sig for signals). */
static int wait_exit(pid_t pid, double limit, double *took)
{
    int code = child_wait(pid, limit, took);

    cr_assert_neq(code, -1, "tutti-run still running after %.0f s", limit);
    return code;
}

static char *slurp(const char *name)
{
    static char buf[65536];
    char path[128];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return (char *)child_read(path, buf, sizeof(buf));
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

/*
 * One tutti-run per "host" (--nnodes 2 --node-rank I --master 127.0.0.1:PORT), the two posing
 * as hostA and hostB (TUTTI_HOSTID, which each launcher's ranks inherit), n ranks in all:
 * output to DIR/out.0 and DIR/out.1, launcher pids in l[2].
 */
static void launch_two_hosts(int n, const char *mode, const char *arg1, const char *arg2,
                             pid_t l[2])
{
    char ns[16], master[64];

    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(master, sizeof(master), "127.0.0.1:%d", free_port());
    for (int h = 0; h < 2; h++) {
        const char *args[] = {"-n",
                              ns,
                              "--nnodes",
                              "2",
                              "--node-rank",
                              h ? "1" : "0",
                              "--master",
                              master,
                              getenv("RANK_HELPER"),
                              dir,
                              mode,
                              arg1,
                              arg2,
                              NULL};
        setenv("TUTTI_HOSTID", h ? "hostB" : "hostA", 1); /* the launcher inherits it */
        l[h] = launch_to(args, h ? "out.1" : "out.0");
    }
    unsetenv("TUTTI_HOSTID");
}

/* 5 ranks on 2 hosts: 0-2 on the first, 3-4 on the second, each told its global and local
 * rank; the hosts talk over sockets (rank_helper's all-reduce and barriers would fail
 * otherwise), and the launchers' rendezvous defaults to loopback for a loopback master. */
Test(launcher, two_hosts, .timeout = 60)
{
    pid_t l[2], pids[5];

    make_dir();
    launch_two_hosts(5, "ok", NULL, NULL, l);
    cr_assert_eq(wait_exit(l[0], 30, NULL), 0, "%s", slurp("out.0"));
    cr_assert_eq(wait_exit(l[1], 30, NULL), 0, "%s", slurp("out.1"));
    wait_pids(5, pids);
    assert_gone(5, pids);
    assert_no_shm(l[0]);
    assert_no_shm(l[1]);
    const char *want[2][3] = {{"[0] rank 0 ready (local rank 0, 5 ranks)",
                               "[1] rank 1 ready (local rank 1, 5 ranks)",
                               "[2] rank 2 ready (local rank 2, 5 ranks)"},
                              {"[3] rank 3 ready (local rank 0, 5 ranks)",
                               "[4] rank 4 ready (local rank 1, 5 ranks)", NULL}};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 3 && want[h][k]; k++)
            cr_assert(strstr(slurp(h ? "out.1" : "out.0"), want[h][k]), "host %d lacks '%s':\n%s",
                      h, want[h][k], slurp(h ? "out.1" : "out.0"));
    /* No TUTTI_SECRET: every host's launcher says what that exposes. */
    for (int h = 0; h < 2; h++)
        cr_assert(strstr(slurp(h ? "out.1" : "out.0"), "WARNING: TUTTI_SECRET is not set"),
                  "host %d did not warn:\n%s", h, slurp(h ? "out.1" : "out.0"));
}

/* With TUTTI_SECRET the hosts join as before, and nobody warns. */
Test(launcher, two_hosts_with_a_secret, .timeout = 60)
{
    pid_t l[2];

    make_dir();
    setenv("TUTTI_SECRET", "a-test-secret-8d1f", 1);
    launch_two_hosts(4, "ok", NULL, NULL, l);
    cr_assert_eq(wait_exit(l[0], 30, NULL), 0, "%s", slurp("out.0"));
    cr_assert_eq(wait_exit(l[1], 30, NULL), 0, "%s", slurp("out.1"));
    for (int h = 0; h < 2; h++)
        cr_assert_null(strstr(slurp(h ? "out.1" : "out.0"), "TUTTI_SECRET"), "host %d:\n%s", h,
                       slurp(h ? "out.1" : "out.0"));
}

/* A rank of the second host exits with status 7: its launcher stops its other rank and exits
 * 7; on the first host the ranks' calls fail (the peer is gone), so that launcher stops too. */
Test(launcher, two_hosts_failure_stops_both, .timeout = 60)
{
    pid_t l[2], pids[4];
    double took;

    make_dir();
    launch_two_hosts(4, "exit", "3", "7", l);
    wait_pids(4, pids);
    cr_assert_eq(wait_exit(l[1], 20, &took), 7, "%s", slurp("out.1"));
    cr_assert(strstr(slurp("out.1"), "rank 3") && strstr(slurp("out.1"), "status 7"), "%s",
              slurp("out.1"));
    int code = wait_exit(l[0], 20, &took);
    cr_assert_neq(code, 0, "the first host's launcher exited 0:\n%s", slurp("out.0"));
    cr_assert(took < 10.0, "the first host took %.1f s to stop:\n%s", took, slurp("out.0"));
    assert_gone(4, pids);
    assert_no_shm(l[0]);
    assert_no_shm(l[1]);
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
    /* Several hosts: each option's mistake is named. */
    const char *b1[] = {"-n", "2", "--nnodes", "2", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b1), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "--master"), "%s", slurp("out"));
    const char *b2[] = {"-n",        "2", "--nnodes", "2", "--master", "127.0.0.1:29500",
                        "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b2), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "needs --node-rank"), "%s", slurp("out"));
    const char *b3[] = {"-n", "2",        "--nnodes", "2",         "--node-rank",
                        "2",  "--master", "h:29500",  "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b3), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "--node-rank 2 is out of range"), "%s", slurp("out"));
    const char *b4[] = {"-n", "2", "--master", "127.0.0.1", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b4), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "ADDRESS:PORT"), "%s", slurp("out"));
    const char *b5[] = {"-n", "1",        "--nnodes", "2",         "--node-rank",
                        "0",  "--master", "h:1",      "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b5), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "more than the 1 ranks"), "%s", slurp("out"));
    const char *b6[] = {"-n",          "4", "--nodes",  "2",   "--nnodes",  "2",
                        "--node-rank", "0", "--master", "h:1", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(b6), 10, NULL), 2);
    cr_assert(strstr(slurp("out"), "do not go together"), "%s", slurp("out"));
}

/* A TUTTI_* value the ranks would refuse is refused by tutti-run, once, before any rank starts:
 * TUTTI_TIMEOUT=nan used to start the job and retry the rendezvous forever. */
Test(launcher, bad_knob_refused_before_any_rank_starts, .timeout = 30)
{
    double took;

    make_dir();
    setenv("TUTTI_TIMEOUT", "nan", 1);
    setenv("TUTTI_TRANSPORTS", "^shm,tcp", 1);
    const char *a[] = {"-n", "4", "/bin/sh", "-c", "echo started", NULL};
    cr_assert_eq(wait_exit(launch(a), 10, &took), 2);
    cr_assert(strstr(slurp("out"), "TUTTI_TIMEOUT='nan' is not a finite number of seconds"), "%s",
              slurp("out"));
    cr_assert(strstr(slurp("out"), "TUTTI_TRANSPORTS='^shm,tcp' names 'tcp'"), "%s", slurp("out"));
    cr_assert_null(strstr(slurp("out"), "started"), "%s", slurp("out"));
    cr_assert_lt(took, 5.0);
}

/* Too few file descriptors for the launcher's pipes and rendezvous: said so at once, as such
 * (it used to end as "missing ranks" after the rendezvous timed out). */
Test(launcher, fd_limit_named, .timeout = 30)
{
    struct rlimit rl = {40, 40};

    make_dir();
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    const char *a[] = {"-n", "12", "/bin/true", NULL};
    cr_assert_eq(wait_exit(launch(a), 10, NULL), 1);
    cr_assert(strstr(slurp("out"), "file descriptors in tutti-run, but its limit is 40"), "%s",
              slurp("out"));
    cr_assert_null(strstr(slurp("out"), "missing"), "%s", slurp("out"));
}
