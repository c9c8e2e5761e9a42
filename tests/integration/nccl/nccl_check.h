/*
 * nccl_check.h -- what nccl_check's files share: nccl_main.c makes the communicators (the ways
 * NCCL's user guide shows) and calls nccl_check.c's battery, run_checks(); nccl_values.c has
 * the element values.
 */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>

#define MAXR 8
#define GUARD 64 /* bytes after every output, which no call may touch */

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define NC(x)                                                                                      \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_), \
                    ncclGetLastError(NULL));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct rank {
    ncclComm_t comm;
    int rank, dev;
    cudaStream_t s;
};

/* This process's ranks: one, or every rank (one thread drives them all, in groups). */
extern struct rank R[MAXR];
extern int nlocal, nranks, checks;

struct buf {
    void *dev;
    size_t bytes; /* without the guard */
};

/* A device buffer of `bytes` with guard bytes after it, on rank k's device; freed by dfree. */
struct buf dalloc(int k, size_t bytes);
void dfree(struct buf *b);

/* Element values (nccl_values.c): a type's size; element i of p as a double and back (small
 * integers, exact in every type); rank r's input element i (1..5; 1..2 for products). */
size_t dsize(ncclDataType_t d);
void put(ncclDataType_t d, void *p, size_t i, double v);
double get(ncclDataType_t d, const void *p, size_t i);
double val(int r, size_t i, int prod);

/* Every check, on every rank of this process; exits non-zero at the first wrong result. */
void run_checks(void);

#endif
