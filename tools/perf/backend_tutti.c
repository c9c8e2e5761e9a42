/* backend_tutti.c -- tutti-perf's backend: the calls of include/tutti.h (see perf.h). */
#include "perf.h"
#include "values.h"

#include <stdio.h>

#ifdef TUTTI_PERF_CUDA
#include <cuda_runtime_api.h>
#endif

static tutti_comm_t comm;
static int me, n;

static int t_init(int *argc, char ***argv, int *rank, int *nranks)
{
    (void)argc;
    (void)argv;
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-perf: cannot join: %s\n", tutti_last_error());
        return -1;
    }
    tutti_comm_rank(comm, &me);
    tutti_comm_size(comm, &n);
    *rank = me;
    *nranks = n;
    return 0;
}

static int t_supports(enum pcoll c, tutti_dtype_t t, int op)
{
    (void)c;
    (void)t;
    (void)op;
    return 1;
}

#ifdef TUTTI_PERF_CUDA
static char cuda_err[200];

static void *t_dev_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        snprintf(cuda_err, sizeof(cuda_err), "cudaMalloc: %s", cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void t_dev_free(void *p)
{
    cudaFree(p);
}

static int t_dev_copy(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) {
        snprintf(cuda_err, sizeof(cuda_err), "cudaMemcpy: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
#endif

/* mulsum (VAL_PREMUL): one premul-sum operator per dtype, made at its first call, with this
 * rank's scalar of values.h. */
static tutti_op_t premul_op(tutti_dtype_t t)
{
    static tutti_op_t ops[TUTTI_NUM_DTYPES];
    static int made[TUTTI_NUM_DTYPES];
    unsigned char k[8] = {0};

    if (!made[t]) {
        val_premul_scalar(t, me, k);
        if (tutti_op_create_premul_sum(&ops[t], k, t, TUTTI_SCALAR_HOST_IMMEDIATE, comm) !=
            TUTTI_SUCCESS)
            return (tutti_op_t)-1; /* the call then fails, naming it */
        made[t] = 1;
    }
    return ops[t];
}

static int t_run(enum pcoll c, void *s, void *r, size_t count, tutti_dtype_t t, int op, int root,
                 int inplace)
{
    tutti_op_t o = op == VAL_PREMUL ? premul_op(t) : (tutti_op_t)op;

    (void)inplace; /* tutti sees in place from the pointers */
    switch (c) {
    case ALL_REDUCE: return tutti_all_reduce(s, r, count, t, o, comm, NULL);
    case ALL_GATHER: return tutti_all_gather(s, r, count, t, comm, NULL);
    case REDUCE_SCATTER: return tutti_reduce_scatter(s, r, count, t, o, comm, NULL);
    case BROADCAST: return tutti_broadcast(s, r, count, t, root, comm, NULL);
    case REDUCE: return tutti_reduce(s, r, count, t, o, root, comm, NULL);
    case ALL_TO_ALL: return tutti_all_to_all(s, r, count, t, comm, NULL);
    case GATHER: return tutti_gather(s, r, count, t, root, comm, NULL);
    case SCATTER: return tutti_scatter(s, r, count, t, root, comm, NULL);
    default:
        tutti_group_start();
        tutti_send(s, count, t, (me + 1) % n, comm, NULL);
        tutti_recv(r, count, t, (me + n - 1) % n, comm, NULL);
        return tutti_group_end();
    }
}

static void t_group_start(void)
{
    tutti_group_start();
}

static int t_group_end(void)
{
    return tutti_group_end();
}

static void t_barrier(void)
{
    tutti_barrier(comm, NULL);
}

static void t_allreduce_double(double *v, enum perf_agg agg)
{
    tutti_all_reduce(v, v, 1, TUTTI_FLOAT64,
                     agg == AGG_MIN   ? TUTTI_MIN
                     : agg == AGG_MAX ? TUTTI_MAX
                                      : TUTTI_AVG,
                     comm, NULL);
}

static void t_allreduce_sum_ll(long long *v)
{
    tutti_all_reduce(v, v, 1, TUTTI_INT64, TUTTI_SUM, comm, NULL);
}

static const char *t_last_error(void)
{
#ifdef TUTTI_PERF_CUDA
    if (cuda_err[0])
        return cuda_err;
#endif
    return tutti_comm_last_error(comm);
}

static int t_mem_register(void *p, size_t bytes, void **handle)
{
    return tutti_comm_register(comm, p, bytes, handle) == TUTTI_SUCCESS ? 0 : -1;
}

static int t_mem_deregister(void *handle)
{
    return tutti_comm_deregister(comm, handle) == TUTTI_SUCCESS ? 0 : -1;
}

static void *t_sym_alloc(size_t bytes)
{
    void *p = NULL;
    return tutti_mem_alloc(comm, bytes, &p) == TUTTI_SUCCESS ? p : NULL;
}

#ifdef TUTTI_PERF_CUDA
static void *t_sym_dev_alloc(size_t bytes)
{
    void *p = NULL;
    return tutti_mem_alloc_device(comm, bytes, &p) == TUTTI_SUCCESS ? p : NULL;
}
#endif

static void t_sym_free(void *p)
{
    tutti_mem_free(comm, p);
}

static int t_win_register(void *p, size_t bytes, void **handle)
{
    return tutti_comm_window_register(comm, p, bytes, handle) == TUTTI_SUCCESS ? 0 : -1;
}

static int t_win_deregister(void *handle)
{
    return tutti_comm_window_deregister(comm, handle) == TUTTI_SUCCESS ? 0 : -1;
}

static void t_fini(void)
{
    tutti_comm_destroy(comm);
}

const struct perf_backend perf_backend = {
    .name = "tutti",
    .init = t_init,
    .supports = t_supports,
    .run = t_run,
    .barrier = t_barrier,
    .allreduce_double = t_allreduce_double,
    .allreduce_sum_ll = t_allreduce_sum_ll,
    .last_error = t_last_error,
    .fini = t_fini,
    .mem_register = t_mem_register,
    .mem_deregister = t_mem_deregister,
    .sym_alloc = t_sym_alloc,
    .sym_free = t_sym_free,
    .win_register = t_win_register,
    .win_deregister = t_win_deregister,
    .group_start = t_group_start,
    .group_end = t_group_end,
#ifdef TUTTI_PERF_CUDA
    .dev_alloc = t_dev_alloc,
    .dev_free = t_dev_free,
    .dev_copy = t_dev_copy,
    .sym_dev_alloc = t_sym_dev_alloc,
#endif
};
