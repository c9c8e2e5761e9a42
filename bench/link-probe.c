/*
 * link-probe.c -- what the network between two ranks carries: both directions at once, at the
 * message sizes the collectives use, over plain TCP with everything a transport may tune, so
 * that every socket figure can stand beside its limit from the same run (issue 41).
 *
 *   build/bench/link-probe [-1] [-b MIN] [-e MAX] [-f FACTOR] [-s SOCKETS] [-n ITERS]
 *                          [-B BYTES] [-m WAY] [-r PIECE] loop [ADDR]
 *   build/bench/link-probe [options] serve ADDR PORT      (one end: listens)
 *   build/bench/link-probe [options] connect ADDR PORT    (the other end)
 *
 * `loop` runs both ends here (a forked child connects to ADDR, default 127.0.0.1); `serve` and
 * `connect` put the ends where the caller wants them (two network namespaces joined by a veth
 * pair: the netns test's layout). For each size S, from MIN (8) to MAX (256M) times FACTOR (4),
 * each end sends S bytes to the other and receives S bytes from it at the same time, split
 * over SOCKETS connections (default 2, as TUTTI_NSOCKS; TCP_NODELAY, socket buffers of -B
 * BYTES, default 4M, 0 for the kernel's autotuning), three ways: one thread per end moving every
 * connection's bytes with non-blocking calls, spinning (sched_yield) for 100 us when nothing
 * moves, then poll (what a progress loop can do); a sending and a receiving thread per
 * connection at each end with blocking calls (what parallel copies in and out of the kernel
 * can do); and the polling thread again, moving at most 128 KiB a call and receiving into a
 * 1 MiB ring (a transport's slots, which stay in cache). The best of the three, per size, is
 * what the link carries both ways by plain calls without any library's protocol: the figure
 * socket results stand beside. It is not a proven ceiling: under bbr, this VM's default
 * congestion control, tutti's socket transport beats it at some sizes, because bbr's pacing
 * slows the probe's large exchanges more (under cubic, 1 MiB and more each way run about twice
 * as fast; BENCHMARKS.md, "Congestion control"). An exchange is timed from a
 * start both ends agree on (a one-byte handshake on the first connection) to the last byte
 * received, over a run of exchanges back to back (ITERS, default: about 40 ms' worth, at most 1000)
 * divided by their number; the median of 7 such runs.
 *
 * -m WAY times only that way (0 the polling loop, 1 threads, 2 pieces; with -1, 0 or 1), the
 * others printed as "-": a profile of one way (BENCHMARKS.md, "The all-reduce's CPU beside the
 * probe's").
 *
 * -r PIECE times a 2-rank all-reduce of S bytes of float32 instead, by plain calls and the
 * polling loop: the exchange of S/2 each way, the sum, the exchange of S/2 each way again, a
 * piece of PIECE bytes of each half at a time (0: the halves whole); prints its time and S
 * over it (bus bandwidth). What an all-reduce can do over the link beside its reduction and
 * the wait between its two exchanges (BENCHMARKS.md, "The all-reduce's CPU beside the
 * probe's").
 *
 * -1 measures one direction instead: messages of S bytes back to back from the leader (the
 * serving end) to the other, a send call each, on the first connection; the receiver reads
 * what has come, across messages. What a broadcast between two ranks can do at best, a
 * message per call: the kernel's cost per message (stream() below).
 *
 * Prints per size the exchange's time (us) and S over that time (GB/s): the bytes each
 * direction carried per second while the other carried as many; with MIN <= 4 KiB and MAX >=
 * 1 MiB, then a TUTTI_TUNE_LINKS line whose network figures are the smallest exchange's time
 * and the largest one's rate, for the tuner to plan with this link. A 2-rank all-reduce of S bytes
 * moves S/2 each way twice; its bus bandwidth (S / time, nccl-tests' definition for 2 ranks)
 * can at most equal this figure at the same size.
 */
#include "link-probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SAMPLES 7
#define NHOW 3 /* ways to move the bytes: a polling loop, threads, a polling loop in pieces */

static int iters_fixed, one_way, only_how = -1, reducing;
static size_t reduce_piece; /* -r */
static char *abuf;          /* -r: the all-reduce's result */
static size_t minb = 8, maxb = (size_t)256 << 20, factor = 4;

/* One direction of one connection for one exchange. */
struct job {
    int fd, send;
    char *buf;
    size_t bytes;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    if (j->send)
        full_write(j->fd, j->buf, j->bytes);
    else
        full_read(j->fd, j->buf, j->bytes);
    return NULL;
}

/* Persistent threads: one sender and one receiver per connection, started per exchange. */
struct worker {
    pthread_t t;
    pthread_mutex_t m;
    pthread_cond_t cv;
    struct job job;
    int quit;
    unsigned long round, finished;
};

static struct worker W[2 * MAXS];

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned long seen = 0;

    pthread_mutex_lock(&w->m);
    for (;;) {
        while (w->round == seen && !w->quit)
            pthread_cond_wait(&w->cv, &w->m);
        if (w->quit)
            break;
        seen = w->round;
        pthread_mutex_unlock(&w->m);
        run_job(&w->job);
        pthread_mutex_lock(&w->m);
        w->finished = seen;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->m);
    return NULL;
}

/* Connection s's share of size bytes: at *off, *n bytes. */
static void share(size_t size, int s, size_t *off, size_t *n)
{
    /* No connection carries less than 64 KiB, so small messages take one: the fewest calls. */
    size_t use = size / (64 << 10) < 1 ? 1 : size / (64 << 10);
    if (use > (size_t)nsocks)
        use = (size_t)nsocks;
    size_t per = (size + use - 1) / use;
    *off = (size_t)s * per;
    *n = *off < size ? (size - *off < per ? size - *off : per) : 0;
}

/* One thread, every connection, non-blocking calls; poll when nothing moved. With pieces
 * (PIECE_BYTES), every call moves at most one piece and each connection receives into its own
 * ring of PIECE_RING bytes of rbuf, over and over (a transport's receive slots: they stay in
 * cache); else each call moves what the socket takes, straight to the bytes' place in rbuf. */
#define PIECE_BYTES ((size_t)128 << 10)
#define PIECE_RING ((size_t)1 << 20)
static void loop_exchange(const int *fds, char *sbuf, char *rbuf, size_t size, int pieces)
{
    size_t sent[MAXS] = {0}, got[MAXS] = {0}, off, n, left = 2 * size;
    size_t cap = pieces ? PIECE_BYTES : size,
           ring = (maxb < PIECE_RING ? maxb : PIECE_RING) / (size_t)nsocks;
    double idle_since = 0;

    while (left) {
        int moved = 0;
        struct pollfd p[2 * MAXS];
        int np = 0;
        for (int s = 0; s < nsocks; s++) {
            share(size, s, &off, &n);
            if (sent[s] < n) {
                size_t want = n - sent[s] < cap ? n - sent[s] : cap;
                ssize_t w = send(fds[s], sbuf + off + sent[s], want, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                    sent[s] += (size_t)w, left -= (size_t)w, moved = 1;
                } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    die("send");
                }
                if (sent[s] < n)
                    p[np++] = (struct pollfd){.fd = fds[s], .events = POLLOUT};
            }
            if (got[s] < n) {
                size_t want = n - got[s] < cap ? n - got[s] : cap;
                char *to = rbuf + off + got[s];
                if (pieces && ring >= 64) {
                    to = rbuf + (size_t)s * ring + got[s] % ring;
                    if (want > ring - got[s] % ring)
                        want = ring - got[s] % ring;
                }
                ssize_t r = recv(fds[s], to, want, MSG_DONTWAIT);
                if (r > 0) {
                    got[s] += (size_t)r, left -= (size_t)r, moved = 1;
                } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    die("recv");
                }
                if (got[s] < n)
                    p[np++] = (struct pollfd){.fd = fds[s], .events = POLLIN};
            }
        }
        if (moved || !left)
            idle_since = 0;
        else if (!idle_since)
            idle_since = now();
        else if (now() - idle_since < 100e-6)
            sched_yield(); /* a message is usually this close: spin, as a progress loop does */
        else
            poll(p, (nfds_t)np, 10);
    }
}

/* One exchange, by threads: a sending and a receiving thread per connection. */
static void thread_exchange(const int *fds, char *sbuf, char *rbuf, size_t size)
{
    for (int s = 0; s < nsocks; s++) {
        size_t off, n;
        share(size, s, &off, &n);
        for (int d = 0; d < 2; d++) {
            struct worker *w = &W[2 * s + d];
            pthread_mutex_lock(&w->m);
            w->job = (struct job){fds[s], d == 0, (d == 0 ? sbuf : rbuf) + off, n};
            w->round++;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->m);
        }
    }
    for (int i = 0; i < 2 * nsocks; i++) {
        struct worker *w = &W[i];
        pthread_mutex_lock(&w->m);
        while (w->finished != w->round)
            pthread_cond_wait(&w->cv, &w->m);
        pthread_mutex_unlock(&w->m);
    }
}

/* -r: out = a + b, n float32 values (the sum a 2-rank all-reduce does, vectorized as wide as
 * this CPU goes, like tutti's kernels). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
sum_f32(float *restrict out, const float *restrict a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* -r: an all-reduce of size bytes of float32 between the two ends by plain calls, as a
 * 2-rank ring does it: each end sends the half the other owns and receives the other's
 * contribution to its own half (size/2 each way), sums it, then sends its summed half and
 * receives the other's (size/2 each way again); in pieces of `piece` bytes of each half, a
 * piece's both exchanges before the next piece's (0: each half whole). The polling loop moves
 * the bytes. What the link and the reduction allow an all-reduce over plain TCP, without a
 * library's protocol. */
static size_t reduce_half(size_t size)
{
    return size / 2 & ~(size_t)3; /* whole float32 values */
}

static void reduce_exchange(const int *fds, char *sbuf, char *rbuf, size_t size, int leader,
                            size_t piece)
{
    size_t half = reduce_half(size), mine = leader ? 0 : half, theirs = leader ? half : 0;

    if (!piece || piece > half)
        piece = half;
    for (size_t off = 0; off < half; off += piece) {
        size_t n = half - off < piece ? half - off : piece;
        loop_exchange(fds, sbuf + theirs + off, rbuf + off, n, 0);
        sum_f32((float *)(abuf + mine + off), (const float *)(sbuf + mine + off),
                (const float *)(rbuf + off), n / 4);
        loop_exchange(fds, abuf + mine + off, abuf + theirs + off, n, 0);
    }
}

/* -r: the all-reduce of size bytes just run left both ends' sum of sbuf (the same at both
 * ends) in abuf; else the probe is wrong, not slow. */
static void check_sum(const char *sbuf, size_t size)
{
    size_t n = reduce_half(size) * 2 / 4;

    for (size_t i = 0; i < n; i++) {
        float a, got;
        memcpy(&a, sbuf + 4 * i, 4);
        memcpy(&got, abuf + 4 * i, 4);
        if (got != a + a) {
            fprintf(stderr, "link-probe -r: value %zu of the all-reduce is %g, not %g\n", i,
                    (double)got, (double)(a + a));
            exit(1);
        }
    }
}

/* reps exchanges of size bytes both ways, back to back (each waits for the peer's whole
 * message, so the ends keep in step), from a start both ends agree on; seconds per exchange. */
static double exchange(const int *fds, char *sbuf, char *rbuf, size_t size, int leader, int how,
                       int reps)
{
    double t0;

    common_start(fds[0], leader);
    t0 = now();
    for (int i = 0; i < reps; i++) {
        if (reducing)
            reduce_exchange(fds, sbuf, rbuf, size, leader, reduce_piece);
        else if (how == 1)
            thread_exchange(fds, sbuf, rbuf, size);
        else
            loop_exchange(fds, sbuf, rbuf, size, how == 2);
    }
    return (now() - t0) / reps;
}

/* -1: reps messages of size bytes from the leader to the other end on the first connection,
 * back to back, one send call a message (what a broadcast between two ranks moves, a message
 * a call); the receiver reads whatever has come, up to STREAM_RING bytes a call, across
 * message boundaries: the fewest reads any receiver can make. how 0: non-blocking calls with
 * the polling loop's waits; how 1: blocking calls. Timed from the common start to the
 * receiver's one-byte answer after the last byte; seconds per message. */
#define STREAM_RING ((size_t)1 << 20)
static double stream(int fd, const char *sbuf, char *ring, size_t size, int leader, int how,
                     int reps)
{
    int flags = how == 0 ? MSG_DONTWAIT : 0;
    double t0, idle_since = 0;
    char c = 0;

    common_start(fd, leader);
    t0 = now();
    for (size_t left = (size_t)reps * size, done = 0; left;) {
        ssize_t n;
        if (leader) {
            n = send(fd, sbuf + done, size - done, MSG_NOSIGNAL | flags);
        } else {
            size_t want = left < STREAM_RING ? left : STREAM_RING;
            n = recv(fd, ring, want, flags);
            if (n == 0)
                die("recv: closed");
        }
        if (n > 0) {
            left -= (size_t)n;
            done = leader ? (done + (size_t)n) % size : 0;
            idle_since = 0;
            continue;
        }
        if (errno != EAGAIN && errno != EINTR)
            die(leader ? "send" : "recv");
        if (!idle_since) {
            idle_since = now();
        } else if (now() - idle_since < 100e-6) {
            sched_yield();
        } else {
            struct pollfd p = {.fd = fd, .events = leader ? POLLOUT : POLLIN};
            poll(&p, 1, 10);
        }
    }
    if (leader)
        full_read(fd, &c, 1);
    else
        full_write(fd, &c, 1);
    return (now() - t0) / reps;
}

/* The ways this run times: -1 two, -r one, else NHOW. */
static int nways(void)
{
    return one_way ? 2 : reducing ? 1 : NHOW;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run(const int *fds, int leader)
{
    double first_us = 0, last_gbs = 0;
    size_t rlen = one_way ? STREAM_RING : maxb; /* -1 receives into a ring */
    char *sbuf = malloc(maxb), *rbuf = malloc(rlen);
    int nhow = nways();
    double *t = malloc(SAMPLES * sizeof(*t));

    abuf = reducing ? malloc(maxb) : NULL;
    if (!sbuf || !rbuf || !t || (reducing && !abuf))
        die("malloc");
    memset(sbuf, 1, maxb);
    memset(rbuf, 0, rlen);
    for (int i = 0; i < 2 * nsocks; i++) {
        pthread_mutex_init(&W[i].m, NULL);
        pthread_cond_init(&W[i].cv, NULL);
        pthread_create(&W[i].t, NULL, worker_main, &W[i]);
    }
    if (leader && reducing)
        printf("# link-probe -r: an all-reduce of S bytes of float32 between the two ends by "
               "plain calls over %d socket(s), in pieces of %zu bytes of each half (0: whole); "
               "median time per all-reduce (us), and S over it\n# %12s %10s %10s\n",
               nsocks, reduce_piece, "bytes", "reduce_us", "GB/s_bus");
    else if (leader && one_way)
        printf("# link-probe -1: one way, a message a send, back to back on one socket; median "
               "time per message (us) by one polling thread and by blocking calls; limit: the "
               "best, as bytes per second\n# %12s %10s %10s %10s\n",
               "bytes", "loop_us", "blocking_us", "GB/s");
    else if (leader)
        printf("# link-probe: %d socket(s), both directions at once; median time per exchange "
               "(us) by one polling thread, by threads, and by one polling thread in 128 KiB "
               "pieces; limit: the best, as bytes each way per second\n# %12s %10s %10s %10s "
               "%10s\n",
               nsocks, "bytes", "loop_us", "threads_us", "pieces_us", "GB/s_each");
    for (size_t size = minb; size <= maxb; size *= factor) {
        double med[NHOW];
        for (int how = 0; how < nhow; how++) {
            int reps;
            if (only_how >= 0 && how != only_how) {
                med[how] = -1; /* -m: not run */
                continue;
            }
            /* Both ends run as many: the leader's first exchange decides how many a sample
             * takes (about 40 ms), and SAMPLES samples are timed. */
            double first = one_way ? stream(fds[0], sbuf, rbuf, size, leader, how, 1)
                                   : exchange(fds, sbuf, rbuf, size, leader, how, 1);
            if (leader) {
                reps = iters_fixed ? iters_fixed : (int)(0.04 / (first > 1e-6 ? first : 1e-6));
                reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
                uint32_t wire = htonl((uint32_t)reps);
                full_write(fds[0], (char *)&wire, 4);
            } else {
                uint32_t wire;
                full_read(fds[0], (char *)&wire, 4);
                reps = (int)ntohl(wire);
            }
            for (int i = 0; i < SAMPLES; i++)
                t[i] = one_way ? stream(fds[0], sbuf, rbuf, size, leader, how, reps)
                               : exchange(fds, sbuf, rbuf, size, leader, how, reps);
            qsort(t, SAMPLES, sizeof(*t), cmp);
            med[how] = t[SAMPLES / 2];
        }
        if (leader) {
            double best = med[only_how >= 0 ? only_how : 0];
            for (int how = 0; how < nhow; how++)
                best = med[how] >= 0 && med[how] < best ? med[how] : best;
            printf("  %12zu", size);
            for (int how = 0; how < nhow; how++)
                if (med[how] < 0)
                    printf(" %10s", "-");
                else
                    printf(one_way ? " %10.2f" : " %10.1f", med[how] * 1e6);
            printf(" %10.3f\n", (double)size / best / 1e9);
            fflush(stdout);
            if (size == minb)
                first_us = best * 1e6;
            last_gbs = (double)size / best / 1e9;
        }
        if (reducing) /* -r: every value of the last all-reduce is the two ends' sum */
            check_sum(sbuf, size);
        if (size > maxb / factor)
            break;
    }
    /* The tuner's network link (lib/topo/tune.c: a hop's latency, a link's bytes per second
     * each way): the smallest exchange's time and the largest one's rate. */
    if (leader && !one_way && !reducing && minb <= 4096 && maxb >= ((size_t)1 << 20))
        printf("# for the tuner (its network link from this run; the first two figures are its "
               "shared-memory defaults):\n# TUTTI_TUNE_LINKS=0.25,12,%.1f,%.2f\n",
               first_us, last_gbs);
    for (int i = 0; i < 2 * nsocks; i++) {
        pthread_mutex_lock(&W[i].m);
        W[i].quit = 1;
        pthread_cond_broadcast(&W[i].cv);
        pthread_mutex_unlock(&W[i].m);
        pthread_join(W[i].t, NULL);
    }
}

static size_t size_arg(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': v <<= 10; break;
    case 'M': v <<= 20; break;
    case 'G': v <<= 30; break;
    default: break;
    }
    return v;
}

int main(int argc, char **argv)
{
    int opt, fds[MAXS], port = 0;

    while ((opt = getopt(argc, argv, "1b:e:f:s:n:B:m:r:")) != -1) {
        switch (opt) {
        case '1': one_way = 1; break;
        case 'b': minb = size_arg(optarg); break;
        case 'e': maxb = size_arg(optarg); break;
        case 'f': factor = size_arg(optarg); break;
        case 's': nsocks = atoi(optarg); break;
        case 'n': iters_fixed = atoi(optarg); break;
        case 'B': sockbuf = (int)size_arg(optarg); break;
        case 'm': only_how = atoi(optarg); break;
        case 'r': reducing = 1, reduce_piece = size_arg(optarg) & ~(size_t)3; break;
        default: return 2;
        }
    }
    if (optind >= argc || nsocks < 1 || nsocks > MAXS || minb < 1 || maxb < minb || factor < 2 ||
        only_how < -1 || only_how >= nways() || (one_way && reducing)) {
        fprintf(
            stderr,
            "usage: link-probe [-1] [-b MIN] [-e MAX] [-f FACTOR] [-s SOCKETS] [-n ITERS] "
            "[-B BYTES] [-m WAY] [-r PIECE] loop [ADDR] | serve ADDR PORT | connect ADDR PORT\n");
        return 2;
    }
    const char *mode = argv[optind], *addr = optind + 1 < argc ? argv[optind + 1] : "127.0.0.1";
    if (optind + 2 < argc)
        port = atoi(argv[optind + 2]);
    if (strcmp(mode, "loop") == 0) {
        int bound;
        pid_t child;
        serve(addr, 0, &bound);
        child = fork();
        if (child == 0) {
            close(listener);
            connect_all(addr, bound, fds);
            run(fds, 0);
            _exit(0);
        }
        accept_all(fds);
        run(fds, 1);
        waitpid(child, NULL, 0);
    } else if (strcmp(mode, "serve") == 0) {
        int bound;
        serve(addr, port, &bound);
        printf("# listening on %s:%d\n", addr, bound);
        fflush(stdout);
        accept_all(fds);
        run(fds, 1);
    } else if (strcmp(mode, "connect") == 0) {
        connect_all(addr, port, fds);
        run(fds, 0);
    } else {
        fprintf(stderr, "link-probe: mode %s (loop, serve or connect)\n", mode);
        return 2;
    }
    return 0;
}
