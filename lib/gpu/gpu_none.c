/*
 * gpu_none.c -- gpu.h in a build without CUDA: no memory is device memory, and whatever would
 * touch the GPU fails saying so. The only file of lib/gpu that such a build compiles.
 */
#include "lib/gpu/gpu.h"

#include "lib/base/error.h"

#include <stdio.h>

int tt_cuda_ready(void)
{
    return 0;
}

tutti_result_t tutti_cuda_devices(int *count)
{
    if (!count)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_cuda_devices: count is NULL");
    *count = 0;
    return tt_fail_quiet(NULL, TUTTI_ERR_UNSUPPORTED,
                         "CUDA unavailable: this libtutti was built without CUDA (-Dcuda)");
}

enum tt_mem tt_cuda_kind(const void *p)
{
    (void)p;
    return TT_MEM_HOST;
}

tutti_result_t tt_cuda_read(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "built without CUDA");
}

tutti_result_t tt_stage_pinned(void **buf, size_t *cap, size_t need)
{
    (void)buf, (void)cap, (void)need;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "built without CUDA");
}

tutti_result_t tt_pinned_pool_get(struct tt_pinned_pool *pool, size_t need)
{
    (void)pool, (void)need;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "built without CUDA");
}

void tt_pinned_pool_free(struct tt_pinned_pool *pool)
{
    (void)pool;
}

tutti_result_t tt_cuda_stream_sync(void *cuda_stream)
{
    (void)cuda_stream;
    return TUTTI_ERR_UNSUPPORTED;
}

tutti_result_t tt_cuda_stream_query(void *cuda_stream)
{
    (void)cuda_stream;
    return TUTTI_ERR_UNSUPPORTED;
}

tutti_result_t tt_cuda_stream_id(void *cuda_stream, unsigned long long *id)
{
    (void)cuda_stream;
    *id = 0;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "built without CUDA");
}

tutti_result_t tt_cuda_scratch(void **buf, size_t *cap, size_t bytes, void *stream)
{
    (void)buf, (void)cap, (void)bytes, (void)stream;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "device path: built without CUDA");
}

void tt_cuda_free_scratch(void **buf, size_t *cap)
{
    *buf = NULL;
    *cap = 0;
}

tutti_result_t tt_cuda_sym_alloc(int dev, size_t bytes, void **p)
{
    (void)dev, (void)bytes;
    *p = NULL;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "this libtutti was built without CUDA");
}

void tt_cuda_sym_free(void *p)
{
    (void)p;
}

tutti_result_t tt_cuda_ipc_open(int dev, const unsigned char *handle, void **p)
{
    (void)dev, (void)handle;
    *p = NULL;
    return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "this libtutti was built without CUDA");
}

void tt_cuda_ipc_close(void *p)
{
    (void)p;
}

tutti_result_t tt_cuda_ipc_of(const void *p, char **base, size_t *size, unsigned char *handle)
{
    (void)p, (void)base, (void)size, (void)handle;
    return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "not CUDA device memory");
}

int tt_cuda_dmabuf(const void *p, int *fd, uintptr_t *base, size_t *size, char *why,
                   size_t why_size)
{
    (void)p, (void)fd, (void)base, (void)size;
    snprintf(why, why_size, "this libtutti was built without CUDA");
    return -1;
}
