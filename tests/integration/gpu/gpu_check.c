/*
 * gpu_check -- CUDA device buffers in tutti's collectives and point-to-point calls (run under
 * tutti-run, except probe).
 *
 *   gpu_check probe    exit 0 and print the device count, or print why not and exit 77
 *   gpu_check matrix   every collective x dtype x op (and a premul-sum operator, its scalar
 *                      in device memory for half the calls) on device buffers, in and out of place,
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
 *   gpu_check group    collectives in a group: two all-reduces and a broadcast on device
 *                      buffers beside three small all-reduces on host buffers (which
 *                      tutti_group_end packs into one), on the NULL stream; the device ones
 *                      again on a wrapped CUDA stream; against values computed on the host
 *   gpu_check mix      a device sendbuf with a host recvbuf is refused naming both kinds
 *   gpu_check capture  an all-reduce and a send/recv group on a wrapped CUDA stream being
 *                      captured into a CUDA graph are refused (TUTTI_ERR_UNSUPPORTED); after
 *                      the capture an all-reduce on that stream is right
 *   gpu_check kinds    (TUTTI_CHECK_COLL=1) rank 0 passes device buffers, the others host
 *                      buffers: on the device path that would wait on different connections;
 *                      every rank must fail the call naming the disagreement, and the
 *                      communicator must stay usable; then rank 0 sends from device memory
 *                      to rank 1's host memory: both must fail naming the device path
 * Every rank uses device 0 (several ranks may share one GPU). Exit 0: all checks passed.
 * GPU_CHECK_MAX_COUNT=N caps the largest counts above at N elements (the cudamock run: its
 * "device" copies are the host's). Linked with tests/support/cudamock instead of CUDA's runtime,
 * the same checks run without a GPU (gpu_check_mock, test `gpu-mock`). The random sequences and the
 * failing kernel are soak_check's, the kernels and copies alone kernel_check's.
 */
#include "gpu_common.h"
#include "values.h"

static tutti_comm_t comm;

#define MAX_RANKS 64 /* p2p's all-to-allv count arrays */

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

/* Inputs: bytes that are valid values of every dtype (small, positive). The device and host
 * paths may reduce in different orders (their plans differ), so every partial sum must be
 * exact: FP8 gets 0 or 1 (sums up to 8 are exact in both formats, a premul-sum's scalar 2
 * included), where the small codes of the other dtypes would round differently by order
 * (seen on an H200: e5m2 sums and e4m3 premul sums at count 1 on 4 ranks). */
static void fill(unsigned char *p, size_t bytes, tutti_dtype_t t, int seed)
{
    size_t es = tutti_dtype_size(t);
    unsigned char one = t == TUTTI_FLOAT8_E4M3 ? 0x38 : 0x3c; /* 1.0 */

    memset(p, 0, bytes);
    for (size_t i = 0; i < bytes / es; i++) {
        unsigned v = 1 + (unsigned)((i * 7 + (size_t)seed * 13) % 5);
        if (t == TUTTI_FLOAT8_E4M3 || t == TUTTI_FLOAT8_E5M2)
            p[i] = v > 2 ? one : 0;
        else
            p[i * es + (es > 1 ? es - 2 : 0)] = (unsigned char)v;
    }
}

#define PREMUL TUTTI_NUM_OPS /* the matrix's op index of a premul-sum operator */

static const char *op_name(int op)
{
    return op == PREMUL ? "premul_sum" : tutti_op_name((tutti_op_t)op);
}

/* For the premul index: this rank's scalar (values.h) in device memory at dk; *dop for the
 * device call (its scalar read on the device when by_address, else by value), *hop for the
 * host reference (by value). */
static void premul_ops(tutti_dtype_t t, void *dk, int by_address, tutti_op_t *dop, tutti_op_t *hop)
{
    unsigned char k[8] = {0};

    val_premul_scalar(t, rank, k);
    CU(cudaMemcpy(dk, k, sizeof(k), cudaMemcpyHostToDevice));
    if (tutti_op_create_premul_sum(dop, by_address ? dk : (void *)k, t,
                                   by_address ? TUTTI_SCALAR_DEVICE : TUTTI_SCALAR_HOST_IMMEDIATE,
                                   comm) != TUTTI_SUCCESS ||
        tutti_op_create_premul_sum(hop, k, t, TUTTI_SCALAR_HOST_IMMEDIATE, comm) != TUTTI_SUCCESS) {
        fail("tutti_op_create_premul_sum: %s", tutti_last_error());
        exit(1);
    }
}

static void matrix(void)
{
    const size_t counts[] = {0, 1, 4099, big(1000003)};
    /* One allocation of the largest size, reused: a cudaFree per case waits for the whole
     * device, and with several processes on one GPU that wait is most of the run. */
    size_t most = (counts[3] > counts[2] ? counts[3] : counts[2]) * 8 * (size_t)nranks + 1;
    unsigned char *hs = malloc(most), *hr = malloc(most), *got = malloc(most);
    void *ds, *dr, *dk;
    tutti_stream_t ws;
    cudaStream_t cs;
    int k = 0;

    CU(cudaMalloc(&ds, most));
    CU(cudaMalloc(&dr, most));
    CU(cudaMalloc(&dk, 8));
    CU(cudaStreamCreate(&cs));
    if (tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("tutti_stream_wrap_cuda: %s", tutti_last_error());
        return;
    }
    for (int c = 0; c < NCOLL; c++)
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
            for (int op = 0; op <= PREMUL; op++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        size_t es = tutti_dtype_size((tutti_dtype_t)t), n = counts[ci];
                        size_t sb = (c == RS ? n * nranks : n) * es;
                        size_t rb = (c == AG ? n * nranks : n) * es, big = sb > rb ? sb : rb;
                        void *s, *r, *hsp, *hrp;
                        tutti_stream_t st = (k % 2) ? ws : NULL;
                        tutti_op_t dop = (tutti_op_t)op, hop = (tutti_op_t)op;
                        tutti_result_t rc;

                        if ((c == AG || c == BC) && op > 0)
                            continue; /* no op */
                        if (!counts[ci] && inplace)
                            continue;
                        if (op == PREMUL && c != AG && c != BC)
                            premul_ops((tutti_dtype_t)t, dk, k / 2 % 2, &dop, &hop);
                        k++;
                        memset(hs, 0, big + 1);
                        fill(hs, sb, (tutti_dtype_t)t, rank);
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
                        rc = call(c, s, r, n, (tutti_dtype_t)t, dop, st);
                        /* The call holds what it needs of its op once it has returned. */
                        if (dop != (tutti_op_t)op && tutti_op_destroy(dop, comm) != TUTTI_SUCCESS)
                            fail("tutti_op_destroy: %s", tutti_last_error());
                        if (rc == TUTTI_SUCCESS && st)
                            rc = tutti_stream_sync(st);
                        if (rc != TUTTI_SUCCESS) {
                            fail("%s %s %s count %zu%s: %s", coll_name[c],
                                 tutti_dtype_name((tutti_dtype_t)t), op_name(op), n,
                                 inplace ? " in place" : "", tutti_last_error());
                            exit(1);
                        }
                        CU(cudaMemcpy(got, dr, big, cudaMemcpyDeviceToHost));
                        /* The reference: the same call on host memory. */
                        if (call(c, hsp, hrp, n, (tutti_dtype_t)t, hop, NULL) != TUTTI_SUCCESS) {
                            fail("host reference: %s", tutti_last_error());
                            exit(1);
                        }
                        if (hop != (tutti_op_t)op && tutti_op_destroy(hop, comm) != TUTTI_SUCCESS)
                            fail("tutti_op_destroy: %s", tutti_last_error());
                        /* Compare the output block only (in-place scratch may differ). */
                        if ((c != RD || rank == nranks - 1) &&
                            memcmp(got + ((char *)r - (char *)dr), hrp, rb) != 0)
                            fail("%s %s %s count %zu%s on %s: device result differs from host",
                                 coll_name[c], tutti_dtype_name((tutti_dtype_t)t), op_name(op), n,
                                 inplace ? " in place" : "",
                                 st ? "a CUDA stream" : "the NULL stream");
                    }
    cudaFree(ds);
    cudaFree(dr);
    cudaFree(dk);
    free(hs);
    free(hr);
    free(got);
    tutti_stream_destroy(ws);
    cudaStreamDestroy(cs);
    printf("rank %d: %d device calls checked against the host path\n", rank, k);
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

/* Rank r's element i of grouped call k, and its sum over the ranks. */
static float gval(int k, int r, size_t i)
{
    return (float)((k * 7 + r * 3 + (int)(i % 13)) % 11);
}

static float gsum(int k, size_t i)
{
    float s = 0;
    for (int r = 0; r < nranks; r++)
        s += gval(k, r, i);
    return s;
}

static void group(void)
{
    enum { DN = 4099, HN = 5 };
    cudaStream_t cs;
    tutti_stream_t ws;
    float *h = malloc(DN * sizeof(float)), hbuf[3][HN], *d[3];

    CU(cudaStreamCreate(&cs));
    if (!h || tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("group: tutti_stream_wrap_cuda: %s", tutti_last_error());
        exit(1);
    }
    for (int k = 0; k < 3; k++)
        CU(cudaMalloc((void **)&d[k], DN * sizeof(float)));
    for (int pass = 0; pass < 2; pass++) { /* 0: the NULL stream; 1: the wrapped CUDA stream */
        tutti_stream_t st = pass ? ws : NULL;
        int root = nranks - 1;
        tutti_result_t rc = TUTTI_SUCCESS;
        for (int k = 0; k < 3; k++) {
            for (size_t i = 0; i < DN; i++)
                h[i] = k == 2 && rank != root ? -1.0f : gval(k, rank, i);
            CU(cudaMemcpy(d[k], h, DN * sizeof(float), cudaMemcpyHostToDevice));
            for (size_t i = 0; i < HN; i++)
                hbuf[k][i] = gval(k + 3, rank, i);
        }
        tutti_group_start();
        rc |= tutti_all_reduce(d[0], d[0], DN, TUTTI_FLOAT32, TUTTI_SUM, comm, st);
        for (int k = 0; k < 3 && !pass; k++)
            rc |= tutti_all_reduce(hbuf[k], hbuf[k], HN, TUTTI_FLOAT32, TUTTI_SUM, comm, st);
        rc |= tutti_all_reduce(d[1], d[1], DN, TUTTI_FLOAT32, TUTTI_SUM, comm, st);
        rc |= tutti_broadcast(d[2], d[2], DN, TUTTI_FLOAT32, root, comm, st);
        rc |= tutti_group_end();
        if (rc == TUTTI_SUCCESS && st)
            rc = tutti_stream_sync(st);
        if (rc != TUTTI_SUCCESS) {
            fail("group (pass %d): %s", pass, tutti_comm_last_error(comm));
            continue;
        }
        for (int k = 0; k < 3; k++) {
            CU(cudaMemcpy(h, d[k], DN * sizeof(float), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < DN; i++)
                if (h[i] != (k == 2 ? gval(k, root, i) : gsum(k, i))) {
                    fail("group (pass %d): device call %d element %zu is %g", pass, k, i, h[i]);
                    break;
                }
            for (size_t i = 0; i < HN && !pass; i++)
                if (hbuf[k][i] != gsum(k + 3, i)) {
                    fail("group: host all-reduce %d element %zu is %g", k, i, hbuf[k][i]);
                    break;
                }
        }
    }
    for (int k = 0; k < 3; k++)
        cudaFree(d[k]);
    free(h);
    tutti_stream_destroy(ws);
    cudaStreamDestroy(cs);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    gpu_begin();
    if (!strcmp(mode, "probe")) {
        int ndev = 0;
        tutti_cuda_devices(&ndev);
        printf("CUDA devices: %d\n", ndev);
        return 0;
    }
    comm = report_join("gpu_check");
    if (!strcmp(mode, "matrix"))
        matrix();
    else if (!strcmp(mode, "order"))
        order(argc > 2 && !strcmp(argv[2], "async"));
    else if (!strcmp(mode, "mix"))
        mix();
    else if (!strcmp(mode, "group"))
        group();
    else if (!strcmp(mode, "p2p"))
        p2p();
    else if (!strcmp(mode, "kinds"))
        kinds();
    else if (!strcmp(mode, "capture"))
        capture();
    else {
        fprintf(stderr,
                "usage: gpu_check probe|matrix|order [async]|p2p|group|mix|kinds|capture\n");
        return 2;
    }
    return report_end(comm, "gpu_check", mode);
}
