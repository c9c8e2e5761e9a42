/*
 * cuda_streams.c -- a communicator's own wrappers of CUDA streams (tutti_comm_cuda_stream): one per
 * CUDA stream the program names, made on first use and freed by tutti_comm_destroy, so that a
 * binding (NCCL's API takes a cudaStream_t on every call) needs no wrapper of its own.
 *
 * A wrapper is found by the stream's handle and its id (cudaStreamGetId): a destroyed stream's
 * handle may come back for a new stream, whose id differs, so the new stream never shares the
 * old one's staging. The wrappers of destroyed streams stay until the communicator goes;
 * freeing them touches no CUDA stream (tt_stream_cuda_release), since by then the program may
 * have destroyed any of them.
 */
#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/gpu/gpu.h"
#include "lib/stream/stream.h"

#include <stdlib.h>

struct tt_comm_stream {
    void *handle;
    unsigned long long id;
    tutti_stream_t s;
};

tutti_result_t tutti_comm_cuda_stream(tutti_comm_t comm, void *cuda_stream, tutti_stream_t *stream)
{
    unsigned long long id;
    tutti_result_t rc;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_cuda_stream"));
    if (!stream)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_cuda_stream: stream is NULL");
    rc = tt_cuda_stream_id(cuda_stream, &id);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_cuda_stream: %s", tt_thread_error());
    pthread_mutex_lock(&comm->streams_lock);
    for (int i = 0; i < comm->nstreams; i++)
        if (comm->streams[i].handle == cuda_stream && comm->streams[i].id == id) {
            *stream = comm->streams[i].s;
            pthread_mutex_unlock(&comm->streams_lock);
            return TUTTI_SUCCESS;
        }
    if (comm->nstreams == comm->streams_cap) {
        int cap = comm->streams_cap ? 2 * comm->streams_cap : 4;
        struct tt_comm_stream *t = realloc(comm->streams, (size_t)cap * sizeof(*t));
        if (!t) {
            pthread_mutex_unlock(&comm->streams_lock);
            return tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_cuda_stream: out of memory");
        }
        comm->streams = t;
        comm->streams_cap = cap;
    }
    rc = tutti_stream_wrap_cuda(stream, cuda_stream);
    if (rc == TUTTI_SUCCESS) {
        tt_stream_cuda_adopt(*stream);
        comm->streams[comm->nstreams++] = (struct tt_comm_stream){cuda_stream, id, *stream};
    }
    pthread_mutex_unlock(&comm->streams_lock);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_cuda_stream: %s", tt_thread_error());
    return TUTTI_SUCCESS;
}

void tt_comm_streams_free(struct tutti_comm *comm)
{
    for (int i = 0; i < comm->nstreams; i++)
        tt_stream_cuda_release(comm->streams[i].s);
    free(comm->streams);
    comm->streams = NULL;
    comm->nstreams = comm->streams_cap = 0;
}
