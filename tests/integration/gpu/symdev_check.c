/*
 * symdev_check -- symmetric device memory: tutti_mem_alloc_device and windows over it (run
 * under tutti-run with TUTTI_CUDA_P2P_MIN=0, so that every call is on the device path;
 * gpu_common.h says what the gpu suite's programs share).
 *
 *   symdev_check matrix   every collective x dtype x op on buffers in device windows, counts
 *                         1 to big(2^18) + 3, in and out of place, on the NULL stream and on a
 *                         wrapped CUDA stream (alternating; the input is queued on that stream,
 *                         or CUDA's default one, just before the call), each output between guard
 * bytes in the same window: every element against values.h's reference (computed without tutti),
 * every guard byte unchanged. symdev_check rules    the last rank's buffer in plain cudaMalloc
 * memory: every rank takes the usual path with right results, or under TUTTI_CHECK_COLL=1 every
 *                         rank's call fails naming that rank, and the communicator stays
 *                         usable; a window of host memory on rank 0 and device memory on the
 *                         others: refused on every rank, naming rank 1; a window past the end
 *                         of a cudaMalloc allocation on the last rank: refused, naming it;
 *                         freeing memory a window covers, twice, and 0 bytes: refused.
 * Exit 0: all checks passed; 77: no usable CUDA device.
 */
#define REPORT_THREADS /* (the threads mode's ranks) */
#include "gpu_common.h"
#include "values.h"

#include <pthread.h>

static _Thread_local tutti_comm_t comm;

#define GUARD 256 /* bytes before and after each output */
#define GUARD_BYTE 0xa5

/* The window starts this far into its allocation, a different offset on every rank: each
 * rank must find the others' ranges where they lie. */
#define WIN_SKIP(r) (512 + 64 * (size_t)(r))

struct win {
    char *alloc; /* device memory */
    char *base;  /* the window: [base, base + bytes), WIN_SKIP(rank) into alloc */
    size_t bytes;
    void *handle;
    int own; /* the program's own cudaMalloc memory, not tutti_mem_alloc_device's */
};

static void win_make(struct win *w, size_t bytes, int own)
{
    size_t all = bytes + WIN_SKIP(rank);

    w->bytes = bytes;
    w->own = own;
    if (own)
        CU(cudaMalloc((void **)&w->alloc, all));
    if ((!own && tutti_mem_alloc_device(comm, all, (void **)&w->alloc) != TUTTI_SUCCESS) ||
        tutti_comm_window_register(comm, w->alloc + WIN_SKIP(rank), bytes, &w->handle) !=
            TUTTI_SUCCESS) {
        fail("a device window of %zu bytes: %s", bytes, tutti_comm_last_error(comm));
        exit(1);
    }
    w->base = w->alloc + WIN_SKIP(rank);
}

static void win_drop(struct win *w)
{
    if (tutti_comm_window_deregister(comm, w->handle) != TUTTI_SUCCESS ||
        (!w->own && tutti_mem_free(comm, w->alloc) != TUTTI_SUCCESS))
        fail("dropping a device window: %s", tutti_comm_last_error(comm));
    if (w->own)
        CU(cudaFree(w->alloc));
}

static tutti_result_t call(int c, void *s, void *r, size_t n, tutti_dtype_t t, tutti_op_t op,
                           int root, tutti_stream_t st)
{
    switch (c) {
    case AR: return tutti_all_reduce(s, r, n, t, op, comm, st);
    case AG: return tutti_all_gather(s, r, n, t, comm, st);
    case RS: return tutti_reduce_scatter(s, r, n, t, op, comm, st);
    case BC: return tutti_broadcast(s, r, n, t, root, comm, st);
    default: return tutti_reduce(s, r, n, t, op, root, comm, st);
    }
}

/* Is this rank's output (rb bytes, downloaded to `out`) right? */
static void expect(int c, const unsigned char *out, size_t n, tutti_dtype_t t, int op, int root,
                   const char *what)
{
    unsigned char table[VAL_MAX_PERIOD * 8];
    size_t es = tutti_dtype_size(t), bad = 0, wrong = 0;

    if (c == RD && rank != root)
        return;
    if (c == AG) {
        for (int r = 0; r < nranks && !wrong; r++) {
            val_expect_input(t, VAL_NO_OP, r, table);
            wrong = val_count_wrong(t, VAL_NO_OP, out + (size_t)r * n * es, n, 0, table, &bad);
            bad += (size_t)r * n;
        }
    } else if (c == BC) {
        val_expect_input(t, VAL_NO_OP, root, table);
        wrong = val_count_wrong(t, VAL_NO_OP, out, n, 0, table, &bad);
    } else {
        val_expect_reduce(t, op, nranks, table);
        wrong = val_count_wrong(t, op, out, n, c == RS ? (size_t)rank * n : 0, table, &bad);
    }
    if (wrong)
        fail("%s: %zu element(s) wrong, the first at %zu", what, wrong, bad);
}

/* One call on the window: output at w->base + GUARD, input after it (out of place) or inside
 * it where tutti.h's layout puts it (in place). */
static void one(struct win *w, unsigned char *host, int c, tutti_dtype_t t, int op, size_t n,
                int inplace, tutti_stream_t st, cudaStream_t cs)
{
    size_t es = tutti_dtype_size(t), in_n = c == RS ? n * (size_t)nranks : n;
    size_t out_n = c == AG ? n * (size_t)nranks : n, ob = out_n * es, ib = in_n * es;
    int root = (int)(n % (size_t)nranks);
    char *r = w->base + GUARD, *s = r + ob + GUARD, what[160];
    tutti_result_t rc;

    snprintf(what, sizeof(what), "%s of %zu %s, op %d, %s, %s", coll_name[c], n,
             tutti_dtype_name(t), op, inplace ? "in place" : "out of place",
             st ? "wrapped CUDA stream" : "NULL stream");
    if (2 * GUARD + ob + ib > w->bytes) {
        fail("%s: the window is too small", what);
        return;
    }
    if (inplace)
        s = c == AG ? r + (size_t)rank * n * es : r;
    if (c == RS && inplace)
        r += (size_t)rank * n * es;
    CU(cudaMemset(w->base, GUARD_BYTE, w->bytes));
    CU(cudaStreamSynchronize(0)); /* (before the input goes on a non-blocking stream) */
    val_fill(t, op, rank, host, in_n, 0);
    /* The input is queued on the call's stream (the wrapped one, or CUDA's default stream for
     * NULL) just before the call: the peers may read it only once it is there. */
    CU(cudaMemcpyAsync(s, host, ib, cudaMemcpyHostToDevice, st ? cs : 0));
    rc = call(c, s, r, n, t, (tutti_op_t)(op < 0 ? 0 : op), root, st);
    if (rc == TUTTI_SUCCESS && st)
        rc = tutti_stream_sync(st);
    if (rc != TUTTI_SUCCESS) {
        fail("%s: %s", what, tutti_comm_last_error(comm));
        return;
    }
    /* the output and the guards around it (in place: the layout's whole buffer) */
    char *lo = c == RS && inplace ? r - (size_t)rank * n * es : r;
    size_t span = c == RS && inplace ? ib : ob;
    CU(cudaMemcpy(host, lo - GUARD, span + 2 * GUARD, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < span + 2 * GUARD; i++) {
        if (i >= GUARD && i < GUARD + span)
            continue;
        if (host[i] != GUARD_BYTE) {
            fail("%s: guard byte %zd (from the output) was written", what,
                 i < GUARD ? (ssize_t)i - GUARD : (ssize_t)(i - GUARD - span));
            return;
        }
    }
    expect(c, host + GUARD + (r - lo), n, t, op, root, what);
}

/* full: every dtype and op; else float32 and bfloat16, sum and max (the threads mode). */
static void matrix(int own, int full)
{
    const size_t counts[] = {1, 7, 1029, big(((size_t)1 << 18) + 3)};
    size_t most = counts[3] * 8 * (size_t)nranks;
    unsigned char *host = malloc(2 * most + 2 * GUARD);
    struct win w;
    cudaStream_t cs;
    tutti_stream_t ws;
    int k = 0;

    win_make(&w, 2 * most + 2 * GUARD + 64, own);
    /* Ranks as threads: a non-blocking stream. CUDA's legacy default stream waits for every
     * blocking stream of the process, so one thread's cudaMemcpy would wait for another's
     * call, which waits for the first thread's part: a deadlock of the program's making (as
     * with any collective library; cudamock's stall report showed it). */
    CU(cudaStreamCreateWithFlags(&cs, full ? cudaStreamDefault : cudaStreamNonBlocking));
    if (!host || tutti_stream_wrap_cuda(&ws, cs) != TUTTI_SUCCESS) {
        fail("tutti_stream_wrap_cuda: %s", tutti_last_error());
        exit(1);
    }
    for (int c = 0; c < NCOLL; c++)
        for (int t = 0; t < TUTTI_NUM_DTYPES; t++)
            for (int op = 0; op < TUTTI_NUM_OPS; op++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        if ((c == AG || c == BC) && op > 0)
                            continue; /* no op */
                        if (!full && ((t != TUTTI_FLOAT32 && t != TUTTI_BFLOAT16) ||
                                      (op != TUTTI_SUM && op != TUTTI_MAX)))
                            continue;
                        one(&w, host, c, (tutti_dtype_t)t, c == AG || c == BC ? VAL_NO_OP : op,
                            counts[ci], inplace, k % 2 ? ws : NULL, cs);
                        k++;
                    }
    tutti_stream_destroy(ws);
    CU(cudaStreamDestroy(cs));
    win_drop(&w);
    free(host);
}

static void rules(void)
{
    const size_t n = 70001;
    int checking = getenv("TUTTI_CHECK_COLL") && strcmp(getenv("TUTTI_CHECK_COLL"), "1") == 0;
    unsigned char *host = malloc(2 * n * 4), table[VAL_MAX_PERIOD * 8];
    struct win w;
    void *plain, *h, *hw;
    char last[32];
    size_t bad;
    tutti_result_t rc;

    win_make(&w, 2 * n * 4, 0);
    CU(cudaMalloc(&plain, 2 * n * 4));
    val_expect_reduce(TUTTI_FLOAT32, TUTTI_SUM, nranks, table);
    /* The last rank's buffers outside any window. */
    char *buf = rank == nranks - 1 ? plain : w.base;
    val_fill(TUTTI_FLOAT32, TUTTI_SUM, rank, host, n, 0);
    CU(cudaMemcpy(buf, host, n * 4, cudaMemcpyHostToDevice));
    rc = tutti_all_reduce(buf, buf + n * 4, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    snprintf(last, sizeof(last), "rank %d's", nranks - 1);
    if (checking && nranks > 1) {
        if (rc != TUTTI_ERR_INVALID_ARG || !strstr(tutti_comm_last_error(comm), last))
            fail("a rank outside a window under TUTTI_CHECK_COLL: returned %s, error: %s",
                 tutti_strerror(rc), tutti_comm_last_error(comm));
    } else if (rc != TUTTI_SUCCESS) {
        fail("a rank outside a window: %s", tutti_comm_last_error(comm));
    } else {
        CU(cudaMemcpy(host, buf + n * 4, n * 4, cudaMemcpyDeviceToHost));
        if (val_count_wrong(TUTTI_FLOAT32, TUTTI_SUM, host, n, 0, table, &bad))
            fail("a rank outside a window: element %zu wrong", bad);
    }
    /* Usable after: every rank in its window. */
    val_fill(TUTTI_FLOAT32, TUTTI_SUM, rank, host, n, 0);
    CU(cudaMemcpy(w.base, host, n * 4, cudaMemcpyHostToDevice));
    if (tutti_all_reduce(w.base, w.base + n * 4, n, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) !=
        TUTTI_SUCCESS)
        fail("every rank in a window, after: %s", tutti_comm_last_error(comm));
    CU(cudaMemcpy(host, w.base + n * 4, n * 4, cudaMemcpyDeviceToHost));
    if (val_count_wrong(TUTTI_FLOAT32, TUTTI_SUM, host, n, 0, table, &bad))
        fail("every rank in a window, after: element %zu wrong", bad);
    /* A window of two kinds: host memory on rank 0. */
    if (nranks > 1) {
        rc = rank == 0 ? tutti_mem_alloc(comm, 4096, &h) : tutti_mem_alloc_device(comm, 4096, &h);
        if (rc != TUTTI_SUCCESS)
            fail("allocating 4096 bytes: %s", tutti_comm_last_error(comm));
        rc = tutti_comm_window_register(comm, h, 4096, &hw);
        if (rc != TUTTI_ERR_INVALID_ARG ||
            !strstr(tutti_comm_last_error(comm), "rank 1's range is device memory"))
            fail("a window of host and device memory: returned %s, error: %s", tutti_strerror(rc),
                 tutti_comm_last_error(comm));
        if (tutti_mem_free(comm, h) != TUTTI_SUCCESS)
            fail("freeing 4096 bytes: %s", tutti_comm_last_error(comm));
    }
    /* A window past the end of the program's own cudaMalloc allocation (on the last rank). */
    if (nranks > 1) {
        char who[48];
        snprintf(who, sizeof(who), "rank %d cannot register", nranks - 1);
        rc = tutti_comm_window_register(comm, plain,
                                        rank == nranks - 1 ? 2 * n * 4 + (4 << 20) : 64, &hw);
        if (rc != TUTTI_ERR_INVALID_ARG || !strstr(tutti_comm_last_error(comm), who) ||
            !strstr(tutti_comm_last_error(comm), "runs past the end"))
            fail("a window past the end of a cudaMalloc allocation: returned %s, error: %s",
                 tutti_strerror(rc), tutti_comm_last_error(comm));
    }
    /* Refusals. */
    if (tutti_mem_free(comm, w.alloc) != TUTTI_ERR_INVALID_ARG ||
        !strstr(tutti_comm_last_error(comm), "still cover"))
        fail("freeing memory under a window: %s", tutti_comm_last_error(comm));
    if (tutti_mem_alloc_device(comm, 0, &h) != TUTTI_ERR_INVALID_ARG)
        fail("tutti_mem_alloc_device of 0 bytes was not refused");
    win_drop(&w);
    if (tutti_mem_free(comm, w.alloc) != TUTTI_ERR_INVALID_ARG)
        fail("freeing device memory twice was not refused");
    CU(cudaFree(plain));
    free(host);
}

/* Ranks as threads of one process (as nccl-tests' -t): each opens nothing by IPC (CUDA
 * refuses a process its own handles) but addresses the others' device memory directly. */
static tutti_id_t thread_id;
static int nthreads;

struct thread_rank {
    int rank, failures;
};

static void *thread_rank(void *arg)
{
    struct thread_rank *t = arg;

    rank = t->rank;
    nranks = nthreads;
    CU(cudaSetDevice(0));
    if (tutti_comm_init(&comm, nthreads, &thread_id, rank, NULL) != TUTTI_SUCCESS) {
        fail("tutti_comm_init: %s", tutti_last_error());
    } else {
        matrix(0, 0);
        tutti_comm_destroy(comm);
    }
    t->failures = failures;
    return NULL;
}

static int threads(int n)
{
    pthread_t th[8];
    struct thread_rank t[8];
    int bad = 0;

    nthreads = n < 1 ? 1 : n > 8 ? 8 : n;
    if (tutti_get_id(&thread_id) != TUTTI_SUCCESS) {
        fprintf(stderr, "tutti_get_id: %s\n", tutti_last_error());
        return 1;
    }
    for (int r = 0; r < nthreads; r++) {
        t[r] = (struct thread_rank){r, 0};
        pthread_create(&th[r], NULL, thread_rank, &t[r]);
    }
    for (int r = 0; r < nthreads; r++) {
        pthread_join(th[r], NULL);
        bad += t[r].failures;
    }
    if (!bad)
        printf("symdev_check threads: %d ranks as threads ok\n", nthreads);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    gpu_begin();
    if (!strcmp(mode, "threads"))
        return threads(argc > 2 ? atoi(argv[2]) : 2);
    if (strcmp(mode, "matrix") != 0 && strcmp(mode, "matrix-own") != 0 &&
        strcmp(mode, "rules") != 0) {
        fprintf(stderr, "usage: symdev_check matrix|matrix-own|rules|threads N\n");
        return 2;
    }
    comm = report_join("symdev_check");
    if (!strcmp(mode, "rules"))
        rules();
    else
        matrix(!strcmp(mode, "matrix-own"), 1);
    return report_end(comm, "symdev_check", mode);
}
