/*
 * perf_opts.c -- the perf driver's command line (perf.h): nccl-tests' flags, short and long
 * (`-n 20`, `--iters 20`, `--iters=20`), so a line written for all_reduce_perf runs here.
 * Where tutti-perf differs (one rank a process, host buffers unless -G 1, -J for JSON) a flag
 * that cannot mean the same is refused by name rather than ignored.
 */
#include "perf.h"
#include "size_arg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Short flag, long name; every one takes a value except the last three. */
static const struct {
    char flag;
    const char *name;
} longs[] = {
    {'t', "nthreads"},    {'g', "ngpus"},         {'b', "minbytes"},     {'e', "maxbytes"},
    {'i', "stepbytes"},   {'f', "stepfactor"},    {'o', "op"},           {'d', "datatype"},
    {'r', "root"},        {'n', "iters"},         {'w', "warmup_iters"}, {'m', "agg_iters"},
    {'a', "average"},     {'p', "parallel_init"}, {'c', "check"},        {'z', "blocking"},
    {'F', "output_file"}, {'J', "json"},          {'G', "device"},       {'R', "register"},
};

/* A whole number >= lo, or die naming the flag. */
static int count_arg(const char *flag, const char *v, int lo)
{
    char *end;
    long n = strtol(v, &end, 10);

    if (*end || end == v || n < lo || n > 1000000000L) {
        char what[96];
        snprintf(what, sizeof(what), "%s %s: need a whole number >= %d", flag, v, lo);
        perf_die("%s", what);
    }
    return (int)n;
}

/* 0 or 1, or die naming the flag (and why, where it means more elsewhere). */
static int switch_arg(const char *flag, const char *v, const char *why)
{
    int n = count_arg(flag, v, 0);

    if (n > 1) {
        char what[192];
        snprintf(what, sizeof(what), "%s %s: 0 or 1%s", flag, v, why);
        perf_die("%s", what);
    }
    return n;
}

void perf_usage(const char *name, int rank)
{
    if (rank == 0)
        printf("usage: %s-perf COLL [options]   (run under tutti-run, srun or mpirun)\n"
               "  COLL: all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all "
               "gather scatter all\n"
               "  nccl-tests' flags, short or long (--minbytes 8, --iters=20):\n"
               "  -b SIZE   --minbytes      minimum bytes (K/M/G suffixes)     [8]\n"
               "  -e SIZE   --maxbytes      maximum bytes                      [64M]\n"
               "  -f F      --stepfactor    multiply the size by F each step   [2]\n"
               "  -i SIZE   --stepbytes     add SIZE each step instead\n"
               "  -n N      --iters         timed iterations per size          [20]\n"
               "  -w N      --warmup_iters  warm-up iterations per size        [5]\n"
               "  -m N      --agg_iters     calls per iteration, in one group (time is per "
               "call) [1]\n"
               "  -c N      --check         check results (#wrong); 0: do not  [1]\n"
               "  -d TYPE   --datatype      int8 uint8 int32 uint32 int64 uint64 float16\n"
               "                            bfloat16 float32 float64 float8_e4m3 float8_e5m2\n"
               "                            (float half double f8e4m3 f8e5m2), all\n"
               "  -o OP     --op            sum prod min max avg mulsum, or all [sum]\n"
               "  -r ROOT   --root          root of broadcast, reduce, gather, scatter, or\n"
               "                            all (a row per root)               [0]\n"
               "  -a AGG    --average       ranks' times: 0|rank0 (rank 0's), 1|avg, 2|min,\n"
               "                            3|max                              [avg]\n"
               "  -t 1      --nthreads      one thread a rank (more: refused)\n"
               "  -g 1      --ngpus         one GPU a rank (more: refused)\n"
               "  -p 0|1    --parallel_init accepted; nothing to do with one rank a process\n"
               "  -z 0|1    --blocking      accepted; every call returns when it is complete\n"
               "  -F FILE   --output_file   also write the rows as CSV to FILE (rank 0)\n"
               "  and tutti-perf's own:\n"
               "  -G 0|1    --device        buffers in CUDA device memory      [0]\n"
               "            (nccl-tests' -G is CUDA graph launches: not offered)\n"
               "  -R 0|1|2  --register      1: register the buffers with the communicator; 2:\n"
               "                            allocate them as symmetric memory in windows\n"
               "                            (zero-copy sends where the transport can: net_ib) [0]\n"
               "                            (-R 2 with -G 1: symmetric device memory)\n"
               "  -J FILE   --json          also write the results as JSON\n"
               "  --csv     print CSV instead of the table\n",
               name);
}

/* argv[*i] as a short flag and its value (advancing *i past them); NULL flag: --csv etc. */
static char flag_of(int argc, char **argv, int *i, const char **v)
{
    const char *f = argv[*i];

    if (f[0] == '-' && f[1] == '-') {
        const char *name = f + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        for (size_t k = 0; k < sizeof(longs) / sizeof(longs[0]); k++)
            if (strlen(longs[k].name) == len && !strncmp(longs[k].name, name, len)) {
                if (eq) {
                    *v = eq + 1;
                } else {
                    if (*i + 1 >= argc)
                        perf_die("%s needs a value", f);
                    *v = argv[++*i];
                }
                return longs[k].flag;
            }
        perf_die("unknown flag '%s' (see --help)", f);
    }
    if (f[0] != '-' || strlen(f) != 2)
        perf_die("bad argument '%s' (see --help)", f);
    if (*i + 1 >= argc)
        perf_die("%s needs a value", f);
    *v = argv[++*i];
    return f[1];
}

void perf_parse(int argc, char **argv, struct perf_opts *o, int *colls, int *ncolls,
                const struct perf_backend *be, int nranks)
{
    *o = (struct perf_opts){.minb = 8,
                            .maxb = 64u << 20,
                            .factor = 2,
                            .iters = 20,
                            .warmup = 5,
                            .agg_iters = 1,
                            .check = 1,
                            .dtypes = {TUTTI_FLOAT32},
                            .ndt = 1,
                            .ops = {TUTTI_SUM},
                            .nops = 1};
    *ncolls = 0;
    for (int c = 0; c < NPCOLL; c++)
        if (!strcmp(argv[1], perf_coll_names[c]) || !strcmp(argv[1], "all"))
            colls[(*ncolls)++] = c;
    if (*ncolls == 0)
        perf_die("unknown collective '%s' (all_reduce all_gather reduce_scatter broadcast reduce "
                 "sendrecv all_to_all gather scatter all)",
                 argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *v = NULL, *f = argv[i];
        if (!strcmp(f, "--csv")) {
            o->csv = 1;
            continue;
        }
        if (!strcmp(f, "--corrupt")) {
            o->corrupt = 1;
            continue;
        }
        char flag = flag_of(argc, argv, &i, &v);
        switch (flag) {
        case 'b':
            if (tt_size_arg(v, &o->minb))
                perf_die("-b %s: not a size", v);
            break;
        case 'e':
            if (tt_size_arg(v, &o->maxb))
                perf_die("-e %s: not a size", v);
            break;
        case 'i':
            if (tt_size_arg(v, &o->incr) || !o->incr)
                perf_die("-i %s: not a size", v);
            break;
        case 'f':
            o->factor = atof(v);
            if (o->factor <= 1)
                perf_die("-f %s: must be > 1", v);
            break;
        case 'n': o->iters = count_arg("-n", v, 1); break;
        case 'w': o->warmup = count_arg("-w", v, 0); break;
        case 'm': o->agg_iters = count_arg("-m", v, 1); break;
        case 'c': o->check = count_arg("-c", v, 0) != 0; break;
        case 't':
        case 'g':
            if (count_arg(flag == 't' ? "-t" : "-g", v, 1) != 1)
                perf_die(flag == 't' ? "-t %s: one thread a rank; start more ranks instead "
                                       "(tutti-run -n, srun, mpirun -np)"
                                     : "-g %s: one GPU a rank; start a rank per GPU instead "
                                       "(tutti-run -n, srun, mpirun -np)",
                         v);
            break;
        case 'p':
        case 'z': switch_arg(flag == 'p' ? "-p" : "-z", v, ""); break;
        case 'G':
            o->device = switch_arg("-G", v,
                                   " (device buffers; nccl-tests' -G, CUDA graph launches, is not "
                                   "offered)");
            if (o->device && !be->dev_alloc)
                perf_die("-G %s: this perf tool was built without CUDA", v);
            break;
        case 'R':
            o->reg = count_arg("-R", v, 0);
            if (o->reg > 2)
                perf_die("-R %s: 0, 1 (registered) or 2 (symmetric memory)", v);
            if (o->reg == 1 && !be->mem_register)
                perf_die("-R %s: this library has no buffer registration", v);
            if (o->reg == 2 && !be->sym_alloc)
                perf_die("-R %s: this library has no symmetric memory", v);
            break;
        case 'r':
            o->root = !strcmp(v, "all") ? -1 : count_arg("-r", v, 0); /* -1: every root */
            if (o->root >= nranks)
                perf_die("-r %s: no such rank", v);
            break;
        case 'J': o->json = v; break;
        case 'F': o->csv_file = v; break;
        case 'a':
            o->agg = !strcmp(v, "1") || !strcmp(v, "avg")     ? AGG_AVG
                     : !strcmp(v, "2") || !strcmp(v, "min")   ? AGG_MIN
                     : !strcmp(v, "3") || !strcmp(v, "max")   ? AGG_MAX
                     : !strcmp(v, "0") || !strcmp(v, "rank0") ? AGG_RANK0
                                                              : -1;
            if ((int)o->agg < 0)
                perf_die("-a %s: 0|rank0, 1|avg, 2|min or 3|max", v);
            break;
        case 'd':
            o->ndt = 0;
            for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
                if (!strcmp(v, "all") || !strcmp(v, tutti_dtype_name((tutti_dtype_t)t)) ||
                    (!strcmp(v, "float") && t == TUTTI_FLOAT32) ||
                    (!strcmp(v, "half") && t == TUTTI_FLOAT16) ||
                    (!strcmp(v, "double") && t == TUTTI_FLOAT64) ||
                    (!strcmp(v, "f8e4m3") && t == TUTTI_FLOAT8_E4M3) ||
                    (!strcmp(v, "f8e5m2") && t == TUTTI_FLOAT8_E5M2))
                    o->dtypes[o->ndt++] = t;
            if (!o->ndt)
                perf_die("-d %s: unknown dtype", v);
            break;
        case 'o':
            o->nops = 0;
            for (int op = 0; op <= TUTTI_NUM_OPS; op++)
                if (!strcmp(v, "all") || !strcmp(v, perf_op_name(op)))
                    o->ops[o->nops++] = op;
            if (!o->nops)
                perf_die("-o %s: unknown op", v);
            break;
        default: perf_die("unknown flag '%s' (see --help)", f);
        }
    }
    if (o->minb > o->maxb)
        perf_die("-b is larger than -e%s", "");
    if (o->reg == 2 && o->device && !be->sym_dev_alloc)
        perf_die("-R 2 -G 1: this library has no symmetric device memory%s", "");
}
