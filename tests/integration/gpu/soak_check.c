/*
 * soak_check -- CUDA device buffers in tutti under random sequences and failures (run under
 * tutti-run; gpu_common.h says what the gpu suite's programs share).
 *
 *   soak_check soak    a random sequence of collectives on device buffers, on the NULL
 *                      stream or a wrapped CUDA stream, synchronised now and then, so that
 *                      device-path, staged and NULL-stream calls interleave on shared buffers;
 *                      every output exact (GPU_CHECK_SEED, GPU_CHECK_SOAK_STEPS)
 *   soak_check fault   (cudamock only) a kernel launch fails on rank 0 inside a device-path
 *                      all-reduce on a wrapped CUDA stream: rank 0's tutti_stream_sync fails,
 *                      each peer's fails or has the right sum, within 10 s; no stream waits;
 *                      the next call fails on every rank within 10 s
 * Exit 0: all checks passed; 77: no usable CUDA device.
 */
#include "gpu_common.h"

static tutti_comm_t comm;

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

/* cudamock's (tests/support/cudamock): the next n kernel launches fail. NULL on CUDA's runtime. */
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    gpu_begin();
    if (strcmp(mode, "soak") != 0 && strcmp(mode, "fault") != 0) {
        fprintf(stderr, "usage: soak_check soak|fault\n");
        return 2;
    }
    comm = report_join("soak_check");
    if (!strcmp(mode, "soak"))
        soak();
    else
        fault();
    return report_end(comm, "soak_check", mode);
}
