/*
 * wait.h -- how every wait in tutti waits: spin briefly, then yield, then sleep.
 *
 * Ranks may outnumber cores, so a waiter must give its core to the rank it waits for. The
 * first `spin_limit` polls (TUTTI_SPIN) spin (cheap when the peer runs on another core), the next
 * ones call sched_yield (hands the core to a runnable peer at once), and after `yield_s`
 * without progress (TUTTI_YIELD_US: 1 ms) the waiter sleeps in growing steps up to 200 us. Any
 * progress resets the backoff. (Where waits block, exec.c yields for yield_s and then blocks
 * in the kernel until the peer wakes it.)
 */
#ifndef TT_WAIT_H
#define TT_WAIT_H

#include <sched.h>
#include <time.h>

struct tt_backoff {
    unsigned polls;
    unsigned spin_limit;
    double yield_s;     /* how long to yield before sleeping */
    double yield_until; /* monotonic seconds; 0 = not yet yielding */
    long sleep_ns;
};

static inline double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Ask for the cache line at p in exclusive state: a later store to it need not wait for the
 * other cores' copies to be invalidated (a line a peer polled last time round). */
static inline void tt_prefetch_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" ::"m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

static inline void tt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void tt_backoff_init(struct tt_backoff *b, unsigned spin_limit, double yield_s);

static inline void tt_backoff_reset(struct tt_backoff *b)
{
    b->polls = 0;
    b->yield_until = 0;
    b->sleep_ns = 0;
}

/* Wait a little; returns the current time if it looked at the clock, else 0. */
double tt_backoff_wait(struct tt_backoff *b);

#endif
