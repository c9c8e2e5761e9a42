/*
 * window.c -- tutti_comm_window_register / _deregister: the collective step that lets every
 * rank of a host address each other's range of symmetric memory (symmem.h).
 *
 * Registration is two of the library's own all-gathers. The first carries each rank's range
 * (its process, the allocation's file descriptor, the page-aligned offset; for device memory
 * the allocation's CUDA IPC handle and the offset) and whether it allows the path; at the first
 * registration the host's local index 0 also offers the control lines' file. Each rank then maps
 * the ranges of the other ranks of its host (through /proc/<pid>/fd/<fd>; device memory by
 * opening the IPC handle, once per allocation), and the second
 * all-gather says whether every rank could: the window exists on every rank or on none, and a
 * failure names the rank and its cause everywhere.
 */
#include "lib/coll/coll.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/symmem.h"
#include "lib/engine/engine.h"
#include "lib/gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct win_info {
    int32_t ok; /* else why says what */
    int32_t on; /* TUTTI_SYMMETRIC allows the path */
    int32_t pid, fd, ctl_fd;
    uint32_t ctl_len;
    uint64_t off;  /* the range's first page in the allocation */
    uint64_t skip; /* the range's start past that */
    uint64_t bytes;
    int32_t device; /* device memory: the allocation's IPC handle, the range skip into it */
    uint64_t addr;  /* and where the allocation lies in this rank's process (ranks that share
                     * a process address it directly: CUDA refuses a process its own handle) */
    unsigned char ipc[TT_CUDA_IPC_BYTES];
    char why[160];
};

static void why(struct win_info *i, tutti_result_t rc, const char *text)
{
    i->ok = -(int32_t)rc;
    snprintf(i->why, sizeof(i->why), "%s", text);
}

/* Wait for work queued on comm's streams, as a call made now does, then take the run lock. */
static void enter(struct tutti_comm *comm)
{
    tt_coll_after_queued_work(comm);
    pthread_mutex_lock(&comm->run_lock);
}

/* The first rank whose info is not ok: fail naming it (every rank alike). */
static tutti_result_t first_bad(struct tutti_comm *comm, const struct win_info *all,
                                const char *step)
{
    for (int r = 0; r < comm->nranks; r++)
        if (all[r].ok != 1)
            return tt_fail(comm, (tutti_result_t)-all[r].ok,
                           "tutti_comm_window_register: rank %d %s: %s", r, step, all[r].why);
    return TUTTI_SUCCESS;
}

/* A window is host memory on every rank or device memory on every rank (each rank fails
 * alike, naming the first rank of the other kind). */
static tutti_result_t one_kind(struct tutti_comm *comm, const struct win_info *all)
{
    for (int r = 1; r < comm->nranks; r++)
        if (all[r].device != all[0].device)
            return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_window_register: rank %d's range is %s memory, rank 0's "
                           "%s memory: a window is of one kind on every rank",
                           r, all[r].device ? "device" : "host", all[0].device ? "device" : "host");
    return TUTTI_SUCCESS;
}

/* Map the other ranks' ranges of this host into w (and the control lines, first time). */
static void map_peers(struct tutti_comm *comm, struct tt_window *w, const struct win_info *all,
                      int first, struct win_info *res)
{
    struct tt_sym *s = comm->sym;
    int node = comm->topo.node_of[comm->rank], me = comm->topo.local_of[comm->rank];

    for (int r = 0; r < comm->nranks && res->ok == 1; r++) {
        int l = comm->topo.local_of[r];
        if (comm->topo.node_of[r] != node)
            continue;
        if (l == me) {
            w->peer[l] = w->base;
            continue;
        }
        w->map_len[l] = all[r].skip + all[r].bytes;
        if (w->device && all[r].pid == (int32_t)getpid()) {
            w->peer[l] = (char *)(uintptr_t)all[r].addr + all[r].skip;
            continue;
        }
        w->maps[l] = w->device ? tt_sym_ipc_open(comm, all[r].ipc)
                               : tt_sym_map_peer(all[r].pid, all[r].fd, all[r].off, w->map_len[l]);
        if (!w->maps[l])
            why(res, TUTTI_ERR_SYSTEM, tt_thread_error());
        else
            w->peer[l] = (char *)w->maps[l] + all[r].skip;
    }
    if (first && me != 0 && res->ok == 1) {
        int r0 = -1;
        for (int r = 0; r < comm->nranks && r0 < 0; r++)
            if (comm->topo.node_of[r] == node && comm->topo.local_of[r] == 0)
                r0 = r;
        s->ctl_len = all[r0].ctl_len;
        s->ctl_map = tt_sym_map_peer(all[r0].pid, all[r0].ctl_fd, 0, s->ctl_len);
        if (!s->ctl_map)
            why(res, TUTTI_ERR_SYSTEM, tt_thread_error());
    }
}

/* Undo a first registration's control lines (it failed on some rank). */
static void drop_ctl(struct tt_sym *s)
{
    if (s->ctl_map)
        munmap(s->ctl_map, s->ctl_len);
    if (s->ctl_fd >= 0)
        close(s->ctl_fd);
    s->ctl_map = NULL;
    s->ctl_fd = -1;
}

/* The path's state, at the first registration that succeeds everywhere. */
static tutti_result_t first_success(struct tutti_comm *comm, int on)
{
    struct tt_sym *s = comm->sym;
    size_t n = (size_t)comm->nranks;

    s->decided = 1;
    s->on = comm->local_size > 1 && on;
    s->lines = s->ctl_map;
    s->all = calloc((size_t)comm->local_size, sizeof(*s->all));
    s->src = calloc(n, sizeof(*s->src));
    s->dst = calloc(n, sizeof(*s->dst));
    s->scal = calloc(n, sizeof(*s->scal));
    if (!s->all || !s->src || !s->dst || !s->scal)
        return tt_comm_set_error(
            comm, tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_window_register: out of memory"));
    TT_INFO(TT_SUB_COLL, "symmetric path %s (TUTTI_SYMMETRIC)",
            s->on ? "on" : "off: a rank turned it off");
    return TUTTI_SUCCESS;
}

/* A range of device memory (any cudaMalloc allocation, tutti_mem_alloc_device's or the
 * user's own, as NCCL's windows take): the allocation's IPC handle and the range's offset in
 * it. */
static void device_range(struct win_info *i, void *buf, size_t bytes)
{
    char *base = NULL;
    size_t size = 0;

    if (tt_cuda_ipc_of(buf, &base, &size, i->ipc) != TUTTI_SUCCESS)
        why(i, TUTTI_ERR_INVALID_ARG, tt_thread_error());
    else if ((size_t)((char *)buf - base) > size || bytes > size - (size_t)((char *)buf - base))
        why(i, TUTTI_ERR_INVALID_ARG, "its range runs past the end of its cudaMalloc allocation");
    else {
        i->device = 1;
        i->skip = (uint64_t)((char *)buf - base);
        i->addr = (uint64_t)(uintptr_t)base;
    }
}

static tutti_result_t do_register(struct tutti_comm *comm, void *buf, size_t bytes,
                                  struct tt_window **out)
{
    struct tt_sym *s = tt_sym_get(comm);
    struct tt_symalloc *a;
    struct tt_window *w = NULL;
    struct win_info mine = {.ok = 1, .pid = (int32_t)getpid(), .fd = -1, .ctl_fd = -1}, *all = NULL;
    int first, me = comm->topo.local_of[comm->rank], on = 1;
    size_t ln = (size_t)comm->local_size;
    long page = sysconf(_SC_PAGESIZE);
    tutti_result_t rc;

    if (!s)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_window_register: out of memory");
    first = !s->decided;
    a = buf && bytes ? tt_sym_alloc_of(comm, buf, bytes) : NULL;
    mine.on = tt_env_flag("TUTTI_SYMMETRIC");
    mine.bytes = bytes;
    if (!buf || !bytes)
        why(&mine, TUTTI_ERR_INVALID_ARG, !buf ? "buf is NULL" : "bytes is 0");
    else if (a ? a->device : tt_cuda_kind(buf) == TT_MEM_DEVICE)
        device_range(&mine, buf, bytes);
    else if (!a)
        why(&mine, TUTTI_ERR_INVALID_ARG,
            "its range is not inside memory of tutti_mem_alloc on this communicator (nor CUDA "
            "device memory)");
    else {
        uint64_t at = (uint64_t)((char *)buf - a->base);
        mine.fd = a->fd;
        mine.off = at / (uint64_t)page * (uint64_t)page;
        mine.skip = at - mine.off;
    }
    if (mine.ok == 1 && first && me == 0 && comm->local_size > 1) {
        size_t len = ln * sizeof(struct tt_sym_line);
        len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
        if (tt_sym_make_file(comm, "tutti_comm_window_register", len, &s->ctl_fd, &s->ctl_map) !=
            TUTTI_SUCCESS)
            why(&mine, TUTTI_ERR_SYSTEM, tt_thread_error());
        s->ctl_len = len;
        mine.ctl_fd = s->ctl_fd;
        mine.ctl_len = (uint32_t)len;
    }
    all = calloc((size_t)comm->nranks, sizeof(*all));
    w = calloc(1, sizeof(*w));
    if (w) {
        w->peer = calloc(ln, sizeof(*w->peer));
        w->maps = calloc(ln, sizeof(*w->maps));
        w->map_len = calloc(ln, sizeof(*w->map_len));
    }
    if (!all || !w || !w->peer || !w->maps || !w->map_len) {
        free(all);
        tt_sym_window_free(comm, w);
        return tt_comm_set_error(
            comm, tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_window_register: out of memory"));
    }
    w->base = buf;
    w->bytes = bytes;
    comm->seq++; /* a collective */
    rc = tt_coll_allgather_own(comm, "window registration", 3, &mine, sizeof(mine), all);
    if (rc == TUTTI_SUCCESS && (rc = first_bad(comm, all, "cannot register its range")) == 0)
        rc = one_kind(comm, all);
    if (rc == TUTTI_SUCCESS) {
        struct win_info res = {.ok = 1};
        for (int r = 0; r < comm->nranks; r++)
            on &= all[r].on;
        w->device = all[0].device;
        map_peers(comm, w, all, first, &res);
        rc = tt_coll_allgather_own(comm, "window mapping", 4, &res, sizeof(res), all);
        if (rc == TUTTI_SUCCESS)
            rc = first_bad(comm, all, "cannot map the other ranks' ranges");
    }
    if (rc == TUTTI_SUCCESS && first)
        rc = first_success(comm, on);
    free(all);
    if (rc != TUTTI_SUCCESS) {
        tt_sym_window_free(comm, w);
        if (first)
            drop_ctl(s);
        return rc;
    }
    w->magic = TT_WINDOW_MAGIC;
    w->id = ++s->next_id;
    w->next = s->windows;
    s->windows = w;
    s->nwin++;
    w->alloc = a; /* (NULL: the user's own device memory) */
    if (a)
        a->windows++;
    *out = w;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_window_register(tutti_comm_t comm, void *buf, size_t bytes, void **win)
{
    struct tt_window *w = NULL;
    tutti_result_t rc;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_window_register"));
    if (!win)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_window_register: win is NULL");
    *win = NULL;
    if (tt_group_open())
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_window_register: not inside a group (it is collective)");
    enter(comm);
    rc = tt_coll_check_health(comm, "tutti_comm_window_register");
    if (rc == TUTTI_SUCCESS)
        rc = do_register(comm, buf, bytes, &w);
    pthread_mutex_unlock(&comm->run_lock);
    if (rc == TUTTI_SUCCESS) {
        TT_INFO(TT_SUB_COLL, "window %u: [%p, +%zu)", w->id, buf, bytes);
        *win = w;
    }
    return rc;
}

tutti_result_t tutti_comm_window_deregister(tutti_comm_t comm, void *win)
{
    struct tt_window **p, *w = win;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_window_deregister"));
    enter(comm);
    if (!w || !tt_sym_window_live(comm, w)) {
        pthread_mutex_unlock(&comm->run_lock);
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_window_deregister: %p is not a window of this communicator "
                       "(deregistered twice, or from another communicator?)",
                       win);
    }
    for (p = &comm->sym->windows; *p != w; p = &(*p)->next)
        ;
    *p = w->next;
    comm->sym->nwin--;
    tt_sym_window_free(comm, w);
    pthread_mutex_unlock(&comm->run_lock);
    return TUTTI_SUCCESS;
}
