/*
 * test_faults.c -- failures surface on every rank, fast: a rank killed with SIGKILL in the
 * middle of all-reduces (over shared memory, and across emulated nodes over sockets), and
 * tutti_comm_abort from another thread (which also polls tutti_comm_get_error, as a watchdog
 * would). Every surviving rank must return an error within 10 s with the default settings, a
 * later call must fail at once, destroy must return, and nothing may be left in /dev/shm.
 * Ranks are started here directly (MASTER_ADDR rendezvous).
 */
#include "../../support/child.h"
#include "../../support/scratch_dir.h"
#include "../../support/free_port.h"
#include "../../support/shm_names.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

#define now child_now

static const char *extra_env; /* VAR=value words, space-separated (at most 6) */

/* Start rank `rank` of n running prog (a NULL-terminated argv, at most 6 words). The child only
 * opens, dups and execs (env(1) sets the variables): a forked child of a process with threads
 * must not allocate before exec. */
static pid_t start_prog(int rank, int n, int port, const char *const *prog, const char *hostid)
{
    char out[128], vr[32], vn[32], vp[32], vt[64], vh[96], ve[256];
    const char *argv[24];
    int k = 0;
    pid_t pid;

    snprintf(out, sizeof(out), "%s/out.%d", dir, rank);
    snprintf(vr, sizeof(vr), "RANK=%d", rank);
    snprintf(vn, sizeof(vn), "WORLD_SIZE=%d", n);
    snprintf(vp, sizeof(vp), "MASTER_PORT=%d", port);
    snprintf(vt, sizeof(vt), "TUTTI_JOB_TAG=fault%d", (int)getpid());
    snprintf(vh, sizeof(vh), "TUTTI_HOSTID=%s", hostid ? hostid : "");
    argv[k++] = "/usr/bin/env";
    argv[k++] = "-u";
    argv[k++] = "TUTTI_TIMEOUT"; /* the defaults are what is tested */
    argv[k++] = vr;
    argv[k++] = vn;
    argv[k++] = "MASTER_ADDR=127.0.0.1";
    argv[k++] = vp;
    argv[k++] = vt;
    argv[k++] = "TUTTI_SOCKET_IFNAME==lo";
    if (hostid)
        argv[k++] = vh;
    if (extra_env) { /* split before the fork: the child must not allocate */
        snprintf(ve, sizeof(ve), "%s", extra_env);
        for (char *w = strtok(ve, " "); w && k < 16; w = strtok(NULL, " "))
            argv[k++] = w;
    }
    cr_assert_not_null(prog[0], "the program to run is not set (FAULT_RANK, COLL_CHECK)");
    for (int i = 0; prog[i] && i < 6; i++)
        argv[k++] = prog[i];
    argv[k] = NULL;
    pid = child_start(out, argv);
    cr_assert(pid >= 0);
    return pid;
}

/* Rank `rank` of fault_rank in `mode`. */
static pid_t start(int rank, int n, int port, const char *mode, const char *hostid)
{
    const char *prog[] = {getenv("FAULT_RANK"), dir, mode, NULL};
    return start_prog(rank, n, port, prog, hostid);
}

/* All n ranks of prog, posing as `nodes` hosts (blocks of consecutive ranks) when nodes > 1. */
static void start_all(pid_t *pids, int n, int nodes, int port, const char *const *prog)
{
    for (int r = 0; r < n; r++) {
        char host[32];
        snprintf(host, sizeof(host), "node%d", r * nodes / n);
        pids[r] = start_prog(r, n, port, prog, nodes > 1 ? host : NULL);
    }
}

static const char *output(int r)
{
    static char buf[8192];
    char path[128];

    snprintf(path, sizeof(path), "%s/out.%d", dir, r);
    return child_read(path, buf, sizeof(buf));
}

/* text from the first `word` on, or all of it if word is not there (never NULL). */
static const char *from_word(const char *text, const char *word)
{
    const char *p = strstr(text, word);
    return p ? p : text;
}

static void wait_ready(int n)
{
    double t0 = now();
    for (int r = 0; r < n; r++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/pid.%d", dir, r);
        while (access(path, F_OK) != 0) {
            cr_assert(now() - t0 < 30, "rank %d never got ready: %s", r, output(r));
            usleep(10000);
        }
    }
}

static int wait_exit(pid_t pid, double limit)
{
    return child_wait(pid, limit, NULL);
}

/* Names this test's jobs left in /dev/shm: removed, and (remove == 0) asserted absent; remove:
 * what a launcher does for a rank killed during set-up (tutti-run). */
static void shm_left(int remove)
{
    char prefix[64], left[256];

    snprintf(prefix, sizeof(prefix), "tutti-fault%d-", (int)getpid());
    shm_names_remove(prefix, left, sizeof(left));
    cr_assert(remove || !left[0], "left in /dev/shm: %s", left);
}

static void assert_no_shm(void)
{
    shm_left(0);
}

static void setup(void)
{
    const char *d = scratch_dir("tutti-fault");

    cr_assert_not_null(d, "cannot make a directory under /tmp");
    snprintf(dir, sizeof(dir), "%s", d);
}

/* Kill rank `victim` of n mid-loop; every other rank must report an error within 10 s. `reap`
 * 0 leaves the victim a zombie until the survivors have exited (a launcher that waits for its
 * ranks in order): kill(pid, 0) still finds it, /proc says it is gone. */
static void kill_one_reaping(int n, int victim, int nodes, int reap)
{
    const char *prog[] = {getenv("FAULT_RANK"), dir, "loop", NULL};
    pid_t pids[8];
    int port = free_port();
    double killed;

    start_all(pids, n, nodes, port, prog);
    wait_ready(n);
    usleep(500000); /* well inside the all-reduce loop */
    kill(pids[victim], SIGKILL);
    killed = now();
    if (reap)
        waitpid(pids[victim], NULL, 0);
    for (int r = 0; r < n; r++) {
        if (r == victim)
            continue;
        int code = wait_exit(pids[r], 15);
        cr_assert_eq(code, 0, "rank %d: exit %d, %.1f s after the kill:\n%s", r, code,
                     now() - killed, output(r));
        double after;
        const char *res = strstr(output(r), "RESULT");
        cr_assert(res && sscanf(strstr(res, "after") + 6, "%lf", &after) == 1, "%s", output(r));
        cr_assert(after < 10.0, "rank %d took %.2f s: %s", r, after, output(r));
        printf("%s", res); /* the figures for RELIABILITY.md */
    }
    if (!reap)
        waitpid(pids[victim], NULL, 0);
    assert_no_shm();
}

static void kill_one(int n, int victim, int nodes)
{
    kill_one_reaping(n, victim, nodes, 1);
}

Test(faults, killed_rank_over_shared_memory, .init = setup, .timeout = 60)
{
    kill_one(4, 2, 1);
}

Test(faults, killed_rank_left_a_zombie, .init = setup, .timeout = 60)
{
    kill_one_reaping(3, 2, 1, 0);
}

Test(faults, killed_rank_across_nodes_over_sockets, .init = setup, .timeout = 60)
{
    kill_one(4, 1, 2);
}

/*
 * A random rank killed at a random moment of a random sequence of calls (coll_check soak: every
 * collective, dtype, size and so algorithm, host streams, point-to-point), set-up included:
 * every survivor must report the failure and exit within 10 s, nothing left in /dev/shm. The
 * seed (victim, moment and calls) is in the assertion messages. A rank killed before it joined
 * the rendezvous cannot be told from one that has not started yet: the others wait for it until
 * TUTTI_TIMEOUT, here 5 s (once the rendezvous has formed, every death is seen at once).
 */
static void kill_in_soak_args(int n, int nodes, const char *env, const char *flag)
{
    unsigned seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8), h = seed * 2654435761u;
    int victim = (int)((h >> 16) % (unsigned)n), port = free_port();
    useconds_t at = h % 3000000; /* 0 to 3 s in: set-up included */
    double slowest = 0;
    int in_setup = 0;
    char seedarg[32];
    const char *prog[] = {getenv("COLL_CHECK"), "soak", "60", seedarg, flag, NULL};
    pid_t pids[8];
    double killed;

    snprintf(seedarg, sizeof(seedarg), "%u", seed);
    extra_env = env;
    start_all(pids, n, nodes, port, prog);
    usleep(at);
    kill(pids[victim], SIGKILL);
    killed = now();
    waitpid(pids[victim], NULL, 0);
    for (int r = 0; r < n; r++) {
        if (r == victim)
            continue;
        int code = wait_exit(pids[r], 15);
        double after = now() - killed;
        cr_assert_neq(code, -1,
                      "seed %u: rank %d still ran 15 s after rank %d was killed %.1f s in:\n%s",
                      seed, r, victim, at / 1e6, output(r));
        cr_assert_eq(code, 1, "seed %u: rank %d exited %d after rank %d was killed:\n%s", seed, r,
                     code, victim, output(r));
        cr_assert(after < 10.0, "seed %u: rank %d took %.1f s to fail:\n%s", seed, r, after,
                  output(r));
        cr_assert_not_null(strstr(output(r), "FAIL"), "seed %u: rank %d reported nothing:\n%s",
                           seed, r, output(r));
        slowest = after > slowest ? after : slowest;
        in_setup |= strstr(output(r), "FAIL init") != NULL;
    }
    printf(
        "seed %u: rank %d of %d killed %.2f s in; every survivor failed, the last %.2f s after\n",
        seed, victim, n, at / 1e6, slowest);
    /* A rank killed while connecting may leave the names it made; after set-up, none. */
    shm_left(in_setup);
}

static void kill_in_soak(int n, int nodes, const char *env)
{
    kill_in_soak_args(n, nodes, env, NULL);
}

Test(faults, killed_rank_during_random_calls_over_shared_memory, .init = setup, .timeout = 60)
{
    kill_in_soak(4, 1, "TUTTI_TIMEOUT=5");
}

Test(faults, killed_rank_during_random_calls_across_nodes, .init = setup, .timeout = 60)
{
    kill_in_soak(6, 2, "TUTTI_TIMEOUT=5");
}

/* On symmetric memory (coll_check --symmetric-mix: most buffers in a window, a third per rank
 * from malloc): a survivor may be at a call's gate, in its pass over the victim's buffers, or
 * at its closing barrier. */
Test(faults, killed_rank_during_random_calls_on_symmetric_memory, .init = setup, .timeout = 60)
{
    kill_in_soak_args(4, 1, "TUTTI_TIMEOUT=5", "--symmetric-mix");
}

/* The same across 2 emulated nodes x 2 with the hierarchical plans forced: a survivor may also
 * be in its node's sum before the steps between nodes, or in its copies after them. */
Test(faults, killed_rank_during_random_calls_on_symmetric_memory_across_nodes, .init = setup,
     .timeout = 60)
{
    kill_in_soak_args(4, 2,
                      "TUTTI_TIMEOUT=5 TUTTI_ALGO=all_reduce:hier;all_gather:hier;broadcast:hier",
                      "--symmetric-mix");
}

/* By single copy: a survivor may be reading the victim's memory, or waiting for the victim to
 * read its own. */
Test(faults, killed_rank_during_random_calls_by_single_copy, .init = setup, .timeout = 60)
{
    kill_in_soak(2, 1, "TUTTI_TIMEOUT=5 TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=poll");
}

/* The same where waits block: a survivor may be asleep waiting for the victim to read. */
Test(faults, killed_rank_during_random_calls_by_single_copy_blocking, .init = setup, .timeout = 60)
{
    kill_in_soak(3, 1, "TUTTI_TIMEOUT=5 TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
}

/*
 * tutti_comm_abort from another thread of a random rank at a random moment of a random sequence
 * of calls (coll_check soak): the aborting rank sees its calls fail as aborted, every other rank
 * fails too, and all exit within 10 s of the abort; nothing left in /dev/shm.
 */
static void abort_in_soak(int n, int nodes)
{
    unsigned seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8), h = seed * 2654435761u;
    int who = (int)((h >> 16) % (unsigned)n), port = free_port();
    long ms = 200 + (long)(h % 2500);
    char seedarg[32], rankarg[16], msarg[32];
    const char *prog[] = {getenv("COLL_CHECK"), "soak", "60", seedarg, rankarg, msarg, NULL};
    pid_t pids[8];
    double t0 = now();

    snprintf(seedarg, sizeof(seedarg), "%u", seed);
    snprintf(rankarg, sizeof(rankarg), "%d", who);
    snprintf(msarg, sizeof(msarg), "%ld", ms);
    start_all(pids, n, nodes, port, prog);
    for (int r = 0; r < n; r++) {
        int code = wait_exit(pids[r], 20);
        cr_assert_neq(code, -1,
                      "seed %u: rank %d still ran 20 s after the start (rank %d aborts %ld ms "
                      "after init):\n%s",
                      seed, r, who, ms, output(r));
        cr_assert_eq(code, 1, "seed %u: rank %d exited %d (rank %d aborted):\n%s", seed, r, code,
                     who, output(r));
        cr_assert_not_null(strstr(output(r), r == who ? "aborted" : "FAIL"),
                           "seed %u: rank %d did not report the abort of rank %d:\n%s", seed, r,
                           who, output(r));
    }
    /* Set-up takes well under a second here: the abort came at most ~ms + 1 s in. */
    cr_assert(now() - t0 < (double)ms / 1000 + 11, "seed %u: the ranks took %.1f s", seed,
              now() - t0);
    printf("seed %u: rank %d of %d aborted %ld ms after init; all failed, %.2f s from the start\n",
           seed, who, n, ms, now() - t0);
    assert_no_shm();
}

Test(faults, abort_during_random_calls, .init = setup, .timeout = 60)
{
    abort_in_soak(4, 1);
}

Test(faults, abort_during_random_calls_across_nodes, .init = setup, .timeout = 60)
{
    abort_in_soak(4, 2);
}

Test(faults, abort_from_another_thread, .init = setup, .timeout = 60)
{
    pid_t p0, p1;
    int port = free_port();

    p0 = start(0, 2, port, "abort", NULL);
    p1 = start(1, 2, port, "abort", NULL);
    int c0 = wait_exit(p0, 20), c1 = wait_exit(p1, 20);
    cr_assert_eq(c0, 0, "rank 0 (aborted): exit %d:\n%s", c0, output(0));
    cr_assert_eq(c1, 0, "rank 1 (its peer): exit %d:\n%s", c1, output(1));
    double after;
    const char *res = strstr(output(0), "RESULT");
    cr_assert(res && sscanf(strstr(res, "after") + 6, "%lf", &after) == 1, "%s", output(0));
    cr_assert(after < 1.0, "the abort took %.2f s to end the call: %s", after, output(0));
    res = strstr(output(1), "RESULT");
    cr_assert(res && sscanf(strstr(res, "after") + 6, "%lf", &after) == 1, "%s", output(1));
    cr_assert(after < 1.0, "the aborted rank's peer took %.2f s: %s", after, output(1));
    /* output() reuses one buffer: one rank per printf. What the watchdog thread saw, too. */
    printf("%s", from_word(output(0), "get_error"));
    printf("%s", from_word(output(1), "get_error"));
    assert_no_shm();
}

/* n ranks of fault_rank `mode` under TUTTI_CHECK_COLL=1: each checks its own refusal and exits
 * 0; the first `show` ranks' results are printed. */
static void run_checked(int n, const char *mode, int show)
{
    pid_t p[4];
    int port = free_port();

    extra_env = "TUTTI_CHECK_COLL=1";
    for (int r = 0; r < n; r++)
        p[r] = start(r, n, port, mode, NULL);
    for (int r = 0; r < n; r++) {
        int code = wait_exit(p[r], 30);
        cr_assert_eq(code, 0, "rank %d: exit %d:\n%s", r, code, output(r));
    }
    for (int r = 0; r < show; r++)
        printf("%s", from_word(output(r), "RESULT"));
}

Test(faults, mismatched_collectives_are_named_on_every_rank, .init = setup, .timeout = 60)
{
    run_checked(4, "mismatch", 1);
}

Test(faults, mismatched_messages_fail_both_ends, .init = setup, .timeout = 60)
{
    run_checked(3, "p2pmismatch", 2);
}

Test(faults, stall_inspector_names_the_missing_rank, .init = setup, .timeout = 60)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "TUTTI_STALL_WARN=1 timeout 5 '%s' -n 3 '%s' '%s' wait 2>&1 | "
             "grep 'TUTTI_STALL_WARN' | grep -q 'rank 0 has not reached it'",
             getenv("TUTTI_RUN"), getenv("RANK_HELPER"), dir);
    cr_assert_eq(system(cmd), 0, "no stall report naming rank 0");
}

/* TUTTI_DETERMINISTIC=1: the same bits whatever the channels, chunks, algorithm or nodes. */
Test(faults, deterministic_mode_is_bitwise_reproducible, .timeout = 300)
{
    static const char *cfgs[] = {
        "TUTTI_DETERMINISTIC=1 '%s' -n 4 '%s'",
        "TUTTI_DETERMINISTIC=1 TUTTI_NCHANNELS=3 TUTTI_BUFFSIZE=64K TUTTI_STEPS=4 '%s' -n 4 '%s'",
        "TUTTI_DETERMINISTIC=1 TUTTI_ALGO='all_reduce:ring;reduce_scatter:ring' '%s' -n 4 '%s'",
        "TUTTI_DETERMINISTIC=1 TUTTI_BUFFSIZE=8M '%s' -n 4 --nodes 2 '%s'",
        "TUTTI_DETERMINISTIC=1 '%s' -n 3 '%s'",
        /* The flat all-reduce folds whole arrays in rank order on every rank: det's bits. */
        "TUTTI_ALGO='all_reduce:flat;reduce_scatter:det;reduce:det' TUTTI_NCHANNELS=2 '%s' -n 3 "
        "'%s'",
        /* The control: without the mode the ring's order differs, and the check sees it. */
        "TUTTI_ALGO=all_reduce:ring '%s' -n 4 '%s' expect-mismatch",
    };
    for (size_t k = 0; k < sizeof(cfgs) / sizeof(cfgs[0]); k++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), cfgs[k], getenv("TUTTI_RUN"), getenv("DET_CHECK"));
        int st = system(cmd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit %d", cmd,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}
