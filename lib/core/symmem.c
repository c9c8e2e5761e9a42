/*
 * symmem.c -- tutti_mem_alloc / tutti_mem_free and the communicator's table of symmetric
 * allocations and windows (symmem.h). Registering a window is collective and lives with the
 * calls (lib/coll/window.c).
 */
#include "lib/core/symmem.h"

#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

struct tt_sym *tt_sym_get(struct tutti_comm *comm)
{
    if (!comm->sym) {
        comm->sym = calloc(1, sizeof(*comm->sym));
        if (comm->sym)
            comm->sym->ctl_fd = -1;
    }
    return comm->sym;
}

/* Its pages are taken now: on a full tmpfs, a failure here rather than SIGBUS at the first
 * touch. */
tutti_result_t tt_sym_make_file(struct tutti_comm *comm, const char *fn, size_t len, int *fd,
                                void **p)
{
    int err;

    *fd = memfd_create("tutti-sym", MFD_CLOEXEC);
    if (*fd < 0)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: memfd_create failed: %m", fn);
    if (ftruncate(*fd, (off_t)len) != 0)
        err = errno;
    else
        err = posix_fallocate(*fd, 0, (off_t)len);
    if (err == EOPNOTSUPP || err == EINVAL)
        err = 0;
    if (err == 0) {
        *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
        if (*p == MAP_FAILED)
            err = errno;
    }
    if (err != 0) {
        close(*fd);
        *fd = -1;
        errno = err;
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: no room for %zu bytes of shared memory: %m", fn,
                       len);
    }
    return TUTTI_SUCCESS;
}

/* The checks both allocations make, and a fresh entry for the table (*a, *s). */
static tutti_result_t alloc_entry(tutti_comm_t comm, const char *fn, size_t bytes, void **ptr,
                                  struct tt_symalloc **a, struct tt_sym **s)
{
    TT_CHECK(tt_comm_check(comm, fn));
    if (!ptr)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: ptr is NULL", fn);
    *ptr = NULL;
    if (bytes == 0)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "%s: bytes is 0", fn);
    *a = calloc(1, sizeof(**a));
    pthread_mutex_lock(&sym_lock);
    *s = tt_sym_get(comm);
    pthread_mutex_unlock(&sym_lock);
    if (!*a || !*s) {
        free(*a);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "%s: out of memory", fn);
    }
    return TUTTI_SUCCESS;
}

static void alloc_link(struct tt_sym *s, struct tt_symalloc *a)
{
    pthread_mutex_lock(&sym_lock);
    a->next = s->allocs;
    s->allocs = a;
    pthread_mutex_unlock(&sym_lock);
}

tutti_result_t tutti_mem_alloc(tutti_comm_t comm, size_t bytes, void **ptr)
{
    struct tt_symalloc *a;
    struct tt_sym *s;
    long page = sysconf(_SC_PAGESIZE);
    size_t len;
    void *p;
    int fd;

    if (page <= 0)
        page = 4096;
    TT_CHECK(alloc_entry(comm, "tutti_mem_alloc", bytes, ptr, &a, &s));
    if (bytes > SIZE_MAX - (size_t)page) {
        free(a);
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_mem_alloc: %zu bytes is too many",
                       bytes);
    }
    len = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    if (tt_sym_make_file(comm, "tutti_mem_alloc", len, &fd, &p) != TUTTI_SUCCESS) {
        free(a);
        return TUTTI_ERR_SYSTEM;
    }
    a->base = p;
    a->len = len;
    a->fd = fd;
    alloc_link(s, a);
    TT_INFO(TT_SUB_SHM, "symmetric allocation: %zu bytes at %p (fd %d)", len, p, fd);
    *ptr = p;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_mem_alloc_device(tutti_comm_t comm, size_t bytes, void **ptr)
{
    struct tt_symalloc *a;
    struct tt_sym *s;
    void *p = NULL;

    TT_CHECK(alloc_entry(comm, "tutti_mem_alloc_device", bytes, ptr, &a, &s));
    if (!tt_cuda_ready()) {
        free(a);
        return tt_fail(comm, TUTTI_ERR_UNSUPPORTED,
                       "tutti_mem_alloc_device: no usable CUDA device (or a libtutti built "
                       "without CUDA)");
    }
    /* On the communicator's device (the one current at its creation), where it has one. */
    if (tt_cuda_sym_alloc(comm->cuda.dev, bytes, &p) != TUTTI_SUCCESS) {
        free(a);
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_mem_alloc_device: %zu bytes: %s", bytes,
                       tt_thread_error());
    }
    a->base = p;
    a->len = bytes;
    a->fd = -1;
    a->device = 1;
    alloc_link(s, a);
    TT_INFO(TT_SUB_SHM, "symmetric device allocation: %zu bytes at %p", bytes, p);
    *ptr = p;
    return TUTTI_SUCCESS;
}

static void alloc_release(struct tt_symalloc *a)
{
    if (a->device) {
        tt_cuda_sym_free(a->base);
    } else {
        munmap(a->base, a->len);
        close(a->fd);
    }
    free(a);
}

tutti_result_t tutti_mem_free(tutti_comm_t comm, void *ptr)
{
    struct tt_symalloc **p, *a = NULL;
    int queued;

    TT_CHECK(tt_comm_check(comm, "tutti_mem_free"));
    if (!ptr)
        return TUTTI_SUCCESS; /* as free(NULL) */
    queued = __atomic_load_n(&comm->work_pending, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&comm->run_lock); /* not during the operation comm is running */
    pthread_mutex_lock(&sym_lock);
    for (p = comm->sym ? &comm->sym->allocs : NULL; p && *p; p = &(*p)->next)
        if ((*p)->base == ptr) {
            a = *p;
            break;
        }
    if (a && !a->windows && !queued)
        *p = a->next;
    pthread_mutex_unlock(&sym_lock);
    pthread_mutex_unlock(&comm->run_lock);
    if (!a)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_mem_free: %p is not memory of tutti_mem_alloc(_device) on this "
                       "communicator (freed twice, from another communicator, or not the pointer "
                       "it gave?)",
                       ptr);
    if (a->windows)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_mem_free: %d window(s) still cover %p: "
                       "tutti_comm_window_deregister them first",
                       a->windows, ptr);
    if (queued)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_mem_free: %d operation(s) are still queued on streams of this "
                       "communicator and may use %p: synchronize them first",
                       queued, ptr);
    alloc_release(a);
    return TUTTI_SUCCESS;
}

struct tt_symalloc *tt_sym_alloc_of(struct tutti_comm *comm, const void *p, size_t len)
{
    struct tt_symalloc *found = NULL;
    const char *lo = p;

    pthread_mutex_lock(&sym_lock);
    for (struct tt_symalloc *a = comm->sym ? comm->sym->allocs : NULL; a && !found; a = a->next)
        if (lo >= a->base && len <= a->len && (size_t)(lo - a->base) <= a->len - len)
            found = a;
    pthread_mutex_unlock(&sym_lock);
    return found;
}

uint32_t tt_sym_find(struct tutti_comm *comm, const void *p, size_t len, uint64_t *off)
{
    const char *lo = p;

    /* Windows change only by the collective calls of the thread that makes this one. */
    for (struct tt_window *w = comm->sym ? comm->sym->windows : NULL; w; w = w->next)
        if (lo >= w->base && len <= w->bytes && (size_t)(lo - w->base) <= w->bytes - len) {
            *off = (uint64_t)(lo - w->base);
            return w->id;
        }
    return 0;
}

struct tt_window *tt_sym_window(struct tutti_comm *comm, uint32_t id)
{
    for (struct tt_window *w = comm->sym ? comm->sym->windows : NULL; w; w = w->next)
        if (w->id == id)
            return w;
    return NULL;
}

void *tt_sym_map_peer(int32_t pid, int fd, uint64_t off, size_t len)
{
    char path[64];
    void *p;
    int f;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
    f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0) {
        tt_fail(NULL, TUTTI_ERR_SYSTEM, "cannot open %s (the rank's memory): %m", path);
        return NULL;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, (off_t)off);
    close(f);
    if (p == MAP_FAILED) {
        tt_fail(NULL, TUTTI_ERR_SYSTEM, "cannot map %zu bytes of %s: %m", len, path);
        return NULL;
    }
    return p;
}

void *tt_sym_ipc_open(struct tutti_comm *comm, const unsigned char *handle)
{
    struct tt_sym *s = comm->sym;
    struct tt_sym_ipc *o;

    for (o = s->opened; o; o = o->next)
        if (memcmp(o->handle, handle, TT_CUDA_IPC_BYTES) == 0) {
            o->refs++;
            return o->base;
        }
    if (!(o = calloc(1, sizeof(*o)))) {
        tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory");
        return NULL;
    }
    if (tt_cuda_ipc_open(comm->cuda.dev, handle, &o->base) != TUTTI_SUCCESS) {
        free(o);
        return NULL;
    }
    memcpy(o->handle, handle, TT_CUDA_IPC_BYTES);
    o->refs = 1;
    o->next = s->opened;
    s->opened = o;
    return o->base;
}

void tt_sym_ipc_release(struct tutti_comm *comm, void *base)
{
    struct tt_sym_ipc **p, *o;

    for (p = &comm->sym->opened; (o = *p) != NULL; p = &o->next)
        if (o->base == base) {
            if (--o->refs == 0) {
                *p = o->next;
                tt_cuda_ipc_close(o->base);
                free(o);
            }
            return;
        }
}

void tt_sym_window_free(struct tutti_comm *comm, struct tt_window *w)
{
    int n = comm->local_size;

    if (!w)
        return;
    for (int i = 0; w->maps && i < n; i++)
        if (w->maps[i] && w->device)
            tt_sym_ipc_release(comm, w->maps[i]);
        else if (w->maps[i])
            munmap(w->maps[i], w->map_len[i]);
    if (w->alloc) {
        pthread_mutex_lock(&sym_lock);
        w->alloc->windows--;
        pthread_mutex_unlock(&sym_lock);
    }
    w->magic = 0;
    free(w->peer);
    free(w->maps);
    free(w->map_len);
    free(w);
}

int tt_sym_window_live(struct tutti_comm *comm, const struct tt_window *w)
{
    for (struct tt_window *x = comm->sym ? comm->sym->windows : NULL; x; x = x->next)
        if (x == w && x->magic == TT_WINDOW_MAGIC)
            return 1;
    return 0;
}

void tt_sym_free_all(struct tutti_comm *comm)
{
    struct tt_sym *s = comm->sym;

    if (!s)
        return;
    while (s->windows) {
        struct tt_window *w = s->windows;
        s->windows = w->next;
        tt_sym_window_free(comm, w);
    }
    while (s->allocs) {
        struct tt_symalloc *a = s->allocs;
        s->allocs = a->next;
        alloc_release(a);
    }
    if (s->ctl_map)
        munmap(s->ctl_map, s->ctl_len);
    if (s->ctl_fd >= 0)
        close(s->ctl_fd);
    free(s->tmp);
    free(s->all);
    free(s->src);
    free(s->dst);
    free(s->scal);
    free(s);
    comm->sym = NULL;
}
