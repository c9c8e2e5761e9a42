/*
 * transport.h -- the one interface every transport implements.
 *
 * A connection is a one-way FIFO of slots from a sender rank to a receiver rank on one
 * channel. Setup: the receiver creates the FIFO and describes it in a small blob; the
 * communicator carries the blob to the sender over bootstrap; the sender attaches.
 * Data path (never blocks; "not yet" is TUTTI_IN_PROGRESS):
 *   sender:   send_slot(bytes) -> where to write bytes (<= slot_bytes), fill,
 *             send_commit(bytes, tag)
 *   receiver: recv_peek() -> oldest committed slot, its byte count and tag, use it,
 *             recv_release()
 * The tag is the sender's 32-bit label of the operation the message belongs to (lib/exec/tag.h):
 * every transport carries it beside the message, unchanged, so a receiver can tell a message
 * of another call (a stale one, or a rank that called something else) from its data.
 * progress() pumps transports that need it (sockets, verbs); shm's is a no-op.
 * Operations table begins with its size so it can grow (libfabric's rule).
 */
#ifndef TT_TRANSPORT_H
#define TT_TRANSPORT_H

#include "tutti.h"

#include <stddef.h>
#include <stdint.h>

#define TT_BLOB_MAX 256
#define TT_MAX_SLOTS 64 /* most slots a connection FIFO may have */

struct tt_transport;
struct tt_memreg;    /* lib/core/memreg.h */
struct tt_rank_info; /* lib/topo/topo.h: a rank's published record */

/* Common head of every transport's connection. */
struct tt_conn {
    const struct tt_transport *tp;
    int peer;
    int channel;
    size_t slot_bytes;
    int queued; /* the executor holds it in its list of connections to flush */
    /* While finish() waits for the peer to connect: has it died, or has any rank given up
     * (lib/core sets it; NULL: only the deadline ends the wait)? */
    int (*gone)(void *arg, int peer);
    void *gone_arg;
};

/* What the communicator lends a transport during setup. */
struct tt_transport_ctx {
    int rank;
    int nranks;
    const char *job_tag; /* unique per communicator; used in names of OS objects */
    size_t slot_bytes;
    size_t msg_max; /* sockets: longest payload a receiver reading in place takes (0: a slot) */
    int nslots;
    int sleepy;          /* receivers may block in the kernel while waiting (oversubscribed host) */
    const int32_t *pids; /* process id of every rank (meaningful for ranks on this machine) */
    const void *net_addr; /* struct tt_addr: where network transports listen (port 0) */
    double timeout_s;     /* bound on set-up waits */
    void *cuda_stream;    /* p2p: the cudaStream_t the communicator's device work runs on */
};

struct tt_transport {
    size_t size;
    const char *name;
    /* Slots are memory that the peer's process reads where it lies (shm): the executor may
     * write them with streaming stores (exec.h nt_slots). */
    int shared_slots;
    tutti_result_t (*recv_setup)(const struct tt_transport_ctx *ctx, int peer, int channel,
                                 void *blob, size_t *blob_len, struct tt_conn **conn);
    tutti_result_t (*send_connect)(const struct tt_transport_ctx *ctx, int peer, int channel,
                                   const void *blob, size_t blob_len, struct tt_conn **conn);
    /* After every sender has connected: complete the receiving side (sockets: accept). */
    tutti_result_t (*finish)(struct tt_conn *conn, double deadline);
    tutti_result_t (*send_slot)(struct tt_conn *conn, size_t bytes, void **slot);
    tutti_result_t (*send_commit)(struct tt_conn *conn, size_t bytes, uint32_t tag);
    /* Push committed messages on; TUTTI_SUCCESS once none is left in this process. */
    tutti_result_t (*flush)(struct tt_conn *conn);
    tutti_result_t (*recv_peek)(struct tt_conn *conn, const void **slot, size_t *bytes,
                                uint32_t *tag);
    tutti_result_t (*recv_release)(struct tt_conn *conn);
    tutti_result_t (*progress)(struct tt_conn *conn);
    /* Block up to ns nanoseconds or until the connection may have moved (a hint: it may
     * return at once). */
    void (*wait)(struct tt_conn *conn, long ns);
    /* TUTTI_ERR_REMOTE (message set) if the peer is known to be gone, else TUTTI_SUCCESS.
     * Cheap enough to call every few milliseconds of waiting. */
    tutti_result_t (*alive)(struct tt_conn *conn);
    /* This side gives up: the peer's next operation on the connection fails at once. */
    void (*fail)(struct tt_conn *conn);
    void (*close)(struct tt_conn *conn);
    /*
     * Optional (NULL where not offered): zero-copy sends from registered user memory.
     * send_commit_from commits the slot send_slot gave, with `bytes` read straight from src
     * (inside reg) instead of from the slot; TUTTI_ERR_UNSUPPORTED (nothing committed, no
     * message set) if it cannot, and the caller fills the slot instead. *ticket names the
     * message: src must not change until sent(conn, *ticket) is non-zero; flush() waits for
     * every one. unregister forgets what the transport keeps for reg (it may be freed next).
     */
    tutti_result_t (*send_commit_from)(struct tt_conn *conn, const void *src, size_t bytes,
                                       uint32_t tag, struct tt_memreg *reg, uint64_t *ticket);
    int (*sent)(struct tt_conn *conn, uint64_t ticket);
    void (*unregister)(struct tt_memreg *reg);
    /* send_commit_from takes any host memory, reg NULL too (sockets: the kernel copies the
     * bytes out of it as it sends them), so the executor sends every host buffer in place. */
    int sends_from_any;
    /* Optional: can send_commit_from read reg's memory where it lies, device memory
     * included (GPUDirect RDMA)? Registers it if needed; 0 if not. */
    int (*can_send_from)(struct tt_memreg *reg);
    /*
     * Optional (NULL where not offered): single copy between processes (shm). Such a
     * transport's send_commit_from takes any host memory (reg may be NULL) and may send the
     * message by address: recv_remote then says the peeked message's bytes are still in the
     * sender's memory (the slot recv_peek gave is reserved but empty), and recv_pull copies
     * them from there into dst (the slot, or wherever the receiver wants them).
     */
    int (*recv_remote)(struct tt_conn *conn);
    tutti_result_t (*recv_pull)(struct tt_conn *conn, void *dst, size_t bytes);
    /* A single-copy transport's senders send by address (shm, mem). Sockets offer recv_remote
     * and recv_pull too, without it: a peeked message's payload may still be in the kernel
     * (TUTTI_NET_DIRECT), and recv_pull reads it into dst; TUTTI_IN_PROGRESS until all of it
     * has come, the next call (same dst) going on. */
    int by_address;
    /* Optional: sender: has the receiver released every message committed so far (a
     * whole-transfer timing, exec.h drain)? Must turn true without the receiver's next call. */
    int (*drained)(struct tt_conn *conn);

    /* The registry (registry.c). May this transport join ranks a and b, by their published
     * records? NULL: never chosen between two ranks (mem joins a rank to itself; p2p is the
     * device path's own). */
    int (*joins)(const struct tt_rank_info *a, const struct tt_rank_info *b);
    /* What a byte costs next to the others: two ranks use the cheapest that joins them and
     * TUTTI_TRANSPORTS allows. */
    int cost;
    /* A network transport: how a connection is made, for the log ("2 socket(s) per
     * connection"); NULL for the others. hca: it runs over the rank's verbs HCA port. */
    void (*describe)(char *buf, size_t size);
    int hca;
};

/*
 * The registry (registry.c): every transport this build has, and the choices made from it.
 * Nothing outside transport/ names a transport or asks which were built.
 */
/* Does TUTTI_TRANSPORTS allow tp? */
int tt_transport_allowed(const struct tt_transport *tp);
/* The transport ranks a and b (records) use: the cheapest that joins them and is allowed;
 * NULL if none. */
const struct tt_transport *tt_transport_between(const struct tt_rank_info *a,
                                                const struct tt_rank_info *b);
/* A rank to itself (mem), and the device path's (p2p; NULL in a build without CUDA). */
const struct tt_transport *tt_transport_self(void);
const struct tt_transport *tt_transport_device(void);
/* This rank's verbs HCA port for its published record (hca, "" if none), nic being its
 * nearest interface; the reason in why where it has none (not built, excluded, no port). */
void tt_transport_probe_hca(const char *nic, int local_rank_hint, char *hca, size_t hca_size,
                            char *why, size_t why_size);
/* Every transport forgets what it keeps for reg (it may be freed next). */
void tt_transport_unregister(struct tt_memreg *reg);

/* Shared memory between processes of one host. */
extern const struct tt_transport tt_transport_shm;
/* Plain memory within one process: the schedule simulator's transport. */
extern const struct tt_transport tt_transport_mem;
/* TCP between hosts; its sockets per connection (TUTTI_NSOCKS). */
extern const struct tt_transport tt_transport_socket;
int tt_socket_nsocks(void);
/* InfiniBand / RoCE verbs between hosts (built where the verbs headers are); its queue pairs
 * per connection (TUTTI_IB_QPS). */
extern const struct tt_transport tt_transport_ib;
int tt_ib_nqps(void);

/* CUDA IPC between processes of one host: device slots, device buffers only (cuda_ipc.c; built
 * with CUDA). */
extern const struct tt_transport tt_transport_p2p;

/* May shm send by address (TUTTI_SHM_SINGLE_COPY not 0)? Also where waits are sleepy: a sender
 * waiting for the receiver's copy blocks until the receiver's release wakes it (fifo.h). */
int tt_shm_single_copy(void);

/* A POSIX shared-memory segment of len bytes, created (and zeroed) or attached (shm.c). */
tutti_result_t tt_shm_map(const char *name, int create, size_t len, void **out);
void tt_shm_unlink(const char *name);

/* The name of the FIFO segment `receiver` makes for messages from `sender` on `channel`. */
void tt_shm_name(char *buf, size_t size, const char *job_tag, int receiver, int sender,
                 int channel);

/* A progress() for transports that need none. */
tutti_result_t tt_transport_no_progress(struct tt_conn *conn);
/* A wait() that just sleeps. */
void tt_transport_sleep(struct tt_conn *conn, long ns);
/* alive() for transports between processes of one host: is pid (the peer's) still there? */
tutti_result_t tt_transport_pid_alive(const struct tt_conn *conn, int32_t pid);
/* Has process pid of this host exited (a zombie counts: its parent may reap it late)? */
int tt_transport_pid_gone(int32_t pid);
/* alive() for transports that cannot tell. */
tutti_result_t tt_transport_no_alive(struct tt_conn *conn);
/* finish() and flush() for transports with nothing to finish or flush. */
tutti_result_t tt_transport_no_finish(struct tt_conn *conn, double deadline);
tutti_result_t tt_transport_no_flush(struct tt_conn *conn);

#endif
