/*
 * tutti.h -- the collectives API of tutti.
 *
 * tutti moves and reduces data among a group of processes ("ranks"): all-reduce, all-gather,
 * reduce-scatter, broadcast, reduce, point-to-point send/recv and barrier, on host memory
 * and CUDA device memory (see "CUDA" below). A communicator groups the ranks; it is created
 * collectively by every rank from one shared tutti_id_t (or from the environment a launcher
 * sets) and used by one thread at a time.
 *
 * Conventions:
 *   - every call returns a tutti_result_t; outputs are written only on TUTTI_SUCCESS;
 *   - on failure, tutti_comm_last_error(comm) (or tutti_last_error() for calls that have no
 *     communicator yet) gives a sentence naming the argument, peer or system call at fault;
 *   - counts are in elements of the given dtype, never bytes; count 0 is valid and does nothing
 *     but still checks its arguments;
 *   - the stream argument: NULL means the call completes before it returns; a host stream
 *     (tutti_stream_create) queues the call and returns at once, the stream's worker runs it
 *     in order with the stream's other work (see "Streams and events" below).
 */
#ifndef TUTTI_H
#define TUTTI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TUTTI_API __attribute__((visibility("default")))
#else
#define TUTTI_API
#endif

/* Version of these headers; tutti_version() gives the library's. */
#define TUTTI_VERSION_MAJOR 0
#define TUTTI_VERSION_MINOR 1
#define TUTTI_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, comparable with tutti_version(). */
#define TUTTI_VERSION_CODE                                                                         \
    (TUTTI_VERSION_MAJOR * 10000 + TUTTI_VERSION_MINOR * 100 + TUTTI_VERSION_PATCH)

/*
 * Result codes. One list generates the enum and the strings of tutti_strerror().
 * X(name, description)
 */
#define TUTTI_RESULT_MAP(X)                                                                        \
    X(SUCCESS, "success")                                                                          \
    X(ERR_INVALID_ARG, "invalid argument")                                                         \
    X(ERR_SYSTEM, "system call failed")                                                            \
    X(ERR_INTERNAL, "internal error")                                                              \
    X(ERR_REMOTE, "remote peer failed or disconnected")                                            \
    X(ERR_TIMEOUT, "timed out")                                                                    \
    X(ERR_ABORTED, "communicator aborted")                                                         \
    X(ERR_UNSUPPORTED, "not supported")                                                            \
    X(IN_PROGRESS, "operation in progress")                                                        \
    X(ERR_FENCED, "fenced out: the other ranks shrank the communicator without this one")

typedef enum {
#define TUTTI_RESULT_ENUM(name, desc) TUTTI_##name,
    TUTTI_RESULT_MAP(TUTTI_RESULT_ENUM)
#undef TUTTI_RESULT_ENUM
        TUTTI_NUM_RESULTS
} tutti_result_t;

/*
 * tutti_strerror - describe a result code.
 * Returns a static string ("invalid argument"); never NULL, also for unknown codes.
 */
TUTTI_API const char *tutti_strerror(tutti_result_t result);

/*
 * tutti_version - version of the loaded library as TUTTI_VERSION_CODE.
 * Compare with the header's TUTTI_VERSION_CODE to detect a mismatched library.
 */
TUTTI_API int tutti_version(void);

/* Element types. */
typedef enum {
    TUTTI_INT8 = 0,
    TUTTI_UINT8,
    TUTTI_INT32,
    TUTTI_UINT32,
    TUTTI_INT64,
    TUTTI_UINT64,
    TUTTI_FLOAT16, /* IEEE 754 binary16 */
    TUTTI_BFLOAT16,
    TUTTI_FLOAT32,
    TUTTI_FLOAT64,
    TUTTI_FLOAT8_E4M3, /* OCP FP8 E4M3 (CUDA's __nv_fp8_e4m3): no infinities, largest 448 */
    TUTTI_FLOAT8_E5M2, /* OCP FP8 E5M2 (__nv_fp8_e5m2): infinities, largest 57344 */
    TUTTI_NUM_DTYPES
} tutti_dtype_t;

/*
 * Reduction operators.
 *   SUM, PROD: integers wrap modulo 2^bits; fp16/bf16 compute each step in float32 and round
 *              to nearest even; FP8 likewise, saturating: a result beyond the largest finite
 *              value (an infinity included) becomes that value, as CUDA's __NV_SATFINITE
 *              conversion does.
 *   MIN, MAX:  a NaN in any input gives NaN; +0 and -0 compare equal (either may come back).
 *   AVG:       SUM divided by the number of ranks at the end; integers truncate toward zero.
 */
typedef enum {
    TUTTI_SUM = 0,
    TUTTI_PROD,
    TUTTI_MIN,
    TUTTI_MAX,
    TUTTI_AVG,
    TUTTI_NUM_OPS
} tutti_op_t;

/* Where the scalar of a premul-sum operator lives (tutti_op_create_premul_sum). */
typedef enum {
    TUTTI_SCALAR_DEVICE = 0,         /* device memory, read by each call as it runs */
    TUTTI_SCALAR_HOST_IMMEDIATE = 1, /* host memory, read once, before the creation returns */
} tutti_scalar_residence_t;

/* tutti_dtype_size - bytes per element of dtype, or 0 for an invalid dtype. */
TUTTI_API size_t tutti_dtype_size(tutti_dtype_t dtype);

/* tutti_dtype_name / tutti_op_name - "float32", "sum"...; "invalid" for bad values
 * ("premul_sum" for an operator of tutti_op_create_premul_sum, live or not). */
TUTTI_API const char *tutti_dtype_name(tutti_dtype_t dtype);
TUTTI_API const char *tutti_op_name(tutti_op_t op);

/*
 * Unique id of one communicator: the root's address plus a random secret. Opaque and
 * fixed-size so it can be sent with any transport (MPI_Bcast, a file, the environment).
 */
#define TUTTI_ID_BYTES 128
typedef struct {
    unsigned char internal[TUTTI_ID_BYTES];
} tutti_id_t;

/* Length of the printable form of an id, including the terminating NUL. */
#define TUTTI_ID_STRLEN 264

/*
 * tutti_get_id - create the id of a new communicator.
 * Called by one process; starts a rendezvous service in this process (a thread) listening
 * on the interface chosen by TUTTI_SOCKET_IFNAME (default: the first non-loopback IPv4
 * interface that is up, else loopback). The service ends once every rank has joined, or
 * after TUTTI_TIMEOUT. The caller passes the id to every rank, which then calls
 * tutti_comm_init. Blocking: no. Returns TUTTI_ERR_INVALID_ARG for id == NULL,
 * TUTTI_ERR_SYSTEM if no socket could be bound.
 */
TUTTI_API tutti_result_t tutti_get_id(tutti_id_t *id);

/*
 * tutti_id_to_string - write the printable form of id into buf (size >= TUTTI_ID_STRLEN).
 * The string contains only [0-9a-z:] and is suitable for an environment variable.
 */
TUTTI_API tutti_result_t tutti_id_to_string(const tutti_id_t *id, char *buf, size_t size);

/*
 * tutti_id_from_string - parse what tutti_id_to_string wrote. Rejects (TUTTI_ERR_INVALID_ARG,
 * with the reason in tutti_last_error()) anything else: wrong prefix, length, characters or
 * an id of another format version.
 */
TUTTI_API tutti_result_t tutti_id_from_string(const char *str, tutti_id_t *id);

/* A communicator: opaque handle. */
typedef struct tutti_comm *tutti_comm_t;

/*
 * A stream: an ordered queue of work. NULL means "complete before returning"; a host stream
 * comes from tutti_stream_create.
 */
typedef struct tutti_stream *tutti_stream_t;

/* An event: a point in a stream's queue that can be waited on (tutti_event_record). */
typedef struct tutti_event *tutti_event_t;

/*
 * Optional settings for tutti_comm_init. Initialise with TUTTI_CONFIG_INIT, then set fields;
 * `size` lets the struct grow in later versions without breaking callers. A field left at
 * its initial value takes the environment's setting (README lists the TUTTI_* variables).
 */
typedef struct {
    size_t size;      /* sizeof(tutti_config_t) as the caller was compiled */
    double timeout_s; /* bound on every wait; <= 0: TUTTI_TIMEOUT */
    int local_rank;   /* rank among the ranks of this host; < 0: derived from host ids */
    int nchannels;    /* parallel rings; <= 0: TUTTI_NCHANNELS */
} tutti_config_t;

#define TUTTI_CONFIG_INIT                                                                          \
    {                                                                                              \
        sizeof(tutti_config_t), 0.0, -1, 0                                                         \
    }

/*
 * tutti_comm_init - join a communicator of nranks ranks as rank `rank`.
 * Every rank calls it with the same id and nranks; it returns once all have joined and the
 * connections between them are set up. config may be NULL. Blocking, bounded by the
 * timeout. On failure *comm is untouched and tutti_last_error() says why.
 */
TUTTI_API tutti_result_t tutti_comm_init(tutti_comm_t *comm, int nranks, const tutti_id_t *id,
                                         int rank, const tutti_config_t *config);

/*
 * tutti_comm_init_env - join the communicator a launcher describes in the environment.
 * Rank and size come from the first complete set of: TUTTI_RANK/TUTTI_WORLD_SIZE,
 * RANK/WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/_SIZE.
 * The local rank from TUTTI_LOCAL_RANK, LOCAL_RANK, SLURM_LOCALID or
 * OMPI_COMM_WORLD_LOCAL_RANK. The rendezvous from TUTTI_ID, else MASTER_ADDR/MASTER_PORT
 * (rank 0 serves it; the secret is derived from TUTTI_SECRET if set), else, when every rank
 * is on this host (Slurm or Open MPI say so), a loopback port derived from the job id.
 * Blocking. Errors name the variable that is missing or malformed.
 */
TUTTI_API tutti_result_t tutti_comm_init_env(tutti_comm_t *comm);

/* The color of a rank that joins no new communicator in tutti_comm_split. */
#define TUTTI_SPLIT_NONE (-1)

/*
 * tutti_comm_split - new communicators from groups of comm's ranks (MPI_Comm_split,
 * ncclCommSplit). Every rank of comm calls it (a collective on comm, host side, blocking);
 * ranks passing the same color >= 0 form one new communicator, ranked by key (ties: by rank
 * in comm), and get it in *newcomm; a rank passing TUTTI_SPLIT_NONE gets NULL. config NULL:
 * the new communicator takes comm's timeout and channel count. The new communicators are
 * independent of comm (destroy each). Errors: TUTTI_ERR_INVALID_ARG (newcomm NULL, color <
 * -1), and what a collective on comm or tutti_comm_init can return, on every rank of the
 * failing group or of comm.
 */
TUTTI_API tutti_result_t tutti_comm_split(tutti_comm_t comm, int color, int key,
                                          tutti_comm_t *newcomm, const tutti_config_t *config);

/*
 * tutti_comm_shrink - a communicator of the ranks of comm that are still alive (MPI's ULFM
 * MPI_Comm_shrink, ncclCommShrink), after a failure or at any time. Called by every surviving
 * rank of comm, and only by them; blocking. The survivors agree on which ranks are gone, so
 * every one of them ends with the same membership even where they saw different failures:
 * a rank whose process exited or whose connections closed is left out at once; one that
 * sends nothing for TUTTI_SHRINK_TIMEOUT seconds (stopped, hung, or not calling this) is left
 * out then, and fenced: its own tutti_comm_shrink of comm fails with TUTTI_ERR_FENCED, and it
 * cannot reach the new communicator. *newcomm gets a communicator of the survivors, ranked in
 * their order in comm, independent of comm (destroy both); config NULL: comm's settings. A
 * rank failing while the new communicator is being made is left out too (the survivors agree
 * again). Work queued on comm's streams ends first (failed, where comm has failed). Once per
 * communicator (again: TUTTI_ERR_INVALID_ARG; shrink the new one after a later failure).
 * comm itself is left as it was. Over every transport. Errors: TUTTI_ERR_FENCED; what
 * tutti_comm_init can return.
 */
TUTTI_API tutti_result_t tutti_comm_shrink(tutti_comm_t comm, tutti_comm_t *newcomm,
                                           const tutti_config_t *config);

/*
 * tutti_comm_failed_ranks - which ranks of comm have failed: after tutti_comm_shrink, those the
 * survivors agreed to leave out (the same on every survivor); before it, those this rank can
 * see have failed without asking anyone (a process on its machine that exited, a bootstrap
 * connection closed at the other end). Writes up to size of them to ranks in increasing
 * order, and their number to *count. Non-blocking.
 */
TUTTI_API tutti_result_t tutti_comm_failed_ranks(tutti_comm_t comm, int *ranks, int size,
                                                 int *count);

/*
 * Growth: newcomers join a running job at a point its members choose. The job keeps a join
 * service open (tutti-run --elastic serves one and sets TUTTI_JOIN for every rank; across hosts
 * host 0's tutti-run serves it beside MASTER_ADDR; or tutti_join_serve). A newcomer calls
 * tutti_comm_join (tutti_comm_init_env does when TUTTI_JOINING=1) and waits there, up to
 * TUTTI_TIMEOUT; at a join point every member of comm calls tutti_comm_grow (a collective on comm,
 * blocking): if newcomers wait (up to max_new;
 * <= 0: all), *newcomm is a communicator of comm's ranks, first and in their order, then the
 * newcomers in the order they arrived, independent of comm; if none waits, *newcomm is NULL.
 * tutti_comm_joined gives, for a communicator made by either, how many of its ranks were
 * members before (ranks [members, size) are the newcomers: they have no state yet); 0 for any
 * other communicator. config NULL: comm's settings (grow), the defaults (join). The new
 * communicator's set-up waits at most TUTTI_SHRINK_TIMEOUT for any of its ranks (a newcomer
 * that died after it was admitted fails the grow on every rank then). Errors:
 * TUTTI_ERR_INVALID_ARG (TUTTI_JOIN malformed, or unset without MASTER_ADDR: on every member
 * where rank 0's),
 * TUTTI_ERR_TIMEOUT (a newcomer not admitted), what a collective on comm or tutti_comm_init
 * can return.
 */
TUTTI_API tutti_result_t tutti_comm_grow(tutti_comm_t comm, int max_new, tutti_comm_t *newcomm,
                                         const tutti_config_t *config);
TUTTI_API tutti_result_t tutti_comm_join(tutti_comm_t *comm, const tutti_config_t *config);
TUTTI_API tutti_result_t tutti_comm_joined(tutti_comm_t comm, int *members);
/* Start a join service in a thread of this process, for as long as it lives. *id zeroed: it
 * picks an address and a secret and *id names it (its string form is what TUTTI_JOIN holds);
 * else it serves at *id's address with its secret. Without TUTTI_JOIN, the ranks of a job whose
 * rendezvous is MASTER_ADDR/MASTER_PORT look for the join service at MASTER_ADDR, the port after
 * MASTER_PORT, with a secret derived from TUTTI_SECRET and both (tutti-run --nnodes --elastic
 * serves it on host 0). tutti_join_env_id: the id of the join service the environment names
 * (TUTTI_JOIN, else that one). tutti_join_waiting: how many newcomers wait at a service. */
TUTTI_API tutti_result_t tutti_join_serve(tutti_id_t *id);
TUTTI_API tutti_result_t tutti_join_env_id(tutti_id_t *id);
TUTTI_API tutti_result_t tutti_join_waiting(const tutti_id_t *service, int *count);

/*
 * tutti_comm_destroy - free a communicator and every resource it holds. Collective only in
 * the sense that peers see the connections close; it does not wait for them. NULL is a
 * no-op.
 */
TUTTI_API tutti_result_t tutti_comm_destroy(tutti_comm_t comm);

/*
 * tutti_comm_abort - make whatever comm is doing fail, from any thread.
 * A collective blocked in comm returns TUTTI_ERR_ABORTED within milliseconds; comm enters
 * its error state and tells its peers, whose blocked calls fail with TUTTI_ERR_REMOTE. Later
 * calls on comm fail at once; tutti_comm_destroy still releases it. Non-blocking.
 */
TUTTI_API tutti_result_t tutti_comm_abort(tutti_comm_t comm);

/*
 * tutti_comm_get_error - comm's error state, from any thread, without blocking (what a
 * watchdog thread polls; NCCL's ncclCommGetAsyncError). *error is TUTTI_SUCCESS while comm is
 * healthy, else the error that made it unusable: a timeout, a peer's failure (TUTTI_ERR_REMOTE)
 * or a system error met by a call or by work queued on a stream, or tutti_comm_abort
 * (TUTTI_ERR_ABORTED, at once, before the call it interrupts has returned). Errors that leave
 * comm usable (bad arguments, a mismatch TUTTI_CHECK_COLL caught) do not count. It changes
 * nothing: a peer that fails while no call on comm waits on it shows here once the next call
 * has run into it. With msg != NULL the message of that first error is copied there, cut to
 * size bytes with its NUL ("" while healthy). This function's own errors
 * (TUTTI_ERR_INVALID_ARG: comm not live, error NULL) go to the calling thread's
 * tutti_last_error() only, never to comm's last error. Not concurrently with
 * tutti_comm_destroy of the same comm (stop the watchdog first).
 */
TUTTI_API tutti_result_t tutti_comm_get_error(tutti_comm_t comm, tutti_result_t *error, char *msg,
                                              size_t size);

/* Queries. Each writes its output and returns TUTTI_SUCCESS, or TUTTI_ERR_INVALID_ARG. */
TUTTI_API tutti_result_t tutti_comm_rank(tutti_comm_t comm, int *rank);
TUTTI_API tutti_result_t tutti_comm_size(tutti_comm_t comm, int *size);
TUTTI_API tutti_result_t tutti_comm_local_rank(tutti_comm_t comm, int *local_rank);
TUTTI_API tutti_result_t tutti_comm_local_size(tutti_comm_t comm, int *local_size);

/*
 * tutti_comm_last_error - the message of the last failure on comm ("" if none). The string
 * belongs to comm and stays valid until its next call. With comm == NULL, the same as
 * tutti_last_error().
 */
TUTTI_API const char *tutti_comm_last_error(tutti_comm_t comm);

/* tutti_last_error - the last failure message of this thread ("" if none). Thread-local. */
TUTTI_API const char *tutti_last_error(void);

/*
 * Collectives. Every rank of comm calls the same collectives in the same order with matching
 * count, dtype, op and root. Buffers must not overlap unless the call is in place:
 *   all_reduce:     sendbuf == recvbuf
 *   all_gather:     sendbuf == recvbuf + rank * sendcount elements
 *   reduce_scatter: recvbuf == sendbuf + rank * recvcount elements
 *   broadcast:      sendbuf == recvbuf (sendbuf is only read on root)
 *   reduce:         sendbuf == recvbuf (recvbuf is only written on root)
 * With stream == NULL each call returns when this rank's part is complete: recvbuf holds the
 * result and sendbuf may be reused. With a host stream the call returns once it is queued and
 * the same holds when the stream has run it. Every rank checks every buffer it passes, used
 * or not (a non-root's unused sendbuf of a broadcast too), against these rules.
 * Errors: TUTTI_ERR_INVALID_ARG before anything of this rank's data is sent. A rank refused
 * for its own buffers (NULL, overlapping, host and device mixed) still takes part in the call
 * without them, so its peers fail it at once with TUTTI_ERR_INVALID_ARG naming that rank and
 * the reason (a rank that only sends in the call, as a reduce's non-root, may finish it) and
 * comm stays usable; on a CUDA stream, the device path or in a group the refusing rank puts
 * comm in the error state instead. Ranks whose calls differ (another collective, count,
 * dtype, op or root, or one call missing) fail with TUTTI_ERR_INVALID_ARG where their
 * messages meet, naming both calls, and comm is then in an error state; no call completes
 * with data of another. TUTTI_ERR_TIMEOUT/REMOTE/SYSTEM during the operation, after which
 * comm is in an error state and later calls fail at once.
 */

/* recvbuf[i] = op over ranks of sendbuf[i], for i < count, on every rank. */
TUTTI_API tutti_result_t tutti_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                          tutti_dtype_t dtype, tutti_op_t op, tutti_comm_t comm,
                                          tutti_stream_t stream);

/* recvbuf[r * sendcount + i] = sendbuf of rank r [i]; recvbuf holds nranks * sendcount. */
TUTTI_API tutti_result_t tutti_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          tutti_dtype_t dtype, tutti_comm_t comm,
                                          tutti_stream_t stream);

/* recvbuf[i] = op over ranks of sendbuf[rank * recvcount + i]; sendbuf holds nranks * recvcount.
 * Recursive halving (small calls on host buffers, inputs up to 64 MiB) keeps its partial sums
 * in a scratch buffer of the communicator's, as large as the largest such input, freed with
 * the communicator. */
TUTTI_API tutti_result_t tutti_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                              tutti_dtype_t dtype, tutti_op_t op, tutti_comm_t comm,
                                              tutti_stream_t stream);

/* recvbuf on every rank = sendbuf of root. */
TUTTI_API tutti_result_t tutti_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                         tutti_dtype_t dtype, int root, tutti_comm_t comm,
                                         tutti_stream_t stream);

/* recvbuf on root = op over ranks of sendbuf; recvbuf may be NULL on other ranks. */
TUTTI_API tutti_result_t tutti_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                      tutti_dtype_t dtype, tutti_op_t op, int root,
                                      tutti_comm_t comm, tutti_stream_t stream);

/*
 * tutti_op_create_premul_sum - an operator, for comm's all-reduce, reduce-scatter and reduce on
 * dtype, that multiplies each rank's input by *scalar (of dtype) before summing: the result
 * is sum over ranks r of scalar_r * sendbuf_r (NCCL's ncclRedOpCreatePreMulSum). Ranks may
 * pass different scalars; every rank of a call passes such an operator. The product follows
 * PROD's rules (integers wrap; float16, bfloat16 and FP8 compute in float32 and round once),
 * then SUM's. residence: TUTTI_SCALAR_HOST_IMMEDIATE reads *scalar now; TUTTI_SCALAR_DEVICE
 * keeps the address (device or managed memory) and each call reads it when it runs, in stream
 * order. On host memory the input is scaled as it is read. On the device path (and in place
 * on one rank) it is scaled once before the collective moves any of it: in recvbuf where the
 * result lands on this rank (all-reduce, the root of a reduce), otherwise in a buffer of the
 * communicator's as large as the largest such input (freed with it).
 * Errors: TUTTI_ERR_INVALID_ARG for a NULL op or scalar, a bad dtype or residence, a host
 * scalar with TUTTI_SCALAR_DEVICE; TUTTI_ERR_UNSUPPORTED for TUTTI_SCALAR_DEVICE without CUDA.
 * A call refuses (TUTTI_ERR_INVALID_ARG, naming the op) an operator of another communicator,
 * a destroyed one, or one made for another dtype.
 */
TUTTI_API tutti_result_t tutti_op_create_premul_sum(tutti_op_t *op, const void *scalar,
                                                    tutti_dtype_t dtype,
                                                    tutti_scalar_residence_t residence,
                                                    tutti_comm_t comm);

/* tutti_op_destroy - free an operator of tutti_op_create_premul_sum. Calls made with it keep
 * what they need: it may be destroyed as soon as the last of them has returned (queued or
 * not). Errors: TUTTI_ERR_INVALID_ARG for a built-in op, one already destroyed or another
 * communicator's. */
TUTTI_API tutti_result_t tutti_op_destroy(tutti_op_t op, tutti_comm_t comm);

/*
 * Point to point. A send to peer is matched with that peer's recv from this rank, in call
 * order; count and dtype must agree. Outside a group a send may block until the peer
 * receives: pairs that send to each other at once belong in a group.
 */
TUTTI_API tutti_result_t tutti_send(const void *sendbuf, size_t count, tutti_dtype_t dtype,
                                    int peer, tutti_comm_t comm, tutti_stream_t stream);
TUTTI_API tutti_result_t tutti_recv(void *recvbuf, size_t count, tutti_dtype_t dtype, int peer,
                                    tutti_comm_t comm, tutti_stream_t stream);

/*
 * tutti_all_to_all - every rank sends block j of sendbuf (count elements) to rank j and
 * receives rank i's block for it into block i of recvbuf (both n * count elements). One batch
 * of point-to-point operations: inside tutti_group_start/end it joins the caller's group.
 * Host or device buffers, any stream, as tutti_send/tutti_recv. sendbuf and recvbuf must not
 * overlap (no in-place form).
 */
TUTTI_API tutti_result_t tutti_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                          tutti_dtype_t dtype, tutti_comm_t comm,
                                          tutti_stream_t stream);

/*
 * tutti_all_to_allv - all-to-all with a block size per peer (MPI_Alltoallv): sendcounts[j]
 * elements at sendbuf + sdispls[j] elements go to rank j, and rank i's block for this rank,
 * recvcounts[i] elements, lands at recvbuf + rdispls[i] elements. The four arrays hold one
 * entry per rank; sendcounts[j] here must equal recvcounts[i] on rank j (i: this rank): a
 * block of another size fails the receiver's call, naming the sender, and with it the calls
 * of the ranks that wait on it (TUTTI_CHECK_COLL=1: both ranks of the pair, before anything
 * moves). Blocks may lie in any order with gaps, which are left untouched; the span of the
 * send blocks (first byte of the lowest to last of the highest) must not overlap that of the
 * receive blocks. Otherwise as tutti_all_to_all.
 */
TUTTI_API tutti_result_t tutti_all_to_allv(const void *sendbuf, const size_t *sendcounts,
                                           const size_t *sdispls, void *recvbuf,
                                           const size_t *recvcounts, const size_t *rdispls,
                                           tutti_dtype_t dtype, tutti_comm_t comm,
                                           tutti_stream_t stream);

/*
 * tutti_gather - rank r's sendbuf (count elements) lands in block r of the root's recvbuf
 * (n * count elements; ignored, and may be NULL, on the other ranks). In place on the root:
 * sendbuf == recvbuf + root * count elements (its block is already there). A rank whose count
 * differs from the root's fails the root's call, naming the rank (TUTTI_CHECK_COLL=1: both,
 * before anything moves). Ranks that name different roots wait on each other and fail after
 * TUTTI_TIMEOUT (sooner if that rank exits), naming the rank they wait for. One batch of
 * point-to-point operations, as tutti_all_to_all: host or device buffers, any stream, inside
 * tutti_group_start/end it joins the caller's group.
 */
TUTTI_API tutti_result_t tutti_gather(const void *sendbuf, void *recvbuf, size_t count,
                                      tutti_dtype_t dtype, int root, tutti_comm_t comm,
                                      tutti_stream_t stream);

/*
 * tutti_scatter - block r of the root's sendbuf (n * count elements; ignored, and may be NULL,
 * on the other ranks) lands in rank r's recvbuf (count elements). In place on the root:
 * recvbuf == sendbuf + root * count elements. Otherwise as tutti_gather.
 */
TUTTI_API tutti_result_t tutti_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                       tutti_dtype_t dtype, int root, tutti_comm_t comm,
                                       tutti_stream_t stream);

/*
 * tutti_group_start / tutti_group_end - batch calls, as NCCL's groups. Between the two, calls
 * are only recorded (each checks its arguments and returns at once); tutti_group_end runs the
 * group's sends and receives concurrently (tutti_all_to_all, tutti_all_to_allv, tutti_gather
 * and tutti_scatter join that batch), then its other collectives in call order, and returns
 * when all are complete (or, when the calls name a stream, all the same one, once they are
 * queued on it). Consecutive all-reduces, all-gathers or reduce-scatters of one kind, dtype
 * and built-in op, each reading and writing up to 64 KiB on host buffers, with no stream,
 * travel as one call of up to 256 KiB over a packed copy: one call's latency for all of them.
 * As in NCCL, no call may depend on the result of another call of its group. A call that
 * reads what an earlier one writes is not packed with it, so where every rank's calls overlap
 * alike it still gets the result of the calls one after another; where they do not, the ranks
 * pack differently and the calls fail (with TUTTI_CHECK_COLL=1, naming the mismatch) rather
 * than mix values. Calls on one communicator only, from one thread; groups do not nest (an
 * inner start/end pair is counted and only the outermost end runs the group). Buffers must
 * stay valid until tutti_group_end returns, or, with a host stream, until the stream has run
 * what tutti_group_end queued on it.
 */
TUTTI_API tutti_result_t tutti_group_start(void);
TUTTI_API tutti_result_t tutti_group_end(void);

/* Returns on each rank once every rank has called it. */
TUTTI_API tutti_result_t tutti_barrier(tutti_comm_t comm, tutti_stream_t stream);

/*
 * tutti_comm_register - promise comm that [buf, buf + bytes) stays allocated until
 * tutti_comm_deregister (as ncclCommRegister). Collectives and sends whose buffers lie inside
 * a registered range may then be sent straight from that memory: over InfiniBand/RoCE
 * (net_ib) the range is registered with the HCA once, on first use, and RDMA-written from,
 * instead of being copied into a staging slot first; the registration is kept in a
 * process-wide cache shared by every communicator (ranges on the same pages share one memory
 * region) and dropped when its last user deregisters. Transports that cannot use it (shm,
 * sockets) ignore it, and unregistered memory works as before. Ranges may overlap. Device
 * memory: a tutti_send from it over net_ib uses GPUDirect RDMA (a dma-buf registration)
 * where the driver and libibverbs offer it; everything else on device memory is staged
 * through pinned host memory. *handle names the registration.
 * Errors: TUTTI_ERR_INVALID_ARG for a NULL buf or handle, bytes == 0.
 */
TUTTI_API tutti_result_t tutti_comm_register(tutti_comm_t comm, void *buf, size_t bytes,
                                             void **handle);

/*
 * tutti_comm_deregister - end a registration. Waits for the operation comm is running; the
 * range must not be used by work still queued on a stream (it would be copied, but the
 * memory must still be there). After it returns the memory may be freed.
 * TUTTI_ERR_INVALID_ARG if handle is not a live registration of comm.
 */
TUTTI_API tutti_result_t tutti_comm_deregister(tutti_comm_t comm, void *handle);

/*
 * Symmetric memory: host memory that every rank of comm on the same host can address.
 *
 * tutti_mem_alloc - bytes of shared memory (page-rounded, zeroed) for this rank, in *ptr. Not
 * collective: each rank allocates its own. The memory can be used like any other; it becomes
 * visible to the other ranks once a window is registered over it.
 * tutti_mem_alloc_device - the same in CUDA device memory (zeroed), on the device that was
 * current when comm was created; peers open it through CUDA IPC handles. Collectives on device
 * windows take the path where comm has the device path (its ranks on one host, each GPU
 * reaching the others') and the call is large enough for it (TUTTI_CUDA_P2P_MIN); a
 * premul-sum operator takes the usual path. TUTTI_ERR_UNSUPPORTED without a usable device.
 * tutti_mem_free - free either (ptr as the allocation gave it). Not collective. Refused
 * (named) while a window still covers it or work is queued on a stream of comm.
 *
 * tutti_comm_window_register - collective: every rank of comm calls it, in the same order, each
 * with its own [buf, buf + bytes) inside memory of tutti_mem_alloc, or on every rank CUDA
 * device memory (tutti_mem_alloc_device's, or any cudaMalloc allocation, which must outlive
 * the window): a window is of one kind on every rank. Each rank maps the
 * windows of the other ranks of its host. From then on a collective whose buffers lie in
 * windows on every rank (any window, any offset) reads and writes its peers' buffers in
 * place, in one pass, instead of through the transport: all-reduce, reduce-scatter,
 * all-gather, broadcast, reduce, on communicators whose ranks share one host (calls of up to
 * 1 KiB of input per rank, broadcasts aside, go through the ranks' shared flags and need no
 * window). Where any rank's buffer is not in a window the call takes the usual path on every
 * rank (TUTTI_CHECK_COLL=1 makes that an error naming the rank). TUTTI_SYMMETRIC=0 on any
 * rank turns the path off for the communicator (decided at its first registration). Each
 * rank maps the others' memory through /proc/<pid>/fd: where processes may not (a ptrace
 * policy), registration fails. Fails on every rank, naming the rank, if a rank's range is
 * not tutti_mem_alloc memory or cannot be mapped. *win names the window. What is left is
 * freed with the communicator. After a call on windows fails, a peer that stalled in it past
 * TUTTI_TIMEOUT may still write its part of that call into this rank's output when it resumes:
 * free that memory (or destroy the communicator) rather than reuse it.
 * tutti_comm_window_deregister - end it (every rank, in the same order; no exchange). Waits
 * for work queued on streams of comm.
 */
TUTTI_API tutti_result_t tutti_mem_alloc(tutti_comm_t comm, size_t bytes, void **ptr);
TUTTI_API tutti_result_t tutti_mem_alloc_device(tutti_comm_t comm, size_t bytes, void **ptr);
TUTTI_API tutti_result_t tutti_mem_free(tutti_comm_t comm, void *ptr);
TUTTI_API tutti_result_t tutti_comm_window_register(tutti_comm_t comm, void *buf, size_t bytes,
                                                    void **win);
TUTTI_API tutti_result_t tutti_comm_window_deregister(tutti_comm_t comm, void *win);

/*
 * Streams and events.
 *
 * A host stream owns a worker thread that runs the work queued on it one item at a time, in
 * the order it was queued: collectives and point-to-point groups on any communicator, and host
 * functions (tutti_stream_launch). A collective given a stream checks its arguments at once
 * (an invalid argument is returned by the call itself, nothing is queued) and returns; its
 * buffers must stay untouched until the stream (or an event recorded after it) says the work
 * is done. The caller computes meanwhile: this is how the DDP layer overlaps gradient
 * reduction with the backward pass.
 *
 * Order across ranks: collectives on one communicator must run in the same order on every
 * rank. Work on one stream runs in queue order; work of two streams on one communicator runs
 * in an unspecified order, so give each communicator one stream at a time. A call with
 * stream == NULL on a communicator first waits for that communicator's work queued on any
 * stream (the way CUDA's legacy default stream orders with other streams), then runs on the
 * calling thread; from inside a host function it runs at once.
 *
 * Errors: the first failure of queued work (a collective's error or a host function's
 * non-success result) is kept by the stream and returned by tutti_stream_sync/query and by
 * the events recorded after it; tutti_stream_last_error gives its message. Work queued after a
 * failure is not run: its collectives put their communicators into the error state (so peers
 * fail at once instead of waiting for a rank that will not come), its host functions are
 * skipped. A stream that failed stays failed; destroy it.
 */

/* A host function for tutti_stream_launch: returns TUTTI_SUCCESS or the failure to record. */
typedef tutti_result_t (*tutti_host_fn_t)(void *arg);

/*
 * tutti_stream_create - create a host stream and start its worker thread.
 * Errors: TUTTI_ERR_INVALID_ARG (stream NULL), TUTTI_ERR_SYSTEM (no memory or thread).
 */
TUTTI_API tutti_result_t tutti_stream_create(tutti_stream_t *stream);

/*
 * tutti_stream_destroy - wait for the queued work, stop the worker, free the stream. Returns
 * the stream's error if its work failed (the stream is freed all the same). NULL is a no-op.
 * Events recorded on the stream must not be queried or waited on afterwards.
 */
TUTTI_API tutti_result_t tutti_stream_destroy(tutti_stream_t stream);

/*
 * tutti_stream_sync - block until everything queued so far has run. Returns TUTTI_SUCCESS, or
 * the stream's first failure (its message: tutti_stream_last_error, also copied to the calling
 * thread's tutti_last_error).
 */
TUTTI_API tutti_result_t tutti_stream_sync(tutti_stream_t stream);

/*
 * tutti_stream_query - TUTTI_SUCCESS if everything queued has run, TUTTI_IN_PROGRESS if not,
 * the stream's failure if it failed. Never blocks.
 */
TUTTI_API tutti_result_t tutti_stream_query(tutti_stream_t stream);

/*
 * tutti_stream_launch - queue fn(arg) on the stream's worker, after the work queued before.
 * fn may queue more work (on this or other streams) and may call NULL-stream collectives; it
 * must not sync or destroy its own stream.
 */
TUTTI_API tutti_result_t tutti_stream_launch(tutti_stream_t stream, tutti_host_fn_t fn, void *arg);

/*
 * tutti_stream_wait_event - work queued on stream after this call starts only once event has
 * completed (work on another stream). Waiting on an event never recorded does nothing.
 */
TUTTI_API tutti_result_t tutti_stream_wait_event(tutti_stream_t stream, tutti_event_t event);

/* tutti_stream_last_error - message of the stream's failure ("" while healthy). */
TUTTI_API const char *tutti_stream_last_error(tutti_stream_t stream);

/* tutti_event_create / tutti_event_destroy - an event object, reusable by recording again. */
TUTTI_API tutti_result_t tutti_event_create(tutti_event_t *event);
TUTTI_API tutti_result_t tutti_event_destroy(tutti_event_t event);

/*
 * tutti_event_record - make event stand for the work queued on stream so far; replaces
 * what it stood for before. Never blocks.
 */
TUTTI_API tutti_result_t tutti_event_record(tutti_event_t event, tutti_stream_t stream);

/*
 * tutti_event_query - TUTTI_SUCCESS if the recorded work has run (or the event was never
 * recorded), TUTTI_IN_PROGRESS if not, the stream's failure if that work failed.
 * tutti_event_sync - block until then; same results.
 */
TUTTI_API tutti_result_t tutti_event_query(tutti_event_t event);
TUTTI_API tutti_result_t tutti_event_sync(tutti_event_t event);

/*
 * CUDA. A libtutti built with CUDA (meson -Dcuda=auto finds nvcc) on a machine with a driver
 * and a device takes CUDA device and managed memory in every collective and in
 * tutti_send/tutti_recv. The kind of each buffer is
 * detected; a call that mixes host and device buffers is refused (TUTTI_ERR_INVALID_ARG). Semantics
 * by stream:
 *   - NULL or a host stream: the call (or the stream's worker) copies the inputs from the
 *     device after the work already queued on CUDA's legacy default stream, runs, copies the
 *     results back, and completes as for host memory;
 *   - a CUDA stream wrapped with tutti_stream_wrap_cuda: the call returns at once (on the
 *     device path below with TUTTI_CUDA_ASYNC=0: once done); the work runs in the CUDA
 *     stream's order: it sees what the kernels queued before it wrote, and
 *     kernels queued after it see its results. tutti_stream_sync/query on the wrapper wait
 *     for / poll the CUDA stream and report a failed collective (cudaStreamSynchronize alone
 *     does not tell: a failed collective leaves its outputs undefined). Host buffers may be
 *     given on a wrapped stream too; they are used in stream order.
 * Where every rank is on one host and its GPU reaches the others' (the same GPU, or peer
 * access), collectives and messages to other ranks on device buffers move GPU to GPU (CUDA
 * IPC, CUDA kernels; the device path, from TUTTI_CUDA_P2P_MIN bytes); otherwise device data
 * goes through pinned host memory (a registered device send buffer over net_ib excepted:
 * GPUDirect RDMA, see tutti_comm_register). On the device path every rank of a collective,
 * and both ends of a message, must pass device memory if one does. Without CUDA or a device,
 * device pointers are not recognised (do not pass them).
 */

/*
 * tutti_cuda_devices - the number of CUDA devices this process can use. TUTTI_ERR_UNSUPPORTED
 * (reason in tutti_last_error) when libtutti was built without CUDA, or there is no driver
 * or no device.
 */
TUTTI_API tutti_result_t tutti_cuda_devices(int *count);

/*
 * tutti_stream_wrap_cuda - a tutti stream that stands for the cudaStream_t `cuda_stream`
 * (passed as void *; NULL is CUDA's legacy default stream), for collectives in that stream's
 * order. The CUDA stream must outlive the wrapper; tutti_stream_destroy frees only the
 * wrapper (after synchronising the CUDA stream). tutti_stream_launch, tutti_stream_wait_event
 * and tutti_event_record are not available on it (use their CUDA equivalents).
 * Errors: TUTTI_ERR_UNSUPPORTED without CUDA or a device.
 */
TUTTI_API tutti_result_t tutti_stream_wrap_cuda(tutti_stream_t *stream, void *cuda_stream);

/*
 * tutti_comm_cuda_stream - comm's own wrapper of the cudaStream_t `cuda_stream` (NULL: the
 * legacy default stream): as tutti_stream_wrap_cuda, but made on the first call that names
 * that CUDA stream, found again by later calls, and freed by tutti_comm_destroy without
 * touching the CUDA stream, so the program may destroy its CUDA streams in any order and
 * never destroys the wrapper (tutti_stream_destroy refuses it). A handle that comes back for
 * a new CUDA stream gets a new wrapper (streams are told apart by cudaStreamGetId).
 * Errors: TUTTI_ERR_UNSUPPORTED without CUDA or a device, TUTTI_ERR_INVALID_ARG for a
 * destroyed CUDA stream.
 */
TUTTI_API tutti_result_t tutti_comm_cuda_stream(tutti_comm_t comm, void *cuda_stream,
                                                tutti_stream_t *stream);

/*
 * Tracing. With TUTTI_TRACE=file.json set, the library records every collective (and each
 * phase of its schedule, per channel) and writes a Chrome / Perfetto trace (JSON array of
 * complete events; open it in ui.perfetto.dev or chrome://tracing) when the process exits.
 * The ranks of a host share the file, one process (pid = rank) each; a name containing %r
 * gives one file per rank instead. Applications add their own spans on the same clock.
 */

/* tutti_trace_enabled - non-zero when TUTTI_TRACE is set. */
TUTTI_API int tutti_trace_enabled(void);

/* tutti_trace_clock - the trace's clock in microseconds (monotonic; one clock per host). */
TUTTI_API double tutti_trace_clock(void);

/*
 * tutti_trace_span - record a span [start_us, end_us) of the calling thread, with a category
 * ("compute") and optional args: the text of a JSON object ("{\"step\":3}") or NULL. Does
 * nothing when tracing is off. Names are cut at 63 bytes, args at 159.
 */
TUTTI_API void tutti_trace_span(const char *name, const char *category, double start_us,
                                double end_us, const char *args);

/* tutti_trace_name_thread - the name of the calling thread's track ("main", "loader"). */
TUTTI_API void tutti_trace_name_thread(const char *name);

/*
 * tutti_trace_flush - write the events recorded so far (also done at exit). Returns
 * TUTTI_ERR_SYSTEM, with the file named, if it cannot be written.
 */
TUTTI_API tutti_result_t tutti_trace_flush(void);

/*
 * tutti_env_print - print every TUTTI_* variable with its current value, where the value
 * came from (default or environment) and a line of help. For `tutti-run --env`.
 */
TUTTI_API void tutti_env_print(FILE *out);

/*
 * tutti_env_check - does every TUTTI_* variable the environment sets hold a value its knob
 * accepts (README, "Environment variables")? TUTTI_SUCCESS, or TUTTI_ERR_INVALID_ARG with
 * tutti_last_error() naming each bad variable, its value and what it accepts. Every init
 * function makes this check first and fails the same way; tutti-run makes it before it starts
 * any rank.
 */
TUTTI_API tutti_result_t tutti_env_check(void);

/*
 * tutti_env_number - the value of the numeric TUTTI_* knob `name` as the library reads it: the
 * environment's where set, else the default (byte counts in bytes, times in seconds). For
 * bindings that take a knob of their own from the one table. TUTTI_ERR_INVALID_ARG for a name
 * that is not a numeric knob, or a value the knob does not accept (named as tutti_env_check
 * names it).
 */
TUTTI_API tutti_result_t tutti_env_number(const char *name, double *value);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_H */
