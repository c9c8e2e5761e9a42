/*
 * perf_main.c -- the driver of tutti-perf (and of mpi-perf, with another backend, perf.h):
 * collective bandwidth and latency in nccl-tests' language.
 *
 *   tutti-run -n N tutti-perf COLL [-b 8] [-e 64M] [-f 2 | -i BYTES] [-n 20] [-w 5] [-c 1]
 *                                 [-d float32|...|all] [-o sum|...|all] [-r 0] [-a avg|min|max]
 *                                 [-J results.json] [--csv]
 *   COLL: all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all gather
 *         scatter all
 *
 * Size S is the bytes of the full array (all-gather / reduce-scatter / all-to-all / gather /
 * scatter: all ranks' blocks together); algbw = S / time, busbw = algbw * factor with
 * nccl-tests' factors: all-reduce 2(n-1)/n, all-gather, reduce-scatter, all-to-all, gather and
 * scatter (n-1)/n, broadcast, reduce and sendrecv 1.
 * With -c 1, after the timed runs each size is run once more on fresh inputs and #wrong
 * counts, over all ranks, the elements that differ from an expectation computed without tutti
 * (tools/values.c). Inputs are small integers, so every float result is exactly representable
 * and compared exactly: the tolerance is zero for every dtype. The exit status is non-zero if
 * any element was wrong or any call failed. --corrupt (a test hook) flips one output byte on
 * rank 0 before each check, to prove the check catches it.
 */
#include "perf.h"
#include "values.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *pcoll_names[NPCOLL] = {"all_reduce", "all_gather", "reduce_scatter",
                                          "broadcast",  "reduce",     "sendrecv",
                                          "all_to_all", "gather",     "scatter"};

struct opts {
    size_t minb, maxb, incr;
    double factor;
    int iters, warmup, check, root, agg, csv, corrupt, device, reg;
    int dtypes[TUTTI_NUM_DTYPES], ndt;
    int ops[TUTTI_NUM_OPS], nops;
    const char *json;
};

struct result {
    double time_us, algbw, busbw;
    long long wrong; /* -1: not checked */
};

static const struct perf_backend *be = &perf_backend;
static int rank, nranks;
static FILE *json;
static int json_rows;
static double bw_sum;
static int bw_n;
static long long wrong_total;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *fmt, const char *arg)
{
    if (rank == 0) {
        fprintf(stderr, "%s-perf: ", be->name);
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
    }
    exit(2);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default: break;
    }
    if (*end == 'B')
        end++;
    if (*end)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int has_op(enum pcoll c)
{
    return c == ALL_REDUCE || c == REDUCE_SCATTER || c == REDUCE;
}
static int has_root(enum pcoll c)
{
    return c == BROADCAST || c == REDUCE || c == GATHER || c == SCATTER;
}

/* Collectives whose size is n blocks (the whole array), each rank's block 1/n of it. */
static int blocked(enum pcoll c)
{
    return c == ALL_GATHER || c == REDUCE_SCATTER || c == ALL_TO_ALL || c == GATHER || c == SCATTER;
}

/* Is the send side n blocks (the receive side one)? Gathering ones: the other way round. */
static int sends_whole(enum pcoll c)
{
    return c == REDUCE_SCATTER || c == ALL_TO_ALL || c == SCATTER;
}
static int recvs_whole(enum pcoll c)
{
    return c == ALL_GATHER || c == ALL_TO_ALL || c == GATHER;
}

/* Collectives with an in-place form (measured both ways). */
static int has_inplace(enum pcoll c)
{
    return c != SENDRECV && c != ALL_TO_ALL;
}

static double bus_factor(enum pcoll c)
{
    double n = nranks;
    if (c == ALL_REDUCE)
        return 2 * (n - 1) / n;
    if (blocked(c))
        return (n - 1) / n;
    return 1;
}

/* Elements per rank block: the full array for most, 1/n of it for the blocked ones. */
static size_t block_count(enum pcoll c, size_t bytes, size_t es)
{
    size_t count = bytes / es;
    return blocked(c) ? count / (size_t)nranks : count;
}

struct bufs {
    char *send, *recv;
    char *hsend, *hrecv; /* -G 1: host mirrors for filling and checking */
};

/* Pointers for one call: in place, both live in recv per tutti.h's layout. */
static void call_bufs(enum pcoll c, struct bufs *b, size_t per, size_t es, int inplace, void **s,
                      void **r)
{
    *s = b->send;
    *r = b->recv;
    if (!inplace)
        return;
    if (c == ALL_GATHER || c == GATHER) {
        *s = b->recv + (size_t)rank * per * es;
    } else if (c == REDUCE_SCATTER || c == SCATTER) {
        *s = b->recv;
        *r = b->recv + (size_t)rank * per * es;
    } else {
        *s = b->recv;
    }
}

static int run(enum pcoll c, void *s, void *r, size_t per, tutti_dtype_t t, int op, int root,
               int inplace)
{
    return be->run(c, s, r, per, t, op, root, inplace);
}

/* Run once on fresh inputs and count wrong elements on this rank. */
static long long check_once(enum pcoll c, struct bufs *b, size_t per, tutti_dtype_t t, int op,
                            int root, int inplace, const struct opts *o)
{
    size_t es = tutti_dtype_size(t), n = (size_t)nranks, wrong = 0;
    int vop = has_op(c) ? op : VAL_NO_OP;
    unsigned char table[VAL_MAX_PERIOD * 8];
    void *s, *r;

    call_bufs(c, b, per, es, inplace, &s, &r);
    if (o->device) { /* fill and check host mirrors at the same offsets; copy across */
        struct bufs h = {b->hsend, b->hrecv, NULL, NULL};
        void *hs, *hr, *ds = s, *dr = r;
        size_t in = (sends_whole(c) ? per * n : per) * es;
        size_t out = (recvs_whole(c) ? per * n : per) * es;
        call_bufs(c, &h, per, es, inplace, &hs, &hr);
        val_fill(t, vop, rank, hs, in / es, 0);
        if (be->dev_copy(ds, hs, in) != 0)
            return -2;
        if (run(c, ds, dr, per, t, op, root, inplace) != 0)
            return -2;
        if (be->dev_copy(hr, dr, out) != 0)
            return -2;
        s = hs;
        r = hr;
    } else {
        val_fill(t, vop, rank, s, sends_whole(c) ? per * n : per, 0);
        if (run(c, s, r, per, t, op, root, inplace) != 0)
            return -2;
    }
    if (o->corrupt && rank == 0 && per > 0)
        ((unsigned char *)r)[0] ^= 0x5a;
    switch (c) {
    case ALL_REDUCE:
    case REDUCE:
        if (c == REDUCE && rank != root)
            break;
        val_expect_reduce(t, op, nranks, table);
        wrong = val_count_wrong(t, op, r, per, 0, table, NULL);
        break;
    case REDUCE_SCATTER:
        val_expect_reduce(t, op, nranks, table);
        wrong = val_count_wrong(t, op, r, per, (size_t)rank * per, table, NULL);
        break;
    case GATHER: /* on the root, as all-gather */
    case ALL_GATHER:
        if (c == GATHER && rank != root)
            break;
        for (int k = 0; k < nranks; k++) {
            val_expect_input(t, vop, k, table);
            wrong += val_count_wrong(t, vop, (char *)r + (size_t)k * per * es, per, 0, table, NULL);
        }
        break;
    case BROADCAST:
        val_expect_input(t, vop, root, table);
        wrong = val_count_wrong(t, vop, r, per, 0, table, NULL);
        break;
    case SCATTER: /* the root's inputs from index rank * per */
        val_expect_input(t, vop, root, table);
        wrong = val_count_wrong(t, vop, r, per, (size_t)rank * per, table, NULL);
        break;
    case ALL_TO_ALL: /* block k: rank k's inputs from index rank * per */
        for (int k = 0; k < nranks; k++) {
            val_expect_input(t, vop, k, table);
            wrong += val_count_wrong(t, vop, (char *)r + (size_t)k * per * es, per,
                                     (size_t)rank * per, table, NULL);
        }
        break;
    default:
        val_expect_input(t, vop, (rank + nranks - 1) % nranks, table);
        wrong = val_count_wrong(t, vop, r, per, 0, table, NULL);
        break;
    }
    return (long long)wrong;
}

static struct result measure(enum pcoll c, struct bufs *b, size_t bytes, tutti_dtype_t t, int op,
                             int inplace, const struct opts *o)
{
    size_t es = tutti_dtype_size(t), per = block_count(c, bytes, es);
    double times[1], total, t0;
    struct result res = {0, 0, 0, -1};
    void *s, *r;
    int bad = 0;

    call_bufs(c, b, per, es, inplace, &s, &r);
    for (int i = 0; i < o->warmup && !bad; i++)
        bad |= run(c, s, r, per, t, op, o->root, inplace) != 0;
    be->barrier();
    t0 = now();
    for (int i = 0; i < o->iters && !bad; i++)
        bad |= run(c, s, r, per, t, op, o->root, inplace) != 0;
    times[0] = (now() - t0) / o->iters;
    if (bad) {
        fprintf(stderr, "%s-perf: rank %d: %s failed: %s\n", be->name, rank, pcoll_names[c],
                be->last_error());
        exit(1);
    }
    be->allreduce_double(times, (enum perf_agg)o->agg);
    total = (double)(per * es * (blocked(c) ? (size_t)nranks : 1));
    res.time_us = times[0] * 1e6;
    res.algbw = times[0] > 0 ? total / times[0] / 1e9 : 0;
    res.busbw = res.algbw * bus_factor(c);
    if (o->check) {
        long long w = check_once(c, b, per, t, op, o->root, inplace, o);
        if (w == -2) {
            fprintf(stderr, "%s-perf: rank %d: %s failed: %s\n", be->name, rank, pcoll_names[c],
                    be->last_error());
            exit(1);
        }
        be->allreduce_sum_ll(&w);
        res.wrong = w;
    }
    return res;
}

static void print_header(enum pcoll c, const struct opts *o)
{
    char host[64] = "?";

    if (rank != 0)
        return;
    gethostname(host, sizeof(host));
    if (o->csv) {
        printf("collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,"
               "oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong\n");
        return;
    }
    printf("# %s-perf %s: %d ranks on %s, minBytes %zu maxBytes %zu step %s%g, warmup %d, "
           "iters %d, agg %s, validation %d%s\n",
           be->name, pcoll_names[c], nranks, host, o->minb, o->maxb, o->incr ? "+" : "x",
           o->incr ? (double)o->incr : o->factor, o->warmup, o->iters,
           o->agg == 1   ? "min"
           : o->agg == 2 ? "max"
                         : "avg",
           o->check, o->reg ? ", registered buffers" : "");
    printf("#\n");
    printf("# %62s %28s %6s\n", "out-of-place", "", "in-place");
    printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

static void fmt_wrong(char *buf, size_t n, long long w)
{
    if (w < 0)
        snprintf(buf, n, "N/A");
    else
        snprintf(buf, n, "%lld", w);
}

static void json_row(enum pcoll c, size_t size, size_t count, tutti_dtype_t t, const char *op,
                     int root, int inplace, const struct result *r)
{
    if (!json || !r)
        return;
    fprintf(json,
            "%s\n  {\"library\": \"%s\", \"collective\": \"%s\", \"nranks\": %d, "
            "\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, "
            "\"inplace\": %s, \"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
            "\"wrong\": %lld}",
            json_rows++ ? "," : "", be->name, pcoll_names[c], nranks, size, count,
            tutti_dtype_name(t), op, root, inplace ? "true" : "false", r->time_us, r->algbw,
            r->busbw, r->wrong);
}

static void print_row(enum pcoll c, size_t size, size_t count, tutti_dtype_t t, int op,
                      const struct result *oop, const struct result *ip, const struct opts *o)
{
    const char *opname = has_op(c) ? tutti_op_name((tutti_op_t)op) : "none";
    int root = has_root(c) ? o->root : -1;
    char w1[24], w2[24];

    for (int k = 0; k < 2; k++) {
        const struct result *r = k ? ip : oop;
        if (!r)
            continue;
        if (r->wrong > 0)
            wrong_total += r->wrong;
        bw_sum += r->busbw;
        bw_n++;
    }
    if (rank != 0)
        return;
    json_row(c, size, count, t, opname, root, 0, oop);
    json_row(c, size, count, t, opname, root, 1, ip);
    fmt_wrong(w1, sizeof(w1), oop->wrong);
    fmt_wrong(w2, sizeof(w2), ip ? ip->wrong : -1);
    if (o->csv) {
        printf("%s,%d,%zu,%zu,%s,%s,%d,%.3f,%.4f,%.4f,%s,", pcoll_names[c], nranks, size, count,
               tutti_dtype_name(t), opname, root, oop->time_us, oop->algbw, oop->busbw, w1);
        if (ip)
            printf("%.3f,%.4f,%.4f,%s\n", ip->time_us, ip->algbw, ip->busbw, w2);
        else
            printf(",,,\n");
        return;
    }
    printf("  %10zu %12zu %8s %6s %6d %9.2f %7.3f %7.3f %6s", size, count, tutti_dtype_name(t),
           opname, root, oop->time_us, oop->algbw, oop->busbw, w1);
    if (ip)
        printf(" %9.2f %7.3f %7.3f %6s\n", ip->time_us, ip->algbw, ip->busbw, w2);
    else
        printf(" %9s %7s %7s %6s\n", "N/A", "N/A", "N/A", "N/A");
    fflush(stdout);
}

static void bench(enum pcoll c, const struct opts *o)
{
    size_t maxes = 8, n = (size_t)nranks;
    size_t send_bytes = sends_whole(c) ? o->maxb : o->maxb + maxes;
    struct bufs b;
    void *hsend = NULL, *hrecv = NULL;

    /* One allocation per side, big enough for every size and dtype (+ slack for rounding). */
    b.send = malloc(send_bytes + maxes * n);
    b.recv = malloc(o->maxb + maxes * n);
    b.hsend = b.hrecv = NULL;
    if (!b.send || !b.recv) {
        fprintf(stderr, "%s-perf: rank %d: out of memory for %zu bytes\n", be->name, rank, o->maxb);
        exit(1);
    }
    memset(b.send, 0, send_bytes + maxes * n);
    memset(b.recv, 0, o->maxb + maxes * n);
    if (o->device) { /* the host ones become the mirrors */
        b.hsend = b.send;
        b.hrecv = b.recv;
        b.send = be->dev_alloc(send_bytes + maxes * n);
        b.recv = be->dev_alloc(o->maxb + maxes * n);
        if (!b.send || !b.recv || be->dev_copy(b.send, b.hsend, send_bytes + maxes * n) != 0 ||
            be->dev_copy(b.recv, b.hrecv, o->maxb + maxes * n) != 0) {
            fprintf(stderr, "%s-perf: rank %d: cannot allocate %zu bytes on the device: %s\n",
                    be->name, rank, o->maxb, be->last_error());
            exit(1);
        }
    }
    if (o->reg && (be->mem_register(b.send, send_bytes + maxes * n, &hsend) != 0 ||
                   be->mem_register(b.recv, o->maxb + maxes * n, &hrecv) != 0)) {
        fprintf(stderr, "%s-perf: rank %d: -R 1: cannot register the buffers: %s\n", be->name, rank,
                be->last_error());
        exit(1);
    }
    print_header(c, o);
    for (int d = 0; d < o->ndt; d++) {
        tutti_dtype_t t = (tutti_dtype_t)o->dtypes[d];
        size_t es = tutti_dtype_size(t);
        for (int k = 0; k < (has_op(c) ? o->nops : 1); k++) {
            int op = has_op(c) ? o->ops[k] : TUTTI_SUM;
            if (!be->supports(c, t, op)) {
                if (rank == 0 && !o->csv)
                    printf("# %s %s %s: not supported by %s\n", pcoll_names[c], tutti_dtype_name(t),
                           tutti_op_name((tutti_op_t)op), be->name);
                continue;
            }
            for (size_t size = o->minb; size <= o->maxb;) {
                size_t per = block_count(c, size, es);
                size_t count = per * (blocked(c) ? n : 1);
                struct result oop, ip;

                oop = measure(c, &b, size, t, op, 0, o);
                if (has_inplace(c))
                    ip = measure(c, &b, size, t, op, 1, o);
                print_row(c, count * es, count, t, op, &oop, has_inplace(c) ? &ip : NULL, o);
                if (o->incr)
                    size += o->incr;
                else if ((size_t)(size * o->factor) > size)
                    size = (size_t)(size * o->factor);
                else
                    break;
            }
        }
    }
    if (o->reg && (be->mem_deregister(hsend) != 0 || be->mem_deregister(hrecv) != 0)) {
        fprintf(stderr, "%s-perf: rank %d: -R 1: cannot deregister the buffers: %s\n", be->name,
                rank, be->last_error());
        exit(1);
    }
    if (o->device) {
        be->dev_free(b.send);
        be->dev_free(b.recv);
        free(b.hsend);
        free(b.hrecv);
    } else {
        free(b.send);
        free(b.recv);
    }
}

static void usage(void)
{
    if (rank == 0)
        printf("usage: tutti-perf COLL [options]   (run under tutti-run, srun or mpirun)\n"
               "  COLL: all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all "
               "gather scatter all\n"
               "  -b SIZE   minimum bytes (K/M/G suffixes)     [8]\n"
               "  -e SIZE   maximum bytes                       [64M]\n"
               "  -f F      multiply the size by F each step    [2]\n"
               "  -i SIZE   add SIZE each step instead\n"
               "  -n N      timed iterations per size           [20]\n"
               "  -w N      warm-up iterations per size         [5]\n"
               "  -c 0|1    check results (#wrong)              [1]\n"
               "  -G 0|1    buffers in CUDA device memory       [0]\n"
               "  -R 0|1    register the buffers with the communicator (zero-copy sends\n"
               "            where the transport can: net_ib)    [0]\n"
               "  -d TYPE   int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32\n"
               "            float64, or all                     [float32]\n"
               "  -o OP     sum prod min max avg, or all        [sum]\n"
               "  -r ROOT   root of broadcast, reduce, gather and scatter [0]\n"
               "  -a AGG    combine ranks' times: avg min max   [avg]\n"
               "  -J FILE   also write the results as JSON\n"
               "  --csv     print CSV instead of the table\n");
}

static void parse(int argc, char **argv, struct opts *o, int *colls, int *ncolls)
{
    *o = (struct opts){.minb = 8,
                       .maxb = 64 << 20,
                       .factor = 2,
                       .iters = 20,
                       .warmup = 5,
                       .check = 1,
                       .dtypes = {TUTTI_FLOAT32},
                       .ndt = 1,
                       .ops = {TUTTI_SUM},
                       .nops = 1};
    if (argc < 2 || argv[1][0] == '-') {
        usage();
        exit(argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2);
    }
    *ncolls = 0;
    for (int c = 0; c < NPCOLL; c++)
        if (!strcmp(argv[1], pcoll_names[c]) || !strcmp(argv[1], "all"))
            colls[(*ncolls)++] = c;
    if (*ncolls == 0)
        die("unknown collective '%s' (all_reduce all_gather reduce_scatter broadcast reduce "
            "sendrecv all_to_all gather scatter all)",
            argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--csv")) {
            o->csv = 1;
            continue;
        }
        if (!strcmp(f, "--corrupt")) {
            o->corrupt = 1;
            continue;
        }
        if (!v || f[0] != '-' || strlen(f) != 2)
            die("bad argument '%s' (see tutti-perf --help)", f);
        i++;
        switch (f[1]) {
        case 'b':
            if (parse_size(v, &o->minb))
                die("-b %s: not a size", v);
            break;
        case 'e':
            if (parse_size(v, &o->maxb))
                die("-e %s: not a size", v);
            break;
        case 'i':
            if (parse_size(v, &o->incr) || !o->incr)
                die("-i %s: not a size", v);
            break;
        case 'f':
            o->factor = atof(v);
            if (o->factor <= 1)
                die("-f %s: must be > 1", v);
            break;
        case 'n':
            o->iters = atoi(v);
            if (o->iters < 1)
                die("-n %s: must be >= 1", v);
            break;
        case 'w':
            o->warmup = atoi(v);
            if (o->warmup < 0)
                die("-w %s: must be >= 0", v);
            break;
        case 'c': o->check = atoi(v); break;
        case 'G':
            o->device = atoi(v);
            if (o->device && !be->dev_alloc)
                die("-G %s: this perf tool was built without CUDA", v);
            break;
        case 'R':
            o->reg = atoi(v);
            if (o->reg && !be->mem_register)
                die("-R %s: this library has no buffer registration", v);
            break;
        case 'r':
            o->root = atoi(v);
            if (o->root < 0 || o->root >= nranks)
                die("-r %s: no such rank", v);
            break;
        case 'J': o->json = v; break;
        case 'a':
            o->agg = !strcmp(v, "avg") ? 0 : !strcmp(v, "min") ? 1 : !strcmp(v, "max") ? 2 : -1;
            if (o->agg < 0)
                die("-a %s: avg, min or max", v);
            break;
        case 'd':
            o->ndt = 0;
            for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
                if (!strcmp(v, "all") || !strcmp(v, tutti_dtype_name((tutti_dtype_t)t)) ||
                    (!strcmp(v, "float") && t == TUTTI_FLOAT32) ||
                    (!strcmp(v, "half") && t == TUTTI_FLOAT16) ||
                    (!strcmp(v, "double") && t == TUTTI_FLOAT64))
                    o->dtypes[o->ndt++] = t;
            if (!o->ndt)
                die("-d %s: unknown dtype", v);
            break;
        case 'o':
            o->nops = 0;
            for (int op = 0; op < TUTTI_NUM_OPS; op++)
                if (!strcmp(v, "all") || !strcmp(v, tutti_op_name((tutti_op_t)op)))
                    o->ops[o->nops++] = op;
            if (!o->nops)
                die("-o %s: unknown op", v);
            break;
        default: die("unknown flag '%s' (see tutti-perf --help)", f);
        }
    }
    if (o->minb > o->maxb)
        die("-b is larger than -e%s", "");
}

int main(int argc, char **argv)
{
    struct opts o;
    int colls[NPCOLL], ncolls;

    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage();
        return 0;
    }
    if (be->init(&argc, &argv, &rank, &nranks) != 0)
        return 1;
    parse(argc, argv, &o, colls, &ncolls);
    if (o.json && rank == 0) {
        json = fopen(o.json, "w");
        if (!json)
            die("-J %s: cannot write", o.json);
        fprintf(json, "[");
    }
    for (int k = 0; k < ncolls; k++) {
        bench((enum pcoll)colls[k], &o);
        if (rank == 0 && !o.csv)
            printf("#\n");
    }
    if (json) {
        fprintf(json, "\n]\n");
        fclose(json);
    }
    if (rank == 0 && !o.csv) {
        printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g\n", bw_n ? bw_sum / bw_n : 0.0);
        printf("#\n");
    }
    /* The footer must be out before any rank exits: a launcher stops the others as soon as one
     * exits non-zero, and a killed rank 0 would lose what stdio still buffers. */
    fflush(stdout);
    be->barrier();
    be->fini();
    return wrong_total != 0 ? 1 : 0;
}
