/* wait.c -- see wait.h. */
#include "lib/base/wait.h"

void tt_backoff_init(struct tt_backoff *b, unsigned spin_limit, double yield_s)
{
    b->spin_limit = spin_limit;
    b->yield_s = yield_s;
    tt_backoff_reset(b);
}

double tt_backoff_wait(struct tt_backoff *b)
{
    double now;

    if (b->polls < b->spin_limit) {
        b->polls++;
        tt_cpu_relax();
        return 0;
    }
    now = tt_now();
    if (b->yield_until == 0)
        b->yield_until = now + b->yield_s;
    if (now < b->yield_until) {
        sched_yield();
        return now;
    }
    b->sleep_ns = b->sleep_ns ? (b->sleep_ns * 2 > 200000 ? 200000 : b->sleep_ns * 2) : 10000;
    nanosleep(&(struct timespec){0, b->sleep_ns}, NULL);
    return now;
}
