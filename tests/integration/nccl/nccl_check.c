/*
 * nccl_check.c -- a program written to NCCL's API alone (nccl.h and CUDA's runtime), built
 * against tutti's libnccl.so.2 and run on cudamock: every collective, point-to-point, groups,
 * operators and communicator calls, with every result checked against a reference computed
 * here, and guard bytes after every output. Ways of making the communicators (each as in
 * NCCL's user guide):
 *
 *   nccl_check ranks DIR   one rank per process (launched by tutti-run: RANK, WORLD_SIZE),
 *                          rank 0's ncclGetUniqueId passed through a file in DIR
 *   nccl_check all N       one process, N devices: ncclCommInitAll
 *   nccl_check group N     one process, N devices: ncclCommInitRank per device inside
 *                          ncclGroupStart/End (how nccl-tests makes them)
 *   nccl_check nonblocking N  one process: config.blocking = 0, each init returns
 *                          ncclInProgress and is polled with ncclCommGetAsyncError
 *   nccl_check timeout DIR 2 ranks as `ranks`, under a short TUTTI_NCCL_TIMEOUT: rank 1 makes
 *                          no call; rank 0's all-reduce ends (its stream goes on) and
 *                          ncclCommGetAsyncError says ncclRemoteError, ncclGetLastError why
 *
 * With several ranks in this process every call goes in a group over all of them, one thread
 * driving every rank, as NCCL requires.
 */
#include "nccl_check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

struct rank R[MAXR];
int nlocal, nranks, checks;

static void fail(const char *what, int rank, size_t i, double got, double want)
{
    fprintf(stderr, "FAIL %s: rank %d element %zu: got %.17g, want %.17g\n", what, rank, i, got,
            want);
    exit(1);
}

/* ---- buffers ---- */

struct buf dalloc(int k, size_t bytes)
{
    struct buf b = {NULL, bytes};
    CU(cudaSetDevice(R[k].dev));
    CU(cudaMalloc(&b.dev, bytes + GUARD));
    CU(cudaMemset(b.dev, 0xa5, bytes + GUARD));
    return b;
}

static void upload(struct buf *b, ncclDataType_t d, size_t n, int r, int prod, size_t first)
{
    unsigned char *h = malloc(n * dsize(d) + 1);
    for (size_t i = 0; i < n; i++)
        put(d, h, i, val(r, first + i, prod));
    CU(cudaMemcpy(b->dev, h, n * dsize(d), cudaMemcpyHostToDevice));
    free(h);
}

/* The output's bytes and guard, back on the host (after the rank's stream has run); what is
 * NULL for an output inside a larger buffer (no guard of its own). */
static unsigned char *download(int k, const struct buf *b, const char *what)
{
    unsigned char *h = malloc(b->bytes + GUARD);
    CU(cudaSetDevice(R[k].dev));
    CU(cudaStreamSynchronize(R[k].s));
    CU(cudaMemcpy(h, b->dev, b->bytes + (what ? GUARD : 0), cudaMemcpyDeviceToHost));
    for (size_t i = 0; what && i < GUARD; i++)
        if (h[b->bytes + i] != 0xa5)
            fail(what, R[k].rank, b->bytes + i, h[b->bytes + i], 0xa5);
    return h;
}

void dfree(struct buf *b)
{
    CU(cudaFree(b->dev));
}

static void group_start(void)
{
    if (nlocal > 1)
        NC(ncclGroupStart());
}

static void group_end(void)
{
    if (nlocal > 1)
        NC(ncclGroupEnd());
}

/* ---- the reference ---- */

static double reduce_ref(ncclRedOp_t op, ncclDataType_t d, size_t i, int n, int prod)
{
    double acc = val(0, i, prod);
    for (int r = 1; r < n; r++) {
        double v = val(r, i, prod);
        acc = op == ncclProd  ? acc * v
              : op == ncclMax ? fmax(acc, v)
              : op == ncclMin ? fmin(acc, v)
                              : acc + v;
    }
    if (op == ncclAvg)
        acc = (d == ncclFloat32 ? (double)((float)acc / (float)n) : acc / n);
    /* integers wrap as the type does */
    unsigned char t[8];
    put(d, t, 0, acc);
    return get(d, t, 0);
}

/* ---- the checks ---- */

static const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                           ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                           ncclFloat64, ncclBfloat16};
static const char *type_names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                   "uint64", "float16", "float32", "float64", "bfloat16"};
static const ncclRedOp_t all_ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static const char *op_names[] = {"sum", "prod", "max", "min", "avg"};

static void check_all_reduce(size_t count, int t, int o, int inplace, int null_stream)
{
    ncclDataType_t d = all_types[t];
    ncclRedOp_t op = all_ops[o];
    int prod = op == ncclProd;
    struct buf in[MAXR], out[MAXR];
    char what[128];

    snprintf(what, sizeof(what), "all-reduce %s %s count %zu%s%s", type_names[t], op_names[o],
             count, inplace ? " in place" : "", null_stream ? " on the NULL stream" : "");
    for (int k = 0; k < nlocal; k++) {
        in[k] = dalloc(k, count * dsize(d));
        out[k] = inplace ? in[k] : dalloc(k, count * dsize(d));
        upload(&in[k], d, count, R[k].rank, prod, 0);
    }
    group_start();
    for (int k = 0; k < nlocal; k++)
        NC(ncclAllReduce(in[k].dev, out[k].dev, count, d, op, R[k].comm,
                         null_stream ? NULL : R[k].s));
    group_end();
    for (int k = 0; k < nlocal; k++) {
        if (null_stream) {
            CU(cudaSetDevice(R[k].dev));
            CU(cudaStreamSynchronize(NULL));
        }
        unsigned char *h = download(k, &out[k], what);
        for (size_t i = 0; i < count; i++) {
            double got = get(d, h, i), want = reduce_ref(op, d, i, nranks, prod);
            double tol = op == ncclAvg ? fabs(want) * 1e-6 : 0;
            if (!(fabs(got - want) <= tol))
                fail(what, R[k].rank, i, got, want);
        }
        free(h);
        dfree(&in[k]);
        if (!inplace)
            dfree(&out[k]);
    }
    checks++;
}

/* all-gather, reduce-scatter, broadcast, reduce, all-to-all, gather, scatter on one type. In
 * place as nccl-tests lays it out: the input is this rank's block of the output (all-gather,
 * gather), the output this rank's block of the input (reduce-scatter, scatter), or the same
 * buffer (broadcast, all-to-all). */
enum shape { AG, RS, BC, RED, A2A, GA, SC };

static void check_shape(enum shape sh, size_t count, ncclDataType_t d, int inplace)
{
    static const char *names[] = {"all-gather", "reduce-scatter", "broadcast", "reduce",
                                  "all-to-all", "gather",         "scatter"};
    int root = nranks - 1, n = nranks;
    size_t es = dsize(d), nfull = count * (size_t)n;
    struct buf in[MAXR], out[MAXR];
    char what[128];

    snprintf(what, sizeof(what), "%s count %zu%s", names[sh], count, inplace ? " in place" : "");
    for (int k = 0; k < nlocal; k++) {
        int r = R[k].rank;
        size_t nin =
            (sh == RS || sh == A2A || (sh == SC && (r == root || inplace))) ? nfull : count;
        size_t nout =
            (sh == AG || sh == A2A || (sh == GA && (r == root || inplace))) ? nfull : count;
        if (!inplace) {
            in[k] = dalloc(k, nin * es);
            out[k] = dalloc(k, nout * es);
            upload(&in[k], d, nin, r, 0, 0);
        } else if (sh == AG || sh == GA) {
            out[k] = dalloc(k, nout * es);
            in[k] = (struct buf){(char *)out[k].dev + (size_t)r * count * es, count * es};
            upload(&in[k], d, count, r, 0, 0);
        } else if (sh == RS || sh == SC) {
            in[k] = dalloc(k, nin * es);
            out[k] = (struct buf){(char *)in[k].dev + (size_t)r * count * es, count * es};
            upload(&in[k], d, nin, r, 0, 0);
        } else {
            in[k] = dalloc(k, nin * es);
            out[k] = in[k];
            upload(&in[k], d, nin, r, 0, 0);
        }
    }
    group_start();
    for (int k = 0; k < nlocal; k++) {
        ncclComm_t c = R[k].comm;
        cudaStream_t s = R[k].s;
        switch (sh) {
        case AG: NC(ncclAllGather(in[k].dev, out[k].dev, count, d, c, s)); break;
        case RS: NC(ncclReduceScatter(in[k].dev, out[k].dev, count, d, ncclSum, c, s)); break;
        case BC:
            if (inplace)
                NC(ncclBcast(in[k].dev, count, d, root, c, s));
            else
                NC(ncclBroadcast(in[k].dev, out[k].dev, count, d, root, c, s));
            break;
        case RED: NC(ncclReduce(in[k].dev, out[k].dev, count, d, ncclMax, 0, c, s)); break;
        case A2A: NC(ncclAlltoAll(in[k].dev, out[k].dev, count, d, c, s)); break;
        case GA: NC(ncclGather(in[k].dev, out[k].dev, count, d, root, c, s)); break;
        case SC: NC(ncclScatter(in[k].dev, out[k].dev, count, d, root, c, s)); break;
        }
    }
    group_end();
    for (int k = 0; k < nlocal; k++) {
        int r = R[k].rank;
        /* a view into another buffer has no guard of its own */
        int view = inplace && (sh == RS || sh == SC);
        size_t nout = (sh == AG || sh == A2A || sh == GA) ? nfull : count;
        struct buf whole = {out[k].dev, nout * es};
        if (!((sh == RED && r != 0) || (sh == GA && r != root))) {
            unsigned char *h = download(k, &whole, view ? NULL : what);
            for (size_t i = 0; i < nout; i++) {
                double want = 0;
                size_t b = count ? i / count : 0, j = count ? i % count : 0;
                switch (sh) {
                case AG:
                case GA: want = val((int)b, j, 0); break;
                case RS:
                    for (int q = 0; q < n; q++)
                        want += val(q, (size_t)r * count + i, 0);
                    break;
                case BC: want = val(root, i, 0); break;
                case RED:
                    want = val(0, i, 0);
                    for (int q = 1; q < n; q++)
                        want = fmax(want, val(q, i, 0));
                    break;
                case A2A: want = val((int)b, (size_t)r * count + j, 0); break;
                case SC: want = val(root, (size_t)r * count + i, 0); break;
                }
                if (get(d, h, i) != want)
                    fail(what, r, i, get(d, h, i), want);
            }
            free(h);
        }
        if (!inplace) {
            dfree(&in[k]);
            dfree(&out[k]);
        } else {
            dfree(sh == AG || sh == GA ? &out[k] : &in[k]);
        }
    }
    checks++;
}

/* A ring of sends and receives in one group, then a group of sends and receives to every
 * rank (an all-to-all built of point-to-point, as the user guide writes it). */
static void check_p2p(size_t count)
{
    ncclDataType_t d = ncclFloat32;
    size_t es = 4;
    struct buf in[MAXR], out[MAXR];
    int n = nranks;

    for (int k = 0; k < nlocal; k++) {
        in[k] = dalloc(k, count * n * es);
        out[k] = dalloc(k, count * n * es);
        upload(&in[k], d, count * n, R[k].rank, 0, 0);
    }
    NC(ncclGroupStart());
    for (int k = 0; k < nlocal; k++) {
        int r = R[k].rank;
        NC(ncclSend(in[k].dev, count, d, (r + 1) % n, R[k].comm, R[k].s));
        NC(ncclRecv(out[k].dev, count, d, (r + n - 1) % n, R[k].comm, R[k].s));
    }
    NC(ncclGroupEnd());
    for (int k = 0; k < nlocal; k++) {
        struct buf first = {out[k].dev, count * es};
        unsigned char *h = download(k, &first, "send/recv ring");
        int from = (R[k].rank + n - 1) % n;
        for (size_t i = 0; i < count; i++)
            if (get(d, h, i) != val(from, i, 0))
                fail("send/recv ring", R[k].rank, i, get(d, h, i), val(from, i, 0));
        free(h);
    }
    NC(ncclGroupStart());
    for (int k = 0; k < nlocal; k++)
        for (int p = 0; p < n; p++) {
            NC(ncclSend((char *)in[k].dev + (size_t)p * count * es, count, d, p, R[k].comm,
                        R[k].s));
            NC(ncclRecv((char *)out[k].dev + (size_t)p * count * es, count, d, p, R[k].comm,
                        R[k].s));
        }
    NC(ncclGroupEnd());
    for (int k = 0; k < nlocal; k++) {
        unsigned char *h = download(k, &out[k], "all-to-all of sends and receives");
        for (size_t i = 0; i < count * n; i++) {
            size_t b = i / count, j = i % count;
            double want = val((int)b, (size_t)R[k].rank * count + j, 0);
            if (get(d, h, i) != want)
                fail("all-to-all of sends and receives", R[k].rank, i, get(d, h, i), want);
        }
        free(h);
        dfree(&in[k]);
        dfree(&out[k]);
    }
    checks += 2;
}

/* Sum of scalar_r * x_r with each rank's own scalar (r + 1): on the host, read at once, or in
 * device memory, read when the call runs (set after the operator is made). */
static void check_premul(size_t count, int on_device)
{
    struct buf in[MAXR], out[MAXR], sc[MAXR];
    ncclRedOp_t op[MAXR];

    for (int k = 0; k < nlocal; k++) {
        double scalar = R[k].rank + 1;
        in[k] = dalloc(k, count * 8);
        out[k] = dalloc(k, count * 8);
        upload(&in[k], ncclFloat64, count, R[k].rank, 0, 0);
        if (on_device) {
            double zero = 0;
            sc[k] = dalloc(k, 8);
            CU(cudaMemcpy(sc[k].dev, &zero, 8, cudaMemcpyHostToDevice));
            NC(ncclRedOpCreatePreMulSum(&op[k], sc[k].dev, ncclFloat64, ncclScalarDevice,
                                        R[k].comm));
            CU(cudaMemcpy(sc[k].dev, &scalar, 8, cudaMemcpyHostToDevice));
        } else {
            NC(ncclRedOpCreatePreMulSum(&op[k], &scalar, ncclFloat64, ncclScalarHostImmediate,
                                        R[k].comm));
        }
    }
    group_start();
    for (int k = 0; k < nlocal; k++)
        NC(ncclAllReduce(in[k].dev, out[k].dev, count, ncclFloat64, op[k], R[k].comm, R[k].s));
    group_end();
    for (int k = 0; k < nlocal; k++) {
        unsigned char *h = download(k, &out[k], "pre-multiplied sum");
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int q = 0; q < nranks; q++)
                want += (q + 1) * val(q, i, 0);
            if (get(ncclFloat64, h, i) != want)
                fail("pre-multiplied sum", R[k].rank, i, get(ncclFloat64, h, i), want);
        }
        free(h);
        NC(ncclRedOpDestroy(op[k], R[k].comm));
        dfree(&in[k]);
        dfree(&out[k]);
        if (on_device)
            dfree(&sc[k]);
    }
    checks++;
}

/* Streams come and go: a stream destroyed after its calls, a new one (the handle may be
 * the old one's) used at once; nothing of the library's is ever destroyed by the program. */
static void check_streams(void)
{
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < nlocal; k++) {
            CU(cudaSetDevice(R[k].dev));
            CU(cudaStreamSynchronize(R[k].s));
            CU(cudaStreamDestroy(R[k].s));
            CU(cudaStreamCreateWithFlags(&R[k].s, round % 2 ? cudaStreamNonBlocking : 0));
        }
        check_all_reduce(1000, 7, 0, 0, 0);
    }
}

/* A communicator of each parity, and an all-reduce on it. */
static void check_split(void)
{
    ncclComm_t sub[MAXR];
    struct buf in[MAXR];
    int n;

    group_start();
    for (int k = 0; k < nlocal; k++)
        NC(ncclCommSplit(R[k].comm, R[k].rank % 2, R[k].rank, &sub[k], NULL));
    group_end();
    for (int k = 0; k < nlocal; k++) {
        NC(ncclCommCount(sub[k], &n));
        if (n != (nranks + 1 - R[k].rank % 2) / 2)
            fail("split: size", R[k].rank, 0, n, (nranks + 1 - R[k].rank % 2) / 2);
        in[k] = dalloc(k, 100 * 4);
        upload(&in[k], ncclInt32, 100, R[k].rank, 0, 0);
    }
    group_start();
    for (int k = 0; k < nlocal; k++)
        NC(ncclAllReduce(in[k].dev, in[k].dev, 100, ncclInt32, ncclSum, sub[k], R[k].s));
    group_end();
    for (int k = 0; k < nlocal; k++) {
        unsigned char *h = download(k, &in[k], "split all-reduce");
        for (size_t i = 0; i < 100; i++) {
            double want = 0;
            for (int q = R[k].rank % 2; q < nranks; q += 2)
                want += val(q, i, 0);
            if (get(ncclInt32, h, i) != want)
                fail("split all-reduce", R[k].rank, i, get(ncclInt32, h, i), want);
        }
        free(h);
        dfree(&in[k]);
        NC(ncclCommDestroy(sub[k]));
    }
    checks++;
}

/* What NCCL promises of its queries, versions and errors. */
static void check_api(void)
{
    int v = 0, n = 0, r = -1, dev = -1;
    ncclResult_t async = ncclInternalError;
    struct buf b = dalloc(0, 64);

    NC(ncclGetVersion(&v));
    if (v != NCCL_VERSION_CODE)
        fail("ncclGetVersion", R[0].rank, 0, v, NCCL_VERSION_CODE);
    for (int k = 0; k < nlocal; k++) {
        NC(ncclCommCount(R[k].comm, &n));
        NC(ncclCommUserRank(R[k].comm, &r));
        NC(ncclCommCuDevice(R[k].comm, &dev));
        NC(ncclCommGetAsyncError(R[k].comm, &async));
        if (n != nranks || r != R[k].rank || dev != R[k].dev || async != ncclSuccess)
            fail("queries", R[k].rank, 0, n * 1000 + r * 10 + dev,
                 nranks * 1000 + R[k].rank * 10 + R[k].dev);
    }
    /* refused at once, with a reason: a bad type, a bad operator, a NULL communicator */
    if (ncclAllReduce(b.dev, b.dev, 4, (ncclDataType_t)99, ncclSum, R[0].comm, R[0].s) !=
            ncclInvalidArgument ||
        !strstr(ncclGetLastError(R[0].comm), "99"))
        fail("a bad datatype is ncclInvalidArgument, named", R[0].rank, 0, 0, 1);
    if (ncclAllReduce(b.dev, b.dev, 4, ncclFloat32, (ncclRedOp_t)77, R[0].comm, R[0].s) !=
        ncclInvalidArgument)
        fail("a bad operator is ncclInvalidArgument", R[0].rank, 0, 0, 1);
    if (ncclAllReduce(b.dev, b.dev, 4, ncclFloat32, ncclSum, NULL, R[0].s) != ncclInvalidArgument)
        fail("a NULL communicator is ncclInvalidArgument", R[0].rank, 0, 0, 1);
    if (strcmp(ncclGetErrorString(ncclSuccess), "no error") != 0 ||
        !strstr(ncclGetErrorString(ncclInProgress), "progress"))
        fail("ncclGetErrorString", R[0].rank, 0, 0, 1);
    NC(ncclCommGetAsyncError(R[0].comm, &async)); /* refusals leave the communicator usable */
    if (async != ncclSuccess)
        fail("the communicator is healthy after refusals", R[0].rank, 0, async, ncclSuccess);
    void *mem = NULL, *h = NULL;
    NC(ncclMemAlloc(&mem, 1 << 20));
    NC(ncclCommRegister(R[0].comm, mem, 1 << 20, &h));
    NC(ncclCommDeregister(R[0].comm, h));
    NC(ncclMemFree(mem));
    dfree(&b);
    checks++;
}

/* Windows (one rank per process: ncclCommWindowRegister is collective and blocks): an
 * all-reduce in and out of place on ncclMemAlloc memory in windows registered with
 * NCCL_WIN_COLL_SYMMETRIC (on the device path it takes tutti's symmetric path: check-nccl.sh
 * counts the calls that log it). */
static void check_window(size_t count)
{
    struct buf in = {NULL, count * 4}, out = {NULL, count * 4};
    ncclWindow_t w_in, w_out;

    if (nlocal != 1)
        return;
    NC(ncclMemAlloc(&in.dev, count * 4));
    NC(ncclMemAlloc(&out.dev, count * 4 + GUARD));
    CU(cudaMemset(out.dev, 0xa5, count * 4 + GUARD));
    NC(ncclCommWindowRegister(R[0].comm, in.dev, count * 4, &w_in, NCCL_WIN_COLL_SYMMETRIC));
    NC(ncclCommWindowRegister(R[0].comm, out.dev, count * 4 + GUARD, &w_out,
                              NCCL_WIN_COLL_SYMMETRIC));
    for (int inplace = 0; inplace < 2; inplace++) {
        struct buf *o = inplace ? &in : &out;
        upload(&in, ncclFloat32, count, R[0].rank, 0, 0);
        NC(ncclAllReduce(in.dev, o->dev, count, ncclFloat32, ncclSum, R[0].comm, R[0].s));
        unsigned char *h = download(0, o, inplace ? NULL : "all-reduce in windows");
        for (size_t i = 0; i < count; i++) {
            double got = get(ncclFloat32, h, i),
                   want = reduce_ref(ncclSum, ncclFloat32, i, nranks, 0);
            if (got != want)
                fail(inplace ? "all-reduce in windows, in place" : "all-reduce in windows",
                     R[0].rank, i, got, want);
        }
        free(h);
    }
    NC(ncclCommWindowDeregister(R[0].comm, w_in));
    NC(ncclCommWindowDeregister(R[0].comm, w_out));
    NC(ncclMemFree(in.dev));
    NC(ncclMemFree(out.dev));
    checks++;
}

/* A call while its stream is captured into a CUDA graph: refused before anything is queued
 * (tutti's calls cannot be replayed from a graph), NCCL's ncclInvalidUsage, named; on every
 * rank, so the communicators stay in step. */
static void check_capture(void)
{
    struct buf b[MAXR];
    cudaStream_t cs[MAXR];
    cudaGraph_t g;

    for (int k = 0; k < nlocal; k++) {
        b[k] = dalloc(k, 1024);
        CU(cudaStreamCreateWithFlags(&cs[k], cudaStreamNonBlocking));
        CU(cudaStreamBeginCapture(cs[k], cudaStreamCaptureModeRelaxed));
        ncclResult_t r =
            ncclAllReduce(b[k].dev, b[k].dev, 256, ncclFloat32, ncclSum, R[k].comm, cs[k]);
        if (r != ncclInvalidUsage || !strstr(ncclGetLastError(R[k].comm), "graph"))
            fail("a call under graph capture is ncclInvalidUsage, named", R[k].rank, 0, r,
                 ncclInvalidUsage);
        CU(cudaStreamEndCapture(cs[k], &g));
        CU(cudaGraphDestroy(g));
        CU(cudaStreamDestroy(cs[k]));
        dfree(&b[k]);
    }
    checks++;
}

void run_checks(void)
{
    static const size_t counts[] = {0, 1, 1000, 65536 + 3};

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        for (int t = 0; t < 10; t++)
            for (int o = 0; o < 5; o++) {
                if (o == 4 && all_types[t] != ncclFloat32 && all_types[t] != ncclFloat64)
                    continue; /* averages: floating point */
                check_all_reduce(counts[c], t, o, (int)(c + t + o) % 2, 0);
            }
    /* The NULL stream is one per device: ranks of one process sharing a device would queue
     * one rank's half of a collective behind the other's on it, as with NCCL. */
    int shared = 0;
    for (int a = 0; a < nlocal; a++)
        for (int b = a + 1; b < nlocal; b++)
            shared |= R[a].dev == R[b].dev;
    if (!shared) {
        check_all_reduce(4096, 7, 0, 0, 1);
        check_all_reduce(4096, 7, 0, 1, 1);
    }
    for (int sh = AG; sh <= SC; sh++)
        for (int inplace = 0; inplace < 2; inplace++) {
            if (inplace && sh == RED)
                continue;
            check_shape((enum shape)sh, 1, ncclFloat32, inplace);
            check_shape((enum shape)sh, 3001, ncclInt32, inplace);
            check_shape((enum shape)sh, 20000, ncclFloat16, inplace);
        }
    check_p2p(1);
    check_p2p(5000);
    check_premul(777, 0);
    check_premul(777, 1);
    check_streams();
    check_split();
    check_api();
    check_window(70001);
    check_capture();
}
