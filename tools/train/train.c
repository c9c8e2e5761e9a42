/*
 * tutti-train -- data-parallel training of an MLP on Fashion-MNIST with the DDP layer.
 *
 *   tutti-run -n 2 tutti-train --epochs 3
 *
 * The reference setting: 784-1024-1024-10 with ReLU, softmax cross-entropy, SGD lr 0.05
 * momentum 0.9, global batch 128 split contiguously across ranks, the epoch's permutation
 * seeded by the epoch number, one BLAS thread per rank. Each rank scales its loss so that the
 * averaged gradient is exactly that of the mean over the global batch, whatever the split.
 * See usage() (options.c) for the options; README's "Training" section for the metrics.
 */
#include "data.h"
#include "elastic.h"
#include "mlp.h"
#include "model.h"
#include "options.h"
#include "split.h"
#include "tutti.h"
#include "tutti_ddp.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int rank, nranks;          /* options.h */
static int slow_rank = -1; /* --slow */
static int elastic;        /* --elastic: a failed call is a lost rank to recover from */
static int rank_quiet;     /* --quiet */
static double slow_factor = 1;

/* Whether a launcher (tutti-run, torchrun, srun, mpirun) set a rank in the environment. */
static int launched(void)
{
    static const char *vars[] = {"TUTTI_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The epoch's permutation: Fisher-Yates from a generator seeded by (seed, epoch). */
static void permutation(uint32_t *perm, size_t n, unsigned long long seed, int epoch)
{
    uint64_t s = seed * 1000003ull + (uint64_t)epoch;
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix(&s) % (i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* This rank's contiguous part of a batch of B: [*first, *first + *count). */
static void my_part(int B, int r, int n, int *first, int *count)
{
    split_part(&(struct split_plan){.n = n}, B, r, first, count);
}

static struct split_plan plan; /* --split, --balance */
static int plan_version;       /* bumped by every --balance re-division */
static double bal_compute;     /* --balance: compute seconds and samples since the last one */
static long long bal_samples;

/* Time split of a run of steps. */
struct split {
    double compute, finish, optim, total;
    double loss_sum;
    long long samples, steps;
};

/* A DDP call's result: 0 if it succeeded, 1 if it failed for a lost rank under --elastic;
 * anything else dies. */
static int lost(struct model *md, tutti_result_t rc)
{
    if (rc == TUTTI_SUCCESS)
        return 0;
    if (!elastic || !elastic_failure(rc))
        die("%s", tutti_ddp_last_error(md->ddp));
    if (!rank_quiet)
        printf("rank %d: %s\n", md->rank, tutti_ddp_last_error(md->ddp));
    return 1;
}

/*
 * One micro-batch: forward, backward (gradients marked ready as they are made), finish; an
 * optimizer step when `sync`. idx holds the global batch's image numbers. Under --elastic,
 * -1 if a rank was lost.
 */
static int micro_step(struct model *md, const struct dataset *tr, const uint32_t *idx, int B,
                      int accum, int k, int local, struct split *sp)
{
    int first, count, sync = k == accum - 1;
    double t0 = now(), tf, t1, t2;
    float scale;

    split_part(&plan, B, md->rank, &first, &count);
    /* (local SGD: no gradient is reduced; the step is this rank's own) */
    if (lost(md, tutti_ddp_no_sync(md->ddp, local || !sync)))
        return -1;
    model_point_grads(md);
    if (local) {
        scale = 1.0f / ((float)accum * (float)count); /* this rank's own mean */
    } else if (plan.want) {
        /* --split, --balance: the local mean, weighted count / B by the DDP layer. B and the
         * plan are the same on every rank, so all call the collective set_batch together when
         * either changes (an accumulation group with a shorter last batch is weighted by that
         * batch's split). */
        static int last_B = -1, last_version = -1;
        if ((B != last_B || plan_version != last_version) &&
            tutti_ddp_set_batch(md->ddp, count) != TUTTI_SUCCESS)
            die("%s", tutti_ddp_last_error(md->ddp));
        last_B = B;
        last_version = plan_version;
        scale = 1.0f / ((float)accum * (float)count);
    } else {
        /* Per-sample weight nranks / (accum * B): after the ranks' average, the mean. */
        scale = (float)md->nranks / ((float)accum * (float)B);
    }
    mlp_forward(&md->m, tr->x, tr->dim, idx + first, count);
    tf = now();
    sp->loss_sum +=
        mlp_backward(&md->m, tr->y, idx + first, count, scale, k > 0, model_ready, md) * count;
    t1 = now();
    if (md->rank == slow_rank) { /* --slow: real work, forward passes, for (F - 1) x as long */
        double until = t1 + (slow_factor - 1) * (t1 - t0);
        while (now() < until)
            mlp_forward(&md->m, tr->x, tr->dim, idx + first, count);
        t1 = now();
    }
    bal_compute += t1 - t0;
    bal_samples += count;
    if (md->lost) /* --elastic: a bucket's reduction failed during backward */
        return -1;
    if (lost(md, tutti_ddp_finish(md->ddp)))
        return -1;
    t2 = now();
    if (tutti_trace_enabled()) {
        tutti_trace_span("forward", "train", t0 * 1e6, tf * 1e6, NULL);
        tutti_trace_span("backward", "train", tf * 1e6, t1 * 1e6, NULL);
        tutti_trace_span("finish (waiting for reductions)", "train", t1 * 1e6, t2 * 1e6, NULL);
    }
    sp->compute += t1 - t0;
    sp->finish += t2 - t1;
    if (sync) {
        if (lost(md, tutti_ddp_step(md->ddp)))
            return -1;
        sp->optim += now() - t2;
        sp->steps++;
        if (tutti_trace_enabled())
            tutti_trace_span("optimizer", "train", t2 * 1e6, now() * 1e6, NULL);
    }
    sp->samples += count;
    return sync;
}

static void average_params(struct model *md)
{
    if (tutti_ddp_average_params(md->ddp) != TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
}

/* --balance: every rank's seconds per sample since the last call (all-gathered), and --batch
 * re-divided in proportion to speed; rank 0 says so. Collective. */
static void rebalance(struct model *md, const struct opts *o, long long steps)
{
    double mine = bal_samples > 0 ? bal_compute / (double)bal_samples : 0, all[SPLIT_MAX_RANKS];

    if (md->nranks > SPLIT_MAX_RANKS)
        die("--balance: at most %d ranks", SPLIT_MAX_RANKS);
    if (tutti_all_gather(&mine, all, 1, TUTTI_FLOAT64, md->comm, NULL) != TUTTI_SUCCESS)
        die("--balance: %s", tutti_last_error());
    bal_compute = 0;
    bal_samples = 0;
    for (int r = 0; r < md->nranks; r++)
        if (!(all[r] > 0))
            return; /* a rank without a sample measured: keep the split */
    if (split_rebalance(&plan, o->batch, all) != 0)
        die("--balance: out of memory");
    plan_version++;
    if (md->rank == 0 && !o->quiet) {
        printf("balance after step %lld: split", steps);
        for (int r = 0; r < md->nranks; r++)
            printf("%s%d", r ? "," : " ", plan.want[r]);
        printf(" (us per sample:");
        for (int r = 0; r < md->nranks; r++)
            printf(" %.1f", all[r] * 1e6);
        printf(")\n");
    }
}

static double test_accuracy(struct model *md, const struct dataset *te)
{
    int first, count, chunk = md->m.max_batch;
    long long ok[2] = {0, 0};
    uint32_t *idx = malloc((size_t)chunk * sizeof(uint32_t));

    if (!idx)
        die("out of memory");
    my_part((int)te->n, md->rank, md->nranks, &first, &count);
    /* As many chunks on every rank (the last ones may be empty): with --zero 3 each forward
     * gathers its layers, a collective. */
    int most = ((int)te->n + md->nranks - 1) / md->nranks;
    for (int s = first; s < first + most; s += chunk) {
        int b = first + count - s < chunk ? first + count - s : chunk;
        b = b > 0 ? b : 0;
        for (int i = 0; i < b; i++)
            idx[i] = (uint32_t)(s + i);
        ok[0] += mlp_correct(&md->m, te->x, te->dim, te->y, idx, b);
        ok[1] += b;
    }
    free(idx);
    tutti_result_t rc = tutti_all_reduce(ok, ok, 2, TUTTI_INT64, TUTTI_SUM, md->comm, NULL);
    if (rc != TUTTI_SUCCESS && elastic && elastic_failure(rc))
        return -1; /* a rank was lost: the caller recovers */
    if (rc != TUTTI_SUCCESS)
        die("all_reduce: %s", tutti_comm_last_error(md->comm));
    return (double)ok[0] / (double)ok[1];
}

static void save(struct model *md, const struct opts *o, const struct resume_state *rs)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/ckpt.bin", o->checkpoint);
    if (md->rank == 0)
        mkdir(o->checkpoint, 0755);
    if (tutti_ddp_save(md->ddp, path, rs, sizeof(*rs)) != TUTTI_SUCCESS)
        die("%s", tutti_ddp_last_error(md->ddp));
}

/* Run `steps` optimizer steps from micro-batch `*micro` of the epoch order; returns the split. */
static struct split run_steps(struct model *md, const struct opts *o, const struct dataset *tr,
                              const uint32_t *perm, int B, long long steps, double *each)
{
    struct split sp = {0};
    size_t nb = tr->n / (size_t)B, pos = 0;
    double t0 = now();

    for (long long s = 0; s < steps; s++) {
        double ts = now();
        for (int k = 0; k < o->accum; k++) {
            micro_step(md, tr, perm + pos * (size_t)B, B, o->accum, k, 0, &sp);
            pos = (pos + 1) % (nb ? nb : 1);
        }
        if (each) /* each step's seconds */
            each[s] = now() - ts;
    }
    sp.total = now() - t0;
    return sp;
}

/* --bench: T_n with every rank, then T_1 on rank 0 alone (a one-rank communicator). */
static void bench(struct model *md, const struct opts *o, const struct dataset *tr)
{
    uint32_t *perm = malloc(tr->n * sizeof(uint32_t));
    int warm = 5;
    struct split sn, s1 = {0};
    tutti_ddp_stats_t a, b;
    double tn, t1 = 0, hidden;

    if (!perm || tr->n < (size_t)o->batch)
        die("--bench: out of memory or fewer images than one batch");
    permutation(perm, tr->n, o->seed, 0);
    double *each = calloc((size_t)o->bench_steps, sizeof(double));
    if (!each)
        die("--bench: out of memory");
    run_steps(md, o, tr, perm, o->batch, warm, NULL);
    tutti_barrier(md->comm, NULL);
    tutti_ddp_stats(md->ddp, &a);
    sn = run_steps(md, o, tr, perm, o->batch, o->bench_steps, each);
    tutti_ddp_stats(md->ddp, &b);
    tn = sn.total / (double)o->bench_steps;
    tutti_all_reduce(&tn, &tn, 1, TUTTI_FLOAT64, TUTTI_MAX, md->comm, NULL);
    double comm = b.comm_s - a.comm_s, tcomp = sn.compute + sn.optim;
    hidden = comm > 0 ? (tcomp + comm - sn.total) / comm : 1;
    if (nranks > 1 && rank == 0) {
        tutti_id_t id;
        tutti_comm_t solo;
        struct model one;
        struct split_plan all = plan;
        plan = (struct split_plan){.n = 1}; /* alone, rank 0 takes the whole batch */
        if (tutti_get_id(&id) != TUTTI_SUCCESS || tutti_comm_init(&solo, 1, &id, 0, NULL) != 0)
            die("--bench: one-rank communicator: %s", tutti_last_error());
        model_build(&one, o, solo, o->batch);
        run_steps(&one, o, tr, perm, o->batch, warm, NULL);
        s1 = run_steps(&one, o, tr, perm, o->batch, o->bench_steps, NULL);
        t1 = s1.total / (double)o->bench_steps;
        tutti_ddp_destroy(one.ddp);
        mlp_free(&one.m);
        tutti_comm_destroy(solo);
        plan = all;
    }
    if (nranks == 1) {
        t1 = tn;
        s1 = sn;
    }
    /* The other ranks wait here while rank 0 measures alone. */
    tutti_barrier(md->comm, NULL);
    if (rank == 0) {
        printf("bench: %d ranks, global batch %d, %d timed steps after %d warm-up\n", nranks,
               o->batch, o->bench_steps, warm);
        printf("bench: T1 %.2f ms/step (%.0f samples/s), T%d %.2f ms/step (%.0f samples/s)\n",
               t1 * 1e3, o->batch / t1, nranks, tn * 1e3, o->batch / tn);
        printf("bench: E(%d) = T1 / (%d * T%d) = %.3f\n", nranks, nranks, nranks,
               t1 / (nranks * tn));
        char hid[32] = "n/a (one rank)";
        if (nranks > 1)
            snprintf(hid, sizeof(hid), "%.0f%%", hidden * 100);
        printf("bench: rank 0 at %d ranks: compute %.2f ms/step, optimizer %.2f, waiting in "
               "finish %.2f; communication %.2f ms/step, hidden behind compute %s\n",
               nranks, sn.compute / o->bench_steps * 1e3, sn.optim / o->bench_steps * 1e3,
               sn.finish / o->bench_steps * 1e3, comm / o->bench_steps * 1e3, hid);
        /* For bench/scaling/run: one line, fixed fields (times in ms a step; rank 0 alone:
         * its samples a step, forward + backward, optimizer). */
        printf("bench-data: n %d batch %d params %zu T1 %.4f Tn %.4f E %.4f alone_samples %.1f "
               "alone_compute %.4f alone_optim %.4f compute %.4f optim %.4f finish %.4f comm "
               "%.4f\n",
               nranks, o->batch, md->m.param_bytes / sizeof(float), t1 * 1e3, tn * 1e3,
               t1 / (nranks * tn), (double)s1.samples / o->bench_steps,
               s1.compute / o->bench_steps * 1e3, s1.optim / o->bench_steps * 1e3,
               sn.compute / o->bench_steps * 1e3, sn.optim / o->bench_steps * 1e3,
               sn.finish / o->bench_steps * 1e3, comm / o->bench_steps * 1e3);
        /* and rank 0's every step (ms): a one-rank run's spread, for the scaling model */
        printf("bench-steps:");
        for (int s = 0; s < o->bench_steps; s++)
            printf(" %.4f", each[s] * 1e3);
        printf("\n");
    }
    free(each);
    free(perm);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct dataset tr, te;
    struct model md;
    tutti_comm_t comm;
    char err[1200];
    uint32_t *perm;
    struct resume_state rs = {0, 0, 0};
    int stop = 0, local_max;
    double tstart = now();

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    for (int i = 1; i < argc; i++) /* before the library reads its environment */
        if (!strcmp(argv[i], "--trace") && i + 1 < argc)
            setenv("TUTTI_TRACE", argv[i + 1], 1);
    if (!launched()) { /* started by hand: one rank, no launcher needed */
        tutti_id_t id;
        if (tutti_get_id(&id) != TUTTI_SUCCESS || tutti_comm_init(&comm, 1, &id, 0, NULL) != 0)
            die("%s", tutti_last_error());
    } else if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS)
        die("%s", tutti_last_error());
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    parse(argc, argv, &o, nranks);
    plan.n = nranks;
    if (o.split && split_parse(&plan, o.split, nranks, o.batch, err, sizeof(err)) != 0)
        die("%s", err);
    if (o.slow_rank >= nranks)
        die("--slow %d: there are %d ranks", o.slow_rank, nranks);
    slow_rank = o.slow_rank;
    slow_factor = o.slow_factor;
    openblas_set_num_threads(o.threads);
    tutti_trace_name_thread("train");
    if (dataset_load(&tr, o.data, "train", o.limit, err, sizeof(err)) != 0 ||
        dataset_load(&te, o.data, "t10k", 0, err, sizeof(err)) != 0)
        die("%s", err);
    if (tr.n < (size_t)o.batch)
        die("--batch %d is larger than the training set (%zu images)", o.batch, tr.n);
    elastic = o.elastic;
    rank_quiet = o.quiet;
    /* --elastic: fewer ranks may share the batch later */
    local_max = elastic ? o.batch : (o.batch + nranks - 1) / nranks;
    if (local_max < 256)
        local_max = 256; /* evaluation chunks */
    model_build(&md, &o, comm, local_max);
    md.elastic = elastic;
    int newcomer = elastic && elastic_newcomer(&md, &rs), start_rank = rank;
    nranks = md.nranks;
    plan.n = nranks;
    if (o.bench) {
        bench(&md, &o, &tr);
        goto done;
    }
    if (o.resume) {
        char path[4096];
        size_t got = 0;
        snprintf(path, sizeof(path), "%s/ckpt.bin", o.checkpoint);
        if (tutti_ddp_load(md.ddp, path, &rs, sizeof(rs), &got) != TUTTI_SUCCESS)
            die("%s", tutti_ddp_last_error(md.ddp));
        if (got != sizeof(rs))
            die("%s: not written by tutti-train", path);
        if (rank == 0 && !o.quiet)
            printf("resumed from %s: epoch %lld, batch %lld, %lld steps done\n", path,
                   (long long)rs.epoch + 1, (long long)rs.micro, (long long)rs.steps);
    }
    if (rank == 0 && !o.quiet && !newcomer)
        printf("tutti-train: %d rank(s), MLP 784-%d%s-10 (%d hidden layer(s)), %zu training "
               "images, global batch %d x %d accumulated, hook %s, zero %d, %s\n",
               nranks, o.hidden, o.layers > 1 ? "-..." : "", o.layers, tr.n, o.batch, o.accum,
               tutti_ddp_hook_name(o.hook), o.zero,
               o.optim == TUTTI_DDP_OPTIM_SGD ? "SGD" : "Adam");
    perm = malloc(tr.n * sizeof(uint32_t));
    if (!perm)
        die("out of memory");
    for (int64_t epoch = rs.epoch; epoch < o.epochs && !stop; epoch++) {
        int redo = 0; /* --elastic: the size changed: go on from rs (rank 0's place) */
        size_t nb = (tr.n + (size_t)o.batch - 1) / (size_t)o.batch;
        struct split sp = {0};
        tutti_ddp_stats_t a, b;
        double t0 = now(), acc, loss[2];

        permutation(perm, tr.n, o.seed, (int)epoch);
        tutti_ddp_stats(md.ddp, &a);
        for (int64_t mb = epoch == rs.epoch ? rs.micro : 0; mb < (int64_t)nb; mb++) {
            size_t lo = (size_t)mb * (size_t)o.batch;
            int B = (int)(tr.n - lo < (size_t)o.batch ? tr.n - lo : (size_t)o.batch);
            int k = (int)(mb % o.accum), stepped;
            double ts = now();
            if (B < nranks)
                break; /* a tail smaller than the ranks: skipped */
            /* Accumulation groups do not cross epochs: a short last group steps on its own. */
            int local = o.local_sgd && rs.steps >= o.warmup;
            if (o.crash_rank == start_rank && rs.steps == o.crash_step && !newcomer) {
                printf("rank %d: crashing at step %lld (t=%.6f)\n", rank, (long long)rs.steps,
                       now());
                raise(SIGKILL);
            }
            stepped = micro_step(&md, &tr, perm + lo, B,
                                 mb == (int64_t)nb - 1 && k < o.accum - 1 ? k + 1 : o.accum, k,
                                 local, &sp);
            if (stepped < 0) { /* --elastic: a rank was lost; this micro-batch runs again */
                rs.epoch = epoch;
                rs.micro = mb - k; /* (its accumulation group's start) */
                elastic_recover(&md, &rs);
                redo = 1;
                break;
            }
            if (tutti_trace_enabled())
                tutti_trace_span("micro-batch", "train", ts * 1e6, now() * 1e6, NULL);
            if (stepped) {
                rs.steps++;
                if (elastic)
                    elastic_step_done(&md, &rs);
                if (elastic && rs.steps % o.grow_every == 0) {
                    rs.epoch = epoch;
                    rs.micro = mb + 1;
                    if (elastic_grow(&md, &rs)) {
                        redo = 1;
                        break;
                    }
                }
                if (local && (rs.steps - o.warmup) % o.local_sgd == 0)
                    average_params(&md);
                if (o.balance && rs.steps % o.balance == 0)
                    rebalance(&md, &o, rs.steps);
                if (o.max_steps && rs.steps >= o.max_steps) {
                    rs.epoch = epoch;
                    rs.micro = mb + 1;
                    stop = 1;
                    break;
                }
            }
        }
        nranks = md.nranks;
        plan.n = nranks;
        if (redo) { /* the epoch loop again, from rank 0's place */
            epoch = rs.epoch - 1;
            continue;
        }
        sp.total = now() - t0;
        tutti_ddp_stats(md.ddp, &b);
        if (o.local_sgd && rs.steps > o.warmup && (rs.steps - o.warmup) % o.local_sgd != 0)
            average_params(&md); /* local SGD: one model to evaluate, save and check */
        acc = test_accuracy(&md, &te);
        loss[0] = sp.loss_sum;
        loss[1] = (double)sp.samples;
        if (acc < 0 ||
            tutti_all_reduce(loss, loss, 2, TUTTI_FLOAT64, TUTTI_SUM, md.comm, NULL) != 0) {
            if (!elastic)
                die("all_reduce: %s", tutti_comm_last_error(md.comm));
            rs.epoch = epoch + 1; /* a rank was lost after the epoch's last step */
            rs.micro = 0;
            elastic_recover(&md, &rs);
            nranks = md.nranks;
            plan.n = nranks;
            epoch = rs.epoch - 1;
            continue;
        }
        if (rank == 0 && !o.quiet) {
            double comm_s = b.comm_s - a.comm_s, exposed = b.exposed_s - a.exposed_s;
            double tcomp = sp.compute + sp.optim;
            double hidden = comm_s > 0 ? (tcomp + comm_s - sp.total) / comm_s : 1;
            char hid[32] = "n/a (one rank)";
            if (o.local_sgd) /* averaging is not a reduction behind backward */
                snprintf(hid, sizeof(hid), "n/a (local SGD)");
            else if (nranks > 1)
                snprintf(hid, sizeof(hid), "%.0f%%", hidden * 100);
            printf("epoch %lld/%d: loss %.4f, test accuracy %.4f, %.0f samples/s, communication "
                   "%.2f s, exposed %.2f s, hidden behind compute %s (%.2f ms/step: compute "
                   "%.2f, optimizer %.2f, waiting in finish %.2f)\n",
                   (long long)epoch + 1, o.epochs, loss[0] / (loss[1] > 0 ? loss[1] : 1), acc,
                   loss[1] / sp.total, comm_s, exposed, hid,
                   sp.steps ? sp.total / (double)sp.steps * 1e3 : 0,
                   sp.steps ? sp.compute / (double)sp.steps * 1e3 : 0,
                   sp.steps ? sp.optim / (double)sp.steps * 1e3 : 0,
                   sp.steps ? sp.finish / (double)sp.steps * 1e3 : 0);
        }
        if (!stop) {
            rs.epoch = epoch + 1;
            rs.micro = 0;
        }
        if (o.checkpoint)
            save(&md, &o, &rs);
    }
    free(perm);
    if (rank == 0)
        printf("final test accuracy %.4f after %lld optimizer steps (%.1f s)\n",
               test_accuracy(&md, &te), (long long)rs.steps, now() - tstart);
    else
        test_accuracy(&md, &te);
done : {
    double sum;
    uint64_t h, *all = calloc((size_t)nranks, sizeof(uint64_t));
    int same = 1;
    if (!o.quiet || o.bench) /* (before the whole model is gathered for the checksum) */
        model_print_memory(&md, &o);
    model_whole(&md, 1);
    h = model_hash(&md, &sum);
    if (!all || tutti_all_gather(&h, all, 1, TUTTI_UINT64, md.comm, NULL) != TUTTI_SUCCESS)
        die("all_gather: %s", tutti_comm_last_error(md.comm));
    for (int r = 1; r < nranks; r++)
        same &= all[r] == all[0];
    if (rank == 0) {
        printf("parameter checksum %016llx (sum %.9g); bitwise identical on all %d ranks: %s\n",
               (unsigned long long)h, sum, nranks, same ? "yes" : "NO");
        if (o.save_params) {
            FILE *f = fopen(o.save_params, "wb");
            for (int i = 0; f && i < mlp_nparams(&md.m); i++)
                fwrite(mlp_param(&md.m, i), sizeof(float), mlp_param_count(&md.m, i), f);
            if (!f || fclose(f) != 0)
                die("--save-params %s: %s", o.save_params, strerror(errno));
        }
    }
    model_whole(&md, 0);
    free(all);
    tutti_ddp_destroy(md.ddp);
    mlp_free(&md.m);
    dataset_free(&tr);
    dataset_free(&te);
    tutti_comm_destroy(comm);
    return same ? 0 : 3;
}
}
