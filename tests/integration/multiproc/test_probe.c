/*
 * test_probe.c -- the hardening probe, bounded in time: what a careless user and an attacker
 * on the same network try, each case a process tree started here (loopback only).
 *
 *   collectives        probe_check's cases (silent wrong results, refusals on one rank,
 *                      mismatched calls, TUTTI_CHECK_COLL's batches) on 2 and 3 ranks
 *   flood              400 idle connections, garbage and wrong-secret hellos at a real
 *                      rendezvous while its ranks join: the job runs, rank 0 says what it
 *                      turned away
 *   wrong_secret       a rank with another TUTTI_SECRET: told "wrong secret" at once; the
 *                      others fail at TUTTI_TIMEOUT naming the missing rank and the refusal
 *   hand_started       by hand with a served TUTTI_ID: a duplicate rank, a rank of another
 *                      size, a rank with a damaged id: each is told why, the healthy ranks
 *                      name it when the rendezvous gives up
 *   missing_host       tutti-run --nnodes 2 with the second host never started: its ranks
 *                      are named by number when the rendezvous times out
 *   stopped_rank       a rank stopped (SIGSTOP) in a loop of all-reduces, TUTTI_TIMEOUT=5:
 *                      the others fail within seconds of the timeout, naming it
 *   knobs              every knob of `tutti-run --env` with nan, inf, -1, 0, a huge number and
 *                      garbage through tutti-run: the job runs, or ends at once naming the
 *                      knob; never a hang
 */
#include "../../support/child.h"
#include "../../support/free_port.h"
#include "../../support/scratch_dir.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static char dir[64];

#define now child_now

static void setup(void)
{
    const char *d = scratch_dir("tutti-probe");

    cr_assert_not_null(d, "cannot make a directory under /tmp");
    snprintf(dir, sizeof(dir), "%s", d);
}

/* Start `words` (VAR=value words, then the program and its arguments; NULL-terminated) under
 * env(1), output to DIR/out.NAME. */
static pid_t start(const char *name, const char *const *words)
{
    char out[128];
    const char *argv[48] = {"/usr/bin/env"};
    int k = 1;
    pid_t pid;

    snprintf(out, sizeof(out), "%s/out.%s", dir, name);
    for (int i = 0; words[i] && k < 47; i++)
        argv[k++] = words[i];
    argv[k] = NULL;
    pid = child_start(out, argv);
    cr_assert(pid >= 0);
    return pid;
}

/* Wait for pid at most `limit` seconds (then kill it and fail); its exit code (128 + signal). */
static int finish(pid_t pid, double limit, const char *what)
{
    int code = child_wait(pid, limit, NULL);

    cr_assert_neq(code, -1, "%s: still running after %.0f s", what, limit);
    return code;
}

static const char *output(const char *name)
{
    static char buf[65536];
    char path[128];

    snprintf(path, sizeof(path), "%s/out.%s", dir, name);
    return child_read(path, buf, sizeof(buf));
}

/* ---- collectives ---- */

static void case_under_run(int n, const char *mode, const char *knob)
{
    char ns[8], what[96];
    const char *w[] = {"TUTTI_TIMEOUT=60",
                       knob ? knob : "TUTTI_CHECK_COLL=0",
                       getenv("TUTTI_RUN"),
                       "-n",
                       ns,
                       getenv("PROBE_CHECK"),
                       mode,
                       NULL};
    double t0 = now();

    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(what, sizeof(what), "%s on %d ranks%s%s", mode, n, knob ? " with " : "",
             knob ? knob : "");
    int code = finish(start("run", w), 30, what);
    cr_assert_eq(code, 0, "%s: exit %d:\n%s", what, code, output("run"));
    cr_assert_lt(now() - t0, 20, "%s took %.1f s", what, now() - t0);
}

Test(probe, collectives, .init = setup, .timeout = 300)
{
    static const char *modes[] = {"reduce-null-root",
                                  "reduce-overlap-root",
                                  "bcast-null-root",
                                  "overlap-all",
                                  "gather-null-root",
                                  "dtype",
                                  "op",
                                  "kind"};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
        for (int n = 2; n <= 3; n++)
            case_under_run(n, modes[m], NULL);
    case_under_run(3, "p2p-then-all", "TUTTI_CHECK_COLL=1");
    case_under_run(4, "p2p-then-all", "TUTTI_CHECK_COLL=1");
    case_under_run(3, "gather-count", "TUTTI_CHECK_COLL=1");
    case_under_run(4, "gather-count", "TUTTI_CHECK_COLL=1");
}

/* ---- the rendezvous ---- */

/* Rank r of n started by hand with a MASTER_ADDR rendezvous on port, mode of probe_check,
 * extra VAR=value words before the program. */
static pid_t start_rank(int r, int n, int port, const char *mode, const char *const *extra)
{
    static char vr[8][32], vn[8][32], vp[8][32], vt[8][48], name[8][16];
    const char *w[24];
    int k = 0;

    snprintf(vr[r], sizeof(vr[r]), "RANK=%d", r);
    snprintf(vn[r], sizeof(vn[r]), "WORLD_SIZE=%d", n);
    snprintf(vp[r], sizeof(vp[r]), "MASTER_PORT=%d", port);
    snprintf(vt[r], sizeof(vt[r]), "TUTTI_JOB_TAG=probe%d", (int)getpid());
    snprintf(name[r], sizeof(name[r]), "%d", r);
    w[k++] = vr[r];
    w[k++] = vn[r];
    w[k++] = vp[r];
    w[k++] = vt[r];
    w[k++] = "MASTER_ADDR=127.0.0.1";
    w[k++] = "TUTTI_SOCKET_IFNAME==lo";
    for (int i = 0; extra && extra[i]; i++)
        w[k++] = extra[i];
    w[k++] = getenv("PROBE_CHECK");
    w[k++] = mode;
    w[k] = NULL;
    return start(name[r], w);
}

static int dial(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    a.sin_port = htons((unsigned short)port);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A tutti rendezvous hello (64 bytes: "TTBH", a 32-byte secret, rank, rank count, address)
 * with a secret of `fill` bytes: a stranger's guess. */
static void wrong_hello(int fd, unsigned char fill, int rank, int n)
{
    unsigned char h[64] = {'T', 'T', 'B', 'H'};

    memset(h + 4, fill, 32);
    h[36 + 3] = (unsigned char)rank; /* big-endian 32-bit fields */
    h[40 + 3] = (unsigned char)n;
    if (write(fd, h, sizeof(h)) < 0)
        cr_log_warn("a wrong hello was not sent: %s", strerror(errno));
}

Test(probe, flood, .init = setup, .timeout = 120)
{
    enum { IDLE = 400, GARBAGE = 60, WRONG = 30 };
    static int fds[IDLE + GARBAGE + WRONG];
    struct rlimit rl;
    int port = free_port(), nf = 0, fd;
    pid_t p[3];
    double t0;

    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2048 && rl.rlim_max >= 2048) {
        rl.rlim_cur = 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    p[0] = start_rank(0, 3, port, "ok", NULL);
    for (t0 = now(); (fd = dial(port)) < 0; usleep(2000))
        cr_assert(now() - t0 < 20, "rank 0 never served the rendezvous:\n%s", output("0"));
    fds[nf++] = fd;
    /* Strangers: silent, garbage, wrong secrets. */
    while (nf < IDLE)
        if ((fds[nf] = dial(port)) >= 0)
            nf++;
    for (int i = 0; i < GARBAGE; i++)
        if ((fd = dial(port)) >= 0) {
            if (write(fd, "GET / HTTP/1.0\r\n\r\n", 18) < 0)
                cr_log_warn("garbage not sent");
            fds[nf++] = fd;
        }
    for (int i = 0; i < WRONG; i++)
        if ((fd = dial(port)) >= 0) {
            wrong_hello(fd, (unsigned char)(0x11 + i), i % 3, 3);
            fds[nf++] = fd;
        }
    /* The real ranks arrive in the middle of it. */
    t0 = now();
    p[1] = start_rank(1, 3, port, "ok", NULL);
    p[2] = start_rank(2, 3, port, "ok", NULL);
    for (int i = 0; i < 100; i++) /* and more strangers while they join */
        if ((fd = dial(port)) >= 0)
            close(fd);
    for (int r = 0; r < 3; r++) {
        char name[8];
        snprintf(name, sizeof(name), "%d", r);
        int code = finish(p[r], 60, "a rank of the flooded job");
        cr_assert_eq(code, 0, "rank %d exited %d:\n%s", r, code, output(name));
    }
    printf("flood: %d strangers; the job formed and ran in %.2f s\n", nf + 100, now() - t0);
    cr_assert(strstr(output("0"), "turned away"), "rank 0 said nothing of the strangers:\n%s",
              output("0"));
    for (int i = 0; i < nf; i++)
        close(fds[i]);
}

Test(probe, wrong_secret, .init = setup, .timeout = 60)
{
    const char *good[] = {"TUTTI_SECRET=right-one", "TUTTI_TIMEOUT=4", NULL};
    const char *bad[] = {"TUTTI_SECRET=wrong-one", "TUTTI_TIMEOUT=4", NULL};
    int port = free_port(), code;
    pid_t p[3];
    double t0 = now(), bad_at, good_at;

    p[0] = start_rank(0, 3, port, "ok", good);
    p[1] = start_rank(1, 3, port, "ok", good);
    usleep(300000);
    p[2] = start_rank(2, 3, port, "ok", bad);
    code = finish(p[2], 20, "the wrong-secret rank");
    bad_at = now() - t0;
    cr_assert_neq(code, 0);
    cr_assert(strstr(output("2"), "wrong secret"), "the refused rank was not told:\n%s",
              output("2"));
    for (int r = 0; r < 2; r++) {
        char name[4];
        snprintf(name, sizeof(name), "%d", r);
        cr_assert_neq(finish(p[r], 20, "a healthy rank"), 0);
        cr_assert(strstr(output(name), "missing ranks: 2") &&
                      strstr(output(name), "hello(s) with a wrong secret"),
                  "rank %d does not name the missing rank and the refusal:\n%s", r, output(name));
    }
    good_at = now() - t0;
    printf("wrong secret: the refused rank knew in %.2f s, the others in %.2f s (TUTTI_TIMEOUT "
           "4)\n",
           bad_at, good_at);
    cr_assert_lt(bad_at, 3.0, "the wrong-secret rank took %.1f s to learn it", bad_at);
    cr_assert_lt(good_at, 12.0);
}

/* The id served by a `probe_check serve` process (output: out.NAME): TUTTI_ID=... into out. */
static pid_t serve(const char *name, char *out, size_t size)
{
    const char *w[] = {
        "TUTTI_SOCKET_IFNAME==lo", "TUTTI_TIMEOUT=5", getenv("PROBE_CHECK"), "serve", "12", NULL};
    pid_t p = start(name, w);
    double t0 = now();
    const char *s;

    while (!(s = strstr(output(name), "ID "))) {
        cr_assert(now() - t0 < 10, "no id served:\n%s", output(name));
        usleep(5000);
    }
    snprintf(out, size, "TUTTI_ID=%.*s", (int)strcspn(s + 3, "\n"), s + 3);
    return p;
}

/* Ranks started by hand with TUTTI_ID: rank `r` of n, its name for output. */
static pid_t id_rank(const char *name, const char *id, int r, int n)
{
    static char vr[8][32], vn[8][32];
    static int k;
    const char *w[] = {
        id,   vr[k], vn[k], "TUTTI_TIMEOUT=5", "TUTTI_SOCKET_IFNAME==lo", getenv("PROBE_CHECK"),
        "ok", NULL};

    snprintf(vr[k], sizeof(vr[k]), "TUTTI_RANK=%d", r);
    snprintf(vn[k], sizeof(vn[k]), "TUTTI_WORLD_SIZE=%d", n);
    k = (k + 1) % 8;
    return start(name, w);
}

Test(probe, hand_started, .init = setup, .timeout = 120)
{
    static const struct {
        const char *what, *told, *named;
    } cases[] = {
        {"duplicate rank", "has already joined", "rank 1 has already joined"},
        {"another size", "nranks mismatch", "nranks mismatch"},
        {"a damaged id", "wrong secret", "hello(s) with a wrong secret"},
    };
    for (int c = 0; c < 3; c++) {
        char id[320], bad[320], name[16];
        pid_t s, p0, p1, px;
        snprintf(name, sizeof(name), "serve%d", c);
        s = serve(name, id, sizeof(id));
        snprintf(bad, sizeof(bad), "%s", id);
        if (c == 2) { /* a digit of the secret changed (its bytes 28-59: after the magic,
                       * version and address): the right rendezvous, another secret */
            char *d = strchr(bad, ':') + 1 + 2 * 40;
            *d = *d == '0' ? '1' : '0';
        }
        p0 = id_rank("0", id, 0, 3);
        p1 = id_rank("1", id, 1, 3);
        usleep(300000);
        px = id_rank("x", bad, c == 0 ? 1 : 2, c == 1 ? 4 : 3);
        cr_assert_neq(finish(px, 20, cases[c].what), 0);
        cr_assert(strstr(output("x"), cases[c].told), "%s: the rank was not told '%s':\n%s",
                  cases[c].what, cases[c].told, output("x"));
        for (int r = 0; r < 2; r++) {
            const char *name = r ? "1" : "0";
            cr_assert_neq(finish(r ? p1 : p0, 20, "a healthy rank"), 0);
            cr_assert(strstr(output(name), "missing ranks: 2") &&
                          strstr(output(name), cases[c].named),
                      "%s: rank %d does not name it:\n%s", cases[c].what, r, output(name));
        }
        kill(s, SIGKILL);
        waitpid(s, NULL, 0);
    }
}

Test(probe, missing_host, .init = setup, .timeout = 60)
{
    char master[32];
    const char *w[] = {"TUTTI_TIMEOUT=3",
                       "TUTTI_SECRET=probe-missing-host",
                       getenv("TUTTI_RUN"),
                       "-n",
                       "4",
                       "--nnodes",
                       "2",
                       "--node-rank",
                       "0",
                       "--master",
                       master,
                       getenv("PROBE_CHECK"),
                       "ok",
                       NULL};
    double t0 = now();

    snprintf(master, sizeof(master), "127.0.0.1:%d", free_port());
    cr_assert_neq(finish(start("run", w), 30, "a host whose peer never came"), 0);
    printf("missing host: tutti-run ended in %.2f s (TUTTI_TIMEOUT 3)\n", now() - t0);
    cr_assert(strstr(output("run"), "[0] ") && strstr(output("run"), "missing ranks: 2 3"),
              "the missing ranks are not named:\n%s", output("run"));
    cr_assert_null(strstr(output("run"), "joined the rendezvous and then closed"),
                   "a healthy rank is blamed:\n%s", output("run"));
    cr_assert_lt(now() - t0, 12.0);
}

Test(probe, stopped_rank, .init = setup, .timeout = 60)
{
    const char *extra[] = {"TUTTI_TIMEOUT=5", NULL};
    int port = free_port();
    pid_t p[3];
    double t0, took[2];

    for (int r = 0; r < 3; r++)
        p[r] = start_rank(r, 3, port, "loop", extra);
    for (t0 = now(); !strstr(output("2"), "looping"); usleep(5000))
        cr_assert(now() - t0 < 20, "rank 2 never started:\n%s", output("2"));
    usleep(200000);
    kill(p[2], SIGSTOP);
    t0 = now();
    for (int r = 0; r < 2; r++) {
        const char *name = r ? "1" : "0";
        int code = finish(p[r], 30, "a rank beside a stopped one");
        took[r] = now() - t0;
        cr_assert_eq(code, 0, "rank %d:\n%s", r, output(name));
        cr_assert(strstr(output(name), "rank 2") || strstr(output(name), "had failed"),
                  "rank %d does not name the stopped rank or the rank that failed first:\n%s", r,
                  output(name));
    }
    kill(p[2], SIGKILL);
    waitpid(p[2], NULL, 0);
    printf("stopped rank: the others failed %.2f and %.2f s after the stop (TUTTI_TIMEOUT 5)\n",
           took[0], took[1]);
    cr_assert(took[0] < 12 && took[1] < 12);
}

/* ---- knobs ---- */

Test(probe, knobs, .init = setup, .timeout = 600)
{
    static const char *values[] = {"nan", "inf", "-1", "0", "99999999999999999999", "x!2"};
    char cmd[4200], line[512];
    FILE *env;
    int knobs = 0, refused = 0, ran = 0;
    double t0 = now();

    char run[4096], probe[4096];
    cr_assert(realpath(getenv("TUTTI_RUN"), run) && realpath(getenv("PROBE_CHECK"), probe));
    cr_assert_eq(chdir(dir), 0); /* TUTTI_TRACE=nan and the like write files here */
    snprintf(cmd, sizeof(cmd), "'%s' --env", run);
    env = popen(cmd, "r");
    cr_assert_not_null(env);
    while (fgets(line, sizeof(line), env)) {
        char knob[64];
        if (sscanf(line, "%63s", knob) != 1 || strncmp(knob, "TUTTI_", 6) != 0)
            continue;
        knobs++;
        for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
            char set[128];
            snprintf(set, sizeof(set), "%s=%s", knob, values[v]);
            const char *w[] = {"TUTTI_TIMEOUT=20", set, run, "-n", "2", probe, "ok", NULL};
            double t = now();
            int code = finish(start("knob", w), 60, set);
            if (code == 0) {
                ran++;
                continue;
            }
            refused++;
            cr_assert(strstr(output("knob"), knob), "%s: exit %d without naming %s:\n%s", set, code,
                      knob, output("knob"));
            cr_assert_lt(now() - t, 10, "%s: refused only after %.1f s", set, now() - t);
        }
    }
    pclose(env);
    printf("knobs: %d knobs x 6 bad values: %d jobs refused naming the knob, %d ran (a value "
           "their knob takes), in %.1f s\n",
           knobs, refused, ran, now() - t0);
    cr_assert_geq(knobs, 38);
    cr_assert_geq(refused, 150);
}
