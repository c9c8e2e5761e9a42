/*
 * perf.h -- what the perf driver (perf_main.c) needs from a communication library. tutti-perf
 * links the tutti backend; bench/compare-mpi's mpi-perf links an MPI backend, so both print
 * the same table from the same timing loop and the same result check.
 *
 * Buffers follow tutti.h's layout, in place included; a backend whose library lays data out
 * differently converts inside run().
 */
#ifndef TT_PERF_H
#define TT_PERF_H

#include "tutti.h"

#include <stddef.h>

enum pcoll {
    ALL_REDUCE,
    ALL_GATHER,
    REDUCE_SCATTER,
    BROADCAST,
    REDUCE,
    SENDRECV,
    ALL_TO_ALL,
    GATHER,
    SCATTER,
    NPCOLL
};

/* How ranks' times combine (-a); a backend's allreduce_double sees the first three only. */
enum perf_agg { AGG_AVG, AGG_MIN, AGG_MAX, AGG_RANK0 };

struct perf_backend {
    const char *name; /* "tutti", "mpi": goes into JSON rows */
    /* Join; writes rank and size. Returns 0, or prints why and returns -1. */
    int (*init)(int *argc, char ***argv, int *rank, int *nranks);
    /* Can this library do this dtype/op at all? */
    int (*supports)(enum pcoll c, tutti_dtype_t t, int op);
    /* One call: count per rank block, as in tutti.h. 0 on success. */
    int (*run)(enum pcoll c, void *send, void *recv, size_t count, tutti_dtype_t t, int op,
               int root, int inplace);
    void (*barrier)(void);
    void (*allreduce_double)(double *v, enum perf_agg agg);
    void (*allreduce_sum_ll)(long long *v);
    const char *(*last_error)(void);
    void (*fini)(void);
    /* Device buffers (-G 1), where the backend has them (NULL otherwise): allocate, free,
     * copy either way (the pointers say which). */
    void *(*dev_alloc)(size_t bytes);
    void (*dev_free)(void *p);
    int (*dev_copy)(void *dst, const void *src, size_t bytes);
    /* Buffer registration (-R 1), where the library has it (NULL otherwise): 0 on success. */
    int (*mem_register)(void *p, size_t bytes, void **handle);
    int (*mem_deregister)(void *handle);
    /* Symmetric memory (-R 2), where the library has it (NULL otherwise): allocate memory
     * every rank of a host can address, free it; register a window over it (collective), end
     * it. 0 on success. */
    void *(*sym_alloc)(size_t bytes);
    void (*sym_free)(void *p);            /* (either kind) */
    void *(*sym_dev_alloc)(size_t bytes); /* on the device (-G 1 -R 2), where it has them */
    int (*win_register)(void *p, size_t bytes, void **handle);
    int (*win_deregister)(void *handle);
    /* Groups (-m N > 1: the N calls of an iteration in one group, as nccl-tests), where the
     * library has them (NULL otherwise: the calls go one by one). group_end: 0 on success. */
    void (*group_start)(void);
    int (*group_end)(void);
};

extern const struct perf_backend perf_backend;

/* The command line (perf_opts.c). */
struct perf_opts {
    size_t minb, maxb, incr;
    double factor;
    int iters, warmup, agg_iters, check, root, agg, csv, corrupt, device, reg;
    int dtypes[TUTTI_NUM_DTYPES], ndt;
    int ops[TUTTI_NUM_OPS + 1], nops; /* + 1: mulsum, values.h's VAL_PREMUL */
    const char *json, *csv_file;
};

extern const char *const perf_coll_names[NPCOLL];

/* An op's name on the command line and in the table: tutti_op_name's, and "mulsum" (nccl-tests'
 * name) for a premul-sum operator, values.h's VAL_PREMUL (its scalars: 2 on rank 0, 1 else). */
static inline const char *perf_op_name(int op)
{
    return op == TUTTI_NUM_OPS ? "mulsum" : tutti_op_name((tutti_op_t)op);
}

/* Print "NAME-perf: " fmt (with arg) on rank 0 and exit 2. */
_Noreturn void perf_die(const char *fmt, const char *arg);
void perf_usage(const char *name, int rank);
/* Fill o and the collectives to run from argv (argv[1] is COLL); dies on a bad flag. */
void perf_parse(int argc, char **argv, struct perf_opts *o, int *colls, int *ncolls,
                const struct perf_backend *be, int nranks);

#endif
