/*
 * nccl_values.c -- nccl_check's element values: every NCCL type read and written on the host
 * (small integers, which every type holds exactly), and each rank's inputs.
 */
#include "nccl_check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- element types: what NCCL's dtypes hold, converted exactly for small values ---- */

size_t dsize(ncclDataType_t d)
{
    switch (d) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
    }
}

static uint16_t to_half(double v) /* v a small integer (|v| < 2048) */
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int e = 0;
    double m = fabs(v);
    if (m == 0)
        return sign;
    m = frexp(m, &e); /* m in [0.5, 1) */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                      (uint16_t)((uint32_t)(m * 2048) & 0x3ff));
}

static double from_half(uint16_t h)
{
    int e = (h >> 10) & 31;
    double m = h & 0x3ff;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

void put(ncclDataType_t d, void *p, size_t i, double v)
{
    switch (d) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)(int64_t)v; break;
    case ncclFloat16: ((uint16_t *)p)[i] = to_half(v); break;
    case ncclBfloat16: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16); /* exact: small integers */
        break;
    }
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

double get(ncclDataType_t d, const void *p, size_t i)
{
    switch (d) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return from_half(((const uint16_t *)p)[i]);
    case ncclBfloat16: {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case ncclFloat32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

/* Rank r's input element i: 1..5 (1..2 for products, so that they stay exact everywhere). */
double val(int r, size_t i, int prod)
{
    return prod ? (double)(1 + (r + i) % 2) : (double)((r * 7 + i * 3) % 5 + 1);
}
