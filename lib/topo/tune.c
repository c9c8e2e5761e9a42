/*
 * tune.c -- the alpha-beta cost model and the per-call choice; see tune.h.
 *
 * Notation: S bytes in all, n ranks on N nodes of L ranks, C bytes per chunk, a/b latency and
 * seconds per byte of a link (i: inside a node, e: between nodes; x: the slowest a flat
 * schedule crosses, e when N > 1). Ring positions group each node's ranks together, so
 * recursive doubling's first log2(L) rounds stay inside nodes.
 *   ring all-reduce       2(n-1) (a_x + S/n b_x)
 *   recursive doubling    log2(p) rounds of (a + S b) (+2 such hops when n is not 2^k)
 *   Rabenseifner          2 log2(p) a + 1.5 * 2 (p-1)/p S b (+2 whole-array hops when
 *                         folded); 1.5: each round is a phase that must drain before the next
 *                         starts (plan.h), measured 1.4-1.9x the hierarchical time at 64 MiB
 *                         on 2x2 emulated nodes where the formula alone says equal
 *   double binary tree    2 depth (a_x + C b_x) + 2 S b_x
 *   hierarchical          2 (L-1)(a_i + S/L b_i) + 2 (N-1)(a_e + S/(L N) b_e)
 *   ring all-gather / reduce-scatter   (n-1)(a_x + S/n b_x)
 *   recursive-halving reduce-scatter  sum over rounds k = 0.. of (a + 2 S/2^(k+1) b), the
 *                                     first rounds (partners farthest apart) between nodes,
 *                                     where a node's L ranks share the link (L S/2^(k+1) b_e);
 *                                     + a_x + S b_x + a_x + S/n b_x when folded. 2, not
 *                                     Rabenseifner's 1.5: 32 ranks on 2 cores, 4 MiB took
 *                                     12-14 ms against the ring's 8-9 ms, 1 MiB 2.9-3.8 ms
 *                                     against 4.0-4.8 ms; 2 puts the crossover between
 *   direct reduce-scatter, all-gather a_i + (n-2) a_i0 + (n-1) S/n b_i (one node only;
 *                                     a_i0: a message without a context switch, as all leave
 *                                     at once)
 *   direct all-reduce                 twice the direct reduce-scatter's
 *   flat all-reduce                   a_i + (n-1) a_i0 + n S b_i (every rank sends its whole
 *                                     array to all, itself included)
 *   recursive-doubling all-gather      sum over rounds of (a + 2^k S/p b) (+ a_x + S/n b_x +
 *                                     a_x + S b_x when folded)
 *   hierarchical all-gather            (N-1)(a_e + S/n b_e) + N (L-1)(a_i + S/n b_i)
 *   chain broadcast / reduce           (n-1) a + (n-1) C b + S b_x   (pipelined)
 *   binomial tree broadcast            ceil(log2 n) (a_x + S b_x)
 *   hierarchical broadcast             (N-1)(a_e + C b_e) + (L-1)(a_i + C b_i) + S max(b)
 * Across nodes a reduction also makes a pass more over the bytes it reduces (g, seconds a
 * byte, 1/net_reduce_gbs): the transport lands them in a slot (the kernel's copy, counted in
 * b_e) and the reduction reads them again; inside a node the reduction reads the peer's slot,
 * and that read is the copy. Bytes a rank reduces after a network hop: ring all-reduce and
 * reduce-scatter (n-1)/n S; recursive doubling S a round between nodes (the fold another S);
 * Rabenseifner and recursive halving S/2^(k+1) a round between nodes (the fold S);
 * tree 2 S; hierarchical (N-1)/N S/L; chain reduce S, binomial tree reduce ceil(log2 n) S.
 * 32 GB/s: on 2 emulated hosts over loopback the ring all-reduce (S/2 reduced) and the
 * exchange (S) cross between 512 and 768 KiB (BENCHMARKS.md, "The ring for large all-reduces
 * across hosts"); 32 GB/s puts 2 a_e / g at 640 KB.
 * The default links were measured on the reference machine (tutti-perf, BENCHMARKS.md):
 * shared memory 0.25 us, 12 GB/s; the network there is loopback TCP, 10 us, 2.5 GB/s; a hop
 * that needs a context switch (ranks outnumber cores) 7 us. TUTTI_TUNE_LINKS sets them.
 */
#include "lib/topo/tune.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TT_MIN_CHANNEL_BYTES (64 * 1024)

tutti_result_t tt_tune_links(struct tt_links *l)
{
    const char *s = tt_env_str("TUTTI_TUNE_LINKS");

    *l = (struct tt_links){0.25, 12.0, 10.0, 2.5, 7.0, 32.0};
    if (tt_tune_links_measured()) /* the defaults until init has measured the network */
        return TUTTI_SUCCESS;
    if (*s &&
        sscanf(s, "%lf,%lf,%lf,%lf", &l->intra_us, &l->intra_gbs, &l->inter_us, &l->inter_gbs) != 4)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_TUNE_LINKS='%s' is not intra_us,intra_gbs,inter_us,inter_gbs", s);
    if (l->intra_gbs <= 0 || l->inter_gbs <= 0 || l->intra_us < 0 || l->inter_us < 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_TUNE_LINKS='%s': bandwidths must be > 0, latencies >= 0", s);
    return TUTTI_SUCCESS;
}

int tt_tune_links_measured(void)
{
    return strcmp(tt_env_str("TUTTI_TUNE_LINKS"), "measure") == 0;
}

void tt_tune_set_network(struct tt_tuner *t, double inter_us, double inter_gbs)
{
    t->model.links.inter_us = inter_us;
    t->model.links.inter_gbs = inter_gbs;
    memset(t->logged, 0, sizeof(t->logged));
    memset(t->last, 0, sizeof(t->last)); /* picks made with the old figures are forgotten */
}

static int ilog2_ceil(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

double tt_tune_cost(const struct tt_model *m, const struct tt_algo *a, size_t bytes)
{
    double S = (double)bytes, C = (double)m->chunk, n = m->nranks, N = m->nnodes;
    double L = m->per_node > 0 ? m->per_node : 1;
    double ai = m->links.intra_us * 1e-6, bi = 1e-9 / m->links.intra_gbs;
    double ae = m->links.inter_us * 1e-6, be = 1e-9 / m->links.inter_gbs;
    double a0 = ai; /* a message's own cost, without a context switch */
    double g = N > 1 && m->links.net_reduce_gbs > 0 ? 1e-9 / m->links.net_reduce_gbs : 0;
    double ax, bx;
    int p = 1, rounds, intra_rounds;

    if (m->oversub) {
        double o = m->links.oversub_us * 1e-6;
        ai = ai > o ? ai : o;
        ae = ae > o ? ae : o;
    }
    ax = N > 1 ? ae : ai;
    bx = N > 1 ? be : bi;
    if (n <= 1)
        return ai;
    while (p * 2 <= m->nranks)
        p *= 2;
    rounds = ilog2_ceil(p);
    intra_rounds = ilog2_ceil(m->per_node > p ? p : (m->per_node > 0 ? m->per_node : 1));
    if (N > 1 && (m->per_node & (m->per_node - 1)) != 0)
        intra_rounds = 0; /* partners cross nodes from the first round */

    if (!strcmp(a->name, "direct") || !strcmp(a->name, "flat")) { /* one node (fits) */
        /* One hop; each further message costs a send (flat sends one more, to itself). */
        double lat = ai + (n - 2) * a0;
        if (!strcmp(a->name, "flat"))
            return lat + a0 + n * S * bi;
        return (a->coll == TT_COLL_ALL_REDUCE ? 2 : 1) * (lat + (n - 1) * S / n * bi);
    }
    switch (a->coll) {
    case TT_COLL_ALL_REDUCE:
        if (!strcmp(a->name, "ring"))
            return 2 * (n - 1) * (ax + S / n * bx) + (n - 1) * S / n * g;
        if (!strcmp(a->name, "rd") || !strcmp(a->name, "rabenseifner")) {
            double lat = 0, bw = 0, fold = p < m->nranks ? 2 * (ax + S * bx) + S * g : 0;
            for (int k = 0; k < rounds; k++) {
                double al = k < intra_rounds ? ai : ae, bl = k < intra_rounds ? bi : be;
                double gl = k < intra_rounds ? 0 : g;
                lat += al;
                /* rd moves S every round; halving/doubling moves S/2^(k+1) twice */
                bw += !strcmp(a->name, "rd")
                          ? S * (bl + gl)
                          : 1.5 * 2 * S / (double)(2 << k) * bl + S / (double)(2 << k) * gl;
                if (!strcmp(a->name, "rabenseifner"))
                    lat += al;
            }
            return lat + bw + fold;
        }
        if (!strcmp(a->name, "tree")) {
            double depth = ilog2_ceil(m->nranks + 1);
            return 2 * depth * (ax + C * bx) + 2 * S * bx + 2 * S * g;
        }
        if (!strcmp(a->name, "hier"))
            return 2 * (L - 1) * (ai + S / L * bi) + 2 * (N - 1) * (ae + S / (L * N) * be) +
                   (N - 1) / N * S / L * g;
        break;
    case TT_COLL_ALL_GATHER:
        if (!strcmp(a->name, "ring"))
            return (n - 1) * (ax + S / n * bx);
        if (!strcmp(a->name, "rd")) { /* folded: a block to the buddy, all of them back */
            double t = p < m->nranks ? 2 * ax + S / n * bx + S * bx : 0;
            for (int k = 0; k < rounds; k++)
                t += (k < intra_rounds ? ai + (double)(1 << k) * S / p * bi
                                       : ae + (double)(1 << k) * S / p * be);
            return t;
        }
        if (!strcmp(a->name, "hier"))
            return (N - 1) * (ae + S / n * be) + N * (L - 1) * (ai + S / n * bi);
        break;
    case TT_COLL_REDUCE_SCATTER:
        if (!strcmp(a->name, "ring"))
            return (n - 1) * (ax + S / n * bx) + (n - 1) * S / n * g;
        if (!strcmp(a->name, "rh")) {
            /* folded: the whole array to the buddy, the own block back */
            double t = p < m->nranks ? 2 * ax + S * bx + S / n * bx + S * g : 0;
            for (int k = 0; k < rounds; k++) { /* round k: partners p/2^(k+1) apart */
                double half = S / (double)(2 << k);
                t += k < rounds - intra_rounds ? ae + 2 * L * half * be + half * g
                                               : ai + 2 * half * bi;
            }
            return t;
        }
        break;
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE: {
        double gr = a->coll == TT_COLL_REDUCE ? g : 0; /* a broadcast only copies */
        if (!strcmp(a->name, "chain"))
            return (n - N) * ai + (N - 1) * ae + (n - 1) * C * bi + S * bx + S * gr;
        if (!strcmp(a->name, "tree"))
            return ilog2_ceil(m->nranks) * (ax + S * bx + S * gr);
        if (!strcmp(a->name, "hier"))
            return (N - 1) * (ae + C * be) + (L - 1) * (ai + C * bi) + S * (be > bi ? be : bi) +
                   S * gr;
        break;
    }
    default: break;
    }
    return TT_TUNE_NO_FORMULA;
}

static int coll_by_name(const char *s, size_t len)
{
    for (int c = 0; c < TT_NUM_COLLS; c++) {
        const char *name = tt_coll_name((enum tt_coll)c);
        char squeezed[32];
        size_t k = 0;

        for (const char *q = name; *q && k < sizeof(squeezed) - 1; q++)
            if (*q != '_')
                squeezed[k++] = *q;
        squeezed[k] = '\0';
        if ((strlen(name) == len && strncmp(s, name, len) == 0) ||
            (k == len && strncmp(s, squeezed, len) == 0))
            return c;
    }
    return -1;
}

tutti_result_t tt_tune_init(struct tt_tuner *t, int nranks, int max_channels,
                            const struct tt_topo_view *topo, size_t chunk, int oversub)
{
    const char *spec = tt_env_str("TUTTI_ALGO");
    char buf[256];

    memset(t, 0, sizeof(*t));
    t->topo = topo;
    t->max_channels = max_channels;
    TT_CHECK(tt_tune_links(&t->model.links));
    t->model.nranks = nranks;
    t->model.nnodes = topo ? topo->nnodes : 1;
    t->model.per_node = nranks / t->model.nnodes;
    t->model.chunk = chunk;
    t->model.oversub = oversub;
    t->deterministic = tt_env_flag("TUTTI_DETERMINISTIC");
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *e = strtok_r(buf, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(e, ':');
        int c = colon ? coll_by_name(e, (size_t)(colon - e)) : -1;
        const struct tt_algo *a;

        if (c < 0)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "TUTTI_ALGO entry '%s' is not COLLECTIVE:ALGORITHM with a known "
                           "collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce)",
                           e);
        a = tt_algo_find((enum tt_coll)c, colon + 1, nranks, topo);
        if (!a) {
            for (int i = 0; i < tt_num_algos; i++)
                if ((int)tt_algos[i].coll == c && !strcmp(tt_algos[i].name, colon + 1))
                    return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                                   "TUTTI_ALGO: %s cannot run %s on these %d ranks on %d "
                                   "node(s) (%s)",
                                   colon + 1, tt_coll_name((enum tt_coll)c), nranks,
                                   topo ? topo->nnodes : 1, tt_algos[i].desc);
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "TUTTI_ALGO: %s has no algorithm '%s'",
                           tt_coll_name((enum tt_coll)c), colon + 1);
        }
        t->forced[c] = a;
    }
    if (t->deterministic)
        for (int c = 0; c < TT_NUM_COLLS; c++) {
            const struct tt_algo *det = tt_algo_find((enum tt_coll)c, "det", nranks, topo);
            if (!det)
                continue;
            if (t->forced[c] && t->forced[c] != det)
                TT_WARN(TT_SUB_TUNE, "TUTTI_DETERMINISTIC=1 overrides TUTTI_ALGO for %s",
                        tt_coll_name((enum tt_coll)c));
            t->forced[c] = det;
        }
    return TUTTI_SUCCESS;
}

int tt_tune_may_send_to_self(const struct tt_tuner *t)
{
    for (int i = 0; i < tt_num_algos; i++) {
        const struct tt_algo *a = &tt_algos[i];
        if (!a->to_self)
            continue;
        /* Unforced, the model takes flat only where ranks outnumber cores (with a core per
         * rank its latency term, a send per rank, never beats log-depth rd); det has no
         * formula, so only TUTTI_ALGO or TUTTI_DETERMINISTIC take it. */
        if (t->forced[a->coll]
                ? t->forced[a->coll] == a
                : t->model.oversub && (!a->fits || a->fits(t->model.nranks, t->topo)) &&
                      tt_tune_cost(&t->model, a, 8) < TT_TUNE_NO_FORMULA)
            return 1;
    }
    return 0;
}

static void log_choice(struct tt_tuner *t, enum tt_coll coll, size_t bytes,
                       const struct tt_algo *pick, int forced)
{
    char line[512], why[96];
    int n = 0, bucket = 0;

    while (bucket < 63 && ((size_t)1 << (bucket + 1)) <= bytes)
        bucket++;
    if (t->logged[coll][bucket] || !tt_log_on(TT_LOG_INFO, TT_SUB_TUNE))
        return;
    t->logged[coll][bucket] = 1;
    for (int i = 0; i < tt_num_algos && n < (int)sizeof(line) - 64; i++) {
        const struct tt_algo *a = &tt_algos[i];
        if (a->coll != coll || (a->fits && !a->fits(t->model.nranks, t->topo)))
            continue;
        double cost = tt_tune_cost(&t->model, a, bytes);
        if (cost >= TT_TUNE_NO_FORMULA) /* only when forced (det: TUTTI_DETERMINISTIC) */
            n += snprintf(line + n, sizeof(line) - (size_t)n, " %s -;", a->name);
        else
            n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %.1f us;", a->name, cost * 1e6);
    }
    if (forced && pick != t->forced[coll]) /* tt_tune_pick's fallback */
        snprintf(why, sizeof(why), " (TUTTI_ALGO's %s needs a scratch buffer: input over %zu MiB)",
                 t->forced[coll]->name, TT_SCRATCH_MAX >> 20);
    else
        snprintf(why, sizeof(why), "%s", forced ? " (TUTTI_ALGO)" : "");
    TT_INFO(TT_SUB_TUNE, "%s of %zu bytes on %d ranks / %d nodes: %s%s (predicted:%s)",
            tt_coll_name(coll), bytes, t->model.nranks, t->model.nnodes, pick->name, why, line);
}

const struct tt_algo *tt_tune_pick(struct tt_tuner *t, enum tt_coll coll, size_t bytes,
                                   int *nchannels)
{
    const struct tt_algo *a = t->forced[coll];
    size_t ch = bytes / TT_MIN_CHANNEL_BYTES;
    double best = 0;

    if (t->last[coll].algo && t->last[coll].bytes == bytes) {
        *nchannels = t->last[coll].nchannels;
        return t->last[coll].algo;
    }
    if (a && a->scratch && bytes > TT_SCRATCH_MAX) /* forced, but too large for scratch */
        a = tt_algo_find(coll, "ring", t->model.nranks, t->topo);
    for (int i = 0; !t->forced[coll] && i < tt_num_algos; i++) {
        const struct tt_algo *c = &tt_algos[i];
        double cost;
        if (c->coll != coll || (c->fits && !c->fits(t->model.nranks, t->topo)) ||
            (c->scratch && bytes > TT_SCRATCH_MAX))
            continue;
        cost = tt_tune_cost(&t->model, c, bytes);
        if (!a || cost < best) {
            a = c;
            best = cost;
        }
    }
    log_choice(t, coll, bytes, a, t->forced[coll] != NULL);
    *nchannels = ch < 1 ? 1 : ch > (size_t)t->max_channels ? t->max_channels : (int)ch;
    t->last[coll].bytes = bytes;
    t->last[coll].algo = a;
    t->last[coll].nchannels = *nchannels;
    return a;
}
