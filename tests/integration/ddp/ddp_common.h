/*
 * ddp_common.h -- what the DDP layer's check programs share (ddp_check.c: averages, unused
 * parameters, mismatches, buffers, checkpoints; ddp_join_check.c: uneven inputs): six
 * parameters and a spare one, each rank's gradients and their average, the hooks, setting up
 * a context, two buffers, a backward pass that marks gradients ready, and the checks of
 * values, gradients and error messages.
 */
#ifndef TT_DDP_COMMON_H
#define TT_DDP_COMMON_H

#include "tutti.h"
#include "../../support/report.h"
#include "tutti_ddp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each program uses a part of what follows. */
#define SHARED static __attribute__((unused))

#define NP 7 /* six used parameters and b.unused */

SHARED const char *names[NP] = {"l0.weight", "l0.bias", "l1.weight", "l1.bias",
                                "l2.weight", "l2.bias", "b.unused"};
SHARED const size_t shapes[NP][2] = {{300, 400}, {300, 1}, {200, 300}, {200, 1},
                                     {10, 200},  {10, 1},  {5, 1}};
/* Backward's order in every step: not the reverse of registration, so the rebuild matters. */
SHARED const int ready_order[NP - 1] = {5, 4, 1, 3, 2, 0};

SHARED float *vals[NP], *grads[NP];

SHARED size_t count_of(int i)
{
    return shapes[i][0] * shapes[i][1];
}

/* Rank r's gradient element j of parameter i in step s: multiples of 1/16 in [-3, 3]. */
SHARED float grad_value(int s, int r, int i, size_t j)
{
    return (float)((long)((j * 7 + (size_t)i * 13 + (size_t)r * 29 + (size_t)s * 3) % 97) - 48) /
           16.0f;
}

SHARED double grad_avg(int s, int i, size_t j)
{
    double sum = 0;
    for (int r = 0; r < nranks; r++)
        sum += grad_value(s, r, i, j);
    return sum / nranks;
}

SHARED tutti_result_t user_hook(void *state, const tutti_ddp_bucket_t *b, tutti_comm_t comm,
                                tutti_stream_t stream)
{
    int *calls = state;
    (*calls)++;
    return tutti_all_reduce(b->data, b->data, b->count, TUTTI_FLOAT32, TUTTI_SUM, comm, stream);
}

SHARED int hook_of(const char *s, double *tol)
{
    static const struct {
        const char *name;
        int hook;
        double tol; /* |got - avg| <= tol * (1 + |avg|) */
    } t[] = {{"none", TUTTI_DDP_HOOK_NONE, 1e-6},
             {"fp16", TUTTI_DDP_HOOK_FP16, 4e-3},
             {"bf16", TUTTI_DDP_HOOK_BF16, 3e-2},
             {"int8", TUTTI_DDP_HOOK_INT8, 0.05},
             {"user", TUTTI_DDP_HOOK_USER, 1e-6},
             {"topk", TUTTI_DDP_HOOK_TOPK, -1}, /* -1: an approximation, unchecked */
             {"powersgd", TUTTI_DDP_HOOK_POWERSGD, -1}};
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
        if (!strcmp(s, t[k].name)) {
            *tol = t[k].tol;
            return t[k].hook;
        }
    fprintf(stderr, "ddp_check: unknown hook %s\n", s);
    exit(2);
}

/* Creates the context and registers the parameters (nreg of them; the shape of l1.weight
 * transposed when `transpose`). Values start as rank * 1000 + j. */
SHARED tutti_ddp_t setup(tutti_comm_t comm, tutti_ddp_config_t *cfg, int nreg, int transpose)
{
    tutti_ddp_t d = NULL;
    tutti_result_t rc = tutti_ddp_create(&d, comm, cfg);
    if (rc != TUTTI_SUCCESS) {
        fail("tutti_ddp_create: %s", tutti_ddp_last_error(d));
        exit(1);
    }
    for (int i = 0; i < nreg; i++) {
        size_t shape[2] = {shapes[i][0], shapes[i][1]}, n = count_of(i);
        if (transpose && i == 2) { /* [300, 200] where the others have [200, 300] */
            shape[0] = shapes[i][1];
            shape[1] = shapes[i][0];
        }
        vals[i] = malloc(n * sizeof(float));
        grads[i] = calloc(n, sizeof(float));
        if (!vals[i] || !grads[i]) {
            fail("out of memory");
            exit(1);
        }
        for (size_t j = 0; j < n; j++)
            vals[i][j] = (float)(rank * 1000 + (long)j % 1000);
        rc = tutti_ddp_register(d, names[i], vals[i], cfg->grad_as_bucket_view ? NULL : grads[i], n,
                                shape[1] > 1 ? 2 : 1, shape, NULL);
        if (rc != TUTTI_SUCCESS) {
            fail("tutti_ddp_register %s: %s", names[i], tutti_ddp_last_error(d));
            exit(1);
        }
    }
    return d;
}

/* Buffers (model state that is not trained), as a BatchNorm layer would keep them. */
#define NB 2
SHARED const char *const buf_names[NB] = {"bn.running_mean", "bn.batches"};
SHARED const size_t buf_counts[NB] = {300, 1};
SHARED float bufs[NB][300];

/* Rank r's buffer b, element j, as its forward pass of global step gs leaves it (-1: as
 * registered). */
SHARED float buf_value(int gs, int r, int b, size_t j)
{
    return (float)(gs * 1000 + r * 100 + b * 7 + (long)(j % 50));
}

SHARED void set_buffers(int gs)
{
    for (int b = 0; b < NB; b++)
        for (size_t j = 0; j < buf_counts[b]; j++)
            bufs[b][j] = buf_value(gs, rank, b, j);
}

/* Registers the buffers with this rank's values; the first with first_count values. */
SHARED void add_buffers(tutti_ddp_t d, size_t first_count)
{
    set_buffers(-1);
    for (int b = 0; b < NB; b++)
        if (tutti_ddp_register_buffer(d, buf_names[b], bufs[b], b ? buf_counts[b] : first_count) !=
            TUTTI_SUCCESS) {
            fail("tutti_ddp_register_buffer %s: %s", buf_names[b], tutti_ddp_last_error(d));
            exit(1);
        }
}

/* Every buffer holds what rank r's forward pass of step gs left in it. */
SHARED void check_buffers(int gs, int r, const char *what)
{
    for (int b = 0; b < NB; b++)
        for (size_t j = 0; j < buf_counts[b]; j++)
            if (bufs[b][j] != buf_value(gs, r, b, j)) {
                fail("%s: %s[%zu] = %g, rank %d's is %g", what, buf_names[b], j, bufs[b][j], r,
                     buf_value(gs, r, b, j));
                return;
            }
}

SHARED void check_values(int nreg)
{
    for (int i = 0; i < nreg; i++)
        for (size_t j = 0; j < count_of(i); j++)
            if (vals[i][j] != (float)((long)j % 1000)) {
                fail("after init %s[%zu] = %g, rank 0 registered %g", names[i], j, vals[i][j],
                     (double)((long)j % 1000));
                return;
            }
}

SHARED float *grad_ptr(tutti_ddp_t d, int i, int views)
{
    return views ? tutti_ddp_grad(d, i) : grads[i];
}

/* cfg for the checks' small buckets (several per step) with hook (hook_of: *tol), the user
 * hook counting its calls in *calls, and views. */
SHARED void check_config(tutti_ddp_config_t *cfg, const char *hook, int views, int *calls,
                         double *tol)
{
    cfg->hook = hook_of(hook, tol);
    cfg->user_hook = user_hook;
    cfg->user_state = calls;
    cfg->grad_as_bucket_view = views;
    cfg->bucket_cap_mb = 0.1;
    cfg->first_bucket_mb = 0.005;
}

/* Writes step s's gradients (added to what is there when `add`) and marks them ready, all but
 * parameter `skip` (-1: none). */
SHARED tutti_result_t backward(tutti_ddp_t d, int s, int views, int add, int skip)
{
    for (int k = 0; k < NP - 1; k++) {
        int i = ready_order[k];
        float *g = grad_ptr(d, i, views);
        if (i == skip)
            continue;
        for (size_t j = 0; j < count_of(i); j++)
            g[j] = (add ? g[j] : 0) + grad_value(s, rank, i, j);
        tutti_result_t rc = tutti_ddp_grad_ready(d, i);
        if (rc != TUTTI_SUCCESS)
            return rc;
    }
    return TUTTI_SUCCESS;
}

/* Every used gradient against the average of steps s0..s1 within tol; b.unused against
 * `unused` when >= 0. */
SHARED void check_against(tutti_ddp_t d, int views, int s0, int s1, double tol, const char *what,
                          double (*avg)(int s, int i, size_t j))
{
    for (int i = 0; i < NP - 1; i++) {
        const float *g = grad_ptr(d, i, views);
        for (size_t j = 0; j < count_of(i); j++) {
            double want = 0;
            for (int s = s0; s <= s1; s++)
                want += avg(s, i, j);
            if (fabs(g[j] - want) > tol * (1 + fabs(want))) {
                fail("%s: %s[%zu] = %.9g, the average over ranks is %.9g (tolerance %g)", what,
                     names[i], j, g[j], want, tol);
                return;
            }
        }
    }
}

SHARED void check_grads(tutti_ddp_t d, int views, int s0, int s1, double tol, const char *what)
{
    check_against(d, views, s0, s1, tol, what, grad_avg);
}

SHARED void expect_error(tutti_ddp_t d, tutti_result_t rc, const char *call, const char *want1,
                         const char *want2)
{
    const char *msg = tutti_ddp_last_error(d);
    if (rc == TUTTI_SUCCESS) {
        fail("%s succeeded; it should have failed naming %s", call, want1);
        return;
    }
    printf("rank %d: %s failed as it should: %s\n", rank, call, msg);
    if ((want1 && !strstr(msg, want1)) || (want2 && !strstr(msg, want2)))
        fail("%s: the message does not name '%s' and '%s'", call, want1, want2 ? want2 : "");
}

/* A new empty file that rank 0 made, its name on every rank; 0 (and a failure) if none. */
SHARED int tmp_path(tutti_comm_t comm, char *path, size_t size)
{
    if (rank == 0) {
        int fd;
        snprintf(path, size, "/tmp/tutti-ddp-check-XXXXXX");
        fd = mkstemp(path);
        if (fd < 0)
            path[0] = 0;
        else
            close(fd);
    }
    if (tutti_broadcast(path, path, size, TUTTI_UINT8, 0, comm, NULL) != TUTTI_SUCCESS ||
        !path[0]) {
        fail("no temporary file for the checkpoint");
        return 0;
    }
    return 1;
}

/* Frees the parameters, leaves the job; the exit status (0: every check passed). */
static int ddp_end(tutti_comm_t comm, const char *prog, const char *mode)
{
    for (int i = 0; i < NP; i++) {
        free(vals[i]);
        free(grads[i]);
    }
    return report_end(comm, prog, mode);
}

#endif
