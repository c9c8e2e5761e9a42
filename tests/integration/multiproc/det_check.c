/*
 * det_check -- TUTTI_DETERMINISTIC=1 results against a rank-order fold computed here.
 *
 *   det_check [expect-mismatch]
 * Inputs are floats of wide range (sums depend on their order). For all-reduce (sum and avg),
 * reduce-scatter and reduce, every rank computes acc = x_0, acc = x_q + acc for q = 1..n-1
 * itself and requires every element to match bitwise. Run under different channel counts,
 * chunk sizes, forced algorithms and node layouts, each passing run proves the result is the
 * same bits. With "expect-mismatch" (deterministic mode off) it exits 0 only if some element
 * differs: the check can tell.
 */
#include "tutti.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float val(int r, size_t i)
{
    uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    float m = (float)((int64_t)(h % 2000001) - 1000000) / 1000.0f;
    return m * (float)(1u << (h >> 59)); /* magnitudes from 1e-3 to 3e10 */
}

static float fold(int n, size_t i)
{
    volatile float acc = val(0, i);
    for (int q = 1; q < n; q++)
        acc = val(q, i) + acc;
    return acc;
}

int main(int argc, char **argv)
{
    int expect_mismatch = argc > 1 && strcmp(argv[1], "expect-mismatch") == 0;
    size_t count = 300007, wrong = 0;
    tutti_comm_t comm;
    int rank, n;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS)
        return 2;
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &n);
    float *x = malloc(count * n * sizeof(float)), *y = malloc(count * n * sizeof(float));
    for (size_t i = 0; i < count * (size_t)n; i++)
        x[i] = val(rank, i);

    /* all-reduce, sum and avg */
    for (int avg = 0; avg < 2; avg++) {
        if (tutti_all_reduce(x, y, count, TUTTI_FLOAT32, avg ? TUTTI_AVG : TUTTI_SUM, comm, NULL) !=
            TUTTI_SUCCESS)
            return 2;
        for (size_t i = 0; i < count; i++) {
            volatile float want = fold(n, i);
            if (avg)
                want = want / (float)n;
            wrong += memcmp(&y[i], (const void *)&want, 4) != 0;
        }
    }
    /* reduce-scatter: this rank's block */
    if (tutti_reduce_scatter(x, y, count, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS)
        return 2;
    for (size_t i = 0; i < count; i++) {
        float want = fold(n, (size_t)rank * count + i);
        wrong += memcmp(&y[i], &want, 4) != 0;
    }
    /* reduce to the last rank */
    if (tutti_reduce(x, y, count, TUTTI_FLOAT32, TUTTI_SUM, n - 1, comm, NULL) != TUTTI_SUCCESS)
        return 2;
    if (rank == n - 1)
        for (size_t i = 0; i < count; i++) {
            float want = fold(n, i);
            wrong += memcmp(&y[i], &want, 4) != 0;
        }
    /* Every rank must agree on the verdict. */
    long long w = (long long)wrong;
    tutti_all_reduce(&w, &w, 1, TUTTI_INT64, TUTTI_SUM, comm, NULL);
    if (rank == 0)
        printf("det_check: %d ranks, %lld element(s) differ from the rank-order fold\n", n, w);
    tutti_comm_destroy(comm);
    free(x);
    free(y);
    return expect_mismatch ? (w > 0 ? 0 : 1) : (w == 0 ? 0 : 1);
}
