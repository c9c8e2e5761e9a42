/*
 * test_stream.c -- runs stream_check under tutti-run for 1 to 4 ranks in each mode (see
 * stream_check.c); a rank's failure lines are in the test log.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static void run(int n, const char *mode)
{
    char cmd[1024];
    int st;

    snprintf(cmd, sizeof(cmd), "'%s' -n %d '%s' %s 2>&1", getenv("TUTTI_RUN"), n,
             getenv("STREAM_CHECK"), mode);
    st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", cmd,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

#define STREAM_TESTS(n)                                                                            \
    Test(stream, order_##n##_ranks, .timeout = 120)                                                \
    {                                                                                              \
        run(n, "order");                                                                           \
    }                                                                                              \
    Test(stream, async_##n##_ranks, .timeout = 120)                                                \
    {                                                                                              \
        run(n, "async");                                                                           \
    }                                                                                              \
    Test(stream, mixed_##n##_ranks, .timeout = 120)                                                \
    {                                                                                              \
        run(n, "mixed");                                                                           \
    }                                                                                              \
    Test(stream, fail_##n##_ranks, .timeout = 120)                                                 \
    {                                                                                              \
        run(n, "fail");                                                                            \
    }                                                                                              \
    Test(stream, abort_##n##_ranks, .timeout = 120)                                                \
    {                                                                                              \
        run(n, "abort");                                                                           \
    }

STREAM_TESTS(1)
STREAM_TESTS(2)
STREAM_TESTS(3)
STREAM_TESTS(4)
