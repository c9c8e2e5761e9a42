/*
 * gpu_check -- CUDA device buffers in tutti (run under tutti-run, except probe and bench).
 *
 *   gpu_check probe    exit 0 and print the device count, or print why not and exit 77
 *   gpu_check matrix   every collective x dtype x op on device buffers, in and out of place,
 *                      counts 0, 1, 4099 and 1M+3, on the NULL stream and on a wrapped CUDA
 *                      stream in turn; each result must equal bitwise the same call on host
 *                      buffers (the host path is checked against independent references by
 *                      the coll tests)
 *   gpu_check order [async]  on a wrapped CUDA stream: a slow kernel fills the inputs, the
 *                      all-reduces queued behind it (4 MiB, 4 KiB, 4 MiB again) must see the
 *                      filled values, a kernel queued after them must see their result; with
 *                      `async` the calls must also return before the fill has finished; then
 *                      an all-reduce on the NULL stream after a slow fill on CUDA's default
 *                      stream must see the fill and return with its result in place
 *   gpu_check p2p      tutti_send/tutti_recv on device buffers: a ring exchange in a group
 *                      (0, 1, 4099 and 3M+17 int32, beside 7 int32 on host memory), an
 *                      all-to-all (self included) as a group, by tutti_all_to_all and by
 *                      tutti_all_to_allv (blocks placed in reverse), a gather and a scatter,
 *                      on the NULL stream,
 *                      with the buffers registered (tutti_comm_register), and on a wrapped
 *                      CUDA stream, against values computed on the host from (rank, index)
 *   gpu_check mix      a device sendbuf with a host recvbuf is refused naming both kinds
 *   gpu_check capture  an all-reduce and a send/recv group on a wrapped CUDA stream being
 *                      captured into a CUDA graph are refused (TUTTI_ERR_UNSUPPORTED); after
 *                      the capture an all-reduce on that stream is right
 *   gpu_check kinds    (TUTTI_CHECK_COLL=1) rank 0 passes device buffers, the others host
 *                      buffers: on the device path that would wait on different connections;
 *                      every rank must fail the call naming the disagreement, and the
 *                      communicator must stay usable; then rank 0 sends from device memory
 *                      to rank 1's host memory: both must fail naming the device path
 *   gpu_check fault    (cudamock only) a kernel launch fails on rank 0 inside a device-path
 *                      all-reduce on a wrapped CUDA stream: rank 0's tutti_stream_sync fails,
 *                      each peer's fails or has the right sum, within 10 s; no stream waits;
 *                      the next call fails on every rank within 10 s
 *   gpu_check soak     a random sequence of collectives on device buffers, on the NULL
 *                      stream or a wrapped CUDA stream, synchronised now and then, so that
 *                      device-path, staged and NULL-stream calls interleave on shared buffers;
 *                      every output exact (GPU_CHECK_SEED, GPU_CHECK_SOAK_STEPS)
 *   gpu_check kernels  the CUDA reduction kernels alone (one process): every dtype x op, counts
 *                      1 to 1M+3, vector-aligned and not, the fused second output, in place;
 *                      AVG through the division kernel; against tools/values.c's expectations
 *                      (computed without tutti)
 *   gpu_check bench    reduction kernel (float32 sum, 256 MiB) bandwidth against
 *                      cudaMemcpy device-to-device on the same buffers
 *   gpu_check copylat  the latency of one staging copy (cudaMemcpy to / from pinned memory,
 *                      8 B to 256 KiB), every rank at once (ranks share the GPU)
 * Every rank uses device 0 (several ranks may share one GPU). Exit 0: all checks passed.
 * GPU_CHECK_MAX_COUNT=N caps the largest counts above at N elements (the cudamock run: its
 * "device" copies are the host's). Linked with tests/cudamock instead of CUDA's runtime, the
 * same checks run without a GPU (gpu_check_mock, test `gpu-mock`).
 */
#include "tutti.h"
#include "../report.h"
#include "values.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int gpu_slow_fill(float *buf, size_t n, float value, long long spin, void *stream);
int gpu_twice(float *buf, size_t n, void *stream);
int tt_cuda_reduce(void *dst, const void *a, const void *b, size_t count, tutti_dtype_t dtype,
                   tutti_op_t op, void *stream);
int tt_cuda_reduce_copy(void *dst, void *dst2, const void *a, const void *b, size_t count,
                        tutti_dtype_t dtype, tutti_op_t op, void *stream);
int tt_cuda_divide(void *buf, size_t count, tutti_dtype_t dtype, int ranks, void *stream);

static tutti_comm_t comm;

#define MAX_RANKS 64 /* p2p's all-to-allv count arrays */

/* The largest element count a check uses: n, or less where GPU_CHECK_MAX_COUNT says so (the
 * cudamock run keeps its host copies short). */
static size_t big(size_t n)
{
    const char *v = getenv("GPU_CHECK_MAX_COUNT");
    size_t most = v && *v ? strtoull(v, NULL, 10) : 0;
    return most && most < n ? most : n;
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fail("%s: %s", #call, cudaGetErrorString(e_));                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { AR, AG, RS, BC, RD, NCOLL };
static const char *coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                       "reduce"};

static tutti_result_t call(int c, const void *s, void *r, size_t count, tutti_dtype_t t,
                           tutti_op_t op, tutti_stream_t st)
{
    switch (c) {
    case AR: return tutti_all_reduce(s, r, count, t, op, comm, st);
    case AG: return tutti_all_gather(s, r, count, t, comm, st);
    case RS: return tutti_reduce_scatter(s, r, count, t, op, comm, st);
    case BC: return tutti_broadcast(s, r, count, t, 0, comm, st);
    default: return tutti_reduce(s, r, count, t, op, nranks - 1, comm, st);
    }
}

/* Inputs: bytes that are valid values of every dtype (small, positive). */
static void fill(unsigned char *p, size_t bytes, size_t es, int seed)
{
    memset(p, 0, bytes);
    for (size_t i = 0; i < bytes / es; i++)
        p[i * es + (es > 1 ? es - 2 : 0)] = (unsigned char)(1 + (i * 7 + (size_t)seed * 13) % 5);
}

static void matrix(void)
{
    const size_t counts[] = {0, 1, 4099, big(1000003)};
    /* One allocation of the largest size, reused: a cudaFree per case waits for the whole
     * device, and with several processes on one GPU that wait is most of the run. */
    size_t most = (counts[3] > counts[2] ? counts[3] : counts[2]) * 8 * (size_t)nranks + 1;
    unsigned char *hs = malloc(most), *hr = malloc(most), *got = malloc(most);
    void *ds, *dr;
    tutti_stream_t ws;
    cudaStream_t cs;
    int k = 0;

    CU(cudaMalloc(&ds, most));
    CU(cudaMalloc(&dr, most));
    CU(cudaStreamCreate(&cs));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("tutti_stream_wrap_cuda: %s", tutti_last_error());
        return;
    }
    for (int c = 0; c < NCOLL; c++)
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
            for (int op = 0; op < TUTTI_NUM_OPS; op++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        size_t es = tutti_dtype_size((tutti_dtype_t)t), n = counts[ci];
                        size_t sb = (c == RS ? n * nranks : n) * es;
                        size_t rb = (c == AG ? n * nranks : n) * es, big = sb > rb ? sb : rb;
                        void *s, *r, *hsp, *hrp;
                        tutti_stream_t st = (k++ % 2) ? ws : NULL;
                        tutti_result_t rc;

                        if ((c == AG || c == BC) && op > 0)
                            continue; /* no op */
                        if (!counts[ci] && inplace)
                            continue;
                        memset(hs, 0, big + 1);
                        fill(hs, sb, es, rank);
                        memset(hr, 0, big);
                        CU(cudaMemcpy(ds, hs, big, cudaMemcpyHostToDevice));
                        CU(cudaMemcpy(dr, hr, big, cudaMemcpyHostToDevice));
                        /* In place: the input sits where tutti.h's layout says, in one buffer. */
                        s = ds, r = dr, hsp = hs, hrp = hr;
                        if (inplace) {
                            size_t off = (size_t)rank * n * es;
                            if (c == AG) {
                                memcpy(hr + off, hs, n * es);
                                CU(cudaMemcpy(dr, hr, big, cudaMemcpyHostToDevice));
                                s = (char *)dr + off, hsp = hr + off;
                            } else if (c == RS) {
                                memcpy(hr, hs, sb);
                                CU(cudaMemcpy(dr, hr, big, cudaMemcpyHostToDevice));
                                s = dr, hsp = hr, r = (char *)dr + off, hrp = hr + off;
                            } else {
                                memcpy(hr, hs, sb);
                                CU(cudaMemcpy(dr, hr, big, cudaMemcpyHostToDevice));
                                s = dr, hsp = hr;
                            }
                        }
                        rc = call(c, s, r, n, (tutti_dtype_t)t, (tutti_op_t)op, st);
                        if (rc == TUTTI_SUCCESS && st)
                            rc = tutti_stream_sync(st);
                        if (rc != TUTTI_SUCCESS) {
                            fail("%s %s %s count %zu%s: %s", coll_name[c],
                                 tutti_dtype_name((tutti_dtype_t)t), tutti_op_name((tutti_op_t)op),
                                 n, inplace ? " in place" : "", tutti_last_error());
                            exit(1);
                        }
                        CU(cudaMemcpy(got, dr, big, cudaMemcpyDeviceToHost));
                        /* The reference: the same call on host memory. */
                        if (call(c, hsp, hrp, n, (tutti_dtype_t)t, (tutti_op_t)op, NULL) !=
                            TUTTI_SUCCESS) {
                            fail("host reference: %s", tutti_last_error());
                            exit(1);
                        }
                        /* Compare the output block only (in-place scratch may differ). */
                        if ((c != RD || rank == nranks - 1) &&
                            memcmp(got + ((char *)r - (char *)dr), hrp, rb) != 0)
                            fail("%s %s %s count %zu%s on %s: device result differs from host",
                                 coll_name[c], tutti_dtype_name((tutti_dtype_t)t),
                                 tutti_op_name((tutti_op_t)op), n, inplace ? " in place" : "",
                                 st ? "a CUDA stream" : "the NULL stream");
                    }
    cudaFree(ds);
    cudaFree(dr);
    free(hs);
    free(hr);
    free(got);
    tutti_stream_destroy(ws);
    cudaStreamDestroy(cs);
    printf("rank %d: %d device calls checked against the host path\n", rank, k);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void order(int async)
{
    size_t n = 1 << 20, m = 1024; /* 4 MiB and 4 KiB of float32 */
    float *d, *d2, *h = malloc(n * sizeof(float));
    float sum = (float)(nranks * (nranks + 1) / 2); /* of rank + 1 over the ranks */
    cudaStream_t cs;
    tutti_stream_t ws;
    double t0, t_call, t_done;
    int busy;

    CU(cudaStreamCreate(&cs));
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    CU(cudaMalloc((void **)&d2, m * sizeof(float)));
    CU(cudaMemset(d, 0, n * sizeof(float)));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("tutti_stream_wrap_cuda: %s", tutti_last_error());
        return;
    }
    tutti_barrier(comm, NULL);
    t0 = now();
    if (gpu_slow_fill(d, n, (float)(rank + 1), 2000000000ll, cs) != 0 || /* ~1 s of spinning */
        gpu_slow_fill(d2, m, (float)(rank + 1), 1000, cs) != 0)
        fail("slow_fill launch");
    /* Three calls in a row: with TUTTI_CUDA_P2P_MIN between 4 KiB and 4 MiB the small one is
     * staged (a host function on cs) between two on the device path (the runner). */
    if (tutti_all_reduce(d, d, n, TUTTI_FLOAT32, TUTTI_SUM, comm, ws) != TUTTI_SUCCESS ||
        tutti_all_reduce(d2, d2, m, TUTTI_FLOAT32, TUTTI_SUM, comm, ws) != TUTTI_SUCCESS ||
        tutti_all_reduce(d, d, n, TUTTI_FLOAT32, TUTTI_SUM, comm, ws) != TUTTI_SUCCESS)
        fail("all_reduce on the CUDA stream: %s", tutti_last_error());
    t_call = now() - t0;
    /* Returned at once: the ~1 s fill they are queued behind still runs (a call that waited
     * for its work would find the stream idle). A state, not a time limit: a slow machine
     * passes as long as the calls return before the fill ends. */
    busy = cudaStreamQuery(cs) == cudaErrorNotReady;
    (void)cudaGetLastError();
    if (gpu_twice(d, n, cs) != 0)
        fail("twice launch");
    if (tutti_stream_sync(ws) != TUTTI_SUCCESS)
        fail("tutti_stream_sync: %s", tutti_last_error());
    t_done = now() - t0;
    CU(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != 2.0f * (float)nranks * sum) {
            fail("order: element %zu is %g, want %g (fill, all-reduce twice, doubling)", i, h[i],
                 2.0 * nranks * sum);
            break;
        }
    CU(cudaMemcpy(h, d2, m * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < m; i++)
        if (h[i] != sum) {
            fail("order: small buffer element %zu is %g, want %g", i, h[i], (double)sum);
            break;
        }
    if (async && !busy)
        fail("order: when the all-reduce calls returned (after %.3f s of the %.3f s) their "
             "stream was idle: they did not return at once",
             t_call, t_done);
    /* The NULL stream: a kernel queued on CUDA's default stream before the call is seen by
     * it, and the call returns with its result in place (the copy below does not wait for
     * the communicator's own stream). */
    if (gpu_slow_fill(d2, m, (float)(rank + 1), 200000000ll, NULL) != 0) /* ~0.1 s */
        fail("slow_fill launch on the default stream");
    if (tutti_all_reduce(d2, d2, m, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS)
        fail("all_reduce on the NULL stream: %s", tutti_last_error());
    CU(cudaMemcpy(h, d2, m * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < m; i++)
        if (h[i] != sum) {
            fail("order: on the NULL stream, element %zu is %g, want %g (fill, all-reduce)", i,
                 h[i], (double)sum);
            break;
        }
    printf("rank %d: stream order holds (calls returned after %.3f s, work done after %.3f s)\n",
           rank, t_call, t_done);
    tutti_stream_destroy(ws);
    cudaFree(d);
    cudaFree(d2);
    cudaStreamDestroy(cs);
    free(h);
}

/*
 * A random sequence of collectives on device buffers, each on the NULL stream or on one
 * wrapped CUDA stream with its input uploaded and its output downloaded on that stream.
 * Wrapped-stream calls are synchronised only now and then, so device-path calls (the
 * runner), staged ones (host functions on the stream) and NULL-stream ones interleave, on
 * buffers they share. Values are small integers in float32: every output is exact. The seed
 * comes from rank 0: GPU_CHECK_SEED, else the time; GPU_CHECK_SOAK_STEPS steps (200).
 */
enum { SOAK_BUFS = 3, SOAK_PENDING = 6 };

struct soak_call {
    int c, root, step;
    size_t n;
    float *out;
};

static float soak_val(int r, size_t i, int step)
{
    return (float)(r + 1 + (int)(i % 13) + step % 7);
}

static void soak_check(const struct soak_call *p, unsigned seed)
{
    size_t len = p->c == AG ? p->n * (size_t)nranks : p->n;

    if (p->c == RD && rank != p->root)
        return;
    for (size_t i = 0; i < len; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++)
            want += p->c == RS ? soak_val(r, (size_t)rank * p->n + i, p->step)
                               : soak_val(r, i, p->step);
        if (p->c == AG)
            want = soak_val((int)(i / p->n), i % p->n, p->step);
        else if (p->c == BC)
            want = soak_val(p->root, i, p->step);
        if (p->out[i] != want) {
            fail("soak step %d (%s of %zu float32, seed %u): element %zu is %g, want %g", p->step,
                 coll_name[p->c], p->n, seed, i, (double)p->out[i], (double)want);
            return;
        }
    }
}

static unsigned soak_next(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

static void soak(void)
{
    const char *sv = getenv("GPU_CHECK_SEED"), *kv = getenv("GPU_CHECK_SOAK_STEPS");
    unsigned seed = sv && *sv ? (unsigned)strtoul(sv, NULL, 10) : (unsigned)time(NULL), x;
    int steps = kv && *kv ? atoi(kv) : 200, npend = 0, slot = 0;
    size_t most = big((size_t)1 << 18), cap = most * (size_t)nranks * sizeof(float);
    float *ds[SOAK_BUFS], *dr[SOAK_BUFS], *in[SOAK_PENDING], *out[SOAK_PENDING];
    struct soak_call pend[SOAK_PENDING];
    cudaStream_t cs;
    tutti_stream_t ws;

    tutti_broadcast(&seed, &seed, 1, TUTTI_UINT32, 0, comm, NULL);
    x = seed;
    if (rank == 0)
        printf("soak: seed %u (GPU_CHECK_SEED replays it), %d steps\n", seed, steps);
    for (int b = 0; b < SOAK_BUFS; b++) {
        CU(cudaMalloc((void **)&ds[b], cap));
        CU(cudaMalloc((void **)&dr[b], cap));
    }
    for (int k = 0; k < SOAK_PENDING; k++) { /* pinned: async copies stay async */
        CU(cudaHostAlloc((void **)&in[k], cap, cudaHostAllocDefault));
        CU(cudaHostAlloc((void **)&out[k], cap, cudaHostAllocDefault));
    }
    CU(cudaStreamCreate(&cs));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("soak: tutti_stream_wrap_cuda: %s", tutti_last_error());
        exit(1);
    }
    for (int k = 0; k < steps && !failures; k++) {
        static const size_t fixed[] = {0, 1, 7, 4099};
        int c = (int)(soak_next(&x) % NCOLL), root = (int)(soak_next(&x) % (unsigned)nranks);
        int wrapped = soak_next(&x) % 3 != 0, b = (int)(soak_next(&x) % SOAK_BUFS), pick;
        size_t n, sn, rn;
        tutti_stream_t st = wrapped ? ws : NULL;
        tutti_result_t rc;

        pick = (int)(soak_next(&x) % 6);
        n = pick < 4 ? fixed[pick] : pick == 4 ? soak_next(&x) % (most + 1) : most;
        n = n < most ? n : most;
        sn = c == RS ? n * (size_t)nranks : n;
        rn = c == AG ? n * (size_t)nranks : n;
        for (size_t i = 0; i < sn; i++)
            in[slot][i] = soak_val(rank, i, k);
        if (wrapped)
            CU(cudaMemcpyAsync(ds[b], in[slot], sn * sizeof(float), cudaMemcpyHostToDevice, cs));
        else
            CU(cudaMemcpy(ds[b], in[slot], sn * sizeof(float), cudaMemcpyHostToDevice));
        switch (c) {
        case AR: rc = tutti_all_reduce(ds[b], dr[b], n, TUTTI_FLOAT32, TUTTI_SUM, comm, st); break;
        case AG: rc = tutti_all_gather(ds[b], dr[b], n, TUTTI_FLOAT32, comm, st); break;
        case RS:
            rc = tutti_reduce_scatter(ds[b], dr[b], n, TUTTI_FLOAT32, TUTTI_SUM, comm, st);
            break;
        case BC: rc = tutti_broadcast(ds[b], dr[b], n, TUTTI_FLOAT32, root, comm, st); break;
        default: rc = tutti_reduce(ds[b], dr[b], n, TUTTI_FLOAT32, TUTTI_SUM, root, comm, st);
        }
        if (rc != TUTTI_SUCCESS) {
            fail("soak step %d (%s of %zu float32 on %s, seed %u): %s", k, coll_name[c], n,
                 wrapped ? "the CUDA stream" : "the NULL stream", seed, tutti_last_error());
            exit(1);
        }
        pend[npend] = (struct soak_call){c, root, k, n, out[slot]};
        if (wrapped) {
            CU(cudaMemcpyAsync(out[slot], dr[b], rn * sizeof(float), cudaMemcpyDeviceToHost, cs));
        } else {
            CU(cudaMemcpy(out[slot], dr[b], rn * sizeof(float), cudaMemcpyDeviceToHost));
            soak_check(&pend[npend], seed);
            continue; /* its slot is free again */
        }
        npend++;
        slot = (slot + 1) % SOAK_PENDING;
        if (npend == SOAK_PENDING || soak_next(&x) % 4 == 0 || k == steps - 1) {
            if (tutti_stream_sync(ws) != TUTTI_SUCCESS) {
                fail("soak: tutti_stream_sync after step %d (seed %u): %s", k, seed,
                     tutti_last_error());
                exit(1);
            }
            for (int i = 0; i < npend; i++)
                soak_check(&pend[i], seed);
            npend = 0;
        }
    }
    tutti_stream_destroy(ws);
    for (int b = 0; b < SOAK_BUFS; b++) {
        cudaFree(ds[b]);
        cudaFree(dr[b]);
    }
    for (int k = 0; k < SOAK_PENDING; k++) {
        cudaFreeHost(in[k]);
        cudaFreeHost(out[k]);
    }
    cudaStreamDestroy(cs);
    printf("rank %d: soak of %d steps passed\n", rank, steps);
}

/* cudamock's (tests/cudamock): the next n kernel launches fail. NULL on CUDA's runtime. */
void cudamock_fail_launches(int n) __attribute__((weak));

/*
 * A kernel that fails on rank 0 in the middle of a device-path all-reduce on a wrapped CUDA
 * stream. The call has returned at once, so the failure surfaces in tutti_stream_sync: on
 * rank 0 always; a peer either fails too (rank 0 gave up on their connections) or, if it
 * already had all it needed from rank 0, finishes with the right sum. Either way within
 * seconds, with no CUDA stream left waiting. The next call then fails on every rank within
 * seconds (no rank waits for rank 0, whose communicator is unusable), and every
 * communicator reports an error. Needs cudamock to make the launch fail: on a GPU it says so
 * and passes.
 */
static void fault(void)
{
    size_t n = 1 << 16;
    float *d, *h = malloc(n * sizeof(float)), one = 1;
    cudaStream_t cs;
    tutti_stream_t ws;
    tutti_result_t rc, err = TUTTI_SUCCESS;
    char msg[256] = "";
    double t0, took;

    if (!cudamock_fail_launches) {
        printf("rank %d: fault: not run (it needs cudamock to make a kernel fail)\n", rank);
        free(h);
        return;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(rank + 1);
    CU(cudaStreamCreate(&cs));
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    CU(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("fault: tutti_stream_wrap_cuda: %s", tutti_last_error());
        return;
    }
    tutti_barrier(comm, NULL);
    if (rank == 0)
        cudamock_fail_launches(1);
    t0 = now();
    rc = tutti_all_reduce(d, d, n, TUTTI_FLOAT32, TUTTI_SUM, comm, ws);
    if (rc == TUTTI_SUCCESS)
        rc = tutti_stream_sync(ws);
    took = now() - t0;
    if (took > 10.0)
        fail("fault: the all-reduce took %.1f s to end", took);
    if (rc != TUTTI_SUCCESS) {
        printf("rank %d: failed after %.2f s: %s\n", rank, took, tutti_last_error());
    } else if (rank == 0) {
        fail("fault: an all-reduce whose kernel failed on rank 0 succeeded there");
    } else {
        CU(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
        if (h[0] != (float)(nranks * (nranks + 1) / 2) || h[n - 1] != h[0])
            fail("fault: the all-reduce succeeded here with a wrong sum, %g", (double)h[0]);
        printf("rank %d: finished after %.2f s with the right sum\n", rank, took);
    }
    if (cudaStreamQuery(cs) != cudaSuccess) /* the stream waits for nothing any more */
        fail("fault: the CUDA stream is still busy after tutti_stream_sync");
    /* The next call fails everywhere, promptly. */
    t0 = now();
    rc = tutti_all_reduce(&one, &one, 1, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    took = now() - t0;
    if (rc == TUTTI_SUCCESS || took > 10.0)
        fail("fault: the next all-reduce gave %s after %.1f s", tutti_strerror(rc), took);
    if (tutti_comm_get_error(comm, &err, msg, sizeof(msg)) != TUTTI_SUCCESS || err == TUTTI_SUCCESS)
        fail("fault: the communicator reports no error after the failure");
    tutti_stream_destroy(ws);
    cudaFree(d);
    cudaStreamDestroy(cs);
    free(h);
}

/* Calls on a wrapped CUDA stream that is being captured into a graph are refused, and the
 * communicator stays usable. */
static void capture(void)
{
    size_t n = 1 << 20;
    float *d, h[4];
    cudaStream_t cs;
    cudaGraph_t g;
    tutti_stream_t ws;
    tutti_result_t rc;

    CU(cudaStreamCreate(&cs));
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("tutti_stream_wrap_cuda: %s", tutti_last_error());
        return;
    }
    CU(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    rc = tutti_all_reduce(d, d, n, TUTTI_FLOAT32, TUTTI_SUM, comm, ws);
    if (rc != TUTTI_ERR_UNSUPPORTED || !strstr(tutti_last_error(), "captured"))
        fail("capture: all_reduce under capture gave %s: %s", tutti_strerror(rc),
             tutti_last_error());
    tutti_group_start();
    tutti_send(d, n, TUTTI_FLOAT32, (rank + 1) % nranks, comm, ws);
    tutti_recv(d, n, TUTTI_FLOAT32, (rank + nranks - 1) % nranks, comm, ws);
    rc = tutti_group_end();
    if (nranks > 1 && (rc != TUTTI_ERR_UNSUPPORTED || !strstr(tutti_last_error(), "captured")))
        fail("capture: a send/recv group under capture gave %s: %s", tutti_strerror(rc),
             tutti_last_error());
    CU(cudaStreamEndCapture(cs, &g));
    CU(cudaGraphDestroy(g));
    /* Still usable: a call after the capture is right. */
    for (size_t i = 0; i < 4; i++)
        h[i] = (float)(rank + 1);
    CU(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    if (tutti_all_reduce(d, d, 4, TUTTI_FLOAT32, TUTTI_SUM, comm, ws) != TUTTI_SUCCESS ||
        tutti_stream_sync(ws) != TUTTI_SUCCESS)
        fail("capture: all_reduce after the capture: %s", tutti_last_error());
    CU(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    if (h[0] != (float)(nranks * (nranks + 1) / 2))
        fail("capture: after the capture the sum is %g, want %d", h[0], nranks * (nranks + 1) / 2);
    tutti_stream_destroy(ws);
    cudaFree(d);
    cudaStreamDestroy(cs);
}

static void mix(void)
{
    float *d, h[16];
    tutti_result_t rc;

    CU(cudaMalloc((void **)&d, sizeof(h)));
    rc = tutti_all_reduce(d, h, 16, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    if (rc != TUTTI_ERR_INVALID_ARG || !strstr(tutti_last_error(), "CUDA device") ||
        !strstr(tutti_last_error(), "host"))
        fail("mix: device sendbuf + host recvbuf gave %s: %s", tutti_strerror(rc),
             tutti_last_error());
    printf("rank %d: host/device mixes refused: %s\n", rank, tutti_last_error());
    cudaFree(d);
}

static void kinds(void)
{
    float h[64], *d;
    tutti_result_t rc;

    CU(cudaMalloc((void **)&d, sizeof(h)));
    CU(cudaMemset(d, 0, sizeof(h)));
    rc = tutti_all_reduce(rank == 0 ? (void *)d : (void *)h, rank == 0 ? (void *)d : (void *)h, 64,
                          TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    if (rc != TUTTI_ERR_INVALID_ARG || !strstr(tutti_last_error(), "on device memory"))
        fail("kinds: device buffers on rank 0 only gave %s: %s", tutti_strerror(rc),
             tutti_last_error());
    else
        printf("rank %d: refused: %s\n", rank, tutti_last_error());
    for (int i = 0; i < 64; i++)
        h[i] = (float)(rank + 1);
    rc = tutti_all_reduce(h, h, 64, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    if (rc != TUTTI_SUCCESS || h[63] != (float)(nranks * (nranks + 1) / 2))
        fail("kinds: the next all-reduce gave %s, %g: %s", tutti_strerror(rc), (double)h[63],
             tutti_last_error());
    /* A message from device memory on rank 0 into host memory on rank 1: the sender takes the
     * device path, the receiver could not; both ends must fail naming it. */
    if (rank < 2 && nranks > 1) {
        rc = rank == 0 ? tutti_send(d, 64, TUTTI_FLOAT32, 1, comm, NULL)
                       : tutti_recv(h, 64, TUTTI_FLOAT32, 0, comm, NULL);
        if (rc != TUTTI_ERR_INVALID_ARG || !strstr(tutti_last_error(), "(device path)"))
            fail("kinds: a device-to-host message gave %s: %s", tutti_strerror(rc),
                 tutti_last_error());
        else
            printf("rank %d: refused: %s\n", rank, tutti_last_error());
    }
    cudaFree(d);
}

/* Device buffers in point-to-point calls. */
static void p2p(void)
{
    size_t sizes[] = {0, 1, 4099, big(3000017)};
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

    cudaStream_t cs;
    tutti_stream_t ws;

    if (nranks > MAX_RANKS) {
        fail("p2p: at most %d ranks", MAX_RANKS);
        exit(1);
    }
    CU(cudaStreamCreate(&cs));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("p2p: tutti_stream_wrap_cuda: %s", tutti_last_error());
        exit(1);
    }
    /* pass 0: NULL stream; 1: registered buffers; 2: on the wrapped CUDA stream */
    for (int reg = 0; reg < 3; reg++) {
        tutti_stream_t st = reg == 2 ? ws : NULL;
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t n = sizes[k], bytes = (n ? n : 1) * 4;
            int32_t *h = malloc(bytes), *ds, *dr;
            void *hs = NULL, *hr = NULL;
            tutti_result_t rc;

            CU(cudaMalloc((void **)&ds, bytes));
            CU(cudaMalloc((void **)&dr, bytes));
            for (size_t i = 0; i < n; i++)
                h[i] = (int32_t)(rank * 100000 + (int)(i % 99991));
            CU(cudaMemcpy(ds, h, n * 4, cudaMemcpyHostToDevice));
            CU(cudaMemset(dr, 0, bytes));
            if (reg && n &&
                (tutti_comm_register(comm, ds, n * 4, &hs) != TUTTI_SUCCESS ||
                 tutti_comm_register(comm, dr, n * 4, &hr) != TUTTI_SUCCESS))
                fail("p2p: tutti_comm_register: %s", tutti_last_error());
            /* With the device buffers, a pair on host memory in the same group: on the
             * device path the batch splits in two (device-path operations, then the rest). */
            int32_t hsend[7], hrecv[7] = {0};
            for (int i = 0; i < 7; i++)
                hsend[i] = rank * 10 + i;
            tutti_group_start();
            tutti_send(ds, n, TUTTI_INT32, next, comm, st);
            tutti_send(hsend, 7, TUTTI_INT32, next, comm, st);
            tutti_recv(dr, n, TUTTI_INT32, prev, comm, st);
            tutti_recv(hrecv, 7, TUTTI_INT32, prev, comm, st);
            rc = tutti_group_end();
            if (rc == TUTTI_SUCCESS && st)
                rc = tutti_stream_sync(st);
            if (rc != TUTTI_SUCCESS)
                fail("p2p: ring exchange of %zu int32: %s", n, tutti_comm_last_error(comm));
            for (int i = 0; i < 7; i++)
                if (hrecv[i] != prev * 10 + i) {
                    fail("p2p: the host pair beside %zu int32 (pass %d): element %d is %d", n, reg,
                         i, hrecv[i]);
                    break;
                }
            CU(cudaMemcpy(h, dr, n * 4, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++)
                if (h[i] != (int32_t)(prev * 100000 + (int)(i % 99991))) {
                    fail("p2p: ring exchange of %zu int32 (pass %d): element %zu is %d", n, reg, i,
                         h[i]);
                    break;
                }
            if (hs)
                tutti_comm_deregister(comm, hs);
            if (hr)
                tutti_comm_deregister(comm, hr);
            cudaFree(ds);
            cudaFree(dr);
            free(h);
        }
        /* All-to-all in one group, self included: block j goes to rank j. */
        size_t blk = 1031, all = blk * (size_t)nranks;
        int64_t *h = malloc(all * 8), *ds, *dr;
        CU(cudaMalloc((void **)&ds, all * 8));
        CU(cudaMalloc((void **)&dr, all * 8));
        for (int j = 0; j < nranks; j++)
            for (size_t i = 0; i < blk; i++)
                h[(size_t)j * blk + i] = (int64_t)rank * 1000000 + j * 1000 + (int64_t)i;
        CU(cudaMemcpy(ds, h, all * 8, cudaMemcpyHostToDevice));
        tutti_group_start();
        for (int j = 0; j < nranks; j++) {
            tutti_send(ds + (size_t)j * blk, blk, TUTTI_INT64, j, comm, st);
            tutti_recv(dr + (size_t)j * blk, blk, TUTTI_INT64, j, comm, st);
        }
        if (tutti_group_end() != TUTTI_SUCCESS || (st && tutti_stream_sync(st) != TUTTI_SUCCESS))
            fail("p2p: all-to-all (pass %d): %s", reg, tutti_comm_last_error(comm));
        CU(cudaMemcpy(h, dr, all * 8, cudaMemcpyDeviceToHost));
        for (int j = 0; j < nranks; j++)
            for (size_t i = 0; i < blk; i++)
                if (h[(size_t)j * blk + i] != (int64_t)j * 1000000 + rank * 1000 + (int64_t)i) {
                    fail("p2p: all-to-all: block %d element %zu", j, i);
                    j = nranks;
                    break;
                }
        /* The same through tutti_all_to_all, then tutti_all_to_allv placing block j at
         * n-1-j. */
        for (int v = 0; v < 2; v++) {
            size_t cnt[MAX_RANKS], sd[MAX_RANKS], rd[MAX_RANKS];
            tutti_result_t rc;
            for (int j = 0; j < nranks; j++)
                cnt[j] = blk, sd[j] = (size_t)j * blk, rd[j] = (size_t)(nranks - 1 - j) * blk;
            CU(cudaMemset(dr, 0, all * 8));
            rc = v ? tutti_all_to_allv(ds, cnt, sd, dr, cnt, rd, TUTTI_INT64, comm, st)
                   : tutti_all_to_all(ds, dr, blk, TUTTI_INT64, comm, st);
            if (rc != TUTTI_SUCCESS || (st && tutti_stream_sync(st) != TUTTI_SUCCESS))
                fail("p2p: %s (pass %d): %s", v ? "all_to_allv" : "all_to_all", reg,
                     tutti_comm_last_error(comm));
            CU(cudaMemcpy(h, dr, all * 8, cudaMemcpyDeviceToHost));
            for (int j = 0; j < nranks; j++) {
                size_t at = (size_t)(v ? nranks - 1 - j : j) * blk;
                for (size_t i = 0; i < blk; i++)
                    if (h[at + i] != (int64_t)j * 1000000 + rank * 1000 + (int64_t)i) {
                        fail("p2p: %s (pass %d): block from rank %d element %zu",
                             v ? "all_to_allv" : "all_to_all", reg, j, i);
                        j = nranks;
                        break;
                    }
            }
        }
        /* Gather to the last rank, then scatter from rank 0, on device buffers: block j of
         * the root's n blocks belongs to rank j (ds holds this rank's own blocks from above). */
        int root = nranks - 1;
        CU(cudaMemset(dr, 0, all * 8));
        if (tutti_gather(ds + (size_t)rank * blk, rank == root ? dr : NULL, blk, TUTTI_INT64, root,
                         comm, st) != TUTTI_SUCCESS ||
            (st && tutti_stream_sync(st) != TUTTI_SUCCESS))
            fail("p2p: gather (pass %d): %s", reg, tutti_comm_last_error(comm));
        CU(cudaMemcpy(h, dr, all * 8, cudaMemcpyDeviceToHost));
        for (int j = 0; rank == root && j < nranks; j++)
            for (size_t i = 0; i < blk; i++)
                if (h[(size_t)j * blk + i] != (int64_t)j * 1000000 + j * 1000 + (int64_t)i) {
                    fail("p2p: gather (pass %d): block %d element %zu", reg, j, i);
                    j = nranks;
                    break;
                }
        CU(cudaMemset(dr, 0, blk * 8));
        if (tutti_scatter(rank == 0 ? ds : NULL, dr, blk, TUTTI_INT64, 0, comm, st) !=
                TUTTI_SUCCESS ||
            (st && tutti_stream_sync(st) != TUTTI_SUCCESS))
            fail("p2p: scatter (pass %d): %s", reg, tutti_comm_last_error(comm));
        CU(cudaMemcpy(h, dr, blk * 8, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < blk; i++)
            if (h[i] != (int64_t)rank * 1000 + (int64_t)i) {
                fail("p2p: scatter (pass %d): element %zu is %lld", reg, i, (long long)h[i]);
                break;
            }
        cudaFree(ds);
        cudaFree(dr);
        free(h);
    }
    tutti_stream_destroy(ws);
    cudaStreamDestroy(cs);
}

/* The kernels against expectations computed without tutti: inputs of "ranks" 0 and 1. */
static void kernels(void)
{
    size_t counts[] = {1, 7, 1000, big(1000003)};
    unsigned char table[VAL_MAX_PERIOD * 8];
    size_t checked = 0;

    for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
        for (int op = 0; op < TUTTI_NUM_OPS; op++)
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                for (int shift = 0; shift < 2; shift++) /* 1: off the 16-byte vector path */
                    for (int inplace = 0; inplace < 2; inplace++) {
                        size_t n = counts[k], es = tutti_dtype_size((tutti_dtype_t)t);
                        size_t bytes = (n + 1) * es, off = (size_t)shift * es, bad = 0, wrong;
                        unsigned char *h = malloc(bytes), *g = malloc(bytes);
                        char *a, *b, *d, *d2;
                        CU(cudaMalloc((void **)&a, bytes));
                        CU(cudaMalloc((void **)&b, bytes));
                        CU(cudaMalloc((void **)&d, bytes));
                        CU(cudaMalloc((void **)&d2, bytes));
                        val_fill((tutti_dtype_t)t, op, 0, h, n, 0);
                        CU(cudaMemcpy(a + off, h, n * es, cudaMemcpyHostToDevice));
                        val_fill((tutti_dtype_t)t, op, 1, h, n, 0);
                        CU(cudaMemcpy(b + off, h, n * es, cudaMemcpyHostToDevice));
                        char *dst = inplace ? a + off : d + off;
                        if (tt_cuda_reduce_copy(dst, d2 + off, a + off, b + off, n,
                                                (tutti_dtype_t)t, (tutti_op_t)op, NULL) != 0 ||
                            (op == TUTTI_AVG &&
                             (tt_cuda_divide(dst, n, (tutti_dtype_t)t, 2, NULL) != 0 ||
                              tt_cuda_divide(d2 + off, n, (tutti_dtype_t)t, 2, NULL) != 0)))
                            fail("kernels: launch failed for %s %s",
                                 tutti_dtype_name((tutti_dtype_t)t), tutti_op_name((tutti_op_t)op));
                        CU(cudaMemcpy(h, dst, n * es, cudaMemcpyDeviceToHost));
                        CU(cudaMemcpy(g, d2 + off, n * es, cudaMemcpyDeviceToHost));
                        val_expect_reduce((tutti_dtype_t)t, op, 2, table);
                        wrong = val_count_wrong((tutti_dtype_t)t, op, h, n, 0, table, &bad) +
                                val_count_wrong((tutti_dtype_t)t, op, g, n, 0, table, &bad);
                        if (wrong)
                            fail("kernels: %s %s count %zu%s%s: %zu element(s) wrong, first [%zu]",
                                 tutti_dtype_name((tutti_dtype_t)t), tutti_op_name((tutti_op_t)op),
                                 n, shift ? " unaligned" : "", inplace ? " in place" : "", wrong,
                                 bad);
                        checked++;
                        cudaFree(a);
                        cudaFree(b);
                        cudaFree(d);
                        cudaFree(d2);
                        free(h);
                        free(g);
                    }
    printf("kernels: %zu dtype x op x count x alignment x placement cases checked\n", checked);
}

/*
 * What one staging copy costs by size (the staged path does two per call): blocking
 * cudaMemcpy between device memory and pinned host memory, median of 101, every rank at
 * once (ranks sharing the GPU take turns on it: run on 1 and on 2 ranks to see the cost).
 */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void copy_latency(void)
{
    size_t sizes[] = {8, 512, 4096, 32768, 262144};
    void *d, *h;
    double t[101];

    CU(cudaMalloc(&d, 262144));
    CU(cudaHostAlloc(&h, 262144, cudaHostAllocDefault));
    CU(cudaMemset(d, 0, 262144));
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        double med[2];
        for (int dir = 0; dir < 2; dir++) {
            tutti_barrier(comm, NULL);
            for (int i = 0; i < 101; i++) {
                double t0 = now();
                CU(cudaMemcpy(dir ? d : h, dir ? h : d, sizes[k],
                              dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
                t[i] = now() - t0;
            }
            qsort(t, 101, sizeof(t[0]), cmp_double);
            med[dir] = t[50] * 1e6;
        }
        printf("copy latency, rank %d of %d: %7zu B: device to host %8.2f us, host to device "
               "%8.2f us (blocking cudaMemcpy, pinned, median of 101)\n",
               rank, nranks, sizes[k], med[0], med[1]);
    }
    cudaFreeHost(h);
    cudaFree(d);
}

static void bench(void)
{
    size_t n = (size_t)64 << 20, bytes = n * sizeof(float); /* 256 MiB per buffer */
    float *a, *b, *c, ms;
    cudaEvent_t e0, e1;
    const int iters = 20;

    CU(cudaMalloc((void **)&a, bytes));
    CU(cudaMalloc((void **)&b, bytes));
    CU(cudaMalloc((void **)&c, bytes));
    CU(cudaMemset(a, 0, bytes));
    CU(cudaMemset(b, 0, bytes));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    tt_cuda_reduce(c, a, b, n, TUTTI_FLOAT32, TUTTI_SUM, NULL); /* warm-up */
    CU(cudaEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++)
        if (tt_cuda_reduce(c, a, b, n, TUTTI_FLOAT32, TUTTI_SUM, NULL) != 0)
            fail("tt_cuda_reduce launch");
    CU(cudaEventRecord(e1, NULL));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    double red = 3.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
    CU(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++)
        CU(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, NULL));
    CU(cudaEventRecord(e1, NULL));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    double cpy = 2.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
    printf("kernel bench: float32 sum of 2 x 256 MiB into a third: %.1f GB/s moved; "
           "cudaMemcpy device-to-device: %.1f GB/s moved; ratio %.2f\n",
           red, cpy, red / cpy);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int ndev = 0;

    if (tutti_cuda_devices(&ndev) != TUTTI_SUCCESS) {
        printf("SKIP: no usable CUDA device: %s\n", tutti_last_error());
        return 77;
    }
    if (!strcmp(mode, "probe")) {
        printf("CUDA devices: %d\n", ndev);
        return 0;
    }
    CU(cudaSetDevice(0));
    if (!strcmp(mode, "bench")) {
        bench();
        return failures ? 1 : 0;
    }
    if (!strcmp(mode, "kernels")) {
        kernels();
        return failures ? 1 : 0;
    }
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "gpu_check: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);
    if (!strcmp(mode, "matrix"))
        matrix();
    else if (!strcmp(mode, "order"))
        order(argc > 2 && !strcmp(argv[2], "async"));
    else if (!strcmp(mode, "mix"))
        mix();
    else if (!strcmp(mode, "p2p"))
        p2p();
    else if (!strcmp(mode, "kinds"))
        kinds();
    else if (!strcmp(mode, "capture"))
        capture();
    else if (!strcmp(mode, "fault"))
        fault();
    else if (!strcmp(mode, "soak"))
        soak();
    else if (!strcmp(mode, "copylat"))
        copy_latency();
    else {
        fprintf(
            stderr,
            "usage: gpu_check "
            "probe|kernels|matrix|order [async]|p2p|mix|kinds|capture|fault|soak|copylat|bench\n");
        return 2;
    }
    tutti_comm_destroy(comm);
    if (!failures)
        printf("gpu_check %s: rank %d ok\n", mode, rank);
    return failures ? 1 : 0;
}
