/*
 * ddp_check -- run under tutti-run: the DDP layer (tutti_ddp.h) against values every rank can
 * compute for every other rank.
 *
 *   ddp_check average HOOK VIEWS   four steps over six parameters in several buckets, gradients
 *                                  marked ready in an order that is not the registration order
 *                                  (so the buckets are rebuilt after step one); after each
 *                                  finish every gradient equals the average over ranks within
 *                                  the hook's tolerance. HOOK: none, fp16, bf16, int8, user (a
 *                                  callback that queues its own all-reduce); VIEWS: 0 or 1
 *   ddp_check accum VIEWS          a no_sync step then a synchronised one: the gradients are the
 *                                  average of the two steps' sums
 *   ddp_check mismatch-count       the last rank registers one parameter fewer: init fails on
 *                                  every rank with a message naming that rank and both counts
 *   ddp_check mismatch-shape       the last rank registers l1.weight transposed: init fails on
 *                                  every rank naming the parameter, the rank and both shapes
 *   ddp_check unused               no rank marks b.unused: finish fails on every rank naming it
 *   ddp_check unused-one           only the last rank leaves b.unused out: it fails naming it,
 *                                  the others fail promptly (never a hang)
 *   ddp_check unused-zero          find_unused=1: b.unused counts as zero, the others average
 *
 * Also checked in every mode that gets that far: init gives every rank rank 0's values.
 * Exit status 0 means every check on this rank passed.
 */
#include "tutti.h"
#include "../report.h"
#include "tutti_ddp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NP 7 /* six used parameters and b.unused */

static const char *names[NP] = {"l0.weight", "l0.bias", "l1.weight", "l1.bias",
                                "l2.weight", "l2.bias", "b.unused"};
static const size_t shapes[NP][2] = {{300, 400}, {300, 1}, {200, 300}, {200, 1},
                                     {10, 200},  {10, 1},  {5, 1}};
/* Backward's order in every step: not the reverse of registration, so the rebuild matters. */
static const int ready_order[NP - 1] = {5, 4, 1, 3, 2, 0};

static float *vals[NP], *grads[NP];

static size_t count_of(int i)
{
    return shapes[i][0] * shapes[i][1];
}

/* Rank r's gradient element j of parameter i in step s: multiples of 1/16 in [-3, 3]. */
static float grad_value(int s, int r, int i, size_t j)
{
    return (float)((long)((j * 7 + (size_t)i * 13 + (size_t)r * 29 + (size_t)s * 3) % 97) - 48) /
           16.0f;
}

static double grad_avg(int s, int i, size_t j)
{
    double sum = 0;
    for (int r = 0; r < nranks; r++)
        sum += grad_value(s, r, i, j);
    return sum / nranks;
}

static tutti_result_t user_hook(void *state, const tutti_ddp_bucket_t *b, tutti_comm_t comm,
                                tutti_stream_t stream)
{
    int *calls = state;
    (*calls)++;
    return tutti_all_reduce(b->data, b->data, b->count, TUTTI_FLOAT32, TUTTI_SUM, comm, stream);
}

static int hook_of(const char *s, double *tol)
{
    static const struct {
        const char *name;
        int hook;
        double tol; /* |got - avg| <= tol * (1 + |avg|) */
    } t[] = {{"none", TUTTI_DDP_HOOK_NONE, 1e-6},
             {"fp16", TUTTI_DDP_HOOK_FP16, 4e-3},
             {"bf16", TUTTI_DDP_HOOK_BF16, 3e-2},
             {"int8", TUTTI_DDP_HOOK_INT8, 0.05},
             {"user", TUTTI_DDP_HOOK_USER, 1e-6}};
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
static tutti_ddp_t setup(tutti_comm_t comm, tutti_ddp_config_t *cfg, int nreg, int transpose)
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

static void check_values(int nreg)
{
    for (int i = 0; i < nreg; i++)
        for (size_t j = 0; j < count_of(i); j++)
            if (vals[i][j] != (float)((long)j % 1000)) {
                fail("after init %s[%zu] = %g, rank 0 registered %g", names[i], j, vals[i][j],
                     (double)((long)j % 1000));
                return;
            }
}

static float *grad_ptr(tutti_ddp_t d, int i, int views)
{
    return views ? tutti_ddp_grad(d, i) : grads[i];
}

/* Writes step s's gradients (added to what is there when `add`) and marks them ready, all but
 * parameter `skip` (-1: none). */
static tutti_result_t backward(tutti_ddp_t d, int s, int views, int add, int skip)
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
static void check_grads(tutti_ddp_t d, int views, int s0, int s1, double tol, const char *what)
{
    for (int i = 0; i < NP - 1; i++) {
        const float *g = grad_ptr(d, i, views);
        for (size_t j = 0; j < count_of(i); j++) {
            double want = 0;
            for (int s = s0; s <= s1; s++)
                want += grad_avg(s, i, j);
            if (fabs(g[j] - want) > tol * (1 + fabs(want))) {
                fail("%s: %s[%zu] = %.9g, the average over ranks is %.9g (tolerance %g)", what,
                     names[i], j, g[j], want, tol);
                return;
            }
        }
    }
}

static void mode_average(tutti_comm_t comm, const char *hook, int views)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_stats_t st;
    int calls = 0;
    double tol;

    cfg.hook = hook_of(hook, &tol);
    cfg.user_hook = user_hook;
    cfg.user_state = &calls;
    cfg.grad_as_bucket_view = views;
    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    tutti_ddp_t d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_values(NP - 1);
    for (int s = 0; s < 4; s++) {
        char what[64];
        if (backward(d, s, views, 0, -1) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
            fail("step %d: %s", s, tutti_ddp_last_error(d));
            return;
        }
        snprintf(what, sizeof(what), "step %d, hook %s, views %d", s, hook, views);
        check_grads(d, views, s, s, tol, what);
    }
    tutti_ddp_stats(d, &st);
    if (st.steps != 4 || !st.rebuilt || st.nbuckets < 3)
        fail("stats: %lld steps (want 4), rebuilt %d (want 1), %d buckets (want >= 3)", st.steps,
             st.rebuilt, st.nbuckets);
    if (cfg.hook == TUTTI_DDP_HOOK_USER && calls != 4 * st.nbuckets)
        fail("the user hook ran %d times; 4 steps x %d buckets", calls, st.nbuckets);
    tutti_ddp_destroy(d);
}

static void mode_accum(tutti_comm_t comm, int views)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    cfg.grad_as_bucket_view = views;
    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    tutti_ddp_t d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    /* A plain step first, so the no_sync pair runs on rebuilt buckets. */
    for (int round = 0; round < 2; round++) {
        if (tutti_ddp_no_sync(d, 1) != TUTTI_SUCCESS || backward(d, 0, views, 0, -1) ||
            tutti_ddp_finish(d) != TUTTI_SUCCESS || tutti_ddp_no_sync(d, 0) != TUTTI_SUCCESS ||
            backward(d, 1, views, 1, -1) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
            fail("accumulation round %d: %s", round, tutti_ddp_last_error(d));
            return;
        }
        check_grads(d, views, 0, 1, 1e-6, round ? "accumulated, rebuilt" : "accumulated");
    }
    tutti_ddp_destroy(d);
}

static void expect_error(tutti_ddp_t d, tutti_result_t rc, const char *call, const char *want1,
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

static void mode_mismatch(tutti_comm_t comm, int shape)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    int last = rank == nranks - 1;
    char who[32];
    tutti_ddp_t d = setup(comm, &cfg, last && !shape ? NP - 2 : NP - 1, last && shape);
    snprintf(who, sizeof(who), "rank %d", nranks - 1);
    expect_error(d, tutti_ddp_init(d), "tutti_ddp_init", who,
                 shape ? "'l1.weight' [300, 200]" : "registered 5 parameters");
    tutti_ddp_destroy(d);
}

static void mode_unused(tutti_comm_t comm, int which)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    int skip = which == 2 ? -1 : which == 1 && rank != nranks - 1 ? -1 : 6;
    cfg.find_unused = which == 2;
    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    tutti_ddp_t d = setup(comm, &cfg, NP, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_values(NP);
    if (which == 2) {
        /* b.unused is never marked: its stale gradient must come back as zero. */
        for (int s = 0; s < 3; s++) {
            for (int j = 0; j < 5; j++)
                grads[6][j] = 99.0f;
            if (backward(d, s, 0, 0, 6) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
                fail("step %d: %s", s, tutti_ddp_last_error(d));
                return;
            }
            check_grads(d, 0, s, s, 1e-6, "find_unused");
            for (int j = 0; j < 5; j++)
                if (grads[6][j] != 0.0f)
                    fail("step %d: unused b.unused[%d] = %g, want 0", s, j, grads[6][j]);
        }
    } else {
        /* Parameters 0..5 marked (skipping b.unused where this rank is to), then finish. */
        tutti_result_t rc = backward(d, 0, 0, 0, -1);
        if (rc == TUTTI_SUCCESS && skip < 0)
            rc = tutti_ddp_grad_ready(d, 6);
        if (rc == TUTTI_SUCCESS)
            rc = tutti_ddp_finish(d);
        if (skip == 6)
            expect_error(d, rc, "tutti_ddp_finish", "'b.unused' (6)", "find_unused");
        else if (rc == TUTTI_SUCCESS)
            fail("finish succeeded although rank %d left b.unused out", nranks - 1);
        else
            printf("rank %d: finish failed as it should (a peer left a parameter out): %s\n", rank,
                   tutti_ddp_last_error(d));
    }
    tutti_ddp_destroy(d);
}

int main(int argc, char **argv)
{
    tutti_comm_t comm;
    const char *mode = argc > 1 ? argv[1] : "";

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "ddp_check: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (!strcmp(mode, "average") && argc == 4)
        mode_average(comm, argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "accum") && argc == 3)
        mode_accum(comm, atoi(argv[2]));
    else if (!strcmp(mode, "mismatch-count"))
        mode_mismatch(comm, 0);
    else if (!strcmp(mode, "mismatch-shape"))
        mode_mismatch(comm, 1);
    else if (!strcmp(mode, "unused"))
        mode_unused(comm, 0);
    else if (!strcmp(mode, "unused-one"))
        mode_unused(comm, 1);
    else if (!strcmp(mode, "unused-zero"))
        mode_unused(comm, 2);
    else {
        fprintf(stderr, "usage: ddp_check average {none,fp16,bf16,int8,user} {0,1} | accum "
                        "{0,1} | mismatch-count | mismatch-shape | unused | unused-one | "
                        "unused-zero\n");
        return 2;
    }
    for (int i = 0; i < NP; i++) {
        free(vals[i]);
        free(grads[i]);
    }
    tutti_comm_destroy(comm);
    if (!failures)
        printf("ddp_check %s: rank %d ok\n", mode, rank);
    return failures ? 1 : 0;
}
