/*
 * tutti-topo -- what tutti sees and what it would do.
 *
 *   tutti-topo [--xml FILE]                 the machine (hwloc): packages, NUMA, cores, NICs,
 *                                           GPUs; the live one, TUTTI_TOPO_FILE or FILE
 *   tutti-run -n N [--nodes K] tutti-topo --comm
 *                                           the communicator: nodes and their ranks, the ring
 *                                           and the two trees of each channel, the transport
 *                                           of every pair of ranks
 *   tutti-topo --simulate [--nodes N] [--per-node L] [--links a,b,c,d] [--oversub]
 *              [--coll C] [-b MIN] [-e MAX] [-f F]
 *                                           the cost model's predicted time and bus bandwidth
 *                                           of every algorithm over a size sweep, and the
 *                                           tuner's pick: the plan for clusters we cannot run
 *                                           (links: intra_us,intra_gbs,inter_us,inter_gbs;
 *                                           --oversub: ranks outnumber cores, so every hop
 *                                           waits for a context switch)
 *   tutti-topo --scaling --sample-us S --batch B --grad-mb G [--step-us O] [--bucket-mb C]
 *              [--weak] [--nodes N] [--per-node L] [--cores K] [--links a,b,c,d] [--n LIST]
 *              [--out FILE]
 *                                           a data-parallel job's step time, samples/s and
 *                                           E(n) on n ranks of a described cluster, from one
 *                                           rank's measured figures (topo_scaling.c)
 *
 * A project tool: it links the library's internals (lib/core/comm.h, lib/topo/tune.h).
 */
#include "../lib/core/comm.h"
#include "../lib/topo/tune.h"
#include "size_arg.h"
#include "topo_scaling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double bus_factor(enum tt_coll c, int n)
{
    if (c == TT_COLL_ALL_REDUCE)
        return 2.0 * (n - 1) / n;
    if (c == TT_COLL_ALL_GATHER || c == TT_COLL_REDUCE_SCATTER)
        return (double)(n - 1) / n;
    return 1;
}

static int simulate(int nodes, int per_node, const char *links, int oversub, const char *coll,
                    size_t minb, size_t maxb, double factor)
{
    int n = nodes * per_node;
    int *node_of = malloc((size_t)n * sizeof(int)), *local_of = malloc((size_t)n * sizeof(int));
    int *node_size = malloc((size_t)nodes * sizeof(int));
    struct tt_topo_view v = {nodes, node_of, local_of, node_size, 1};
    struct tt_model m = {
        .nranks = n, .nnodes = nodes, .per_node = per_node, .chunk = 128 << 10, .oversub = oversub};

    if (!node_of || !local_of || !node_size)
        return 1;
    for (int r = 0; r < n; r++) {
        node_of[r] = r / per_node;
        local_of[r] = r % per_node;
    }
    for (int g = 0; g < nodes; g++)
        node_size[g] = per_node;
    if (tt_tune_links(&m.links) != TUTTI_SUCCESS) { /* TUTTI_TUNE_LINKS or the defaults */
        fprintf(stderr, "tutti-topo: %s\n", tutti_last_error());
        return 2;
    }
    if (links && (sscanf(links, "%lf,%lf,%lf,%lf", &m.links.intra_us, &m.links.intra_gbs,
                         &m.links.inter_us, &m.links.inter_gbs) != 4 ||
                  m.links.intra_gbs <= 0 || m.links.inter_gbs <= 0 || m.links.intra_us < 0 ||
                  m.links.inter_us < 0)) {
        fprintf(
            stderr,
            "tutti-topo: --links %s: need intra_us,intra_gbs,inter_us,inter_gbs (bandwidths > 0, "
            "latencies >= 0)\n",
            links);
        return 2;
    }
    printf("# simulate: %d nodes x %d ranks = %d ranks; links: inside a node %.2f us, %.1f GB/s;"
           " between nodes %.2f us, %.1f GB/s; chunk %zu B",
           nodes, per_node, n, m.links.intra_us, m.links.intra_gbs, m.links.inter_us,
           m.links.inter_gbs, m.chunk);
    if (oversub)
        printf("; ranks outnumber cores: a hop takes at least %.2f us", m.links.oversub_us);
    printf("\n");
    for (int c = 0; c < TT_NUM_COLLS; c++) {
        const struct tt_algo *fit[16];
        int nfit = 0;

        if (coll && strcmp(coll, tt_coll_name((enum tt_coll)c)) != 0)
            continue;
        for (int i = 0; i < tt_num_algos && nfit < 16; i++)
            if ((int)tt_algos[i].coll == c && (!tt_algos[i].fits || tt_algos[i].fits(n, &v)))
                fit[nfit++] = &tt_algos[i];
        printf("#\n# %s: predicted time (us) and busbw (GB/s) per algorithm\n# %12s",
               tt_coll_name((enum tt_coll)c), "size(B)");
        for (int k = 0; k < nfit; k++)
            printf(" %22s", fit[k]->name);
        printf("  pick\n");
        for (size_t s = minb; s <= maxb && s > 0; s = (size_t)((double)s * factor)) {
            const struct tt_algo *best = NULL;
            double bt = 0;
            printf("  %12zu", s);
            for (int k = 0; k < nfit; k++) {
                double t = tt_tune_cost(&m, fit[k], s);
                if (t >= TT_TUNE_NO_FORMULA) { /* det: taken only when asked for */
                    printf(" %22s", "-");
                    continue;
                }
                printf(" %11.1f %10.2f", t * 1e6,
                       t > 0 ? (double)s / t / 1e9 * bus_factor((enum tt_coll)c, n) : 0);
                if (!best || t < bt) {
                    best = fit[k];
                    bt = t;
                }
            }
            printf("  %s\n", best ? best->name : "-");
            if ((double)s * factor <= (double)s)
                break;
        }
    }
    free(node_of);
    free(local_of);
    free(node_size);
    return 0;
}

static void print_tree(const struct tutti_comm *c, int tree)
{
    int n = c->nranks;

    printf("  tree %d (parent of each rank):", tree);
    for (int pos = 0; pos < n; pos++) {
        int v = tree ? n - 1 - pos : pos, rank = c->topo.ring[pos];
        int parent = v ? c->topo.ring[tree ? n - 1 - (v - 1) / 2 : (v - 1) / 2] : -1;
        if (parent < 0)
            printf(" %d:root", rank);
        else
            printf(" %d<-%d", rank, parent);
    }
    printf("\n");
}

static int show_comm(void)
{
    tutti_comm_t comm;
    struct tutti_comm *c;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-topo --comm: %s (run it under tutti-run, srun or mpirun)\n",
                tutti_last_error());
        return 1;
    }
    c = comm;
    if (c->rank == 0) {
        printf("communicator: %d ranks on %d node(s)%s\n", c->nranks, c->topo.nnodes,
               c->topo.uniform ? "" : " of different sizes");
        for (int g = 0; g < c->topo.nnodes; g++) {
            printf("  node %d:", g);
            for (int r = 0; r < c->nranks; r++)
                if (c->topo.node_of[r] == g)
                    printf(" %d", r);
            for (int r = 0; r < c->nranks; r++)
                if (c->topo.node_of[r] == g) {
                    const struct tt_rank_info *i = &c->peers[r];
                    printf("  (host %s, NUMA %d, CPUs %s, NIC %s, GPU %s)", i->host, i->numa,
                           i->cpuset, i->nic[0] ? i->nic : "none",
                           i->gpu_bus[0] ? i->gpu_bus : "none");
                    break;
                }
            printf("\n");
        }
        for (int ch = 0; ch < c->nchannels; ch++) {
            printf("channel %d:\n  ring:", ch);
            for (int k = 0; k < c->nranks; k++)
                printf(" %d", c->topo.ring[k]);
            printf("\n");
            print_tree(c, 0);
            print_tree(c, 1);
        }
        printf("transports:\n");
        for (int a = 0; a < c->nranks; a++) {
            printf("  %3d:", a);
            for (int b = 0; b < c->nranks; b++)
                printf(" %s", a == b ? "-" : tt_comm_transport_name(c, a, b));
            printf("\n");
        }
        if (c->cuda.dev_path) {
            printf("device buffers: p2p (CUDA IPC) between every pair from %zu bytes, staged "
                   "below (collectives and messages); on a wrapped CUDA stream rank 0's calls "
                   "%s\n",
                   c->cuda.min_bytes,
                   c->cuda.async ? "return at once" : "return once done (TUTTI_CUDA_ASYNC)");
        } else {
            int all = 1;
            for (int r = 0; r < c->nranks; r++)
                all &= c->peers[r].cuda_bus[0] != '\0';
            printf("device buffers: staged through pinned host memory (%s)\n",
                   c->topo.nnodes > 1 ? "ranks on several hosts"
                   : all              ? "a GPU cannot reach another's"
                                      : "a rank has no CUDA device, or TUTTI_CUDA_P2P=0 or "
                                        "TUTTI_TRANSPORTS leaves p2p out");
        }
    }
    tutti_barrier(comm, NULL);
    tutti_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    const char *xml = NULL, *links = NULL, *coll = NULL;
    int sim = 0, comm = 0, nodes = 512, per_node = 8;
    size_t minb = 8, maxb = 1ull << 30;
    double factor = 4;
    int oversub = 0;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--scaling"))
            return topo_scaling(argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--simulate"))
            sim = 1;
        else if (!strcmp(a, "--comm"))
            comm = 1;
        else if (!strcmp(a, "--xml") && v)
            xml = argv[++i];
        else if (!strcmp(a, "--nodes") && v)
            nodes = atoi(argv[++i]);
        else if (!strcmp(a, "--per-node") && v)
            per_node = atoi(argv[++i]);
        else if (!strcmp(a, "--links") && v)
            links = argv[++i];
        else if (!strcmp(a, "--oversub"))
            oversub = 1;
        else if (!strcmp(a, "--coll") && v)
            coll = argv[++i];
        else if (!strcmp(a, "-b") && v && tt_size_arg(argv[++i], &minb) == 0)
            ;
        else if (!strcmp(a, "-e") && v && tt_size_arg(argv[++i], &maxb) == 0)
            ;
        else if (!strcmp(a, "-f") && v && (factor = atof(argv[++i])) > 1)
            ;
        else {
            fprintf(stderr,
                    "usage: tutti-topo [--xml FILE] | --comm | --simulate [--nodes N] "
                    "[--per-node L] [--links a,b,c,d] [--oversub] [--coll C] [-b MIN] [-e MAX] "
                    "[-f F] | --scaling ... (see topo_scaling.c)\n");
            return 2;
        }
    }
    if (nodes < 1 || per_node < 1 || (long)nodes * per_node > 65536) {
        fprintf(stderr, "tutti-topo: --nodes and --per-node must be >= 1, at most 65536 ranks\n");
        return 2;
    }
    if (sim)
        return simulate(nodes, per_node, links, oversub, coll, minb, maxb, factor);
    if (comm)
        return show_comm();
    if (tt_topo_print_machine(stdout, xml) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti-topo: %s\n", tutti_last_error());
        return 1;
    }
    return 0;
}
