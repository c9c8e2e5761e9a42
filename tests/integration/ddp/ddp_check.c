/*
 * ddp_check -- run under tutti-run: the DDP layer (tutti_ddp.h) against values every rank can
 * compute for every other rank (ddp_common.h); uneven inputs: ddp_join_check.c; ZeRO-3:
 * ddp_zero3_check.c.
 *
 *   ddp_check average HOOK VIEWS [OVERLAP]
 *                                  four steps over six parameters in several buckets, gradients
 *                                  marked ready in an order that is not the registration order
 *                                  (so the buckets are rebuilt after step one); after each
 *                                  finish every gradient equals the average over ranks within
 *                                  the hook's tolerance. HOOK: none, fp16, bf16, int8, user (a
 *                                  callback that queues its own all-reduce); VIEWS: 0 or 1;
 *                                  OVERLAP: the config's overlap, 1, 0 or -1 (auto, default)
 *   ddp_check adaptive-config      adaptive_buckets = 2, adaptive_buckets with uneven_inputs,
 *                                  and overlap = 2: tutti_ddp_create refuses each, naming it
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
 *                                  leave the parameters alone; the good file loads after them,
 *                                  removing the PATH.tmp a killed save left
 *
 *   ddp_check weights HOOK VIEWS   tutti_ddp_set_batch(rank + 1), then rank 0 alone 3 and the
 *                                  rest 0: after each finish every gradient is the sum of the
 *                                  ranks' gradients weighted by their batch / the total; then
 *                                  a negative batch on the last rank fails the call on every
 *                                  rank naming it, and with uneven_inputs the call is refused
 *
 *
 * Also checked in every mode that gets that far: init gives every rank rank 0's values.
 * Exit status 0 means every check on this rank passed.
 */
#include "ddp_common.h"

static void mode_average(tutti_comm_t comm, const char *hook, int views, int overlap)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_stats_t st;
    int calls = 0;
    double tol;

    check_config(&cfg, hook, views, &calls, &tol);
    cfg.overlap = overlap;
    if (tol < 0) {
        fprintf(stderr, "ddp_check: average: %s approximates the average; try it with join\n",
                hook);
        exit(2);
    }
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

/* The batches of tutti_ddp_set_batch in mode_weights' current round, per rank. */
static long long wbatch[64];

static double weighted(int s, int i, size_t j)
{
    double sum = 0, total = 0;
    for (int r = 0; r < nranks; r++)
        total += (double)wbatch[r];
    for (int r = 0; r < nranks; r++)
        sum += (double)wbatch[r] / total * grad_value(s, r, i, j);
    return sum;
}

static void mode_weights(tutti_comm_t comm, const char *hook, int views)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    double tol;
    int calls = 0;

    check_config(&cfg, hook, views, &calls, &tol);
    tutti_ddp_t d = setup(comm, &cfg, NP - 1, 0);
    if (tol < 0 || nranks > 64 || tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("weights: hook %s, %d ranks: %s", hook, nranks, tutti_ddp_last_error(d));
        return;
    }
    for (int round = 0; round < 3; round++) {
        char what[64];
        for (int r = 0; r < nranks; r++)
            wbatch[r] = round == 1 ? (r == 0 ? 3 : 0) : r + 1 + round;
        if (tutti_ddp_set_batch(d, wbatch[rank]) != TUTTI_SUCCESS ||
            backward(d, round, views, 0, -1) != TUTTI_SUCCESS ||
            tutti_ddp_finish(d) != TUTTI_SUCCESS) {
            fail("weights round %d: %s", round, tutti_ddp_last_error(d));
            return;
        }
        snprintf(what, sizeof(what), "weighted by batch, round %d (hook %s)", round, hook);
        check_against(d, views, round, round, tol > 1e-6 ? tol : 1e-6, what, weighted);
    }
    expect_error(d, tutti_ddp_set_batch(d, rank == nranks - 1 ? -5 : 4), "tutti_ddp_set_batch",
                 "negative batch", NULL);
    tutti_ddp_destroy(d);
    for (int i = 0; i < NP; i++) { /* setup allocates the parameters anew */
        free(vals[i]);
        free(grads[i]);
        vals[i] = grads[i] = NULL;
    }
    cfg = (tutti_ddp_config_t)TUTTI_DDP_CONFIG_INIT;
    cfg.uneven_inputs = 1;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("weights, uneven_inputs: %s", tutti_ddp_last_error(d));
        return;
    }
    expect_error(d, tutti_ddp_set_batch(d, 1), "tutti_ddp_set_batch", "uneven_inputs", NULL);
    tutti_ddp_destroy(d);
}

/* adaptive_buckets' settings: 2 refused, with uneven_inputs refused, each naming it. */
static void mode_adaptive_config(tutti_comm_t comm)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_t d = NULL;
    tutti_result_t rc;

    cfg.adaptive_buckets = 2;
    rc = tutti_ddp_create(&d, comm, &cfg);
    if (rc == TUTTI_SUCCESS || !strstr(tutti_ddp_last_error(NULL), "adaptive_buckets is 2"))
        fail("adaptive_buckets = 2: %s", tutti_ddp_last_error(NULL));
    cfg.adaptive_buckets = 1;
    cfg.uneven_inputs = 1;
    rc = tutti_ddp_create(&d, comm, &cfg);
    if (rc == TUTTI_SUCCESS || !strstr(tutti_ddp_last_error(NULL), "uneven_inputs"))
        fail("adaptive_buckets with uneven_inputs: %s", tutti_ddp_last_error(NULL));
    cfg = (tutti_ddp_config_t)TUTTI_DDP_CONFIG_INIT;
    cfg.overlap = 2;
    rc = tutti_ddp_create(&d, comm, &cfg);
    if (rc == TUTTI_SUCCESS || !strstr(tutti_ddp_last_error(NULL), "overlap is 2"))
        fail("overlap = 2: %s", tutti_ddp_last_error(NULL));
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
    /* What a save killed midway leaves: PATH.tmp, half written. The next load removes it. */
    char stale[80];
    snprintf(stale, sizeof(stale), "%s.tmp", path);
    if (rank == 0 && good)
        spit(stale, good, len / 2);
    vals[3][0] = -7.0f;
    if (tutti_ddp_load(d, path, NULL, 0, NULL) != TUTTI_SUCCESS)
        fail("the good checkpoint after the damaged ones: %s", tutti_ddp_last_error(d));
    else if (vals[3][0] != keep0)
        fail("the good checkpoint gave l1.bias[0] = %g, saved %g", vals[3][0], keep0);
    if (rank == 0 && access(stale, F_OK) == 0)
        fail("%s, left by a killed save, is still there after a load", stale);
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    tutti_comm_t comm = report_join("ddp_check");

    if (!strcmp(mode, "average") && (argc == 4 || argc == 5))
        mode_average(comm, argv[2], atoi(argv[3]), argc == 5 ? atoi(argv[4]) : -1);
    else if (!strcmp(mode, "weights") && argc == 4)
        mode_weights(comm, argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "adaptive-config"))
        mode_adaptive_config(comm);
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
    else {
        fprintf(
            stderr,
            "usage: ddp_check average|weights {none,fp16,bf16,int8,user} {0,1} [OVERLAP] | accum "
            "{0,1} | adaptive-config | mismatch-count | mismatch-shape | mismatch-setting | "
            "mismatch-buffer | buffers | damaged | unused | unused-one | "
            "unused-zero\n");
        return 2;
    }
    return ddp_end(comm, "ddp_check", mode);
}
