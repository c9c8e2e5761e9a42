/*
 * test_values.c -- the checkers' own reference (tools/values.c): val_fill writes, element by
 * element, what val_gen and val_encode give for each index, for every dtype and kind of data,
 * at every phase of the period and at lengths on both sides of its block size; val_count_wrong
 * counts exactly the elements that differ and names the first, wherever they lie.
 */
#include "values.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 20000

static const int kinds[] = {VAL_NO_OP, TUTTI_SUM, TUTTI_PROD, TUTTI_MIN, VAL_PREMUL};

/* Lengths around val_fill's block (4096 bytes of whole periods) and the periods themselves. */
static const size_t lens[] = {0,   1,   2,    3,    8,    9,    36,   37,   38,   111,  455,
                              456, 512, 1021, 1024, 1025, 2047, 4095, 4096, 4097, 12289};

Test(values, fill_matches_the_element_reference)
{
    unsigned char *got = malloc(MAX_N * 8 + 8), *want = malloc(MAX_N * 8 + 8);

    cr_assert(got && want);
    for (int t = 0; t < TUTTI_NUM_DTYPES; t++) {
        size_t es = tutti_dtype_size((tutti_dtype_t)t);
        for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++)
            for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
                for (size_t first = 0; first < 40; first += 7) {
                    int op = kinds[ki], r = (int)(first % 5);
                    size_t n = lens[li];
                    for (size_t i = 0; i < n; i++) {
                        int64_t v = val_gen((tutti_dtype_t)t, op, r, first + i);
                        val_encode((tutti_dtype_t)t, v, (double)v, want + i * es);
                    }
                    memset(got, 0xA5, n * es + 8);
                    val_fill((tutti_dtype_t)t, op, r, got, n, first);
                    cr_assert(memcmp(got, want, n * es) == 0,
                              "dtype %d kind %d n %zu first %zu: fill differs", t, op, n, first);
                    for (size_t b = n * es; b < n * es + 8; b++)
                        cr_assert(got[b] == 0xA5, "dtype %d n %zu: wrote past the end", t, n);
                }
    }
    free(got);
    free(want);
}

Test(values, count_wrong_counts_every_difference)
{
    unsigned char *buf = malloc(MAX_N * 8), table[VAL_MAX_PERIOD * 8];
    const size_t n = MAX_N;

    cr_assert(buf);
    for (int t = 0; t < TUTTI_NUM_DTYPES; t++) {
        size_t es = tutti_dtype_size((tutti_dtype_t)t);
        for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++) {
            int op = kinds[ki];
            for (size_t first = 0; first < 40; first += 7) {
                size_t bad = 12345;
                val_expect_input((tutti_dtype_t)t, op, 1, table);
                val_fill((tutti_dtype_t)t, op, 1, buf, n, first);
                cr_assert(val_count_wrong((tutti_dtype_t)t, op, buf, n, first, table, &bad) == 0);
                cr_assert(bad == 12345, "first_bad set with nothing wrong");
                /* The right data read at another phase is wrong (every period's values
                 * differ from their neighbours'). */
                cr_assert(val_count_wrong((tutti_dtype_t)t, op, buf, n, first + 1, table, NULL) >
                          0);
                /* Single bytes flipped: first, last, at block edges, and several in a block. */
                size_t at[] = {n - 1, 4096 / es, 4096 / es - 1, 777, 778, 780, 9000, 0};
                size_t k = sizeof(at) / sizeof(at[0]);
                size_t lo = n; /* the first after element 0 */
                for (size_t j = 0; j < k; j++) {
                    buf[at[j] * es + (j % es)] ^= 0x10;
                    lo = at[j] && at[j] < lo ? at[j] : lo;
                }
                cr_assert(val_count_wrong((tutti_dtype_t)t, op, buf, n, first, table, &bad) == k,
                          "dtype %d kind %d first %zu: wrong count", t, op, first);
                cr_assert(bad == 0, "first bad is %zu, not 0", bad);
                buf[(k - 1) % es] ^= 0x10; /* element 0's flip undone */
                cr_assert(val_count_wrong((tutti_dtype_t)t, op, buf, n, first, table, &bad) ==
                          k - 1);
                cr_assert(bad == lo, "first bad is %zu, not %zu", bad, lo);
                /* Checked from an offset: the logical index moves with it. */
                cr_assert(val_count_wrong((tutti_dtype_t)t, op, buf + 100 * es, n - 100,
                                          first + 100, table, &bad) == k - 1);
                cr_assert(bad == lo - 100);
            }
        }
    }
    free(buf);
}
