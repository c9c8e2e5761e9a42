/*
 * checkpoint.c -- tutti_ddp_save / tutti_ddp_load.
 *
 * File layout (little-endian, as the machine writes it):
 *   header            struct ckpt_header
 *   descriptors       nparams + nbuffers x struct ddp_desc (names and shapes, checked on
 *                     load; the buffers' after the parameters', with one dimension)
 *   bucket order      nparams x int32 (the rebuilt order, when header.rebuilt)
 *   parameters        total x float32, flat space
 *   buffers           buffer_total x float32, in registration order
 *   optimizer         slots x total x float32 (gathered from the shards)
 *   hook, per rank    nranks x hook_rank_bytes (error-feedback residuals)
 *   hook, shared      hook_shared_bytes (PowerSGD's warm-start factors)
 *   extra             extra_len bytes of the application's
 *   checksum          uint64, FNV-1a of everything before it
 * Rank 0 writes PATH.tmp, fsyncs it and renames it over PATH; loading reads the whole file on
 * rank 0, checks it, and broadcasts it, so ranks need no shared file system. A PATH.tmp that a
 * save killed midway left behind is removed by the next load of PATH (and replaced by the
 * next save).
 */
#include "ddp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPT_MAGIC "TUTTIDDP"
#define CKPT_VERSION 2 /* 2: buffers */

struct ckpt_header {
    char magic[8];
    uint32_t version, nranks;
    uint64_t nparams, total;
    uint32_t optim, zero, hook, slots;
    int64_t steps, optim_t;
    double lr;
    uint64_t hook_rank_bytes, hook_shared_bytes, extra_len;
    uint32_t rebuilt, pad;
    uint64_t nbuffers, buffer_total;
};

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Bytes of everything after the header up to the checksum. */
static size_t body_size(const struct ckpt_header *h)
{
    return (h->nparams + h->nbuffers) * sizeof(struct ddp_desc) + h->nparams * sizeof(int32_t) +
           h->total * sizeof(float) * (1 + h->slots) + h->buffer_total * sizeof(float) +
           h->nranks * h->hook_rank_bytes + h->hook_shared_bytes + h->extra_len;
}

static void fill_header(const struct tutti_ddp *d, struct ckpt_header *h, size_t extra_len)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, CKPT_MAGIC, 8);
    h->version = CKPT_VERSION;
    h->nranks = (uint32_t)d->nranks;
    h->nparams = (uint64_t)d->nparams;
    h->total = d->total;
    h->optim = (uint32_t)d->cfg.optim;
    h->zero = (uint32_t)d->cfg.zero;
    h->hook = (uint32_t)d->cfg.hook;
    h->slots = (uint32_t)ddp_optim_slots(d);
    h->steps = d->steps;
    h->optim_t = *ddp_optim_t(d);
    h->lr = d->cfg.lr;
    h->hook_rank_bytes = ddp_hook_state_size(d);
    h->hook_shared_bytes = ddp_hook_shared_size(d);
    h->extra_len = extra_len;
    h->rebuilt = (uint32_t)d->rebuilt;
    h->nbuffers = (uint64_t)d->nbuffers;
    h->buffer_total = d->buffer_total;
}

/* Every rank ends with the same result: rank 0's, with its message. */
static tutti_result_t agree(struct tutti_ddp *d, tutti_result_t rc, const char *fn)
{
    int32_t v = (int32_t)rc;
    tutti_result_t brc = tutti_broadcast(&v, &v, 1, TUTTI_INT32, 0, d->comm, NULL);
    char why[DDP_ERR_LEN];

    if (brc != TUTTI_SUCCESS)
        return ddp_fail(d, brc, "%s: %s", fn, tutti_comm_last_error(d->comm));
    if (v == TUTTI_SUCCESS)
        return TUTTI_SUCCESS;
    /* Failed on rank 0: every rank tells why (rank 0's message, less its "fn: "). */
    memcpy(why, d->err, sizeof(why));
    brc = tutti_broadcast(why, why, sizeof(why), TUTTI_UINT8, 0, d->comm, NULL);
    if (d->rank == 0)
        return (tutti_result_t)v;
    why[sizeof(why) - 1] = 0;
    if (brc != TUTTI_SUCCESS)
        return ddp_fail(d, (tutti_result_t)v, "%s: rank 0 failed (its message says why)", fn);
    return ddp_fail(
        d, (tutti_result_t)v, "%s: rank 0 failed: %s", fn,
        strncmp(why, fn, strlen(fn)) == 0 && why[strlen(fn)] == ':' ? why + strlen(fn) + 2 : why);
}

/* The bucket order as it stands: the order the buckets were built from. */
static void bucket_order(const struct tutti_ddp *d, int32_t *order)
{
    for (int k = 0; k < d->nparams; k++)
        order[k] = d->build_order[k];
}

tutti_result_t tutti_ddp_save(tutti_ddp_t d, const char *path, const void *extra, size_t extra_len)
{
    struct ckpt_header h;
    unsigned char *buf = NULL, *w = NULL, *pw = NULL;
    size_t size, shard_all;
    float *tmp = NULL;
    tutti_result_t rc = TUTTI_SUCCESS;
    char tmpname[4200];
    int fd = -1;

    if (!d || !d->initialized || !path || (extra_len && !extra))
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_save: ddp not initialised, path NULL, or extra NULL with a "
                        "length");
    if (d->in_step || d->broken)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_save: call it between steps, on a healthy ddp");
    fill_header(d, &h, extra_len);
    size = sizeof(h) + body_size(&h) + sizeof(uint64_t);
    buf = calloc(1, size);
    shard_all = d->shard * (size_t)d->nranks;
    tmp = calloc(shard_all + (h.hook_rank_bytes / sizeof(float)) * (size_t)d->nranks + 1,
                 sizeof(float));
    if (!buf || !tmp) {
        rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_save: out of memory");
        goto gather;
    }
    w = buf;
    memcpy(w, &h, sizeof(h));
    w += sizeof(h);
    ddp_fill_desc(d, (struct ddp_desc *)w);
    w += (h.nparams + h.nbuffers) * sizeof(struct ddp_desc);
    bucket_order(d, (int32_t *)w);
    w += h.nparams * sizeof(int32_t);
    pw = w; /* (zero 3: the shards are gathered below) */
    ddp_flat_copy(d, (float *)w, 0, d->total, 1);
    w += d->total * sizeof(float);
    for (int i = 0; i < d->nbuffers; i++)
        memcpy(w + d->buffers[i].off * sizeof(float), d->buffers[i].data,
               d->buffers[i].count * sizeof(float));
    w += d->buffer_total * sizeof(float);
gather:
    /* Collective part: every rank takes it whatever happened above. */
    if (d->cfg.zero == 3) { /* the parameters, from every rank's shard */
        tutti_result_t grc = TUTTI_SUCCESS;
        float *mine = tmp ? tmp + (size_t)d->rank * d->shard : NULL;
        if (mine)
            memcpy(mine, d->param_shard, (d->own_hi - d->own_lo) * sizeof(float));
        if (tmp)
            grc = tutti_all_gather(mine, tmp, d->shard, TUTTI_FLOAT32, d->comm, NULL);
        if (grc == TUTTI_SUCCESS && pw)
            memcpy(pw, tmp, d->total * sizeof(float));
        if (grc != TUTTI_SUCCESS && rc == TUTTI_SUCCESS)
            rc = ddp_fail(d, grc, "tutti_ddp_save: gathering the parameters: %s",
                          tutti_comm_last_error(d->comm));
    }
    for (unsigned s = 0; s < h.slots; s++) {
        size_t lo, hi;
        const float *st = ddp_optim_slot(d, (int)s, &lo, &hi);
        tutti_result_t grc = TUTTI_SUCCESS;
        if (d->cfg.zero) {
            float *mine = tmp ? tmp + (size_t)d->rank * d->shard : NULL;
            if (mine)
                memcpy(mine, st, (hi - lo) * sizeof(float));
            if (tmp)
                grc = tutti_all_gather(mine, tmp, d->shard, TUTTI_FLOAT32, d->comm, NULL);
            if (grc == TUTTI_SUCCESS && buf)
                memcpy(w, tmp, d->total * sizeof(float));
        } else if (buf) {
            memcpy(w, st, d->total * sizeof(float));
        }
        if (grc != TUTTI_SUCCESS && rc == TUTTI_SUCCESS)
            rc = ddp_fail(d, grc, "tutti_ddp_save: gathering optimizer state: %s",
                          tutti_comm_last_error(d->comm));
        if (buf)
            w += d->total * sizeof(float);
    }
    if (h.hook_rank_bytes) {
        tutti_result_t grc = TUTTI_SUCCESS;
        if (buf)
            grc = tutti_all_gather(ddp_hook_state_ptr(d), w, h.hook_rank_bytes, TUTTI_UINT8,
                                   d->comm, NULL);
        if (grc != TUTTI_SUCCESS && rc == TUTTI_SUCCESS)
            rc = ddp_fail(d, grc, "tutti_ddp_save: gathering hook state: %s",
                          tutti_comm_last_error(d->comm));
        if (buf)
            w += h.hook_rank_bytes * (size_t)d->nranks;
    }
    if (rc != TUTTI_SUCCESS || !buf)
        goto out;
    ddp_hook_shared_copy(d, w, 1);
    w += h.hook_shared_bytes;
    if (extra_len)
        memcpy(w, extra, extra_len);
    w += extra_len;
    {
        uint64_t sum = fnv1a(buf, (size_t)(w - buf));
        memcpy(w, &sum, sizeof(sum));
    }
    if (d->rank != 0)
        goto out;
    snprintf(tmpname, sizeof(tmpname), "%s.tmp", path);
    fd = open(tmpname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_save: cannot create %s: %s", tmpname,
                      strerror(errno));
        goto out;
    }
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, buf + off, size - off);
        if (n <= 0) {
            rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_save: writing %s: %s", tmpname,
                          n < 0 ? strerror(errno) : "short write");
            break;
        }
        off += (size_t)n;
    }
    if (rc == TUTTI_SUCCESS && fsync(fd) != 0)
        rc =
            ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_save: fsync %s: %s", tmpname, strerror(errno));
    close(fd);
    if (rc == TUTTI_SUCCESS && rename(tmpname, path) != 0)
        rc = ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_save: rename %s to %s: %s", tmpname, path,
                      strerror(errno));
    if (rc != TUTTI_SUCCESS)
        unlink(tmpname);
out:
    free(buf);
    free(tmp);
    return agree(d, rc, "tutti_ddp_save");
}

/* Rank 0: read and check the file. */
static tutti_result_t read_file(struct tutti_ddp *d, const char *path, unsigned char **out,
                                size_t *out_size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len;
    struct ckpt_header h, mine;
    struct ddp_desc *want = NULL;
    uint64_t sum;

    if (!f)
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: cannot open %s: %s", path,
                        strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: cannot size %s", path);
    }
    if ((size_t)len < sizeof(h) + sizeof(sum)) {
        fclose(f);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG, "tutti_ddp_load: %s is too short (%ld bytes)",
                        path, len);
    }
    buf = malloc((size_t)len);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: reading %s failed", path);
    }
    fclose(f);
    memcpy(&h, buf, sizeof(h));
    if (memcmp(h.magic, CKPT_MAGIC, 8) != 0) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s is not a tutti DDP checkpoint", path);
    }
    if (h.version != CKPT_VERSION) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s is a tutti DDP checkpoint of version %u; this build "
                        "reads version %d (version 1 held no buffers)",
                        path, h.version, CKPT_VERSION);
    }
    /* Bounds first, so that the size below cannot overflow. */
    if (h.nparams > (1u << 24) || h.total > ((uint64_t)1 << 40) || h.slots > 2 ||
        h.nbuffers > (1u << 24) || h.buffer_total > ((uint64_t)1 << 40) || h.nranks > 65536 ||
        h.hook_rank_bytes > ((uint64_t)1 << 40) || h.hook_shared_bytes > ((uint64_t)1 << 40) ||
        h.extra_len > ((uint64_t)1 << 32)) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s is damaged (its header's counts are out of bounds)",
                        path);
    }
    if (sizeof(h) + body_size(&h) + sizeof(sum) != (size_t)len) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s is damaged (its header describes %zu bytes, the file "
                        "holds %ld: cut short or grown)",
                        path, sizeof(h) + body_size(&h) + sizeof(sum), len);
    }
    memcpy(&sum, buf + len - (long)sizeof(sum), sizeof(sum));
    if (sum != fnv1a(buf, (size_t)len - sizeof(sum))) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s is damaged (checksum mismatch)", path);
    }
    fill_header(d, &mine, h.extra_len);
    if (h.nparams != mine.nparams || h.total != mine.total || h.nbuffers != mine.nbuffers ||
        h.buffer_total != mine.buffer_total) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s holds %llu parameters (%llu values) and %llu buffers "
                        "(%llu values); %llu (%llu) and %llu (%llu) are registered",
                        path, (unsigned long long)h.nparams, (unsigned long long)h.total,
                        (unsigned long long)h.nbuffers, (unsigned long long)h.buffer_total,
                        (unsigned long long)mine.nparams, (unsigned long long)mine.total,
                        (unsigned long long)mine.nbuffers, (unsigned long long)mine.buffer_total);
    }
    want = calloc((size_t)(h.nparams + h.nbuffers), sizeof(*want));
    if (!want) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: out of memory");
    }
    ddp_fill_desc(d, want);
    for (uint64_t i = 0; i < h.nparams + h.nbuffers; i++) {
        const struct ddp_desc *x = (const struct ddp_desc *)(buf + sizeof(h)) + i;
        int buffer = i >= h.nparams;
        if (memcmp(x, &want[i], sizeof(*x)) != 0) {
            ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                     "tutti_ddp_load: %s: %s %llu is '%.*s' with %llu values there, '%s' with "
                     "%llu here",
                     path, buffer ? "buffer" : "parameter",
                     (unsigned long long)(buffer ? i - h.nparams : i), DDP_NAME_LEN, x->name,
                     (unsigned long long)x->count, want[i].name, (unsigned long long)want[i].count);
            free(want);
            free(buf);
            return TUTTI_ERR_INVALID_ARG;
        }
    }
    free(want);
    if (h.optim != mine.optim || h.slots != mine.slots || h.hook != mine.hook ||
        h.hook_rank_bytes != mine.hook_rank_bytes ||
        h.hook_shared_bytes != mine.hook_shared_bytes ||
        (h.hook_rank_bytes && h.nranks != mine.nranks)) {
        free(buf);
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: %s was saved with optimizer %u, hook %s, %u ranks; this "
                        "run has optimizer %u, hook %s, %u ranks",
                        path, h.optim, tutti_ddp_hook_name((tutti_ddp_hook_t)h.hook), h.nranks,
                        mine.optim, tutti_ddp_hook_name((tutti_ddp_hook_t)mine.hook), mine.nranks);
    }
    *out = buf;
    *out_size = (size_t)len;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_ddp_load(tutti_ddp_t d, const char *path, void *extra, size_t extra_cap,
                              size_t *extra_len)
{
    unsigned char *buf = NULL;
    const unsigned char *r;
    uint64_t size = 0;
    size_t got = 0;
    struct ckpt_header h;
    tutti_result_t rc = TUTTI_SUCCESS;

    if (!d || !d->initialized || !path)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: ddp not initialised, or path NULL");
    if (d->in_step || d->broken)
        return ddp_fail(d, TUTTI_ERR_INVALID_ARG,
                        "tutti_ddp_load: call it between steps, on a healthy ddp");
    if (d->rank == 0) {
        char tmpname[4200];
        snprintf(tmpname, sizeof(tmpname), "%s.tmp", path);
        if (unlink(tmpname) == 0 &&
            !(getenv("TUTTI_DEBUG") && !strcmp(getenv("TUTTI_DEBUG"), "NONE")))
            fprintf(stderr, "tutti DDP rank 0: removed %s, left by a save that did not finish\n",
                    tmpname);
        rc = read_file(d, path, &buf, &got);
        size = got;
    }
    TUTTI_DDP_CHECK(agree(d, rc, "tutti_ddp_load"));
    rc = tutti_broadcast(&size, &size, 1, TUTTI_UINT64, 0, d->comm, NULL);
    if (rc == TUTTI_SUCCESS && d->rank != 0) {
        buf = malloc(size ? size : 1);
        if (!buf) {
            d->broken = 1;
            tutti_comm_abort(d->comm); /* the peers are about to send it: fail them */
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: out of memory");
        }
    }
    if (rc == TUTTI_SUCCESS)
        rc = tutti_broadcast(buf, buf, size, TUTTI_UINT8, 0, d->comm, NULL);
    if (rc != TUTTI_SUCCESS) {
        free(buf);
        return ddp_fail(d, rc, "tutti_ddp_load: broadcasting the checkpoint: %s",
                        tutti_comm_last_error(d->comm));
    }
    memcpy(&h, buf, sizeof(h));
    r = buf + sizeof(h) + (h.nparams + h.nbuffers) * sizeof(struct ddp_desc);
    if (h.rebuilt) {
        int *order = malloc(h.nparams * sizeof(int));
        if (!order) {
            free(buf);
            return ddp_fail(d, TUTTI_ERR_SYSTEM, "tutti_ddp_load: out of memory");
        }
        memcpy(order, r, h.nparams * sizeof(int32_t));
        rc = ddp_build_buckets(d, order);
        free(order);
        if (rc != TUTTI_SUCCESS) {
            free(buf);
            return rc;
        }
    }
    d->rebuilt = (int)h.rebuilt;
    r += h.nparams * sizeof(int32_t);
    ddp_flat_copy(d, (float *)r, 0, d->total, 0);
    r += d->total * sizeof(float);
    for (int i = 0; i < d->nbuffers; i++)
        memcpy(d->buffers[i].data, r + d->buffers[i].off * sizeof(float),
               d->buffers[i].count * sizeof(float));
    r += d->buffer_total * sizeof(float);
    for (unsigned s = 0; s < h.slots; s++) {
        size_t lo, hi;
        float *st = ddp_optim_slot(d, (int)s, &lo, &hi);
        memcpy(st, r + lo * sizeof(float), (hi - lo) * sizeof(float));
        r += d->total * sizeof(float);
    }
    *ddp_optim_t(d) = h.optim_t;
    if (h.hook_rank_bytes)
        memcpy(ddp_hook_state_ptr(d), r + (size_t)d->rank * h.hook_rank_bytes, h.hook_rank_bytes);
    r += h.hook_rank_bytes * h.nranks;
    ddp_hook_shared_copy(d, (unsigned char *)r, 0);
    r += h.hook_shared_bytes;
    if (extra && extra_cap)
        memcpy(extra, r, h.extra_len < extra_cap ? h.extra_len : extra_cap);
    if (extra_len)
        *extra_len = h.extra_len;
    d->steps = h.steps;
    d->cfg.lr = h.lr;
    free(buf);
    return TUTTI_SUCCESS;
}
