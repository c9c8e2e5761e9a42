/*
 * kernels.c -- lib/cuda/kernels.h on cudamock: each "kernel" is the host reduction of
 * lib/kern/reduce.c, queued on the stream (cudamock_launch) after the checks a launch makes (the
 * dtype and op) and the ones a GPU's memory system would (every pointer in device memory).
 */
#include "cudamock.h"

#include "../../../lib/cuda/kernels.h"
#include "../../../lib/kern/reduce.h"

#include <cuda_runtime_api.h>
#include <string.h>

struct reduce_args {
    tt_reduce_fn fn;
    void *dst, *dst2;
    const void *a, *b;
    size_t n;
    tutti_dtype_t dtype;
    int divisor;
};

/* With a divisor: the reduction, the division (tt_postop_avg, the same bits as the division
 * kernel's), then the copy to dst2. */
static void run_reduce(void *arg)
{
    struct reduce_args *r = arg;
    if (r->divisor <= 1) {
        r->fn(r->dst, r->dst2, r->a, r->b, r->n);
        return;
    }
    r->fn(r->dst, NULL, r->a, r->b, r->n);
    tt_postop_avg(r->dtype, r->dst, r->n, r->divisor);
    if (r->dst2)
        memcpy(r->dst2, r->dst, r->n * tutti_dtype_size(r->dtype));
}

int tt_cuda_reduce_copy(void *dst, void *dst2, const void *a, const void *b, size_t count,
                        tutti_dtype_t dtype, tutti_op_t op, int divisor, void *stream)
{
    tt_reduce_fn fn = tt_reduce_kernel(dtype, op);
    size_t bytes = count * tutti_dtype_size(dtype);
    struct reduce_args r = {fn, dst, dst2, a, b, count, dtype, divisor};

    if (!fn)
        return cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    if (!cudamock_device_range(dst, bytes, "reduction kernel, dst") ||
        (dst2 && !cudamock_device_range(dst2, bytes, "reduction kernel, dst2")) ||
        !cudamock_device_range(a, bytes, "reduction kernel, a") ||
        !cudamock_device_range(b, bytes, "reduction kernel, b"))
        return cudaErrorIllegalAddress;
    return cudamock_launch(stream, run_reduce, &r, sizeof(r));
}

int tt_cuda_reduce(void *dst, const void *a, const void *b, size_t count, tutti_dtype_t dtype,
                   tutti_op_t op, void *stream)
{
    return tt_cuda_reduce_copy(dst, NULL, a, b, count, dtype, op, 0, stream);
}

struct divide_args {
    tutti_dtype_t dtype;
    void *buf;
    size_t n;
    int ranks;
};

static void run_divide(void *arg)
{
    struct divide_args *d = arg;
    tt_postop_avg(d->dtype, d->buf, d->n, d->ranks);
}

int tt_cuda_divide(void *buf, size_t count, tutti_dtype_t dtype, int ranks, void *stream)
{
    struct divide_args d = {dtype, buf, count, ranks};

    if (!tt_reduce_kernel(dtype, TUTTI_SUM) || ranks <= 0)
        return cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    if (!cudamock_device_range(buf, count * tutti_dtype_size(dtype), "division kernel"))
        return cudaErrorIllegalAddress;
    return cudamock_launch(stream, run_divide, &d, sizeof(d));
}

struct premul_args {
    tutti_dtype_t dtype;
    void *dst;
    const void *src;
    size_t n;
    unsigned char value[8];
    const void *dev;
};

static void run_premul(void *arg)
{
    struct premul_args *p = arg;
    if (p->dev) /* read as the kernel runs, as a GPU's would */
        memcpy(p->value, p->dev, tutti_dtype_size(p->dtype));
    tt_premul(p->dtype, p->dst, p->src, p->n, p->value);
}

int tt_cuda_premul(void *dst, const void *src, size_t count, tutti_dtype_t dtype, const void *value,
                   const void *dev_scalar, void *stream)
{
    struct premul_args p = {dtype, dst, src, count, {0}, dev_scalar};
    size_t es = tutti_dtype_size(dtype);

    if (es == 0 || (!value && !dev_scalar))
        return cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    if (!cudamock_device_range(dst, count * es, "premul-sum kernel, dst") ||
        !cudamock_device_range(src, count * es, "premul-sum kernel, src") ||
        (dev_scalar && !cudamock_device_range(dev_scalar, es, "premul-sum kernel, scalar")))
        return cudaErrorIllegalAddress;
    if (!dev_scalar)
        memcpy(p.value, value, es);
    return cudamock_launch(stream, run_premul, &p, sizeof(p));
}
