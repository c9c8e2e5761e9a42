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
 *   ddp_check mismatch-setting     the last rank alone sets uneven_inputs: init fails on every
 *                                  rank naming the setting and that rank
 *   ddp_check mismatch-buffer      the last rank's first buffer is one value short: init
 *                                  fails on every rank naming the buffer and that rank
 *   ddp_check buffers              two buffers that each rank's "forward pass" fills with its
 *                                  own values: after init and after each synchronised step
 *                                  every rank holds rank 0's; a checkpoint saved and loaded
 *                                  gives them back, with the parameters
 *   ddp_check damaged              damaged checkpoints (cut, a byte flipped, resealed with
 *                                  another version, parameter count or name, missing, and 60
 *                                  random damages) are refused on every rank naming why, and
 *                                  leave the parameters alone; the good file loads after them
 *   ddp_check join HOOK VIEWS OPT  uneven inputs: two epochs in which ranks train different
 *                                  numbers of steps (rank 0 none in the first) and then call
 *                                  tutti_ddp_join. After each step every gradient is the sum of
 *                                  the training ranks' over the number of ranks; after each
 *                                  join every rank holds the same parameters, those of plain
 *                                  SGD (lr 0.25) on those averages; the buffers are those of
 *                                  the highest rank training in each step, and after a join
 *                                  of the last one. OPT: app (the application updates the
 *                                  parameters), sgd0, sgd1, sgd2 (tutti_ddp_step
 *                                  with that zero; sgd2 reduces each rank only its shard of
 *                                  the gradients, so there only the parameters are checked).
 *                                  HOOK as above, or topk or powersgd, approximations: there
 *                                  only the ranks' agreement is checked
 *   ddp_check join-errors          join without uneven_inputs, with no_sync on and mid-step
 *                                  fails naming the cause; then every rank joins at once
 *
 * Also checked in every mode that gets that far: init gives every rank rank 0's values.
 * Exit status 0 means every check on this rank passed.
 */
#include "tutti.h"
#include "../report.h"
#include "tutti_ddp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Buffers (model state that is not trained), as a BatchNorm layer would keep them. */
#define NB 2
static const char *const buf_names[NB] = {"bn.running_mean", "bn.batches"};
static const size_t buf_counts[NB] = {300, 1};
static float bufs[NB][300];

/* Rank r's buffer b, element j, as its forward pass of global step gs leaves it (-1: as
 * registered). */
static float buf_value(int gs, int r, int b, size_t j)
{
    return (float)(gs * 1000 + r * 100 + b * 7 + (long)(j % 50));
}

static void set_buffers(int gs)
{
    for (int b = 0; b < NB; b++)
        for (size_t j = 0; j < buf_counts[b]; j++)
            bufs[b][j] = buf_value(gs, rank, b, j);
}

/* Registers the buffers with this rank's values; the first with first_count values. */
static void add_buffers(tutti_ddp_t d, size_t first_count)
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
static void check_buffers(int gs, int r, const char *what)
{
    for (int b = 0; b < NB; b++)
        for (size_t j = 0; j < buf_counts[b]; j++)
            if (bufs[b][j] != buf_value(gs, r, b, j)) {
                fail("%s: %s[%zu] = %g, rank %d's is %g", what, buf_names[b], j, bufs[b][j], r,
                     buf_value(gs, r, b, j));
                return;
            }
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
static void check_against(tutti_ddp_t d, int views, int s0, int s1, double tol, const char *what,
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

static void check_grads(tutti_ddp_t d, int views, int s0, int s1, double tol, const char *what)
{
    check_against(d, views, s0, s1, tol, what, grad_avg);
}

static void mode_average(tutti_comm_t comm, const char *hook, int views)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_stats_t st;
    int calls = 0;
    double tol;

    cfg.hook = hook_of(hook, &tol);
    if (tol < 0) {
        fprintf(stderr, "ddp_check: average: %s approximates the average; try it with join\n",
                hook);
        exit(2);
    }
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

/* what: 0 one parameter fewer, 1 a shape transposed, 2 a setting (uneven_inputs), 3 a buffer
 * one value short */
static void mode_mismatch(tutti_comm_t comm, int what)
{
    static const char *const says[] = {"registered 5 parameters", "'l1.weight' [300, 200]",
                                       "uneven_inputs = 1", "buffer 0 differs"};
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    int last = rank == nranks - 1;
    char who[32];
    cfg.uneven_inputs = last && what == 2;
    tutti_ddp_t d = setup(comm, &cfg, last && what == 0 ? NP - 2 : NP - 1, last && what == 1);
    add_buffers(d, last && what == 3 ? buf_counts[0] - 1 : buf_counts[0]);
    snprintf(who, sizeof(who), "rank %d", nranks - 1);
    expect_error(d, tutti_ddp_init(d), "tutti_ddp_init", who, says[what]);
    tutti_ddp_destroy(d);
}

/* A new empty file that rank 0 made, its name on every rank; 0 (and a failure) if none. */
static int tmp_path(tutti_comm_t comm, char *path, size_t size)
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

static void mode_buffers(tutti_comm_t comm)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    char path[64] = "", what[64];
    float *keep = malloc(count_of(0) * sizeof(float));
    tutti_ddp_t d;

    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    d = setup(comm, &cfg, NP - 1, 0);
    add_buffers(d, buf_counts[0]);
    if (!keep || tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_buffers(-1, 0, "after init");
    for (int s = 0; s < 3; s++) {
        set_buffers(s); /* this rank's forward pass */
        if (backward(d, s, 0, 0, -1) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
            fail("step %d: %s", s, tutti_ddp_last_error(d));
            return;
        }
        snprintf(what, sizeof(what), "after step %d", s);
        check_grads(d, 0, s, s, 1e-6, what);
        check_buffers(s, 0, what);
    }
    /* A checkpoint holds them: save, scribble over buffers and parameters, load. */
    if (!tmp_path(comm, path, sizeof(path)))
        return;
    memcpy(keep, vals[0], count_of(0) * sizeof(float));
    if (tutti_ddp_save(d, path, NULL, 0) != TUTTI_SUCCESS)
        fail("tutti_ddp_save: %s", tutti_ddp_last_error(d));
    set_buffers(99);
    vals[0][7] = -12345.0f;
    if (tutti_ddp_load(d, path, NULL, 0, NULL) != TUTTI_SUCCESS)
        fail("tutti_ddp_load: %s", tutti_ddp_last_error(d));
    check_buffers(2, 0, "after a checkpoint's save and load");
    if (memcmp(keep, vals[0], count_of(0) * sizeof(float)) != 0)
        fail("after a checkpoint's save and load, l0.weight differs from what was saved");
    tutti_barrier(comm, NULL);
    if (rank == 0)
        unlink(path);
    free(keep);
    tutti_ddp_destroy(d);
}

/* The checkpoint's bytes (rank 0), and its FNV-1a trailer recomputed over the rest. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long n;

    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)n)) && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    } else if (b) {
        *len = (size_t)n;
    }
    if (f)
        fclose(f);
    return b;
}

static void reseal(unsigned char *b, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i + 8 < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    memcpy(b + len - 8, &h, 8);
}

static void spit(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len)
        fail("writing %s", path);
    if (f)
        fclose(f);
}

/*
 * Damaged checkpoints (a file is input: never a crash, a hang or a half-loaded state). Rank 0
 * writes each variant of a good checkpoint; every rank loads it and must fail, naming why;
 * after all of them the good file loads and gives back what was saved. The header offsets
 * (version at byte 8, the parameter count at 16) are checkpoint.c's layout.
 */
static void mode_damaged(tutti_comm_t comm)
{
    static const struct {
        const char *what, *says;
    } cases[] = {
        {"cut to 10 bytes", "too short (10 bytes)"},
        {"cut in half", "cut short or grown"},
        {"a byte flipped", "damaged (checksum mismatch)"},
        {"version 1, resealed", "version 1; this build reads version 2"},
        {"a parameter more, resealed", "cut short or grown"},
        {"a descriptor's name changed, resealed", "'l9.bias' with 200 values there"},
        {"no such file", "cannot open"},
    };
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    char path[64], bad[80];
    unsigned char *good = NULL;
    size_t len = 0;
    float keep0;
    tutti_ddp_t d;
    uint64_t seed = 12345;

    d = setup(comm, &cfg, NP - 1, 0);
    add_buffers(d, buf_counts[0]);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS || !tmp_path(comm, path, sizeof(path))) {
        fail("init: %s", tutti_ddp_last_error(d));
        return;
    }
    snprintf(bad, sizeof(bad), "%s.bad", path);
    if (tutti_ddp_save(d, path, "extra", 5) != TUTTI_SUCCESS) {
        fail("tutti_ddp_save: %s", tutti_ddp_last_error(d));
        return;
    }
    keep0 = vals[3][0];
    if (rank == 0 && !(good = slurp(path, &len)))
        fail("reading back %s", path);
    /* The named cases, then 60 random ones: 1-4 bytes set at random, or a random cut. */
    for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])) + 60; k++) {
        int named = k < (int)(sizeof(cases) / sizeof(cases[0]));
        tutti_result_t rc;
        if (rank == 0 && good) {
            unsigned char *b = malloc(len);
            size_t n = len;
            memcpy(b, good, len);
            if (!named) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                if (seed >> 63)
                    n = (size_t)(seed >> 8) % len;
                else
                    for (int m = 0; m <= (int)(seed >> 20) % 4; m++)
                        b[(seed >> (24 + 8 * m)) % len] ^= (unsigned char)(1 + (seed >> 12) % 255);
            } else if (k == 0) {
                n = 10;
            } else if (k == 1) {
                n = len / 2;
            } else if (k == 2) {
                b[len / 2] ^= 0x40;
            } else if (k == 3) {
                b[8] = 1;
                reseal(b, n);
            } else if (k == 4) {
                b[16] += 1;
                reseal(b, n);
            } else if (k == 5) {
                /* Rename l1.bias in its descriptor. */
                size_t at = len;
                for (size_t i = 0; i + 9 < len; i++)
                    if (!memcmp(b + i, "l1.bias", 8)) {
                        at = i;
                        break;
                    }
                if (at < len)
                    b[at + 1] = '9';
                reseal(b, n);
            }
            if (k != 6)
                spit(bad, b, n);
            else
                unlink(bad);
            free(b);
        }
        tutti_barrier(comm, NULL);
        vals[3][0] = -7.0f;
        rc = tutti_ddp_load(d, bad, NULL, 0, NULL);
        if (named) {
            expect_error(d, rc, cases[k].what, cases[k].says, NULL);
        } else if (rc == TUTTI_SUCCESS && vals[3][0] != keep0) {
            fail("random damage %d loaded and changed l1.bias[0] to %g", k, vals[3][0]);
        }
        if (rc != TUTTI_SUCCESS && vals[3][0] != -7.0f)
            fail("%s: a refused load changed the parameters", named ? cases[k].what : "damage");
        tutti_barrier(comm, NULL);
    }
    vals[3][0] = -7.0f;
    if (tutti_ddp_load(d, path, NULL, 0, NULL) != TUTTI_SUCCESS)
        fail("the good checkpoint after the damaged ones: %s", tutti_ddp_last_error(d));
    else if (vals[3][0] != keep0)
        fail("the good checkpoint gave l1.bias[0] = %g, saved %g", vals[3][0], keep0);
    if (backward(d, 0, 0, 0, -1) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS)
        fail("a step after the damaged loads: %s", tutti_ddp_last_error(d));
    else
        check_grads(d, 0, 0, 0, 1e-6, "a step after the damaged loads");
    tutti_barrier(comm, NULL);
    if (rank == 0) {
        unlink(path);
        unlink(bad);
    }
    free(good);
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

/* Uneven inputs: the steps rank r trains in epoch e. In epoch 0 rank 0 trains none, so it
 * shadows the first step, whose bucket order it broadcasts; in epoch 1 rank 0 trains longest. */
static int steps_of(int e, int r)
{
    return e == 0 ? (r ? r + 1 : 0) : nranks - r;
}

/* Step s of epoch e is global step 10 e + s: the training ranks' gradients over nranks. */
static double join_avg(int gs, int i, size_t j)
{
    double sum = 0;
    for (int r = 0; r < nranks; r++)
        if (gs % 10 < steps_of(gs / 10, r))
            sum += grad_value(gs, r, i, j);
    return sum / nranks;
}

/* The highest rank training in global step gs: the one whose buffers every rank takes. */
static int top_rank(int gs)
{
    int top = -1;
    for (int r = 0; r < nranks; r++)
        if (gs % 10 < steps_of(gs / 10, r))
            top = r;
    return top;
}

/* Every rank holds bitwise the same parameters (a hash of them, all-gathered). */
static void check_same_params(tutti_comm_t comm, const char *what)
{
    uint64_t h = 1469598103934665603ull, *all = calloc((size_t)nranks, sizeof(*all));
    for (int i = 0; i < NP - 1; i++) {
        const unsigned char *b = (const unsigned char *)vals[i];
        for (size_t k = 0; k < count_of(i) * sizeof(float); k++)
            h = (h ^ b[k]) * 1099511628211ull;
    }
    if (!all || tutti_all_gather(&h, all, 1, TUTTI_UINT64, comm, NULL) != TUTTI_SUCCESS) {
        fail("%s: all-gathering the parameters' hashes: %s", what, tutti_comm_last_error(comm));
        free(all);
        return;
    }
    for (int r = 1; r < nranks; r++)
        if (all[r] != all[0])
            fail("%s: rank %d's parameters differ from rank 0's", what, r);
    free(all);
}

static void mode_join(tutti_comm_t comm, const char *hook, int views, const char *opt)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    const double lr = 0.25;
    double tol, *want[NP - 1];
    long long total = 0;
    tutti_ddp_stats_t st;
    int calls = 0, app = !strcmp(opt, "app"), last_gs = -1;

    cfg.hook = hook_of(hook, &tol);
    cfg.user_hook = user_hook;
    cfg.user_state = &calls;
    cfg.grad_as_bucket_view = views;
    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    cfg.uneven_inputs = 1;
    if (!app) {
        if (strncmp(opt, "sgd", 3) != 0 || opt[3] < '0' || opt[3] > '2' || opt[4]) {
            fprintf(stderr, "ddp_check: join: OPT is app, sgd0, sgd1 or sgd2, not %s\n", opt);
            exit(2);
        }
        cfg.optim = TUTTI_DDP_OPTIM_SGD;
        cfg.lr = lr;
        cfg.zero = opt[3] - '0';
    }
    tutti_ddp_t d = setup(comm, &cfg, NP - 1, 0);
    add_buffers(d, buf_counts[0]);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_values(NP - 1);
    for (int i = 0; i < NP - 1; i++) {
        want[i] = malloc(count_of(i) * sizeof(double));
        if (!want[i]) {
            fail("out of memory");
            exit(1);
        }
        for (size_t j = 0; j < count_of(i); j++)
            want[i][j] = (double)((long)j % 1000);
    }
    for (int e = 0; e < 2; e++) {
        int most =
            steps_of(e, nranks - 1) > steps_of(e, 0) ? steps_of(e, nranks - 1) : steps_of(e, 0);
        char what[96];
        tutti_result_t rc;
        for (int s = 0; s < most; s++) {
            int gs = 10 * e + s;
            for (int i = 0; i < NP - 1; i++)
                for (size_t j = 0; j < count_of(i); j++)
                    want[i][j] -= lr * join_avg(gs, i, j);
            last_gs = gs;
            if (s >= steps_of(e, rank))
                continue;    /* this rank has joined: its tutti_ddp_join runs this step */
            set_buffers(gs); /* this rank's forward pass */
            if (backward(d, gs, views, 0, -1) != TUTTI_SUCCESS ||
                tutti_ddp_finish(d) != TUTTI_SUCCESS) {
                fail("epoch %d step %d: %s", e, s, tutti_ddp_last_error(d));
                return;
            }
            snprintf(what, sizeof(what), "epoch %d step %d, hook %s, views %d, %s", e, s, hook,
                     views, opt);
            if (tol >= 0 && cfg.zero < 2) /* zero 2 leaves each rank its shard's average */
                check_against(d, views, gs, gs, tol, what, join_avg);
            check_buffers(gs, top_rank(gs), what);
            if (!app && tutti_ddp_step(d) != TUTTI_SUCCESS) {
                fail("%s: tutti_ddp_step: %s", what, tutti_ddp_last_error(d));
                return;
            }
            for (int i = 0; i < NP - 1 && app; i++) {
                const float *g = grad_ptr(d, i, views);
                for (size_t j = 0; j < count_of(i); j++)
                    vals[i][j] -= (float)lr * g[j];
            }
        }
        rc = tutti_ddp_join(d);
        printf("rank %d: epoch %d: trained %d of %d steps, joined: %s\n", rank, e,
               steps_of(e, rank), most, rc == TUTTI_SUCCESS ? "ok" : tutti_ddp_last_error(d));
        if (rc != TUTTI_SUCCESS) {
            fail("epoch %d: tutti_ddp_join: %s", e, tutti_ddp_last_error(d));
            return;
        }
        total += most;
        snprintf(what, sizeof(what), "after epoch %d's join, hook %s, views %d, %s", e, hook, views,
                 opt);
        check_same_params(comm, what);
        check_buffers(last_gs, last_gs < 0 ? 0 : top_rank(last_gs), what);
        /* Float steps against double ones: a few ulps of values below 1000 a step, plus the
         * hook's error on each gradient (|g| <= 3) times lr. */
        for (int i = 0; i < NP - 1 && tol >= 0; i++)
            for (size_t j = 0; j < count_of(i); j++) {
                double lim = 1e-5 * (1 + fabs(want[i][j])) + (double)total * lr * tol * 4;
                if (fabs(vals[i][j] - want[i][j]) > lim) {
                    fail("%s: %s[%zu] = %.9g, SGD on the training ranks' averages gives %.9g", what,
                         names[i], j, vals[i][j], want[i][j]);
                    break;
                }
            }
    }
    tutti_ddp_stats(d, &st);
    if (st.steps != total)
        fail("stats: %lld steps; %lld were synchronised (joined ones included)", st.steps, total);
    for (int i = 0; i < NP - 1; i++)
        free(want[i]);
    tutti_ddp_destroy(d);
}

static void mode_join_errors(tutti_comm_t comm)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_t d;
    tutti_result_t rc;

    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join without uneven_inputs", "uneven_inputs",
                 NULL);
    tutti_ddp_destroy(d);
    for (int i = 0; i < NP - 1; i++) {
        free(vals[i]);
        free(grads[i]);
    }

    cfg.uneven_inputs = 1;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    tutti_ddp_no_sync(d, 1);
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join with no_sync on", "no_sync", NULL);
    tutti_ddp_no_sync(d, 0);
    /* Mid-step: every parameter but l0.weight (the last one backward marks) is ready. */
    rc = backward(d, 0, 0, 0, 0);
    if (rc != TUTTI_SUCCESS) {
        fail("backward: %s", tutti_ddp_last_error(d));
        return;
    }
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join mid-step", "in flight", NULL);
    for (size_t j = 0; j < count_of(0); j++)
        grads[0][j] = grad_value(0, rank, 0, j);
    if (tutti_ddp_grad_ready(d, 0) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
        fail("ending the step: %s", tutti_ddp_last_error(d));
        return;
    }
    check_grads(d, 0, 0, 0, 1e-6, "the step the refused joins interrupted");
    if (tutti_ddp_join(d) != TUTTI_SUCCESS)
        fail("tutti_ddp_join, every rank at once: %s", tutti_ddp_last_error(d));
    check_same_params(comm, "after every rank joined at once");
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
    else if (!strcmp(mode, "mismatch-setting"))
        mode_mismatch(comm, 2);
    else if (!strcmp(mode, "mismatch-buffer"))
        mode_mismatch(comm, 3);
    else if (!strcmp(mode, "buffers"))
        mode_buffers(comm);
    else if (!strcmp(mode, "damaged"))
        mode_damaged(comm);
    else if (!strcmp(mode, "join") && argc == 5)
        mode_join(comm, argv[2], atoi(argv[3]), argv[4]);
    else if (!strcmp(mode, "join-errors"))
        mode_join_errors(comm);
    else {
        fprintf(stderr, "usage: ddp_check average {none,fp16,bf16,int8,user} {0,1} | accum "
                        "{0,1} | mismatch-count | mismatch-shape | mismatch-setting | "
                        "mismatch-buffer | buffers | damaged | unused | "
                        "unused-one | unused-zero | join HOOK {0,1} {app,sgd0,sgd1,sgd2} | "
                        "join-errors\n");
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
