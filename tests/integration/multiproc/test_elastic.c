/*
 * test_elastic.c -- tutti-run --elastic with elastic_check: a job that grows from 2 to 4 ranks
 * (--join 2), one that loses a rank and takes a replacement (4 -> 3 -> 4, --restart 1) on one
 * host and across 2 emulated nodes, the same with one tutti-run per "host" (--nnodes 2 on
 * loopback, the join service beside MASTER_ADDR), one that falls below MIN and stops, and one
 * whose newcomer is never admitted because the job ends first. Each survivor's state is checked
 * element by element against the sum it must hold (elastic_check), and every rank must end at the
 * final size.
 */
#include "../../support/child.h"
#include "../../support/free_port.h"
#include "../../support/scratch_dir.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static void setup(void)
{
    const char *d = scratch_dir("tutti-elastic");

    cr_assert_not_null(d, "cannot make a directory under /tmp");
    snprintf(dir, sizeof(dir), "%s", d);
}

static int count(const char *text, const char *word)
{
    int n = 0;

    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        n++;
    return n;
}

/* tutti-run ARGS... elastic_check PROGARGS...: its exit code; its output in out. */
static int run(char *out, size_t size, const char *const *args)
{
    const char *argv[24];
    char path[128];
    int k = 0, code;

    argv[k++] = getenv("TUTTI_RUN");
    cr_assert_not_null(argv[0], "TUTTI_RUN is not set");
    for (int i = 0; args[i]; i++)
        argv[k++] = strcmp(args[i], "CHECK") == 0 ? getenv("ELASTIC_CHECK") : args[i];
    argv[k] = NULL;
    snprintf(path, sizeof(path), "%s/out", dir);
    code = child_wait(child_start(path, argv), 90, NULL);
    child_read(path, out, size);
    return code;
}

static char out[1 << 16];

Test(elastic, grows_from_two_to_four, .init = setup, .timeout = 120)
{
    const char *a[] = {"-n", "2", "--elastic", "2:4", "--join", "2", "CHECK", "6", NULL};
    int code = run(out, sizeof(out), a);

    cr_assert_eq(code, 0, "exit %d:\n%s", code, out);
    cr_assert_eq(count(out, "FINAL size 4 state ok"), 4, "%s", out);
    cr_assert_eq(count(out, "JOINED"), 2, "%s", out);
}

static void lose_and_replace(const char *nodes)
{
    const char *a[] = {"-n", "4",     "--nodes", nodes, "--elastic", "3:4", "--restart",
                       "1",  "CHECK", "8",       "2",   "2",         NULL};
    int code = run(out, sizeof(out), a);

    cr_assert_eq(code, 0, "exit %d:\n%s", code, out);
    cr_assert(strstr(out, "3 rank(s) go on without rank 2"), "%s", out);
    cr_assert(strstr(out, "started [4] in its place"), "%s", out);
    cr_assert_eq(count(out, "SHRUNK 4 -> 3"), 3, "%s", out);
    cr_assert_eq(count(out, "GREW 3 -> 4"), 3, "%s", out);
    cr_assert_eq(count(out, "FINAL size 4 state ok"), 4, "%s", out);
}

Test(elastic, loses_a_rank_and_takes_a_replacement, .init = setup, .timeout = 120)
{
    lose_and_replace("1");
}

Test(elastic, loses_a_rank_and_takes_a_replacement_across_nodes, .init = setup, .timeout = 120)
{
    lose_and_replace("2");
}

Test(elastic, below_min_stops_the_job, .init = setup, .timeout = 120)
{
    const char *a[] = {"-n", "3", "--elastic", "3:3", "CHECK", "6", "1", "1", NULL};
    int code = run(out, sizeof(out), a);

    cr_assert_eq(code, 137, "exit %d, not the killed rank's 137:\n%s", code, out);
    cr_assert(strstr(out, "fewer than --elastic's MIN 3"), "%s", out);
}

Test(elastic, newcomer_never_admitted_is_stopped_when_the_job_ends, .init = setup, .timeout = 120)
{
    const char *a[] = {"-n", "2", "--elastic", "2:3", "--join", "1", "CHECK", "0", NULL};
    int code = run(out, sizeof(out), a);

    cr_assert_eq(code, 0, "exit %d:\n%s", code, out);
    cr_assert(strstr(out, "stopping 1 newcomer(s) that no member admitted"), "%s", out);
}

Test(elastic, options_are_checked, .init = setup, .timeout = 60)
{
    const char *bad[][10] = {
        {"-n", "2", "--join", "1", "CHECK", "1", NULL},
        {"-n", "2", "--elastic", "3:4", "CHECK", "1", NULL},
        {"-n", "2", "--elastic", "2:3", "--join", "2", "CHECK", "1", NULL},
        {"-n", "2", "--elastic", "2", "CHECK", "1", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int code = run(out, sizeof(out), bad[i]);
        cr_assert_eq(code, 2, "case %zu: exit %d:\n%s", i, code, out);
        cr_assert(strstr(out, "--join") || strstr(out, "--elastic"), "case %zu: %s", i, out);
    }
}

/* Two launchers posing as two hosts (--nnodes 2 --master on loopback, TUTTI_SECRET alike):
 * rank 3, on the second, kills itself at epoch 2; its launcher starts a replacement, which
 * finds the join service host 0's launcher serves beside MASTER_ADDR. */
Test(elastic, replacement_joins_across_hosts_through_master_addr, .init = setup, .timeout = 120)
{
    char master[64], path[2][128];
    pid_t l[2];
    int code[2];

    snprintf(master, sizeof(master), "127.0.0.1:%d", free_port());
    setenv("TUTTI_SECRET", "elastic-test", 1);
    for (int h = 0; h < 2; h++) {
        const char *argv[] = {getenv("TUTTI_RUN"),
                              "-n",
                              "4",
                              "--nnodes",
                              "2",
                              "--node-rank",
                              h ? "1" : "0",
                              "--master",
                              master,
                              "--elastic",
                              "1:2",
                              "--restart",
                              "1",
                              getenv("ELASTIC_CHECK"),
                              "8",
                              "3",
                              "2",
                              NULL};
        snprintf(path[h], sizeof(path[h]), "%s/out.%d", dir, h);
        setenv("TUTTI_HOSTID", h ? "hostB" : "hostA", 1); /* the launcher's ranks inherit it */
        l[h] = child_start(path[h], argv);
    }
    unsetenv("TUTTI_HOSTID");
    unsetenv("TUTTI_SECRET");
    for (int h = 0; h < 2; h++)
        code[h] = child_wait(l[h], 90, NULL);
    child_read(path[0], out, sizeof(out) / 2);
    child_read(path[1], out + sizeof(out) / 2, sizeof(out) / 2);
    for (int h = 0; h < 2; h++)
        cr_assert_eq(code[h], 0, "launcher %d exited %d:\n%s\n%s", h, code[h], out,
                     out + sizeof(out) / 2);
    cr_assert(strstr(out + sizeof(out) / 2, "started [2] in its place"), "%s",
              out + sizeof(out) / 2);
    cr_assert_eq(count(out, "FINAL size 4 state ok") +
                     count(out + sizeof(out) / 2, "FINAL size 4 state ok"),
                 4, "%s\n%s", out, out + sizeof(out) / 2);
}
