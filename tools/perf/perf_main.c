/*
 * perf_main.c -- the driver of tutti-perf (and of mpi-perf, with another backend, perf.h):
 * collective bandwidth and latency in nccl-tests' language.
 *
 *   tutti-run -n N tutti-perf COLL [-b 8] [-e 64M] [-f 2 | -i BYTES] [-n 20] [-w 5] [-m 1]
 *                                 [-c 1] [-d float32|...|all] [-o sum|...|all] [-r 0]
 *                                 [-a 0|1|2|3] [-F rows.csv] [-J results.json] [--csv]
 *   COLL: all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all gather
 *         scatter all
 * The flags are nccl-tests' (long forms too); perf_opts.c has them all.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const perf_coll_names[NPCOLL] = {"all_reduce", "all_gather", "reduce_scatter",
                                             "broadcast",  "reduce",     "sendrecv",
                                             "all_to_all", "gather",     "scatter"};

struct result {
    double time_us, algbw, busbw;
    long long wrong; /* -1: not checked */
};

static const struct perf_backend *be = &perf_backend;
static int rank, nranks;
static FILE *json;
static FILE *csv; /* rank 0: CSV rows (--csv: stdout, instead of the table; -F: a file) */
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

_Noreturn void perf_die(const char *fmt, const char *arg)
{
    if (rank == 0) {
        fprintf(stderr, "%s-perf: ", be->name);
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
    }
    exit(2);
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
                            int root, int inplace, const struct perf_opts *o)
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

/* One iteration: -m calls, in one group where the library groups calls (nccl-tests' way). */
static int run_iter(enum pcoll c, void *s, void *r, size_t per, tutti_dtype_t t, int op,
                    int inplace, const struct perf_opts *o)
{
    int bad = 0, grouped = o->agg_iters > 1 && be->group_start;

    if (grouped)
        be->group_start();
    for (int k = 0; k < o->agg_iters; k++)
        bad |= run(c, s, r, per, t, op, o->root, inplace) != 0;
    if (grouped)
        bad |= be->group_end() != 0;
    return bad;
}

static struct result measure(enum pcoll c, struct bufs *b, size_t bytes, tutti_dtype_t t, int op,
                             int inplace, const struct perf_opts *o)
{
    size_t es = tutti_dtype_size(t), per = block_count(c, bytes, es);
    double times[1], total, t0;
    struct result res = {0, 0, 0, -1};
    void *s, *r;
    int bad = 0;

    call_bufs(c, b, per, es, inplace, &s, &r);
    /* -m: agg_iters calls an iteration; the time is per call (nccl-tests' way). */
    for (long i = 0; i < o->warmup && !bad; i++)
        bad |= run_iter(c, s, r, per, t, op, inplace, o);
    be->barrier();
    t0 = now();
    for (long i = 0; i < o->iters && !bad; i++)
        bad |= run_iter(c, s, r, per, t, op, inplace, o);
    times[0] = (now() - t0) / ((double)o->iters * o->agg_iters);
    if (bad) {
        fprintf(stderr, "%s-perf: rank %d: %s failed: %s\n", be->name, rank, perf_coll_names[c],
                be->last_error());
        exit(1);
    }
    if (o->agg != AGG_RANK0) /* rank 0 prints: its own time as it is */
        be->allreduce_double(times, (enum perf_agg)o->agg);
    total = (double)(per * es * (blocked(c) ? (size_t)nranks : 1));
    res.time_us = times[0] * 1e6;
    res.algbw = times[0] > 0 ? total / times[0] / 1e9 : 0;
    res.busbw = res.algbw * bus_factor(c);
    if (o->check) {
        long long w = check_once(c, b, per, t, op, o->root, inplace, o);
        if (w == -2) {
            fprintf(stderr, "%s-perf: rank %d: %s failed: %s\n", be->name, rank, perf_coll_names[c],
                    be->last_error());
            exit(1);
        }
        be->allreduce_sum_ll(&w);
        res.wrong = w;
    }
    return res;
}

static void print_header(enum pcoll c, const struct perf_opts *o)
{
    char host[64] = "?";

    if (rank != 0)
        return;
    gethostname(host, sizeof(host));
    if (csv)
        fprintf(csv, "collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw,"
                     "oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong\n");
    if (o->csv)
        return;
    printf("# %s-perf %s: %d ranks on %s, minBytes %zu maxBytes %zu step %s%g, warmup %d, "
           "iters %d x %d calls, agg %s, validation %d%s\n",
           be->name, perf_coll_names[c], nranks, host, o->minb, o->maxb, o->incr ? "+" : "x",
           o->incr ? (double)o->incr : o->factor, o->warmup, o->iters, o->agg_iters,
           o->agg == AGG_MIN     ? "min"
           : o->agg == AGG_MAX   ? "max"
           : o->agg == AGG_RANK0 ? "rank 0"
                                 : "avg",
           o->check,
           o->reg == 1   ? ", registered buffers"
           : o->reg == 2 ? (o->device ? ", symmetric device memory" : ", symmetric memory")
                         : "");
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
            json_rows++ ? "," : "", be->name, perf_coll_names[c], nranks, size, count,
            tutti_dtype_name(t), op, root, inplace ? "true" : "false", r->time_us, r->algbw,
            r->busbw, r->wrong);
}

static void print_row(enum pcoll c, size_t size, size_t count, tutti_dtype_t t, int op,
                      const struct result *oop, const struct result *ip, const struct perf_opts *o)
{
    const char *opname = has_op(c) ? perf_op_name(op) : "none";
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
    if (csv) {
        fprintf(csv, "%s,%d,%zu,%zu,%s,%s,%d,%.3f,%.4f,%.4f,%s,", perf_coll_names[c], nranks, size,
                count, tutti_dtype_name(t), opname, root, oop->time_us, oop->algbw, oop->busbw, w1);
        if (ip)
            fprintf(csv, "%.3f,%.4f,%.4f,%s\n", ip->time_us, ip->algbw, ip->busbw, w2);
        else
            fprintf(csv, ",,,\n");
    }
    if (o->csv)
        return;
    printf("  %10zu %12zu %8s %6s %6d %9.2f %7.3f %7.3f %6s", size, count, tutti_dtype_name(t),
           opname, root, oop->time_us, oop->algbw, oop->busbw, w1);
    if (ip)
        printf(" %9.2f %7.3f %7.3f %6s\n", ip->time_us, ip->algbw, ip->busbw, w2);
    else
        printf(" %9s %7s %7s %6s\n", "N/A", "N/A", "N/A", "N/A");
    fflush(stdout);
}

static void bench(enum pcoll c, const struct perf_opts *o)
{
    size_t maxes = 8, n = (size_t)nranks;
    size_t send_bytes = sends_whole(c) ? o->maxb : o->maxb + maxes;
    struct bufs b;
    void *hsend = NULL, *hrecv = NULL;

    /* One allocation per side, big enough for every size and dtype (+ slack for rounding). */
    int host_sym = o->reg == 2 && !o->device;
    b.send = host_sym ? be->sym_alloc(send_bytes + maxes * n) : malloc(send_bytes + maxes * n);
    b.recv = host_sym ? be->sym_alloc(o->maxb + maxes * n) : malloc(o->maxb + maxes * n);
    b.hsend = b.hrecv = NULL;
    if (!b.send || !b.recv) {
        fprintf(stderr, "%s-perf: rank %d: out of memory for %zu bytes\n", be->name, rank, o->maxb);
        exit(1);
    }
    memset(b.send, 0, send_bytes + maxes * n);
    memset(b.recv, 0, o->maxb + maxes * n);
    if (o->device) { /* the host ones become the mirrors */
        void *(*dev_alloc)(size_t) = o->reg == 2 ? be->sym_dev_alloc : be->dev_alloc;
        b.hsend = b.send;
        b.hrecv = b.recv;
        b.send = dev_alloc(send_bytes + maxes * n);
        b.recv = dev_alloc(o->maxb + maxes * n);
        if (!b.send || !b.recv || be->dev_copy(b.send, b.hsend, send_bytes + maxes * n) != 0 ||
            be->dev_copy(b.recv, b.hrecv, o->maxb + maxes * n) != 0) {
            fprintf(stderr, "%s-perf: rank %d: cannot allocate %zu bytes on the device: %s\n",
                    be->name, rank, o->maxb, be->last_error());
            exit(1);
        }
    }
    int (*reg)(void *, size_t, void **) = o->reg == 2 ? be->win_register : be->mem_register;
    int (*dereg)(void *) = o->reg == 2 ? be->win_deregister : be->mem_deregister;
    if (o->reg && (reg(b.send, send_bytes + maxes * n, &hsend) != 0 ||
                   reg(b.recv, o->maxb + maxes * n, &hrecv) != 0)) {
        fprintf(stderr, "%s-perf: rank %d: -R %d: cannot register the buffers: %s\n", be->name,
                rank, o->reg, be->last_error());
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
                    printf("# %s %s %s: not supported by %s\n", perf_coll_names[c],
                           tutti_dtype_name(t), perf_op_name(op), be->name);
                continue;
            }
            for (size_t size = o->minb; size <= o->maxb;) {
                size_t per = block_count(c, size, es);
                size_t count = per * (blocked(c) ? n : 1);
                struct result oop, ip;
                /* -r all: a row per root, each size */
                int all = has_root(c) && o->root < 0;
                for (int root = all ? 0 : o->root; root < (all ? nranks : o->root + 1); root++) {
                    struct perf_opts ro = *o;
                    ro.root = root;
                    oop = measure(c, &b, size, t, op, 0, &ro);
                    if (has_inplace(c))
                        ip = measure(c, &b, size, t, op, 1, &ro);
                    print_row(c, count * es, count, t, op, &oop, has_inplace(c) ? &ip : NULL, &ro);
                }
                if (o->incr)
                    size += o->incr;
                else if ((size_t)(size * o->factor) > size)
                    size = (size_t)(size * o->factor);
                else
                    break;
            }
        }
    }
    if (o->reg && (dereg(hsend) != 0 || dereg(hrecv) != 0)) {
        fprintf(stderr, "%s-perf: rank %d: -R %d: cannot deregister the buffers: %s\n", be->name,
                rank, o->reg, be->last_error());
        exit(1);
    }
    if (o->device) {
        void (*dev_free)(void *) = o->reg == 2 ? be->sym_free : be->dev_free;
        dev_free(b.send);
        dev_free(b.recv);
        free(b.hsend);
        free(b.hrecv);
    } else if (o->reg == 2) {
        be->sym_free(b.send);
        be->sym_free(b.recv);
    } else {
        free(b.send);
        free(b.recv);
    }
}

int main(int argc, char **argv)
{
    struct perf_opts o;
    int colls[NPCOLL], ncolls;

    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        perf_usage(be->name, 0);
        return 0;
    }
    if (be->init(&argc, &argv, &rank, &nranks) != 0)
        return 1;
    if (argc < 2 || argv[1][0] == '-') {
        perf_usage(be->name, rank);
        exit(2);
    }
    perf_parse(argc, argv, &o, colls, &ncolls, be, nranks);
    if (rank == 0 && (o.csv || o.csv_file)) {
        csv = o.csv ? stdout : fopen(o.csv_file, "w");
        if (!csv)
            perf_die("-F %s: cannot write", o.csv_file);
    }
    if (o.json && rank == 0) {
        json = fopen(o.json, "w");
        if (!json)
            perf_die("-J %s: cannot write", o.json);
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
    if (csv && csv != stdout)
        fclose(csv);
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
