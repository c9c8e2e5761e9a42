/* data.c -- IDX reader; see data.h. The format: big-endian magic (0x00000803 images,
 * 0x00000801 labels), big-endian dimension sizes, then unsigned bytes. */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static gzFile open_either(const char *dir, const char *name, char *path, size_t size)
{
    gzFile f;

    snprintf(path, size, "%s/%s", dir, name);
    f = gzopen(path, "rb");
    if (f)
        return f;
    snprintf(path, size, "%s/%s.gz", dir, name);
    return gzopen(path, "rb");
}

static int read_be32(gzFile f, uint32_t *v)
{
    unsigned char b[4];
    if (gzread(f, b, 4) != 4)
        return -1;
    *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return 0;
}

int dataset_load(struct dataset *d, const char *dir, const char *prefix, size_t limit, char *err,
                 size_t errlen)
{
    char name[128], ipath[1024], lpath[1024];
    gzFile fi, fl;
    uint32_t magic, n, rows, cols, nl;
    uint8_t *raw = NULL;
    int rc = -1;

    memset(d, 0, sizeof(*d));
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte", prefix);
    fi = open_either(dir, name, ipath, sizeof(ipath));
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", prefix);
    fl = open_either(dir, name, lpath, sizeof(lpath));
    if (!fi || !fl) {
        snprintf(err, errlen,
                 "cannot open %s (Fashion-MNIST: install Debian's dataset-fashion-mnist, or "
                 "pass --data DIR)",
                 !fi ? ipath : lpath);
        goto out;
    }
    if (read_be32(fi, &magic) || magic != 0x803 || read_be32(fi, &n) || read_be32(fi, &rows) ||
        read_be32(fi, &cols) || rows * cols == 0 || rows > 4096 || cols > 4096) {
        snprintf(err, errlen, "%s: not an IDX image file (magic 0x00000803)", ipath);
        goto out;
    }
    if (read_be32(fl, &magic) || magic != 0x801 || read_be32(fl, &nl) || nl != n) {
        snprintf(err, errlen, "%s: not an IDX label file for %u images", lpath, n);
        goto out;
    }
    if (limit && limit < n)
        n = (uint32_t)limit;
    d->n = n;
    d->dim = (size_t)rows * cols;
    raw = malloc(d->dim * n);
    d->x = malloc(d->dim * n * sizeof(float));
    d->y = malloc(n);
    if (!raw || !d->x || !d->y) {
        snprintf(err, errlen, "out of memory for %u images", n);
        goto out;
    }
    if (gzread(fi, raw, (unsigned)(d->dim * n)) != (int)(d->dim * n) ||
        gzread(fl, d->y, n) != (int)n) {
        snprintf(err, errlen, "%s: truncated", ipath);
        goto out;
    }
    for (size_t i = 0; i < d->dim * n; i++)
        d->x[i] = ((float)raw[i] / 255.0f - 0.2860f) / 0.3530f;
    for (size_t i = 0; i < n; i++)
        if (d->y[i] > 9) {
            snprintf(err, errlen, "%s: label %u out of range", lpath, d->y[i]);
            goto out;
        }
    rc = 0;
out:
    free(raw);
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    if (rc)
        dataset_free(d);
    return rc;
}

void dataset_free(struct dataset *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof(*d));
}
