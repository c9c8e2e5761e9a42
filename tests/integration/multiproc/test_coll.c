/*
 * test_coll.c -- runs coll_check under tutti-run for 1, 2, 3, 4 and 8 ranks (more ranks than
 * cores on purpose) in each mode; a rank's failure lines are in the test log.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* coll_check `mode` on n ranks, with `env` (VAR=value ...) set. */
static void run_env(int n, const char *mode, const char *env)
{
    char cmd[1024];
    int st;

    snprintf(cmd, sizeof(cmd), "env %s '%s' -n %d '%s' %s 2>&1", env, getenv("TUTTI_RUN"), n,
             getenv("COLL_CHECK"), mode);
    st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void run(int n, const char *mode)
{
    run_env(n, mode, "");
}

/* The 1,000,003-element count for every dtype x op pair up to 4 ranks; on 8 (30 s of the
 * suite's time with every pair) for a third of them, every op once per dtype class. */
#define COLL_TESTS(n)                                                                              \
    Test(coll, matrix_##n##_ranks, .timeout = 300)                                                 \
    {                                                                                              \
        run(n, n < 8 ? "matrix-full" : "matrix");                                                  \
    }                                                                                              \
    Test(coll, large_##n##_ranks, .timeout = 300)                                                  \
    {                                                                                              \
        run(n, "large");                                                                           \
    }                                                                                              \
    Test(coll, p2p_##n##_ranks, .timeout = 120)                                                    \
    {                                                                                              \
        run(n, "p2p");                                                                             \
        run(n, "all_to_all");                                                                      \
    }

COLL_TESTS(1)
COLL_TESTS(2)
COLL_TESTS(3)
COLL_TESTS(4)
COLL_TESTS(8)

/* Large calls with every FIFO slot written by streaming stores (lib/kern/copy.h's tt_copy_nt),
 * which TUTTI_STREAM_STORES=auto picks only where they measure faster, so not reliably in the
 * runs above; and with ordinary stores forced. */
Test(coll, large_streaming_stores, .timeout = 300)
{
    run_env(2, "large", "TUTTI_STREAM_STORES=1");
    run_env(3, "large", "TUTTI_STREAM_STORES=1");
    run_env(2, "large", "TUTTI_STREAM_STORES=0");
}

/* Large all-gathers and broadcasts by single copy (the receiver reads the sender's memory),
 * which TUTTI_SHM_SINGLE_COPY=auto picks only where it measures faster; and with it off. The
 * simulator runs the mixes of ranks that send that way and ranks that do not (test_sim). */
Test(coll, large_single_copy, .timeout = 300)
{
    run_env(2, "large", "TUTTI_SHM_SINGLE_COPY=1");
    /* ring all-gather, chain broadcast: forwarding what came whole; with polling waits, and
     * with blocking ones (a sender waiting for its receiver's copy sleeps until woken) */
    run_env(3, "large", "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=poll");
    run_env(4, "large", "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
    run_env(2, "large", "TUTTI_SHM_SINGLE_COPY=0");
}

/*
 * coll_check trials on n ranks with TUNE tracing; rank 1 alone also gets `rank1_env` (VAR=value,
 * exported by a shell before the program starts; NULL: none). Every call is checked. Returns
 * each rank's trial-vote lines (up to 8) in votes[rank][k], without the "[rank] host:pid:rank"
 * prefix.
 */
#define MAX_VOTES 8
static void run_trials(int n, const char *rank1_env, char votes[][MAX_VOTES][256], int *nvotes)
{
    char cmd[1024], line[1024], rank1[256] = "true";
    int st;
    FILE *f;

    if (rank1_env)
        snprintf(rank1, sizeof(rank1), "[ \"$TUTTI_RANK\" != 1 ] || export %s", rank1_env);
    snprintf(cmd, sizeof(cmd),
             "env TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=TUNE '%s' -n %d sh -c "
             "'%s; exec \"$0\" trials' '%s' 2>&1",
             getenv("TUTTI_RUN"), n, rank1, getenv("COLL_CHECK"));
    memset(nvotes, 0, (size_t)n * sizeof(*nvotes));
    f = popen(cmd, "r");
    cr_assert(f, "popen: %s", cmd);
    while (fgets(line, sizeof(line), f)) {
        const char *v = strstr(line, "trial vote: ");
        int r;

        fputs(line, stdout);
        if (!v || sscanf(line, "[%d]", &r) != 1 || r < 0 || r >= n || nvotes[r] >= MAX_VOTES)
            continue;
        v = strstr(line, " calls of ");
        while (v > line && v[-1] != ' ') /* back to the collective's name */
            v--;
        size_t len = strcspn(v, "\n");
        len = len < 255 ? len : 255;
        memcpy(votes[r][nvotes[r]], v, len);
        votes[r][nvotes[r]++][len] = '\0';
    }
    st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* At the end of each trial of a collective (copy_pick.h) the ranks vote: each logs the same
 * means, so each takes the same way. Two pickers x two collectives: four votes per rank. A
 * rank whose knobs differ (TUTTI_SHM_SINGLE_COPY=1 on rank 1) makes the ranks decide alone:
 * no votes, and no call waits for one. */
Test(coll, trials_are_decided_together, .timeout = 120)
{
    char votes[3][MAX_VOTES][256];
    int nvotes[3];

    run_trials(3, NULL, votes, nvotes);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(nvotes[r], 4, "rank %d logged %d trial votes", r, nvotes[r]);
        for (int k = 0; k < 4; k++) {
            cr_assert(strstr(votes[r][k], "the ranks' mean median"), "rank %d: %s", r, votes[r][k]);
            cr_assert_str_eq(votes[r][k], votes[0][k], "rank %d's vote %d differs from rank 0's", r,
                             k);
        }
    }
    run_trials(3, "TUTTI_SHM_SINGLE_COPY=1", votes, nvotes);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(nvotes[r], 0, "rank %d voted with knobs that differ", r);
}

/* One run of the check program named by the environment variable `prog` (SPLIT_CHECK,
 * A2AV_CHECK) on n ranks posing as `nodes` nodes, with `env` (VAR=value ..., or "") set. */
static void run_check_args(const char *prog, int n, int nodes, const char *env, const char *args)
{
    char cmd[1024];
    int st;

    snprintf(cmd, sizeof(cmd), "env %s '%s' -n %d --nodes %d '%s' %s 2>&1", env,
             getenv("TUTTI_RUN"), n, nodes, getenv(prog), args);
    st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void run_check(const char *prog, int n, int nodes, const char *env)
{
    run_check_args(prog, n, nodes, env, "");
}

/* run_check_args, counting the output lines that hold `needle` (the run must pass). */
static int run_check_count(const char *prog, int n, int nodes, const char *env, const char *args,
                           const char *needle)
{
    char cmd[1024], line[4096];
    int st, count = 0;
    FILE *f;

    snprintf(cmd, sizeof(cmd), "env %s '%s' -n %d --nodes %d '%s' %s 2>&1", env,
             getenv("TUTTI_RUN"), n, nodes, getenv(prog), args);
    f = popen(cmd, "r");
    cr_assert(f != NULL, "%s: popen failed", cmd);
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            count++;
        else if (!strstr(line, " TRACE "))
            fputs(line, stdout);
    st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return count;
}

/* A personalized exchange's check program on 1 to 4 and 8 ranks, on 2 nodes x 2 (sockets
 * between them), and with TUTTI_CHECK_COLL=1 (its mismatch named before anything moves). */
static void run_exchange_check(const char *prog)
{
    for (int n = 1; n <= 4; n++)
        run_check(prog, n, 1, "");
    run_check(prog, 8, 1, "");
    run_check(prog, 4, 2, "");
    run_check(prog, 3, 1, "TUTTI_CHECK_COLL=1");
}

/* Point-to-point batches by single copy, which TUTTI_SHM_SINGLE_COPY=auto picks per size where
 * it measures faster: every message of 8 KiB and more goes whole, by address (ring exchanges,
 * all-to-all with self, all-to-allv, gather and scatter); with polling and blocking waits. */
Test(coll, p2p_single_copy, .timeout = 300)
{
    run_env(2, "p2p", "TUTTI_SHM_SINGLE_COPY=1");
    run_env(2, "all_to_all", "TUTTI_SHM_SINGLE_COPY=1");
    run_env(3, "p2p", "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
    run_env(3, "all_to_all", "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=poll");
    run_env(4, "all_to_all", "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
    run_check("A2AV_CHECK", 3, 1, "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
    run_check("ROOTED_CHECK", 4, 1, "TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block");
}

/* coll_check `mode` on 2 ranks with TUTTI_SHM_SINGLE_COPY=1 where process_vm_readv fails with
 * EPERM (tests/support/tools/no_vm_readv: a seccomp filter like a container runtime's default) for
 * `ranks` ("all", or one rank): each refused receiver's probe fails and says so at INFO, its
 * senders keep to two copies, and the checks pass. Returns the output's lines of rank `who`
 * that name the refusal. */
static int run_refused(const char *ranks, const char *mode, int who)
{
    char cmd[1024], line[1024], tag[16];
    int st, named = 0;
    FILE *f;

    snprintf(cmd, sizeof(cmd),
             "env TUTTI_SHM_SINGLE_COPY=1 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=SHM '%s' -n 2 '%s' "
             "%s '%s' %s 2>&1",
             getenv("TUTTI_RUN"), getenv("NO_VM_READV"), ranks, getenv("COLL_CHECK"), mode);
    snprintf(tag, sizeof(tag), "[%d] ", who);
    f = popen(cmd, "r");
    cr_assert(f, "popen: %s", cmd);
    while (fgets(line, sizeof(line), f)) {
        fputs(line, stdout);
        named += strncmp(line, tag, strlen(tag)) == 0 &&
                 strstr(line, "unavailable (process_vm_readv: Operation not permitted): two "
                              "copies") != NULL;
    }
    st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return named;
}

Test(coll, single_copy_refused, .timeout = 120)
{
    cr_expect_gt(run_refused("all", "p2p", 0), 0, "rank 0 did not name the refusal");
    cr_expect_gt(run_refused("all", "large", 1), 0, "rank 1 did not name the refusal");
    /* only rank 1 refused: rank 0 still reads rank 1's memory, and says nothing */
    cr_expect_gt(run_refused("1", "p2p", 1), 0, "rank 1 did not name the refusal");
    cr_expect_eq(run_refused("1", "p2p", 0), 0, "rank 0 named a refusal it did not get");
}

/* tutti_all_to_allv (a2av_check). */
Test(coll, all_to_allv, .timeout = 120)
{
    run_exchange_check("A2AV_CHECK");
}

/* tutti_gather and tutti_scatter (rooted_check). */
Test(coll, gather_scatter, .timeout = 120)
{
    run_exchange_check("ROOTED_CHECK");
}

/* tutti_comm_split (split_check): on 1 to 5 ranks, and on 4 ranks posing as 2 nodes. */
/* Collectives inside tutti_group_start/end (group_check), small all-reduces packed into one;
 * ranks that pack unlike each other (a dependence on one rank only) fail, never hang. */
Test(coll, groups_of_collectives, .timeout = 120)
{
    run_exchange_check("GROUP_CHECK");
    run_check_args("GROUP_CHECK", 2, 1, "TUTTI_TIMEOUT=20", "alias");
    run_check_args("GROUP_CHECK", 3, 1, "TUTTI_TIMEOUT=20 TUTTI_CHECK_COLL=1", "alias");
}

Test(coll, split, .timeout = 120)
{
    for (int n = 1; n <= 5; n++)
        run_check("SPLIT_CHECK", n, 1, "");
    run_check("SPLIT_CHECK", 4, 2, "");
}

/*
 * Symmetric memory (tutti_mem_alloc, windows): every collective x dtype x op on buffers in a
 * window on 1 to 4 and 8 ranks, counts to 2^21 + 3 on 2 ranks; on 2 emulated nodes x 2 (as
 * the tuner picks: the hierarchical plans from 256 KiB); a random mix where each rank draws a
 * third of its buffers from malloc (the ranks fall back together); and sym_check's rules: a
 * rank outside any window (the usual path, or under TUTTI_CHECK_COLL=1 an error naming it),
 * what is refused, and peers that exit right after the last call.
 */
Test(coll, symmetric_memory, .timeout = 300)
{
    for (int n = 1; n <= 4; n++)
        run_check_args("COLL_CHECK", n, 1, "", "matrix-full --symmetric");
    run_check_args("COLL_CHECK", 8, 1, "", "matrix --symmetric");
    run_check_args("COLL_CHECK", 2, 1, "", "matrix 2097155 --symmetric");
    run_check_args("COLL_CHECK", 4, 2, "", "matrix --symmetric");
    run_check_args("COLL_CHECK", 3, 1, "", "large --symmetric");
    run_check_args("COLL_CHECK", 4, 1, "", "soak 3 --symmetric-mix");
    for (int n = 1; n <= 4; n++) {
        run_check("SYM_CHECK", n, 1, "");
        run_check("SYM_CHECK", n, 1, "TUTTI_CHECK_COLL=1");
        run_check_args("SYM_CHECK", n, 1, "", "misuse");
    }
    /* A rank that asks whether its peers are alive just after they finished and exited
     * (the late_alive shim): its call succeeds (it failed "rank 1 has died" before). */
    for (int n = 2; n <= 4; n += 2) {
        char env[1024];
        snprintf(env, sizeof(env), "LD_PRELOAD='%s'", getenv("LATE_ALIVE"));
        run_check_args("SYM_CHECK", n, 1, env, "exit");
    }
    run_check_args("SYM_CHECK", 2, 1, "", "mismatch count");
    run_check_args("SYM_CHECK", 3, 1, "", "mismatch coll");
    run_check("SYM_CHECK", 4, 2, "");
    run_check_args("SYM_CHECK", 4, 2, "", "misuse");
}

/*
 * Across nodes: the hierarchical all-reduce, all-gather and broadcast (forced) with their
 * stages inside each node on windows. Every collective x dtype x op on 2 nodes x 2 and x 3 (a
 * node's third rank reduces in place from its own input first), a random mix where each rank
 * draws a third of its buffers from malloc (nodes decide alone), and sym_check's rules across
 * nodes (one node's buffers in windows and the other's not, deterministically), with and
 * without TUTTI_CHECK_COLL. The runs must log that they took the path (TRACE).
 */
#define HIER_ENV                                                                                   \
    "'TUTTI_ALGO=all_reduce:hier;all_gather:hier;broadcast:hier' TUTTI_DEBUG=TRACE "               \
    "TUTTI_DEBUG_SUBSYS=COLL"
#define HIER_SYM "(symmetric inside nodes)"
Test(coll, symmetric_memory_nodes, .timeout = 300)
{
    cr_assert_gt(run_check_count("COLL_CHECK", 4, 2, HIER_ENV, "matrix --symmetric", HIER_SYM),
                 500);
    cr_assert_gt(run_check_count("COLL_CHECK", 6, 2, HIER_ENV, "matrix --symmetric", HIER_SYM),
                 1000);
    cr_assert_gt(run_check_count("COLL_CHECK", 4, 2, HIER_ENV, "soak 2 --symmetric-mix", HIER_SYM),
                 10);
    for (int n = 4; n <= 6; n += 2) {
        cr_assert_gt(run_check_count("SYM_CHECK", n, 2, HIER_ENV, "nodes", HIER_SYM), 0);
        cr_assert_gt(
            run_check_count("SYM_CHECK", n, 2, HIER_ENV " TUTTI_CHECK_COLL=1", "nodes", HIER_SYM),
            0);
    }
}
