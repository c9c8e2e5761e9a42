/*
 * copy-ceiling.c -- the fastest two processes on this machine can pass bytes through shared
 * memory: the ceiling of any two-copy shared-memory transport (tutti's FIFOs, Open MPI's
 * vader eager path) and, as each byte crosses between cores once, near that of a single copy.
 *
 *   build/bench/copy-ceiling [TOTAL_BYTES [SLOT_BYTES [REPEATS]]]   (default 512K 128K 2000)
 *
 * Two processes (fork), each pinned to its own CPU where two are allowed; a pipe of 8 slots
 * per direction in a MAP_SHARED mapping, head and tail counters on their own cache lines.
 * The writer memcpy's TOTAL_BYTES from its buffer into free slots, the reader memcpy's them
 * out into its buffer: the same two copies a FIFO transport makes, with nothing else.
 * Prints time per TOTAL_BYTES and GB/s one way (one process writes, the other reads) and both
 * ways at once (each writes one pipe and reads the other: a 2-rank all-gather in place moves
 * TOTAL_BYTES each way). The best of 5 runs.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS 8

struct pipe_ctl {
    _Alignas(64) atomic_long head; /* slots written */
    _Alignas(64) atomic_long tail; /* slots read */
    _Alignas(64) atomic_int ready; /* processes waiting at the start line */
};

static size_t total, slot;
static int repeats;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static cpu_set_t allowed; /* the CPUs allowed at start (a run pins the parent) */

static void pin(int k)
{
    cpu_set_t one;
    int seen = 0;

    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed) && seen++ == k) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            sched_setaffinity(0, sizeof(one), &one);
            return;
        }
}

/* Process `me` (0 or 1) moves `repeats` x total bytes: writes pipe `me` if `wr`, reads pipe
 * 1 - me if `rd`, interleaving the two a slot at a time. */
static void move(struct pipe_ctl *ctl, char *slots, int me, int wr, int rd, char *src, char *dst)
{
    struct pipe_ctl *out = &ctl[me], *in = &ctl[1 - me];
    char *oslots = slots + (size_t)me * NSLOTS * slot,
         *islots = slots + (size_t)(1 - me) * NSLOTS * slot;
    long nch = (long)(total / slot);

    for (int it = 0; it < repeats; it++) {
        long sent = 0, got = 0;
        while ((wr && sent < nch) || (rd && got < nch)) {
            if (wr && sent < nch) {
                long h = atomic_load_explicit(&out->head, memory_order_relaxed);
                if (h - atomic_load_explicit(&out->tail, memory_order_acquire) < NSLOTS) {
                    memcpy(oslots + (size_t)(h % NSLOTS) * slot, src + (size_t)sent * slot, slot);
                    atomic_store_explicit(&out->head, h + 1, memory_order_release);
                    sent++;
                }
            }
            if (rd && got < nch) {
                long t = atomic_load_explicit(&in->tail, memory_order_relaxed);
                if (atomic_load_explicit(&in->head, memory_order_acquire) > t) {
                    memcpy(dst + (size_t)got * slot, islots + (size_t)(t % NSLOTS) * slot, slot);
                    atomic_store_explicit(&in->tail, t + 1, memory_order_release);
                    got++;
                }
            }
        }
    }
}

static double run(int both)
{
    struct pipe_ctl *ctl = mmap(NULL, 2 * sizeof(*ctl) + 2 * NSLOTS * slot, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *slots;
    double t0, t;
    pid_t pid;

    if (ctl == MAP_FAILED) {
        perror("copy-ceiling: mmap");
        exit(1);
    }
    slots = (char *)(ctl + 2);
    memset(slots, 0, 2 * NSLOTS * slot);
    pid = fork();
    if (pid < 0) {
        perror("copy-ceiling: fork");
        exit(1);
    }
    int me = pid == 0;
    char *src = aligned_alloc(4096, total), *dst = aligned_alloc(4096, total);
    if (!src || !dst) {
        fprintf(stderr, "copy-ceiling: out of memory\n");
        exit(1);
    }
    memset(src, me + 1, total);
    memset(dst, 0, total);
    pin(me);
    atomic_fetch_add(&ctl[0].ready, 1);
    while (atomic_load(&ctl[0].ready) < 2)
        sched_yield();
    t0 = now();
    move(ctl, slots, me, both || me == 0, both || me == 1, src, dst);
    t = (now() - t0) / repeats;
    if (me == 1) {
        if (dst[0] != 1 || dst[total - 1] != 1) {
            fprintf(stderr, "copy-ceiling: wrong bytes arrived\n");
            _exit(1);
        }
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        exit(1);
    free(src);
    free(dst);
    munmap(ctl, 2 * sizeof(*ctl) + 2 * NSLOTS * slot);
    return t;
}

static size_t bytes_arg(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return v;
}

int main(int argc, char **argv)
{
    total = argc > 1 ? bytes_arg(argv[1]) : 512 << 10;
    slot = argc > 2 ? bytes_arg(argv[2]) : 128 << 10;
    repeats = argc > 3 ? atoi(argv[3]) : 2000;
    if (slot == 0 || total < slot || total % slot != 0 || repeats < 1) {
        fprintf(stderr, "usage: copy-ceiling [TOTAL_BYTES [SLOT_BYTES [REPEATS]]]: TOTAL_BYTES a "
                        "multiple of SLOT_BYTES > 0, REPEATS >= 1\n");
        return 2;
    }
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        CPU_ZERO(&allowed);
    for (int both = 0; both < 2; both++) {
        double best = 1e30;
        for (int k = 0; k < 5; k++) {
            double t = run(both);
            best = t < best ? t : best;
        }
        printf("%-9s %10zu B in %6zu B slots: %9.2f us, %6.1f GB/s each way\n",
               both ? "both ways" : "one way", total, slot, best * 1e6, (double)total / best / 1e9);
    }
    return 0;
}
