/*
 * check.h -- CHECK(cond, fmt, ...) for the small multi-rank check programs: a failed
 * condition counts in `failures` and prints one line naming `rank` (both the program's own).
 */
#ifndef TT_TESTS_CHECK_H
#define TT_TESTS_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL rank %d: ", rank);                                                        \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

#endif
