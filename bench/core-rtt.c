/*
 * core-rtt.c -- the round trip of one cache line between two CPUs: how far apart the cores
 * are that a 2-rank run lands on.
 *
 *   build/bench/core-rtt [-q] [CPU_A CPU_B]   (default: the first two CPUs this process may use)
 *
 * Two threads, one pinned to each CPU, pass a counter back and forth in one cache line,
 * ROUNDS times; the median of REPEATS such runs, in nanoseconds per round trip. -q prints
 * the number alone (bench/compare-mpi/compare calls it between runs).
 *
 * Why: on a virtual machine the hypervisor places the guest's vCPUs on host cores and moves
 * them. This task's 2-vCPU VM has two placements, each held for seconds to minutes: about
 * 100-140 ns a round trip (cores that share a cache) and 430-560 ns (cores that do not).
 * Every shared-memory transfer between the two ranks pays that latency, so a 2-rank
 * collective runs 2-4x slower in the far placement, Open MPI's as well as tutti's
 * (BENCHMARKS.md, "Two placements"). A comparison is only fair when both libraries ran in
 * the same placement.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 20000
#define REPEATS 5

static _Alignas(64) atomic_long ball;
static int cpu_b;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The other end (started on cpu_b): answers each odd value with the next even one. */
static void *partner(void *arg)
{
    (void)arg;
    for (long i = 0; i < (long)REPEATS * ROUNDS; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_cpu(const char *s, int *cpu)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v >= CPU_SETSIZE)
        return -1;
    *cpu = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int quiet = 0, cpu_a = -1, a = 1;
    double t[REPEATS];
    pthread_t th;
    pthread_attr_t attr;
    cpu_set_t on;

    if (a < argc && strcmp(argv[a], "-q") == 0) {
        quiet = 1;
        a++;
    }
    if (argc - a == 2) {
        if (parse_cpu(argv[a], &cpu_a) || parse_cpu(argv[a + 1], &cpu_b) || cpu_a == cpu_b) {
            fprintf(stderr, "core-rtt: CPU_A and CPU_B must be two different CPU numbers\n");
            return 2;
        }
    } else if (argc - a == 0) {
        cpu_set_t s;
        int found = 0;
        if (sched_getaffinity(0, sizeof(s), &s) != 0) {
            perror("core-rtt: sched_getaffinity");
            return 1;
        }
        for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
            if (CPU_ISSET(c, &s))
                *(found++ ? &cpu_b : &cpu_a) = c;
        if (found < 2) {
            fprintf(stderr, "core-rtt: this process may use only one CPU\n");
            return 1;
        }
    } else {
        fprintf(stderr, "usage: core-rtt [-q] [CPU_A CPU_B]\n");
        return 2;
    }
    CPU_ZERO(&on);
    CPU_SET(cpu_a, &on);
    if (pthread_setaffinity_np(pthread_self(), sizeof(on), &on) != 0) {
        fprintf(stderr, "core-rtt: cannot run on CPU %d\n", cpu_a);
        return 1;
    }
    CPU_ZERO(&on);
    CPU_SET(cpu_b, &on);
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setaffinity_np(&attr, sizeof(on), &on) != 0 ||
        pthread_create(&th, &attr, partner, NULL) != 0) {
        fprintf(stderr, "core-rtt: cannot start a thread on CPU %d\n", cpu_b);
        return 1;
    }
    for (int r = 0; r < REPEATS; r++) {
        long base = (long)r * ROUNDS;
        double t0 = now();
        for (long i = base; i < base + ROUNDS; i++) {
            atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2)
                ;
        }
        t[r] = (now() - t0) / ROUNDS * 1e9;
    }
    pthread_join(th, NULL);
    qsort(t, REPEATS, sizeof(t[0]), cmp_double);
    if (quiet)
        printf("%.0f\n", t[REPEATS / 2]);
    else
        printf("cpu %d <-> cpu %d: %.0f ns a round trip (median of %d x %d; min %.0f, max %.0f)\n",
               cpu_a, cpu_b, t[REPEATS / 2], REPEATS, ROUNDS, t[0], t[REPEATS - 1]);
    return 0;
}
