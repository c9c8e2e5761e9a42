/*
 * topo_scaling.c -- tutti-topo --scaling: what a data-parallel job's step would take on n ranks
 * of a described cluster, from one rank's measured figures and the collective cost model.
 *
 * A step on n ranks (strong scaling: the global batch B is split, each rank takes
 * ceil(B / n) samples; --weak: each rank takes B):
 *   share   = max(1, ranks per node / cores per node)   ranks that outnumber cores share them
 *   compute = share * (sample_us * local batch + step_us) forward, backward, optimizer; or the
 *             step time measured for n ranks computing side by side with no communication
 *             (--compute-ms, one per n: bench/scaling/run's ceiling)
 *   comm    = the all-reduce of the gradient as measured on this machine (--comm-ms, one per
 *             n: bench/scaling/run times it alone with tutti-perf), or else
 *             the gradient (grad_mb) all-reduced in buckets of bucket_mb, each at the cost the
 *             tuner's model predicts for its best algorithm on this shape (the same formulas
 *             tutti-topo --simulate prints); where a rank and its reduction thread do not
 *             each have a core, hops are oversubscribed (a context switch each) and, where
 *             ranks outnumber cores, they share the node's copy bandwidth (cores / ranks each)
 *   hidden  = the part of comm behind backward (2/3 of forward + backward): all but the last
 *             bucket, at most the backward's length, and only while every rank and its
 *             reduction thread have a core each (2 x ranks per node <= cores)
 *   T(n)    = compute + comm - hidden;  E(n) = T(1) / (n T(n)) (--weak: T(1) / T(n))
 * Regimes: linear while E(n) >= 0.9; saturated once a step up in n buys less than a tenth of
 * the ideal gain in samples/s; sublinear between.
 */
#include "../lib/core/comm.h"
#include "../lib/topo/tune.h"
#include "topo_scaling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
    double sample_us, step_us, grad_mb, bucket_mb;
    int batch, weak, nodes, per_node, cores;
    const char *links, *out, *list, *compute, *comm;
};

/* The cheapest all-reduce of `bytes` on n ranks laid out nodes x rpn. */
static double allreduce_s(const struct tt_links *l, int n, int nodes, int rpn, int oversub,
                          size_t bytes)
{
    int *node_of = malloc((size_t)n * sizeof(int)), *local_of = malloc((size_t)n * sizeof(int));
    int *node_size = malloc((size_t)nodes * sizeof(int));
    struct tt_topo_view v = {nodes, node_of, local_of, node_size, n % rpn == 0};
    struct tt_model m = {.links = *l,
                         .nranks = n,
                         .nnodes = nodes,
                         .per_node = rpn,
                         .chunk = 128 << 10,
                         .oversub = oversub};
    double best = -1;

    if (!node_of || !local_of || !node_size) {
        free(node_of);
        free(local_of);
        free(node_size);
        return -1;
    }
    for (int g = 0; g < nodes; g++)
        node_size[g] = 0;
    for (int r = 0; r < n; r++) {
        node_of[r] = r / rpn;
        local_of[r] = r % rpn;
        node_size[r / rpn]++;
    }
    for (int i = 0; i < tt_num_algos; i++) {
        const struct tt_algo *a = &tt_algos[i];
        if (a->coll != TT_COLL_ALL_REDUCE || (a->fits && !a->fits(n, &v)))
            continue;
        double t = tt_tune_cost(&m, a, bytes);
        if (t < TT_TUNE_NO_FORMULA && (best < 0 || t < best))
            best = t;
    }
    free(node_of);
    free(local_of);
    free(node_size);
    return best;
}

struct point {
    int n, nodes, rpn;
    double compute, comm, hidden, step, rate, eff;
};

/* compute_ms: the measured step of n ranks side by side, comm_ms: the gradient's measured
 * all-reduce (< 0: from the per-sample time, from the cost model) */
static int predict(const struct job *j, const struct tt_links *links, int n, double compute_ms,
                   double comm_ms, struct point *p)
{
    struct tt_links shared = *links, *l = &shared;
    int rpn = n < j->per_node ? n : j->per_node, nodes = (n + rpn - 1) / rpn;
    double share = (double)rpn / j->cores > 1 ? (double)rpn / j->cores : 1;
    double local = j->weak ? j->batch : ceil((double)j->batch / n);
    double fb = share * j->sample_us * local * 1e-6, total = j->grad_mb * 1048576.0;
    double last = 0;

    p->n = n;
    p->nodes = nodes;
    p->rpn = rpn;
    p->compute = compute_ms >= 0 ? compute_ms * 1e-3 : fb + share * j->step_us * 1e-6;
    if (compute_ms >= 0)
        fb = compute_ms * 1e-3 - share * j->step_us * 1e-6;
    if (share > 1) /* every rank copies and reduces at once on fewer cores */
        l->intra_gbs /= share;
    p->comm = 0;
    if (comm_ms >= 0 && n > 1)
        p->comm = last = comm_ms * 1e-3;
    for (double off = 0; comm_ms < 0 && n > 1 && off < total; off += j->bucket_mb * 1048576.0) {
        double b = total - off < j->bucket_mb * 1048576.0 ? total - off : j->bucket_mb * 1048576.0;
        double t = allreduce_s(l, n, nodes, rpn, 2 * rpn > j->cores, (size_t)b);
        if (t < 0)
            return -1;
        p->comm += t;
        last = t;
    }
    p->hidden = 0;
    if (2 * rpn <= j->cores) {
        double behind = p->comm - last, bwd = fb * 2 / 3;
        p->hidden = behind < bwd ? behind : bwd;
    }
    p->step = p->compute + p->comm - p->hidden;
    p->rate = (j->weak ? (double)j->batch * n : (double)j->batch) / p->step;
    return 0;
}

static const char *regime(const struct point *p, const struct point *prev, int *saturated)
{
    if (*saturated)
        return "saturated";
    if (prev && p->n > prev->n) {
        double ideal = prev->rate * ((double)p->n / prev->n) - prev->rate;
        if (p->rate - prev->rate < 0.1 * ideal) {
            *saturated = 1;
            return "saturated";
        }
    }
    return p->eff >= 0.9 ? "linear" : "sublinear";
}

/* A comma-separated list of up to 64 figures, each >= 0 (a bad one ends it): how many. */
static int figures(const char *s, double *v)
{
    int n = 0;
    while (s && *s && n < 64) {
        char *end;
        v[n] = strtod(s, &end);
        if (end == s || !(v[n] >= 0))
            break;
        n++;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: tutti-topo --scaling --sample-us S --batch B --grad-mb G [--step-us O] "
            "[--bucket-mb C] [--weak] [--nodes N] [--per-node L] [--cores K] [--links a,b,c,d] "
            "[--n n1,n2,...] [--compute-ms c1,c2,...] [--comm-ms c1,c2,...] [--out FILE]\n");
    return 2;
}

int topo_scaling(int argc, char **argv)
{
    struct job j = {.bucket_mb = 25, .nodes = 1, .per_node = 8, .cores = 1 << 20};
    struct tt_links l;
    struct point *pts;
    int npts = 0, cap = 64, saturated = 0;
    FILE *out = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--scaling"))
            continue;
        if (!strcmp(a, "--weak")) {
            j.weak = 1;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--sample-us"))
            j.sample_us = atof(v);
        else if (!strcmp(a, "--step-us"))
            j.step_us = atof(v);
        else if (!strcmp(a, "--grad-mb"))
            j.grad_mb = atof(v);
        else if (!strcmp(a, "--bucket-mb"))
            j.bucket_mb = atof(v);
        else if (!strcmp(a, "--batch"))
            j.batch = atoi(v);
        else if (!strcmp(a, "--nodes"))
            j.nodes = atoi(v);
        else if (!strcmp(a, "--per-node"))
            j.per_node = atoi(v);
        else if (!strcmp(a, "--cores"))
            j.cores = atoi(v);
        else if (!strcmp(a, "--links"))
            j.links = v;
        else if (!strcmp(a, "--n"))
            j.list = v;
        else if (!strcmp(a, "--compute-ms"))
            j.compute = v;
        else if (!strcmp(a, "--comm-ms"))
            j.comm = v;
        else if (!strcmp(a, "--out"))
            j.out = v;
        else
            return usage();
    }
    if (!(j.sample_us > 0) || j.batch < 1 || !(j.grad_mb >= 0) || !(j.step_us >= 0) ||
        !(j.bucket_mb > 0) || j.nodes < 1 || j.per_node < 1 || j.cores < 1 ||
        (long)j.nodes * j.per_node > 65536) {
        fprintf(stderr, "tutti-topo --scaling: need --sample-us > 0, --batch >= 1, --grad-mb >= "
                        "0, --bucket-mb > 0, --step-us >= 0, nodes, ranks per node and cores >= "
                        "1, at most 65536 ranks\n");
        return 2;
    }
    if (tt_tune_links(&l) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-topo: %s\n", tutti_last_error());
        return 2;
    }
    if (j.links && (sscanf(j.links, "%lf,%lf,%lf,%lf", &l.intra_us, &l.intra_gbs, &l.inter_us,
                           &l.inter_gbs) != 4 ||
                    !(l.intra_gbs > 0) || !(l.inter_gbs > 0) || l.intra_us < 0 || l.inter_us < 0)) {
        fprintf(stderr, "tutti-topo: --links %s: need intra_us,intra_gbs,inter_us,inter_gbs\n",
                j.links);
        return 2;
    }
    pts = calloc((size_t)cap, sizeof(*pts));
    if (!pts)
        return 1;
    /* n: the list, or 1, 2, 4, ... up to a node, then whole nodes doubling */
    for (const char *s = j.list; s && *s && npts < cap;) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end == s || n < 1 || n > (long)j.nodes * j.per_node) {
            fprintf(stderr, "tutti-topo --scaling: --n %s: each n in [1, %ld]\n", j.list,
                    (long)j.nodes * j.per_node);
            free(pts);
            return 2;
        }
        pts[npts++].n = (int)n;
        s = *end == ',' ? end + 1 : end;
    }
    for (long n = 1; !j.list && n <= (long)j.nodes * j.per_node && npts < cap; n *= 2) {
        if (n > j.per_node && n % j.per_node != 0)
            continue;
        pts[npts++].n = (int)n;
    }
    char cores[32] = "a core for every thread";
    if (j.cores != 1 << 20)
        snprintf(cores, sizeof(cores), "%d cores a node", j.cores);
    printf("# scaling: %d node(s) x %d ranks, %s; links inside %.2f us %.1f GB/s, "
           "across %.2f us %.1f GB/s; %.3g us a sample, %.3g us a step, %s batch %d, %.2f MiB "
           "of gradients in %.1f MiB buckets\n",
           j.nodes, j.per_node, cores, l.intra_us, l.intra_gbs, l.inter_us, l.inter_gbs,
           j.sample_us, j.step_us, j.weak ? "per-rank" : "global", j.batch, j.grad_mb, j.bucket_mb);
    printf("# %6s %5s %5s %12s %12s %12s %12s %12s %7s  %s\n", "n", "nodes", "ppn", "compute_ms",
           "comm_ms", "hidden_ms", "step_ms", "samples/s", "E(n)", "regime");
    if (j.out && !(out = fopen(j.out, "w"))) {
        perror(j.out);
        free(pts);
        return 1;
    }
    if (out)
        fprintf(out, "# n samples/s E regime (tutti-topo --scaling)\n");
    double comp[64], comm[64];
    int ncomp = figures(j.compute, comp), ncomm = figures(j.comm, comm);
    for (int k = 0; k < ncomp; k++)
        ncomp = comp[k] > 0 ? ncomp : -1;
    if ((j.compute && (ncomp != npts || !j.list || pts[0].n != 1)) ||
        (j.comm && (ncomm != npts || !j.list || pts[0].n != 1))) {
        fprintf(stderr, "tutti-topo --scaling: --compute-ms and --comm-ms need --n starting at "
                        "1 and one figure per n (compute > 0, communication >= 0)\n");
        free(pts);
        return 2;
    }
    struct point one;
    if (predict(&j, &l, 1, j.compute ? comp[0] : -1, -1, &one) != 0) {
        free(pts);
        return 1;
    }
    for (int k = 0; k < npts; k++) {
        struct point *p = &pts[k];
        if (predict(&j, &l, p->n, j.compute ? comp[k] : -1, j.comm ? comm[k] : -1, p) != 0) {
            fprintf(stderr, "tutti-topo --scaling: no all-reduce formula for %d ranks\n", p->n);
            free(pts);
            return 1;
        }
        p->eff = j.weak ? one.step / p->step : one.step / (p->n * p->step);
        const char *r = regime(p, k ? &pts[k - 1] : NULL, &saturated);
        printf("  %6d %5d %5d %12.3f %12.3f %12.3f %12.3f %12.0f %7.3f  %s\n", p->n, p->nodes,
               p->rpn, p->compute * 1e3, p->comm * 1e3, p->hidden * 1e3, p->step * 1e3, p->rate,
               p->eff, r);
        if (out)
            fprintf(out, "%d %.1f %.4f %s\n", p->n, p->rate, p->eff, r);
    }
    if (out)
        fclose(out);
    free(pts);
    return 0;
}
