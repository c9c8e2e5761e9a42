/*
 * tutti-run -- start N local ranks of a tutti program.
 *
 *   tutti-run -n N [--nodes K] [--bind core|none] [--no-prefix] [--grace S] [--] program
 *             [args...]
 *   tutti-run -n N --nnodes H --node-rank I --master ADDRESS:PORT [options] program [args...]
 *   tutti-run -n N --elastic MIN:MAX [--join K] [--restart K] [options] program [args...]
 *   tutti-run --env
 *
 * Each rank gets TUTTI_ID, TUTTI_RANK, TUTTI_WORLD_SIZE and TUTTI_LOCAL_RANK (and torchrun's
 * RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, with MASTER_ADDR/MASTER_PORT a free loopback
 * port for a PyTorch program's store, so init_process_group works unchanged); the rendezvous
 * runs inside tutti-run. Output lines are prefixed "[rank] ". When a rank fails (non-zero
 * exit or a signal), the others get SIGTERM, then SIGKILL after the grace period, and
 * tutti-run exits with the failed rank's status (128 + signal for a signal). --nodes K makes
 * the ranks pose as K hosts (consecutive blocks of ranks, TUTTI_HOSTID "nodeI"), so shared
 * memory joins ranks of one block and the network joins blocks. SIGINT, SIGTERM
 * and SIGHUP are forwarded to every rank. Ranks run in their own process groups and die with
 * tutti-run (PR_SET_PDEATHSIG), so nothing is left behind; shared-memory names a killed rank
 * did not get to remove are removed at the end. --bind core pins rank r to the r-th CPU this
 * launcher may use (modulo their count; threads of a rank share its core); the default,
 * none, leaves placement to the kernel.
 *
 * Several hosts (torchrun's way): the same command on each host but --node-rank; host I runs
 * ranks [ceil(I*N/H), ceil((I+1)*N/H)) with TUTTI_RANK, TUTTI_LOCAL_RANK, TUTTI_WORLD_SIZE and
 * MASTER_ADDR / MASTER_PORT (no TUTTI_ID): rank 0 serves the rendezvous at --master, which
 * must be an address of host 0, and the secret comes from TUTTI_SECRET. Output lines carry
 * global ranks. A rank that fails stops its own host's ranks as above; the other hosts' ranks
 * see their connections to it fail and exit, which stops those launchers. Sockets use the
 * interface TUTTI_SOCKET_IFNAME names, loopback only when --master is a loopback address.
 *
 * Elastic: a failed rank stops nothing while MIN ranks are left (with --nnodes, of this host's);
 * newcomers (--join) and replacements (--restart) join at the ranks' next tutti_comm_grow
 * (run_elastic.c).
 */
#include "run_elastic.h"
#include "run_env.h"
#include "run_output.h"
#include "tutti.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4096

struct rank {
    pid_t pid;
    int done;
    int joining; /* a newcomer (--join, --restart): TUTTI_JOINING=1 */
    int node;    /* --nodes: the host it poses as */
    int status;  /* wait status */
    struct stream s[2];
};

static struct rank *ranks;
static int nranks, nnodes = 1, prefix = 1;
static int nslots; /* ranks started so far: nlocal, then newcomers (--elastic) */
static struct run_elastic elastic;
/* --nnodes H --node-rank I: this host runs ranks [lfirst, lfirst + nlocal) of nranks; ranks[]
 * is indexed by the local rank. One host: all of them. */
static int nhosts = 1, host_rank = -1, lfirst, nlocal;
static int ncpus, *cpus; /* --bind core: the CPUs we may use, in order; 0: no binding */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tutti-run -n N [--nodes K] [--bind core|none] [--no-prefix] [--grace SECONDS] "
        "[--elastic MIN:MAX [--join K] [--restart K]] [--] program [args...]\n"
        "       tutti-run -n N --nnodes H --node-rank I --master ADDRESS:PORT [options] "
        "program [args...]\n"
        "       tutti-run --env     print every TUTTI_* variable and exit\n"
        "Starts N ranks of program on this host, wired up through TUTTI_ID.\n"
        "--nodes K: the ranks pose as K hosts (TUTTI_HOSTID), blocks of consecutive ranks.\n"
        "--nnodes H --node-rank I: N ranks on H hosts, one tutti-run on each (the same command,\n"
        "  but I); this host runs host I's block of consecutive ranks. Rank 0, on host 0, serves\n"
        "  the rendezvous at --master (an address of host 0); set TUTTI_SECRET alike on all.\n"
        "--bind core: rank r runs on the r-th CPU tutti-run may use (modulo their count).\n"
        "--elastic MIN:MAX: a failed rank stops nothing while MIN ranks are left; --join K\n"
        "  starts K newcomers, --restart K up to K replacements of failed ranks: they join at\n"
        "  the ranks' next tutti_comm_grow, up to MAX ranks.\n");
}

static void signal_all(int sig)
{
    for (int r = 0; r < nslots; r++)
        if (ranks[r].pid > 0 && !ranks[r].done)
            kill(-ranks[r].pid, sig); /* its process group: the rank and its children */
}

/* Node (or host) k of K holds ranks [ceil(k*n/K), ceil((k+1)*n/K)). */
static int block_first(int k, int of)
{
    return run_block_first(k, of, nranks);
}

/* The environment of local rank li (run_env.c). */
static char **rank_env(int li)
{
    int r = lfirst + li;

    if (ranks[li].joining) /* its rank comes when it is admitted: li names its output */
        return run_rank_env(li, li, nlocal, nnodes > 1 ? ranks[li].node : -1, 1);
    int node = (int)(((long long)r * nnodes) / nranks);
    int local = nnodes > 1 ? r - block_first(node, nnodes) : li;
    int lsize = nnodes > 1 ? block_first(node + 1, nnodes) - block_first(node, nnodes) : nlocal;

    return run_rank_env(r, local, lsize, nnodes > 1 ? node : -1, 0);
}

/*
 * Start local rank r. The child makes only async-signal-safe calls between fork and exec:
 * tutti-run has a thread (the rendezvous) that may hold the allocator's lock when we fork,
 * and a child that allocated (setenv, snprintf) would wait for it forever, a rank that never
 * reaches the rendezvous (seen once under ASan). So its environment is made here.
 */
static pid_t spawn(int r, const char *path, char **argv, const sigset_t *oldmask, pid_t parent)
{
    int out[2], err[2];
    pid_t pid;
    char **env = rank_env(r);
    cpu_set_t core;

    CPU_ZERO(&core);
    if (ncpus > 0)
        CPU_SET(cpus[r % ncpus], &core); /* r: the local rank */

    if (!env) {
        fprintf(stderr, "tutti-run: out of memory\n");
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        perror("tutti-run: pipe");
        free(env);
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        perror("tutti-run: fork");
        free(env);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (lfirst + r != 0) {
            int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0)
                dup2(devnull, 0);
        }
        if (ncpus > 0 && sched_setaffinity(0, sizeof(core), &core) != 0)
            run_write_all(2, "tutti-run: warning: --bind core: sched_setaffinity failed\n", 58);
        sigprocmask(SIG_SETMASK, oldmask, NULL);
        execve(path, argv, env);
        run_write_all(2, "tutti-run: cannot run ", 22);
        run_write_all(2, path, strlen(path));
        run_write_all(2, "\n", 1);
        _exit(127);
    }
    free(env);
    setpgid(pid, pid); /* also here, so the group exists before we might signal it */
    close(out[1]);
    close(err[1]);
    ranks[r].s[0] = (struct stream){.fd = out[0], .out = 1, .buf = malloc(LINE_MAX_BYTES)};
    ranks[r].s[1] = (struct stream){.fd = err[0], .out = 2, .buf = malloc(LINE_MAX_BYTES)};
    if (!ranks[r].s[0].buf || !ranks[r].s[1].buf) {
        fprintf(stderr, "tutti-run: out of memory\n");
        return -1;
    }
    return pid;
}

static int status_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

static void say_failed(int rank, pid_t pid, int st, int stopping)
{
    const char *then = stopping ? "; stopping the other ranks" : "";

    if (WIFSIGNALED(st))
        fprintf(stderr, "tutti-run: rank %d (pid %d) was killed by %s%s\n", rank, (int)pid,
                strsignal(WTERMSIG(st)), then);
    else
        fprintf(stderr, "tutti-run: rank %d (pid %d) exited with status %d%s\n", rank, (int)pid,
                status_code(st), then);
}

/* --restart: a newcomer in failed slot r's place (posing as its host); 1 if it started. */
static int restart(int r, const char *path, char **argv, const sigset_t *oldmask, pid_t parent)
{
    int n = nslots++;

    elastic.restarts++;
    ranks[n].joining = 1;
    ranks[n].node = ranks[r].node;
    ranks[n].pid = spawn(n, path, argv, oldmask, parent);
    ranks[n].done = ranks[n].pid < 0;
    if (ranks[n].pid > 0)
        fprintf(stderr,
                "tutti-run: started [%d] in its place (restart %d of %d): it joins at the job's "
                "next tutti_comm_grow\n",
                n, elastic.restarts, elastic.restart);
    return ranks[n].pid > 0;
}

int main(int argc, char **argv)
{
    double grace = 3.0, kill_at = 0;
    int first = -1, result = 0, live, argi = 1, sfd, interrupted = 0, bind_core = 0, used;
    int ending = 0; /* --elastic: the job ended; newcomers never admitted are being stopped */
    double next_look = 0;
    sigset_t mask, oldmask;
    char tag[32], idstr[TUTTI_ID_STRLEN], val[32], *program, *master = NULL, *port = NULL;
    tutti_id_t id;
    struct pollfd *pfd;
    pid_t self = getpid();

    for (; argi < argc; argi++) {
        const char *opt = argv[argi], *arg = argi + 1 < argc ? argv[argi + 1] : NULL;
        if (arg && (!strcmp(opt, "-n") || !strcmp(opt, "--nodes") || !strcmp(opt, "--nnodes") ||
                    !strcmp(opt, "--node-rank"))) {
            /* Counts are 1..MAX_RANKS, --node-rank 0..MAX_RANKS-1. */
            int *out = !strcmp(opt, "-n")         ? &nranks
                       : !strcmp(opt, "--nodes")  ? &nnodes
                       : !strcmp(opt, "--nnodes") ? &nhosts
                                                  : &host_rank;
            int lo = out == &host_rank ? 0 : 1, hi = MAX_RANKS - 1 + lo;
            char *end;
            long v = strtol(arg, &end, 10);
            if (*end || !*arg || v < lo || v > hi) {
                fprintf(stderr, "tutti-run: %s %s: need a number within %d..%d\n", opt, arg, lo,
                        hi);
                return 2;
            }
            *out = (int)v;
            argi++;
        } else if (strcmp(argv[argi], "--master") == 0 && argi + 1 < argc) {
            /* ADDR:PORT, [IPv6]:PORT */
            char *end;
            master = argv[++argi];
            port = strrchr(master, ':');
            long pn = port ? strtol(port + 1, &end, 10) : 0;
            if (!port || port == master || !port[1] || *end || pn < 1 || pn > 65535) {
                fprintf(stderr, "tutti-run: --master %s: want ADDRESS:PORT (a TCP port 1..65535)\n",
                        master);
                return 2;
            }
            *port++ = '\0';
            if (master[0] == '[' && port[-2] == ']') {
                master++;
                port[-2] = '\0';
            }
        } else if (strcmp(argv[argi], "--bind") == 0 && argi + 1 < argc) {
            const char *how = argv[++argi];
            if (strcmp(how, "core") == 0) {
                bind_core = 1;
            } else if (strcmp(how, "none") != 0) {
                fprintf(stderr, "tutti-run: --bind %s: want core or none\n", how);
                return 2;
            }
        } else if ((used = run_elastic_option(&elastic, opt, arg)) != 0) {
            if (used < 0)
                return 2;
            argi += used;
        } else if (strcmp(argv[argi], "--no-prefix") == 0) {
            prefix = 0;
        } else if (strcmp(argv[argi], "--grace") == 0 && argi + 1 < argc) {
            grace = atof(argv[++argi]);
            if (grace <= 0) {
                fprintf(stderr, "tutti-run: --grace needs a positive number of seconds\n");
                return 2;
            }
        } else if (strcmp(argv[argi], "--env") == 0) {
            tutti_env_print(stdout);
            return 0;
        } else if (strcmp(argv[argi], "-h") == 0 || strcmp(argv[argi], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[argi], "--") == 0) {
            argi++;
            break;
        } else if (argv[argi][0] == '-') {
            fprintf(stderr, "tutti-run: unknown option %s\n", argv[argi]);
            usage(stderr);
            return 2;
        } else {
            break;
        }
    }
    if (nranks == 0 || argi >= argc) {
        usage(stderr);
        return 2;
    }

    if (nnodes > nranks) {
        fprintf(stderr, "tutti-run: --nodes %d is more than the %d ranks\n", nnodes, nranks);
        return 2;
    }
    if ((nhosts > 1 || host_rank >= 0) && !master) {
        fprintf(stderr,
                "tutti-run: --nnodes and --node-rank need --master ADDRESS:PORT (where rank "
                "0, on node 0, serves the rendezvous)\n");
        return 2;
    }
    if (nhosts > 1 && host_rank < 0) {
        fprintf(stderr, "tutti-run: --nnodes %d needs --node-rank (this host's, 0..%d)\n", nhosts,
                nhosts - 1);
        return 2;
    }
    if (host_rank < 0)
        host_rank = 0;
    if (host_rank >= nhosts) {
        fprintf(stderr, "tutti-run: --node-rank %d is out of range for --nnodes %d (0..%d)\n",
                host_rank, nhosts, nhosts - 1);
        return 2;
    }
    if (nhosts > nranks) {
        fprintf(stderr, "tutti-run: --nnodes %d is more than the %d ranks\n", nhosts, nranks);
        return 2;
    }
    if (nhosts > 1 && nnodes > 1) {
        fprintf(stderr, "tutti-run: --nodes (hosts emulated on this one) and --nnodes (real hosts) "
                        "do not go together\n");
        return 2;
    }
    /* Every TUTTI_* value the ranks would refuse, refused here, once, before anything starts. */
    if (tutti_env_check() != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-run: %s\n", tutti_last_error());
        return 2;
    }
    if (master && !(getenv("TUTTI_SECRET") && *getenv("TUTTI_SECRET")))
        fprintf(stderr,
                "tutti-run: WARNING: TUTTI_SECRET is not set. The rendezvous at %s:%s then "
                "admits ranks by a secret derived from that address, port and rank count, which "
                "anyone who can reach it can compute: a stranger could join as a rank and "
                "receive the job's data. Set TUTTI_SECRET to the same random string on every "
                "host, e.g. TUTTI_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')\n",
                master, port);
    lfirst = block_first(host_rank, nhosts);
    nlocal = block_first(host_rank + 1, nhosts) - lfirst;
    if (run_elastic_check(&elastic, nlocal) != 0)
        return 2;
    if (run_fds_for(run_elastic_slots(&elastic, nlocal)) != 0)
        return 1;
    if (bind_core) {
        cpu_set_t mine;
        if (sched_getaffinity(0, sizeof(mine), &mine) != 0 ||
            !(cpus = malloc((size_t)CPU_COUNT(&mine) * sizeof(*cpus)))) {
            fprintf(stderr, "tutti-run: --bind core: cannot read this process's CPUs: %s\n",
                    strerror(errno));
            return 1;
        }
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &mine))
                cpus[ncpus++] = c;
    }
    program = run_find_program(argv[argi]);
    if (!program) {
        fprintf(stderr, "tutti-run: cannot run %s: %s\n", argv[argi], strerror(errno));
        free(cpus);
        return 127;
    }

    /* Before any thread exists (the rendezvous runs in one): signals must reach signalfd. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &oldmask);

    /* One host: rendezvous inside tutti-run, on loopback unless told otherwise. With --master,
     * rank 0 serves it there (tutti_comm_init_env's MASTER_ADDR); loopback is the default
     * interface only when the master is a loopback address (every "host" is this one). */
    if (!master || !strncmp(master, "127.", 4) || !strcmp(master, "::1") ||
        !strcmp(master, "localhost"))
        setenv("TUTTI_SOCKET_IFNAME", "=lo", 0);
    snprintf(tag, sizeof(tag), "r%d", (int)self);
    setenv("TUTTI_JOB_TAG", tag, 1);
    if (master) {
        unsetenv("TUTTI_ID");
        setenv("MASTER_ADDR", master, 1);
        setenv("MASTER_PORT", port, 1);
    } else if (tutti_get_id(&id) != TUTTI_SUCCESS ||
               tutti_id_to_string(&id, idstr, sizeof(idstr)) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-run: cannot start the rendezvous: %s\n", tutti_last_error());
        free(program);
        free(cpus);
        return 1;
    } else {
        setenv("TUTTI_ID", idstr, 1);
    }
    if (run_elastic_start(&elastic, nhosts, host_rank) != 0) {
        free(program);
        free(cpus);
        return 1;
    }
    snprintf(val, sizeof(val), "%d", nranks);
    setenv("TUTTI_WORLD_SIZE", val, 1);
    setenv("WORLD_SIZE", val, 1); /* torchrun's names too: PyTorch's env:// reads them */
    if (!master && run_torch_store_port(val, sizeof(val)) == 0) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", val, 1);
    }

    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    int slots = run_elastic_slots(&elastic, nlocal);
    ranks = calloc((size_t)slots, sizeof(*ranks));
    pfd = calloc(2 * (size_t)slots + 1, sizeof(*pfd));
    if (sfd < 0 || !ranks || !pfd) {
        fprintf(stderr, "tutti-run: setup failed: %s\n", strerror(errno));
        free(program);
        free(cpus);
        return 1;
    }
    for (int r = 0; r < slots; r++)
        ranks[r].s[0].fd = ranks[r].s[1].fd = -1;
    for (int r = 0; r < nlocal + elastic.join; r++) {
        nslots = r + 1;
        ranks[r].joining = r >= nlocal;
        ranks[r].node = nnodes <= 1  ? -1
                        : r < nlocal ? (int)(((long long)(lfirst + r) * nnodes) / nranks)
                                     : (r - nlocal) % nnodes;
        ranks[r].pid = spawn(r, program, argv + argi, &oldmask, self);
        if (ranks[r].pid < 0) {
            signal_all(SIGKILL);
            result = 1;
            ranks[r].done = 1;
            first = r;
            kill_at = now();
            break;
        }
    }

    live = 0;
    for (int r = 0; r < nslots; r++)
        live += !ranks[r].done;
    for (;;) {
        int np = 0, open_streams = 0;
        double t = now();

        pfd[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (int r = 0; r < nslots; r++)
            for (int k = 0; k < 2; k++)
                if (ranks[r].s[k].fd >= 0) {
                    pfd[np++] = (struct pollfd){.fd = ranks[r].s[k].fd, .events = POLLIN};
                    open_streams++;
                }
        if (live == 0 && open_streams == 0)
            break;
        int ms = 200;
        if (kill_at > 0)
            ms = kill_at > t ? (int)((kill_at - t) * 1000) + 1 : 0;
        if (live == 0)
            ms = 100; /* ranks are gone; only their children may hold the pipes */
        int ready = poll(pfd, (nfds_t)np, ms);
        if (ready == 0 && live == 0)
            break; /* quiet pipes after every rank exited: do not wait for grandchildren */
        if (kill_at > 0 && now() >= kill_at) {
            signal_all(SIGKILL);
            kill_at = 0;
        }
        if (!ending && elastic.finished && t >= next_look) {
            next_look = t + 0.2;
            if (run_elastic_only_waiting(&elastic, live)) {
                fprintf(stderr,
                        "tutti-run: the job has ended; stopping %d newcomer(s) that no member "
                        "admitted\n",
                        live);
                ending = 1;
                signal_all(SIGTERM);
                kill_at = now() + grace;
            }
        }
        if (ready <= 0)
            continue;
        for (int i = 1; i < np; i++) {
            if (!pfd[i].revents)
                continue;
            for (int r = 0; r < nslots; r++)
                for (int k = 0; k < 2; k++)
                    if (ranks[r].s[k].fd == pfd[i].fd)
                        run_pump(lfirst + r, &ranks[r].s[k], prefix);
        }
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                /* Forward; a second interrupt kills at once. */
                if (interrupted) {
                    signal_all(SIGKILL);
                } else {
                    fprintf(stderr, "tutti-run: got %s; passing it to every rank\n",
                            strsignal((int)si.ssi_signo));
                    signal_all((int)si.ssi_signo);
                    kill_at = now() + grace;
                    interrupted = (int)si.ssi_signo;
                }
            }
            for (;;) {
                int st;
                pid_t pid = waitpid(-1, &st, WNOHANG);
                if (pid <= 0)
                    break;
                for (int r = 0; r < nslots; r++) {
                    if (ranks[r].pid != pid || ranks[r].done)
                        continue;
                    ranks[r].done = 1;
                    ranks[r].status = st;
                    live--;
                    /* Its group may still hold children: they go too. */
                    kill(-pid, SIGKILL);
                    elastic.finished |= status_code(st) == 0;
                    if (status_code(st) == 0 || first >= 0 || interrupted || ending)
                        continue;
                    say_failed(lfirst + r, pid, st, !elastic.on);
                    if (run_elastic_survives(&elastic, lfirst + r, live)) {
                        if (run_elastic_may_restart(&elastic, live))
                            live += restart(r, program, argv + argi, &oldmask, self);
                        continue;
                    }
                    first = r;
                    result = status_code(st);
                    signal_all(SIGTERM);
                    kill_at = now() + grace;
                }
            }
        }
    }
    free(program);
    free(cpus);
    run_shm_cleanup(tag);
    if (interrupted && first < 0)
        result = 128 + interrupted;
    for (int r = 0; r < nslots; r++) {
        free(ranks[r].s[0].buf);
        free(ranks[r].s[1].buf);
    }
    free(ranks);
    free(pfd);
    return result;
}
