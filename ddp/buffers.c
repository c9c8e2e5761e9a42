/*
 * buffers.c -- buffers: model state that is not trained (BatchNorm's running mean and
 * variance), as PyTorch's DDP keeps them with broadcast_buffers. tutti_ddp_init gives every
 * rank rank 0's values; each synchronised tutti_ddp_finish gives every rank those of rank 0,
 * or with uneven inputs of the highest rank training in that step; tutti_ddp_join's end gives
 * every rank those of the last rank that trained. All buffers travel packed in one broadcast.
 * Uses include/tutti.h only.
 */
#include "ddp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tutti_result_t tutti_ddp_register_buffer(tutti_ddp_t d, const char *name, float *data, size_t count)
{
    struct ddp_buffer *b;

    if (!d)
        return ddp_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_ddp_register_buffer: ddp is NULL");
    if (d->initialized)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register_buffer: buffers are registered before tutti_ddp_init");
    if (!name || !name[0])
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_register_buffer: name is empty");
    if (count == 0 || !data)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_register_buffer: buffer '%s': data is NULL or count is 0", name);
    if (d->nbuffers == d->buffers_cap) {
        int cap = d->buffers_cap ? 2 * d->buffers_cap : 8;
        struct ddp_buffer *g = realloc(d->buffers, (size_t)cap * sizeof(*g));
        if (!g)
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_register_buffer: out of memory");
        d->buffers = g;
        d->buffers_cap = cap;
    }
    b = &d->buffers[d->nbuffers++];
    memset(b, 0, sizeof(*b));
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->data = data;
    b->count = count;
    b->off = d->buffer_total;
    d->buffer_total += count;
    return TUTTI_SUCCESS;
}

tutti_result_t ddp_broadcast_buffers(struct tutti_ddp *d, int root, const char *fn)
{
    tutti_result_t rc;

    if (!d->nbuffers)
        return TUTTI_SUCCESS;
    for (int i = 0; i < d->nbuffers && d->rank == root; i++)
        memcpy(d->buffer_flat + d->buffers[i].off, d->buffers[i].data,
               d->buffers[i].count * sizeof(float));
    rc = tutti_broadcast(d->buffer_flat, d->buffer_flat, d->buffer_total, TUTTI_FLOAT32, root,
                         d->comm, NULL);
    if (rc != TUTTI_SUCCESS)
        return ddp_fail(d, rc, "%s: broadcasting the buffers from rank %d: %s", fn, root,
                        tutti_comm_last_error(d->comm));
    for (int i = 0; i < d->nbuffers && d->rank != root; i++)
        memcpy(d->buffers[i].data, d->buffer_flat + d->buffers[i].off,
               d->buffers[i].count * sizeof(float));
    return TUTTI_SUCCESS;
}
