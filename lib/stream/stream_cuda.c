/*
 * stream_cuda.c -- tutti streams that wrap a cudaStream_t (tutti_stream_wrap_cuda): no worker;
 * lib/cuda queues a call's work on the CUDA stream itself. Sync, query and destroy wait for
 * and poll the CUDA stream (lib/gpu) and report the first failure a host function recorded.
 */
#include "lib/stream/stream_int.h"
#include "lib/base/log.h"
#include "lib/gpu/gpu.h"

#include <stdlib.h>

static const struct tt_stream_kind cuda_kind;

int tt_stream_is_cuda(tutti_stream_t s)
{
    return s && s->kind == &cuda_kind;
}

void *tt_stream_cuda_handle(tutti_stream_t s)
{
    return s->cuda_stream;
}

void **tt_stream_cuda_state(tutti_stream_t s)
{
    return &s->cuda_state;
}

/* sync, query and destroy of a CUDA-wrapped stream. */
static tutti_result_t cuda_sync(tutti_stream_t s)
{
    tutti_result_t rc = tt_cuda_stream_sync(s->cuda_stream);
    if (rc == TUTTI_SUCCESS && tt_stream_failed(s)) {
        rc = s->error;
        tt_fail_quiet(NULL, rc, "%s", s->msg);
    }
    return rc;
}

static tutti_result_t cuda_query(tutti_stream_t s)
{
    if (tt_stream_failed(s)) {
        tt_fail_quiet(NULL, s->error, "%s", s->msg);
        return s->error;
    }
    return tt_cuda_stream_query(s->cuda_stream);
}

void tt_stream_cuda_release(tutti_stream_t s)
{
    tt_pinned_pool_free(s->cuda_state); /* cudaFreeHost waits for the device first */
    s->magic = 0;
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void tt_stream_cuda_adopt(tutti_stream_t s)
{
    s->comm_owned = 1;
}

static tutti_result_t cuda_destroy(tutti_stream_t s)
{
    if (s->comm_owned)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_stream_destroy: the stream belongs to its communicator "
                       "(tutti_comm_cuda_stream); tutti_comm_destroy frees it");
    tutti_result_t rc = cuda_sync(s);
    tt_stream_cuda_release(s);
    return rc;
}

static const struct tt_stream_kind cuda_kind = {cuda_sync, cuda_query, cuda_destroy};

tutti_result_t tutti_stream_wrap_cuda(tutti_stream_t *stream, void *cuda_stream)
{
    struct tutti_stream *s;

    tt_base_init();
    if (!stream)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_stream_wrap_cuda: stream is NULL");
    if (!tt_cuda_ready()) {
        int n;
        tutti_cuda_devices(&n);
        return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "tutti_stream_wrap_cuda: %s",
                       tt_thread_error());
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_stream_wrap_cuda: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    s->kind = &cuda_kind;
    s->cuda_stream = cuda_stream;
    s->magic = TT_STREAM_MAGIC;
    s->id = tt_stream_next_id();
    *stream = s;
    return TUTTI_SUCCESS;
}
