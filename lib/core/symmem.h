/*
 * symmem.h -- symmetric memory (tutti_mem_alloc, windows): host memory that every rank of a
 * host maps, so a collective can read and write its peers' buffers in place.
 *
 * An allocation is an anonymous shared-memory file of this rank (memfd_create: no name, so
 * nothing is ever left in /dev/shm, and /dev/shm's size does not limit it), kept open while
 * it lives. A window (lib/coll/window.c registers it, collectively) is a range of an
 * allocation; the other ranks of the host open the file through /proc/<pid>/fd/<fd> and map
 * the range. Device memory (tutti_mem_alloc_device) is a cudaMalloc allocation instead, which
 * the other ranks open by its CUDA IPC handle. Each rank holds, for every window, where each
 * rank of its host has its own range of it, mapped here. Windows carry an id, the same on
 * every rank (they are registered in the same order), which is what a call's ranks exchange.
 *
 * The control lines (one per rank of the host, in one segment made at the first
 * registration) carry each call's record: the per-call gate of lib/engine/sym.c.
 */
#ifndef TT_SYMMEM_H
#define TT_SYMMEM_H

#include "lib/gpu/gpu.h"
#include "tutti.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct tutti_comm;

/* A rank's record for one call: where its buffers lie (window id 0: in none), and whether it
 * can take the symmetric path at all. Written by the rank before it publishes seq. */
struct tt_sym_rec {
    _Alignas(64) _Atomic uint64_t seq; /* the call (comm->seq) this record is for */
    uint32_t flags;                    /* TT_SYM_* */
    uint32_t tag;                      /* the call's tag (lib/exec/tag.h): kind, dtype, op, root */
    uint64_t count;                    /* and its count: ranks in different calls fail, named */
    uint64_t scalar;                   /* a premul-sum operator's value (its bytes) */
    union {
        struct {
            uint32_t send_win, recv_win;
            uint64_t send_off, recv_off;
        };
        unsigned char small[32]; /* a call of up to TT_SYM_SMALL bytes of input: the input,
                                  * in the record's own cache line */
    };
};
#define TT_SYM_SMALL 32
#define TT_SYM_OK 1u     /* this rank's call may take the path (not refused, host scalar) */
#define TT_SYM_PREMUL 2u /* a premul-sum operator: scalar holds its value */
#define TT_SYM_DEV 4u    /* the call runs on the device path (its buffers are device memory) */

/* A small call's input travels with the record (no pass, no closing barrier): in the
 * record's own line up to TT_SYM_SMALL bytes, else in the rank's data area. */
#define TT_SYM_INLINE 1024
/* Records (and data areas) a rank cycles through, call by call (seq % TT_SYM_SLOTS). With
 * two, a record's line was one the peers had read the call before last, so the writer's store
 * waited for their copies to be invalidated before the peers could fetch the new one: two
 * trips between the cores a call where one will do. With eight, the writer asks for the next
 * call's line in exclusive state (prefetchw) as soon as it has posted this call's, long after
 * the peers last read it (far placement, 2-rank 8-byte all-reduce: 0.44 against 0.53 µs, and
 * the usual path's 0.50; BENCHMARKS.md). */
#define TT_SYM_SLOTS 8

/* A record alone in its 128-byte pair of cache lines. A core's adjacent-line prefetcher
 * fetches lines in such pairs: with two records in one pair, a reader polling one record also
 * held the other, which its writer then had to take back for the next call (far placement,
 * 2-rank 8-byte all-reduce: 0.44 against 0.42 µs; BENCHMARKS.md). */
struct tt_sym_slot {
    struct tt_sym_rec r;
    unsigned char pad[64];
};

struct tt_sym_line {
    _Alignas(128) struct tt_sym_slot rec[TT_SYM_SLOTS]; /* by call, seq % TT_SYM_SLOTS */
    _Alignas(128) _Atomic uint64_t read; /* the last call whose records (and inline inputs)
                                          * it has finished with */
    _Alignas(128) _Atomic uint64_t done; /* the last call whose writes it has finished */
    _Alignas(128) unsigned char data[TT_SYM_SLOTS][TT_SYM_INLINE]; /* a small call's input */
};

struct tt_symalloc {
    struct tt_symalloc *next;
    char *base;
    size_t len;
    int windows; /* windows registered over it */
    int fd;      /* the file, open while it lives (peers open it through /proc); -1: device */
    int device;  /* device memory (tutti_mem_alloc_device): peers open its IPC handle */
};

/* A peer's device allocation opened here (by its IPC handle), once however many windows
 * cover it: CUDA maps a handle once per process. */
struct tt_sym_ipc {
    struct tt_sym_ipc *next;
    unsigned char handle[TT_CUDA_IPC_BYTES];
    void *base;
    int refs;
};

#define TT_WINDOW_MAGIC 0x747574746977696eull /* "tuttiwin" */

struct tt_window {
    uint64_t magic;
    struct tt_window *next;
    uint32_t id;
    char *base; /* this rank's range */
    size_t bytes;
    char **peer; /* by local index: that rank's range, mapped here (peer[me] == base) */
    struct tt_symalloc *alloc; /* the allocation it covers (set once it is registered) */
    void **maps; /* by local index: the mapping of that rank's allocation (NULL: none) */
    size_t *map_len;
    int device; /* device memory: maps[] are opened IPC handles (struct tt_sym_ipc) */
};

struct tt_sym {
    struct tt_symalloc *allocs;
    struct tt_window *windows;
    struct tt_sym_ipc *opened; /* peers' device allocations opened here */
    uint32_t next_id;          /* windows registered (ids from 1) */
    int on;      /* the path is on (every rank allowed it at the first registration) */
    int decided; /* `on` has been agreed */
    struct tt_sym_line *lines; /* by local index; NULL until the first registration */
    void *ctl_map;
    size_t ctl_len;
    int ctl_fd;      /* local index 0: the control lines' file (-1: none) */
    int nwin;        /* windows registered */
    void *tmp;       /* a block of this rank's reductions (lib/engine/sym.c) */
    uint64_t passed; /* the last call whose gate this rank passed */
    /* A call's working arrays (lib/coll/coll_sym.c), by local index / rank, made with lines */
    struct tt_sym_rec *all;
    const char **src;
    char **dst;
    uint64_t *scal;
};

/* The window holding [p, p + len) on comm (id and offset), 0 if none. */
uint32_t tt_sym_find(struct tutti_comm *comm, const void *p, size_t len, uint64_t *off);
/* Window `id` of comm, NULL if it is not (or no longer) registered. */
struct tt_window *tt_sym_window(struct tutti_comm *comm, uint32_t id);
/* The allocation holding [p, p + len), NULL if none. */
struct tt_symalloc *tt_sym_alloc_of(struct tutti_comm *comm, const void *p, size_t len);
/* comm's symmetric state, made on first use (NULL: out of memory). */
struct tt_sym *tt_sym_get(struct tutti_comm *comm);
/* Map [off, off + len) of another rank's allocation (process pid's file descriptor fd), off
 * page-aligned; NULL and the message set if it cannot. */
void *tt_sym_map_peer(int32_t pid, int fd, uint64_t off, size_t len);
/* Open a peer's device allocation by its IPC handle (shared by every window over it); NULL
 * and the message set if it cannot. tt_sym_ipc_release drops one use. */
void *tt_sym_ipc_open(struct tutti_comm *comm, const unsigned char *handle);
void tt_sym_ipc_release(struct tutti_comm *comm, void *base);
/* w is a live window of comm (a handle the user gave). */
int tt_sym_window_live(struct tutti_comm *comm, const struct tt_window *w);
/* Unmap and free a window's mappings and itself. */
void tt_sym_window_free(struct tutti_comm *comm, struct tt_window *w);
/* An anonymous shared file of len bytes, mapped (fd kept open); the message set on failure. */
tutti_result_t tt_sym_make_file(struct tutti_comm *comm, const char *fn, size_t len, int *fd,
                                void **p);
/* Free everything (comm is being destroyed). */
void tt_sym_free_all(struct tutti_comm *comm);

#endif
