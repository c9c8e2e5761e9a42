/*
 * test_env.c -- tutti_comm_init_env under the variables other launchers set: torchrun
 * (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Slurm and Open MPI on one host (loopback
 * rendezvous from the job id); and the errors that name a missing or malformed variable.
 * Each rank is a process started here with exactly those variables (no tutti-run).
 */
#include "../../support/child.h"
#include "../../support/scratch_dir.h"
#include "../../support/free_port.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

/* Start n ranks of rank_helper; env[r] is rank r's NULL-terminated environment. */
static void run_ranks(int n, char *env[][12], int *codes)
{
    pid_t pids[8];

    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        cr_assert(pids[r] >= 0);
        if (pids[r] == 0) {
            char out[128];
            snprintf(out, sizeof(out), "%s/out.%d", dir, r);
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 1);
            dup2(fd, 2);
            execle(getenv("RANK_HELPER"), "rank_helper", dir, "ok", (char *)NULL, env[r]);
            _exit(126);
        }
    }
    for (int r = 0; r < n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

static const char *output(int r)
{
    static char buf[4096];
    char path[128];

    snprintf(path, sizeof(path), "%s/out.%d", dir, r);
    return child_read(path, buf, sizeof(buf));
}

static void expect_init_error(char **e, const char *word);

static void setup(void)
{
    const char *d = scratch_dir("tutti-env-test");

    cr_assert_not_null(d, "cannot make a directory under /tmp");
    snprintf(dir, sizeof(dir), "%s", d);
}

/* One formatted variable; the strings live as long as the test (no allocation to leak). */
static char *fmt(const char *f, int v)
{
    static char pool[32][64];
    static int used;
    char *s;

    cr_assert(used < 32);
    s = pool[used++];
    cr_assert(snprintf(s, sizeof(pool[0]), f, v) < (int)sizeof(pool[0]));
    return s;
}

static void expect_ok(int n, char *env[][12])
{
    int codes[8];

    run_ranks(n, env, codes);
    for (int r = 0; r < n; r++) {
        char want[64];
        cr_assert_eq(codes[r], 0, "rank %d exited %d: %s", r, codes[r], output(r));
        snprintf(want, sizeof(want), "rank %d ready (local rank %d, %d ranks)", r, r, n);
        cr_assert(strstr(output(r), want), "rank %d said: %s", r, output(r));
    }
}

Test(env, torchrun_variables, .init = setup, .timeout = 60)
{
    char *env[3][12];
    int port = free_port();

    for (int r = 0; r < 3; r++) {
        char **e = env[r];
        int k = 0;
        e[k++] = fmt("RANK=%d", r);
        e[k++] = "WORLD_SIZE=3";
        e[k++] = fmt("LOCAL_RANK=%d", r);
        e[k++] = "MASTER_ADDR=127.0.0.1";
        e[k++] = fmt("MASTER_PORT=%d", port);
        e[k++] = "TUTTI_TIMEOUT=30";
        e[k] = NULL;
    }
    expect_ok(3, env);
}

/* This machine's first IPv4 address that is up and not loopback, into buf; 0 if none. */
static int network_address(char *buf, size_t size)
{
    struct ifaddrs *ifs;
    int found = 0;

    if (getifaddrs(&ifs) != 0)
        return 0;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK))
            found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
                              (socklen_t)size) != NULL;
    freeifaddrs(ifs);
    return found;
}

/* MASTER_ADDR on the network without TUTTI_SECRET: the derived secret is no secret, and each
 * host's first rank says so (only it); with TUTTI_SECRET, nobody does. */
Test(env, a_derived_secret_on_the_network_is_warned_about, .init = setup, .timeout = 60)
{
    static char master[64];
    char *env[2][12], addr[INET_ADDRSTRLEN];

    if (!network_address(addr, sizeof(addr)))
        cr_skip_test("no IPv4 interface but loopback here");
    snprintf(master, sizeof(master), "MASTER_ADDR=%s", addr);
    for (int with = 0; with < 2; with++) {
        int port = free_port();
        for (int r = 0; r < 2; r++) {
            char **e = env[r];
            int k = 0;
            e[k++] = fmt("RANK=%d", r);
            e[k++] = "WORLD_SIZE=2";
            e[k++] = fmt("LOCAL_RANK=%d", r);
            e[k++] = master;
            e[k++] = fmt("MASTER_PORT=%d", port);
            e[k++] = "TUTTI_TIMEOUT=30";
            if (with)
                e[k++] = "TUTTI_SECRET=s3cr3t-for-the-test";
            e[k] = NULL;
        }
        expect_ok(2, env);
        cr_assert_eq(strstr(output(0), "TUTTI_SECRET is not set") != NULL, !with, "rank 0: %s",
                     output(0));
        cr_assert_null(strstr(output(1), "TUTTI_SECRET is not set"), "rank 1: %s", output(1));
    }
}

Test(env, slurm_on_one_node, .init = setup, .timeout = 60)
{
    char *env[2][12];
    int job = getpid() * 7 + 13;

    for (int r = 0; r < 2; r++) {
        char **e = env[r];
        int k = 0;
        e[k++] = fmt("SLURM_PROCID=%d", r);
        e[k++] = "SLURM_NTASKS=2";
        e[k++] = fmt("SLURM_LOCALID=%d", r);
        e[k++] = "SLURM_NNODES=1";
        e[k++] = fmt("SLURM_JOB_ID=%d", job);
        e[k++] = "TUTTI_TIMEOUT=30";
        e[k++] = "TUTTI_DEBUG=INFO";
        e[k] = NULL;
    }
    expect_ok(2, env);

    /* The port is below the ephemeral range, where no connection's local port can hold it. */
    const char *at = strstr(output(0), "loopback rendezvous on port ");
    int port = 0, lo = 32768, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    cr_assert(at && sscanf(at, "loopback rendezvous on port %d", &port) == 1, "%s", output(0));
    cr_assert(f && fscanf(f, "%d %d", &lo, &hi) == 2);
    fclose(f);
    cr_assert(port >= 1024 && port < lo, "port %d is not below the ephemeral range %d..%d", port,
              lo, hi);

    /* Someone else listening there: rank 0 says so and names the way out. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* past rank 0's TIME_WAIT */
    a.sin_port = htons((unsigned short)port);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 1) == 0);
    expect_init_error(env[0], "set MASTER_ADDR and MASTER_PORT");
    close(fd);
}

/* srun across nodes: the rendezvous is on the step's first node, found in its node list. */
Test(env, slurm_across_nodes, .init = setup, .timeout = 60)
{
    char *env[3][12];
    int job = getpid() * 5 + 3, port = 0;

    for (int r = 0; r < 3; r++) {
        char **e = env[r];
        int k = 0;
        e[k++] = fmt("SLURM_PROCID=%d", r);
        e[k++] = "SLURM_NTASKS=3";
        e[k++] = fmt("SLURM_LOCALID=%d", r);
        e[k++] = "SLURM_NNODES=2";
        e[k++] = "SLURM_STEP_NODELIST=127.0.0.[1-2]"; /* the step's list wins over the job's */
        e[k++] = "SLURM_JOB_NODELIST=192.0.2.[1-2]";
        e[k++] = fmt("SLURM_JOB_ID=%d", job);
        e[k++] = "SLURM_STEP_ID=0";
        e[k++] = "TUTTI_TIMEOUT=30";
        e[k++] = "TUTTI_DEBUG=INFO";
        e[k] = NULL;
    }
    expect_ok(3, env);
    const char *at = strstr(output(0), "rendezvous at 127.0.0.1:");
    cr_assert(at && sscanf(at, "rendezvous at 127.0.0.1:%d", &port) == 1, "%s", output(0));
    cr_assert(port >= 22768 && port < 32768, "port %d", port);

    /* Rank 0 not on the first node: its error says where it should be and the way out. */
    env[0][4] = "SLURM_STEP_NODELIST=192.0.2.[1-2]"; /* TEST-NET-1: bind fails locally */
    expect_init_error(env[0], "first node of SLURM_STEP_NODELIST");
    expect_init_error(env[0], "MASTER_PORT");
    env[0][4] = "SLURM_STEP_NODELIST=node[1-";
    expect_init_error(env[0], "SLURM_STEP_NODELIST='node[1-'");
}

Test(env, open_mpi_on_one_host, .init = setup, .timeout = 60)
{
    char *env[2][12];
    int job = getpid() * 11 + 5;

    for (int r = 0; r < 2; r++) {
        char **e = env[r];
        int k = 0;
        e[k++] = fmt("OMPI_COMM_WORLD_RANK=%d", r);
        e[k++] = "OMPI_COMM_WORLD_SIZE=2";
        e[k++] = fmt("OMPI_COMM_WORLD_LOCAL_RANK=%d", r);
        e[k++] = "OMPI_COMM_WORLD_LOCAL_SIZE=2";
        e[k++] = fmt("OMPI_MCA_ess_base_jobid=%d", job);
        e[k++] = "TUTTI_TIMEOUT=30";
        e[k] = NULL;
    }
    expect_ok(2, env);
}

/* One process whose init must fail with a message naming `word`. */
static void expect_init_error(char **e, const char *word)
{
    char *env[1][12];
    int code;

    memcpy(env[0], e, 12 * sizeof(char *));
    run_ranks(1, env, &code);
    cr_assert_eq(code, 1, "exit %d: %s", code, output(0));
    cr_assert(strstr(output(0), word), "message lacks '%s': %s", word, output(0));
}

Test(env, missing_and_malformed_variables_are_named, .init = setup, .timeout = 60)
{
    char *a[12] = {"RANK=0", NULL};
    expect_init_error(a, "WORLD_SIZE is not");
    char *b[12] = {NULL};
    expect_init_error(b, "no rank in the environment");
    char *c[12] = {"RANK=0", "WORLD_SIZE=two", NULL};
    expect_init_error(c, "WORLD_SIZE='two'");
    char *d[12] = {"RANK=2", "WORLD_SIZE=2", NULL};
    expect_init_error(d, "out of range");
    char *f[12] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", NULL};
    expect_init_error(f, "MASTER_PORT is not");
    char *g[12] = {"RANK=0", "WORLD_SIZE=2", NULL};
    expect_init_error(g, "no rendezvous");
    char *h[12] = {"TUTTI_RANK=0", "TUTTI_WORLD_SIZE=2", "TUTTI_ID=tutti1:zz", NULL};
    expect_init_error(h, "TUTTI_ID");
    char *i[12] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=70000", NULL};
    expect_init_error(i, "MASTER_PORT=70000");
    /* The device path's knobs are checked on every machine, GPU or not. */
    char *j[12] = {"RANK=0",
                   "WORLD_SIZE=1",
                   "MASTER_ADDR=127.0.0.1",
                   fmt("MASTER_PORT=%d", free_port()),
                   "TUTTI_CUDA_P2P_MIN=lots",
                   NULL};
    expect_init_error(j, "TUTTI_CUDA_P2P_MIN='lots'");
    char *k[12] = {"RANK=0",
                   "WORLD_SIZE=1",
                   "MASTER_ADDR=127.0.0.1",
                   fmt("MASTER_PORT=%d", free_port()),
                   "TUTTI_CUDA_BUFFSIZE=1K",
                   NULL};
    expect_init_error(k, "TUTTI_CUDA_BUFFSIZE='1K'");
}
