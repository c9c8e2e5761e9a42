/* values.c -- see values.h. */
#include "values.h"

#include <math.h>
#include <string.h>

static int is_signed(tutti_dtype_t t)
{
    return t == TUTTI_INT8 || t == TUTTI_INT32 || t == TUTTI_INT64 || t >= TUTTI_FLOAT16;
}

int val_period(int op)
{
    return op == TUTTI_SUM || op == TUTTI_AVG || op == VAL_PREMUL ? 9 : op == TUTTI_PROD ? 3 : 37;
}

static int is_fp8(tutti_dtype_t t)
{
    return t == TUTTI_FLOAT8_E4M3 || t == TUTTI_FLOAT8_E5M2;
}

/* FP8 has 4 (E4M3) or 3 (E5M2) significant bits: integers are exact only up to 16 or 8. So
 * sums take -1, 0 or 1, products 2, -1 or 1, and other data -8..8; ranks from 8 on add 0 and
 * multiply by 1, which keeps every partial sum and product within 8. */
static int64_t fp8_gen(int op, int r, size_t i)
{
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return r >= 8 ? 0 : (int64_t)((i * 7 + (size_t)r * 3) % 9 % 3) - 1;
    case TUTTI_PROD: {
        int k = (int)((i + (size_t)r) % 3);
        return r >= 8 || k == 2 ? 1 : k == 0 ? 2 : -1;
    }
    default: return (int64_t)((i * 13 + (size_t)r * 29) % 37 % 17) - 8;
    }
}

int64_t val_gen(tutti_dtype_t t, int op, int r, size_t i)
{
    int s = is_signed(t);

    if (op == VAL_PREMUL)
        op = TUTTI_SUM;
    if (is_fp8(t))
        return fp8_gen(op, r, i);
    switch (op) {
    case TUTTI_SUM:
    case TUTTI_AVG: return (int64_t)((i * 7 + (size_t)r * 3) % 9) - (s ? 4 : 0);
    case TUTTI_PROD: {
        int k = (int)((i + (size_t)r) % 3);
        return k == 0 ? 2 : k == 1 ? (s ? -1 : 1) : 1;
    }
    default: return (int64_t)((i * 13 + (size_t)r * 29) % 37) - (s ? 18 : 0);
    }
}

static uint16_t bf16_of(double d)
{
    int e;
    float f;
    uint32_t u;

    if (d != 0) {
        frexp(d, &e);
        d = ldexp(nearbyint(ldexp(d, 8 - e)), e - 8); /* 8 significant bits, ties to even */
    }
    f = (float)d;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* The FP8 value of code c (0..0x7f, finite), from the format's definition. */
static double fp8_value(int c, int mbits)
{
    int bias = mbits == 3 ? 7 : 15, e = c >> mbits, m = c & ((1 << mbits) - 1);
    return e ? ldexp(1.0 + ldexp(m, -mbits), e - bias) : ldexp(m, 1 - bias - mbits);
}

/* d rounded to mbits fraction bits (nearest, ties to even), saturated at the largest
 * finite value, found among the codes by value. */
static uint8_t fp8_of(double d, int mbits)
{
    int bias = mbits == 3 ? 7 : 15, top = mbits == 3 ? 0x7e : 0x7b, e = 0, c;
    uint8_t sign = signbit(d) ? 0x80 : 0;

    d = fabs(d);
    if (d != 0)
        frexp(d, &e); /* d = f * 2^e, 0.5 <= f < 1: its leading bit is 2^(e - 1) */
    e = e - 1 < 1 - bias ? 1 - bias : e - 1;
    d = ldexp(nearbyint(ldexp(d, mbits - e)), e - mbits);
    for (c = 0; c < top && fp8_value(c, mbits) < d; c++)
        ;
    return (uint8_t)(sign | c);
}

void val_encode(tutti_dtype_t t, int64_t iv, double fv, void *p)
{
    switch (t) {
    case TUTTI_INT8: {
        int8_t v = (int8_t)(uint8_t)iv;
        memcpy(p, &v, 1);
        break;
    }
    case TUTTI_UINT8: {
        uint8_t v = (uint8_t)iv;
        memcpy(p, &v, 1);
        break;
    }
    case TUTTI_INT32: {
        int32_t v = (int32_t)(uint32_t)iv;
        memcpy(p, &v, 4);
        break;
    }
    case TUTTI_UINT32: {
        uint32_t v = (uint32_t)iv;
        memcpy(p, &v, 4);
        break;
    }
    case TUTTI_INT64: memcpy(p, &iv, 8); break;
    case TUTTI_UINT64: {
        uint64_t v = (uint64_t)iv;
        memcpy(p, &v, 8);
        break;
    }
    case TUTTI_FLOAT16: {
        _Float16 v = (_Float16)fv;
        memcpy(p, &v, 2);
        break;
    }
    case TUTTI_BFLOAT16: {
        uint16_t v = bf16_of(fv);
        memcpy(p, &v, 2);
        break;
    }
    case TUTTI_FLOAT32: {
        float v = (float)fv;
        memcpy(p, &v, 4);
        break;
    }
    case TUTTI_FLOAT8_E4M3:
    case TUTTI_FLOAT8_E5M2: {
        uint8_t v = fp8_of(fv, t == TUTTI_FLOAT8_E4M3 ? 3 : 2);
        memcpy(p, &v, 1);
        break;
    }
    default: memcpy(p, &fv, 8); break;
    }
}

/* Whole periods of table (per elements of es bytes) from phase ph on, as many as fit in
 * VAL_RUN bytes: element k of the run is table[(ph + k) % per]. Returns its length in elements
 * (a multiple of per, so runs laid end to end continue the sequence). */
#define VAL_RUN 4096
static size_t val_run(const unsigned char *table, size_t per, size_t es, size_t ph,
                      unsigned char *run)
{
    size_t len = VAL_RUN / (per * es) * per;

    for (size_t k = 0; k < len; k++)
        memcpy(run + k * es, table + ((ph + k) % per) * es, es);
    return len;
}

void val_fill(tutti_dtype_t t, int op, int r, void *p, size_t n, size_t first)
{
    size_t es = tutti_dtype_size(t), per = (size_t)val_period(op);
    unsigned char pat[VAL_MAX_PERIOD * 8], run[VAL_RUN];

    for (size_t k = 0; k < per; k++) {
        int64_t v = val_gen(t, op, r, k);
        val_encode(t, v, (double)v, pat + k * es);
    }
    size_t len = val_run(pat, per, es, first % per, run);
    for (size_t k = 0; k < n; k += len)
        memcpy((char *)p + k * es, run, (n - k < len ? n - k : len) * es);
}

void val_expect_reduce(tutti_dtype_t t, int op, int nranks, unsigned char *table)
{
    size_t es = tutti_dtype_size(t);

    for (int k = 0; k < val_period(op); k++) {
        int64_t acc = val_gen(t, op, 0, (size_t)k) * (op == VAL_PREMUL ? 2 : 1);
        for (int r = 1; r < nranks; r++) {
            int64_t v = val_gen(t, op, r, (size_t)k);
            switch (op) {
            case VAL_PREMUL: /* every scalar but rank 0's is 1 */
            case TUTTI_SUM:
            case TUTTI_AVG: acc += v; break;
            case TUTTI_PROD: acc *= v; break;
            case TUTTI_MIN: acc = v < acc ? v : acc; break;
            default: acc = v > acc ? v : acc; break;
            }
        }
        if (op == TUTTI_AVG && t >= TUTTI_FLOAT16)
            val_encode(t, 0, (double)acc / nranks, table + (size_t)k * es);
        else if (op == TUTTI_AVG)
            val_encode(t, acc / nranks, 0, table + (size_t)k * es); /* truncates toward zero */
        else
            val_encode(t, acc, (double)acc, table + (size_t)k * es);
    }
}

int val_premul_scalar(tutti_dtype_t t, int r, void *p)
{
    int k = r == 0 ? 2 : 1;
    val_encode(t, k, k, p);
    return k;
}

void val_expect_input(tutti_dtype_t t, int op, int r, unsigned char *table)
{
    val_fill(t, op, r, table, (size_t)val_period(op), 0);
}

size_t val_count_wrong(tutti_dtype_t t, int op, const void *out, size_t n, size_t first,
                       const unsigned char *table, size_t *first_bad)
{
    size_t es = tutti_dtype_size(t), per = (size_t)val_period(op), wrong = 0;
    const unsigned char *o = out;
    unsigned char run[VAL_RUN];
    size_t len = val_run(table, per, es, first % per, run);

    /* A run's worth at a time; element by element only where a run differs. */
    for (size_t b = 0; b < n; b += len) {
        size_t m = n - b < len ? n - b : len;
        if (memcmp(o + b * es, run, m * es) == 0)
            continue;
        for (size_t k = 0; k < m; k++) {
            if (memcmp(o + (b + k) * es, run + k * es, es) != 0) {
                if (wrong == 0 && first_bad)
                    *first_bad = b + k;
                wrong++;
            }
        }
    }
    return wrong;
}
