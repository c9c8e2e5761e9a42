/*
 * options.c -- tutti-train's command line (options.h).
 */
#include "options.h"

#include "mlp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tutti-train: rank %d: ", rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

void usage(FILE *f)
{
    fprintf(f, "usage: tutti-run -n N tutti-train [options]\n"
               "  --epochs N        passes over the training set (1)\n"
               "  --batch B         global batch, split contiguously across ranks (128)\n"
               "  --split b0,b1,..  each rank's part of --batch (each >= 1; default equal):\n"
               "                    gradients are local means, weighted b_r / B by the DDP\n"
               "                    layer (tutti_ddp_set_batch)\n"
               "  --balance auto[:K] every K optimizer steps (10) re-divide --batch in\n"
               "                    proportion to each rank's measured compute speed\n"
               "  --slow R:F        rank R does F times its compute (extra forward passes)\n"
               "  --local-sgd H     after --warmup W synchronous steps (0), local steps with\n"
               "                    the parameters averaged every H steps (and before each\n"
               "                    evaluation)\n"
               "  --lr X            learning rate (0.05)\n"
               "  --momentum X      SGD momentum (0.9)\n"
               "  --eps X           Adam's epsilon (1e-8)\n"
               "  --optim sgd|adam  optimizer (sgd)\n"
               "  --hidden H        units per hidden layer (1024)\n"
               "  --layers L        hidden layers (2)\n"
               "  --bucket-mb X     bucket cap in MiB (25, with --zero 3 1; the first bucket\n"
               "                    closes at 1);\n"
               "                    auto: tried over the first steps (adaptive_buckets)\n"
               "  --overlap 0|1|auto  reduce buckets during backward (1) or in finish (0);\n"
               "                    auto: 0 where a rank's reduction thread has no core of its\n"
               "                    own (2 x ranks on the host > CPUs) (auto)\n"
               "  --accum K         accumulate K batches per optimizer step (no_sync on K-1)\n"
               "  --hook H          none, fp16, bf16, int8, topk, powersgd (none)\n"
               "  --zero Z          0-3: shard optimizer state (1), and gradients (2), and\n"
               "                    parameters (3: each layer gathered before its forward and\n"
               "                    backward, released after; not with --accum or --slow)\n"
               "  --seed S          initial weights and permutations (1)\n"
               "  --checkpoint DIR  save DIR/ckpt.bin after every epoch and at --max-steps\n"
               "  --resume          continue from DIR/ckpt.bin\n"
               "  --trace FILE      Chrome/Perfetto trace (sets TUTTI_TRACE)\n"
               "  --max-steps N     stop after N optimizer steps (0: no limit)\n"
               "  --bench           measure T1 and Tn in one run and print E(n)\n"
               "  --bench-steps N   timed steps per --bench phase (40)\n"
               "  --threads T       BLAS threads per rank (1)\n"
               "  --no-views        copy gradients into buckets instead of living in them\n"
               "  --data DIR        IDX files (/usr/share/datasets/fashion-mnist)\n"
               "  --limit N         use the first N training images\n"
               "  --save-params F   rank 0 writes the final parameters (float32, flat) to F\n"
               "  --elastic         survive a lost rank (under tutti-run --elastic): the\n"
               "                    others shrink and go on from their in-memory model, the\n"
               "                    batch split over the ranks left; newcomers (--restart)\n"
               "                    join every --grow-every K steps (10)\n"
               "  --crash R:S       rank R kills itself (SIGKILL) at optimizer step S\n"
               "  --quiet           only the final lines\n");
}

static long long num(const char *opt, const char *v, long long lo, long long hi)
{
    char *end;
    long long x;

    if (!v)
        die("%s needs a value", opt);
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        die("%s: '%s' is not an integer in [%lld, %lld]", opt, v, lo, hi);
    return x;
}

static double real(const char *opt, const char *v, double lo, double hi)
{
    char *end;
    double x;

    if (!v)
        die("%s needs a value", opt);
    x = strtod(v, &end);
    if (*end || end == v || !(x >= lo && x <= hi))
        die("%s: '%s' is not a number in [%g, %g]", opt, v, lo, hi);
    return x;
}

void parse(int argc, char **argv, struct opts *o, int nranks)
{
    *o = (struct opts){.slow_rank = -1,
                       .crash_rank = -1,
                       .grow_every = 10,
                       .epochs = 1,
                       .batch = 128,
                       .hidden = 1024,
                       .layers = 2,
                       .accum = 1,
                       .threads = 1,
                       .bench_steps = 40,
                       .views = 1,
                       .lr = 0.05,
                       .momentum = 0.9,
                       .eps = 1e-8,
                       .overlap = -1,
                       .bucket_mb = 0, /* 25, or 1 with --zero 3 */
                       .optim = TUTTI_DDP_OPTIM_SGD,
                       .seed = 1,
                       .data = "/usr/share/datasets/fashion-mnist"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "--epochs"))
            o->epochs = (int)num(a, v, 1, 100000);
        else if (!strcmp(a, "--batch"))
            o->batch = (int)num(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--lr"))
            o->lr = real(a, v, 0, 1e6);
        else if (!strcmp(a, "--momentum"))
            o->momentum = real(a, v, 0, 1);
        else if (!strcmp(a, "--eps"))
            o->eps = real(a, v, 1e-30, 1);
        else if (!strcmp(a, "--hidden"))
            o->hidden = (int)num(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--layers"))
            o->layers = (int)num(a, v, 0, MLP_MAX_LAYERS - 1);
        else if (!strcmp(a, "--bucket-mb") && v && !strcmp(v, "auto"))
            o->adaptive_buckets = 1;
        else if (!strcmp(a, "--overlap") && v && !strcmp(v, "auto"))
            o->overlap = -1;
        else if (!strcmp(a, "--overlap"))
            o->overlap = (int)num(a, v, 0, 1);
        else if (!strcmp(a, "--bucket-mb"))
            o->bucket_mb = real(a, v, 1e-6, 1e6);
        else if (!strcmp(a, "--accum"))
            o->accum = (int)num(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--zero"))
            o->zero = (int)num(a, v, 0, 3);
        else if (!strcmp(a, "--seed"))
            o->seed = (unsigned long long)num(a, v, 0, (1ll << 62));
        else if (!strcmp(a, "--checkpoint"))
            o->checkpoint = v ? v : (die("--checkpoint needs a directory"), NULL);
        else if (!strcmp(a, "--trace"))
            o->trace = v ? v : (die("--trace needs a file"), NULL);
        else if (!strcmp(a, "--split"))
            o->split = v ? v : (die("--split needs b0,b1,..."), NULL);
        else if (!strcmp(a, "--data"))
            o->data = v ? v : (die("--data needs a directory"), NULL);
        else if (!strcmp(a, "--save-params"))
            o->save_params = v ? v : (die("--save-params needs a file"), NULL);
        else if (!strcmp(a, "--max-steps"))
            o->max_steps = num(a, v, 0, 1ll << 40);
        else if (!strcmp(a, "--limit"))
            o->limit = (size_t)num(a, v, 1, 1ll << 40);
        else if (!strcmp(a, "--slow")) {
            char *end;
            o->slow_rank = v ? (int)strtol(v, &end, 10) : -1;
            if (!v || end == v || *end != ':' || o->slow_rank < 0)
                die("--slow: '%s' is not RANK:FACTOR", v ? v : "");
            o->slow_factor = real(a, end + 1, 1, 100);
        } else if (!strcmp(a, "--crash")) {
            char *end;
            o->crash_rank = v ? (int)strtol(v, &end, 10) : -1;
            if (!v || end == v || *end != ':' || o->crash_rank < 0)
                die("--crash: '%s' is not RANK:STEP", v ? v : "");
            o->crash_step = num(a, end + 1, 0, 1ll << 40);
        } else if (!strcmp(a, "--grow-every")) {
            o->grow_every = (int)num(a, v, 1, 1000000);
        } else if (!strcmp(a, "--balance")) {
            if (!v || strncmp(v, "auto", 4) || (v[4] && v[4] != ':'))
                die("--balance: '%s' is not auto or auto:K", v ? v : "");
            o->balance = v[4] ? (int)num(a, v + 5, 1, 1000000) : 10;
        } else if (!strcmp(a, "--local-sgd"))
            o->local_sgd = (int)num(a, v, 1, 1000000);
        else if (!strcmp(a, "--warmup"))
            o->warmup = (int)num(a, v, 0, 1000000000);
        else if (!strcmp(a, "--elastic"))
            o->elastic = 1, used = 0;
        else if (!strcmp(a, "--threads"))
            o->threads = (int)num(a, v, 1, 1024);
        else if (!strcmp(a, "--bench-steps"))
            o->bench_steps = (int)num(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--hook")) {
            if (!v)
                die("--hook needs a value");
            o->hook = TUTTI_DDP_NUM_HOOKS;
            for (int h = 0; h < TUTTI_DDP_HOOK_USER; h++)
                if (!strcmp(v, tutti_ddp_hook_name((tutti_ddp_hook_t)h)))
                    o->hook = (tutti_ddp_hook_t)h;
            if (o->hook == TUTTI_DDP_NUM_HOOKS)
                die("--hook: '%s' is not one of none, fp16, bf16, int8, topk, powersgd", v);
        } else if (!strcmp(a, "--optim")) {
            if (v && !strcmp(v, "sgd"))
                o->optim = TUTTI_DDP_OPTIM_SGD;
            else if (v && !strcmp(v, "adam"))
                o->optim = TUTTI_DDP_OPTIM_ADAM;
            else
                die("--optim: '%s' is not sgd or adam", v ? v : "");
        } else {
            used = 0;
            if (!strcmp(a, "--bench"))
                o->bench = 1;
            else if (!strcmp(a, "--resume"))
                o->resume = 1;
            else if (!strcmp(a, "--no-views"))
                o->views = 0;
            else if (!strcmp(a, "--quiet"))
                o->quiet = 1;
            else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
                usage(stdout);
                exit(0);
            } else {
                usage(stderr);
                die("unknown option '%s'", a);
            }
        }
        i += used;
    }
    if (o->resume && !o->checkpoint)
        die("--resume needs --checkpoint DIR");
    if (o->local_sgd && o->zero)
        die("--local-sgd: not with --zero %d (its optimizer steps all-gather the parameters)",
            o->zero);
    if (!(o->bucket_mb > 0)) /* a gradient buffer of zero 3 lives until its bucket is reduced */
        o->bucket_mb = o->zero == 3 ? 1 : 25;
    if (o->zero == 3) { /* every whole gradient lives only until it is reduced */
        if (o->accum > 1)
            die("--accum: not with --zero 3 (accumulating keeps every whole gradient)");
        if (o->slow_rank >= 0)
            die("--slow: not with --zero 3 (its extra forward passes would gather alone)");
        o->views = 0;
    }
    if (o->elastic && (o->zero == 3 || o->split || o->balance || o->local_sgd || o->bench))
        die("--elastic: not with --zero 3 (a lost rank's share of the parameters is gone), "
            "--split, --balance, --local-sgd or --bench");
    if (o->warmup && !o->local_sgd)
        die("--warmup is the synchronous start of --local-sgd");
    if (o->batch < nranks)
        die("--batch %d is smaller than the number of ranks (%d)", o->batch, nranks);
}
