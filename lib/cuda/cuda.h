/*
 * cuda.h -- device memory in collectives (built with CUDA; see cuda.c). Without CUDA the
 * functions exist and say so: tt_cuda_ready() is 0 and nothing else is called.
 */
#ifndef TT_CUDA_H
#define TT_CUDA_H

#include "lib/engine/engine.h"
#include "lib/gpu/gpu.h"
#include "lib/stream/stream.h"

#include <stddef.h>
#include <stdint.h>

struct tutti_comm;

/*
 * Run checked collective c, whose buffers are device memory, on this thread: copy the inputs
 * into pinned host memory, run the host collective there, copy the results back (blocking).
 * comm's run lock is held. `run` is the host path.
 */
tutti_result_t tt_cuda_staged_exec(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_result_t (*run)(struct tutti_comm *,
                                                         const struct tt_call *));

/*
 * Queue checked collective c on CUDA-wrapped stream s, stream-ordered: device inputs copied to
 * pinned memory on s, a host function on s that runs the collective, device outputs copied
 * back on s. Returns at once. `device`: the buffers are device memory (else host memory,
 * used in place).
 */
tutti_result_t tt_cuda_enqueue(struct tutti_comm *comm, const struct tt_call *c, tutti_stream_t s,
                               int device, const struct tt_work_ops *ops);
/* Queue checked collective c of the device path on CUDA-wrapped stream s (cuda_async.c).
 * Returns at once. */
tutti_result_t tt_cuda_enqueue_dev(struct tutti_comm *comm, const struct tt_call *c,
                                   tutti_stream_t s, const struct tt_work_ops *ops);

/*
 * Point-to-point batches with device buffers (ops[i] is the operation behind bufs[i]):
 * tt_cuda_p2p_stage points bufs[i] of every device operation that rdma[i] does not name at
 * pinned staging and copies the sends' bytes there (blocking); tt_cuda_p2p_finish copies
 * the receives' bytes back to the device after the batch. rdma[i]: the transport reads that
 * send's device memory itself (GPUDirect RDMA); stage then first waits for CUDA's legacy
 * default stream, as a staging copy would have. comm's run lock is held.
 */
tutti_result_t tt_cuda_p2p_stage(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                 void **bufs, const unsigned char *rdma);
tutti_result_t tt_cuda_p2p_finish(struct tutti_comm *comm, struct tt_p2p_op *const *ops, int nops,
                                  void *const *bufs, const unsigned char *rdma);

/*
 * Queue a point-to-point batch on CUDA-wrapped stream s, stream-ordered like tt_cuda_enqueue:
 * device send buffers copied to pinned staging on s, a host function on s that runs the batch
 * (on host memory only), device receive buffers copied back on s. Returns at once.
 */
tutti_result_t tt_cuda_enqueue_p2p(struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                                   tutti_stream_t s, const struct tt_work_ops *wops);

/* Free the communicator's staging buffer and device stream (at destroy, after its p2p
 * connections are closed). */
void tt_cuda_comm_free(struct tutti_comm *comm);

/*
 * The device path (cuda_dev.c): device buffers that move GPU to GPU over p2p connections.
 * tt_cuda_self fills this rank's record (its current device's PCI bus id, "" for none) before
 * the init all-gather; tt_cuda_dev_setup then decides comm->cuda.dev_path, the same on every
 * rank. tt_cuda_dev_check refuses buffers on a device other than the communicator's.
 */
struct tt_rank_info;
/* TUTTI_CUDA_P2P_MIN and TUTTI_CUDA_BUFFSIZE, checked at init (after TUTTI_STEPS). */
tutti_result_t tt_cuda_read_config(struct tutti_comm *comm);
void tt_cuda_self(struct tutti_comm *comm, struct tt_rank_info *me);
tutti_result_t tt_cuda_dev_setup(struct tutti_comm *comm);
tutti_result_t tt_cuda_dev_check(struct tutti_comm *comm, const struct tt_call *c);
/* Does checked call c take the device path (device buffers, comm->cuda.dev_path, at least
 * TUTTI_CUDA_P2P_MIN bytes)? The same answer on every rank for the same call. */
int tt_cuda_dev_use(const struct tutti_comm *comm, const struct tt_call *c);
/* Does point-to-point operation op take the device path (device memory, comm->cuda.dev_path,
 * another rank, at least TUTTI_CUDA_P2P_MIN bytes)? Both ends decide alike when both pass
 * device memory, which the device path requires (NCCL's rule). check: its buffer must be on
 * the communicator's device. */
int tt_cuda_dev_p2p(const struct tutti_comm *comm, const struct tt_p2p_op *op);
tutti_result_t tt_cuda_dev_check_p2p(struct tutti_comm *comm, const char *fn,
                                     const struct tt_p2p_op *op);
/* The order a batch runs in: its device-path operations (tt_cuda_dev_p2p) first, then the
 * others, each part in call order, into out (nops entries; NULL: only count). Returns how
 * many take the device path. Every rank splits alike, so each part meets its peers'. */
int tt_cuda_p2p_split(const struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                      struct tt_p2p_op *out);
/* At init, where comm->cuda.dev_path: the device stream, its mover, every kernel loaded. */
tutti_result_t tt_cuda_dev_prepare(struct tutti_comm *comm);
/*
 * Around one plan on the device path: begin makes the communicator's device current (the one
 * before goes to *prev_dev) and its stream wait for the cudaEvent_t `after` (NULL: for what
 * CUDA's legacy default stream holds now); comm->cuda.mover queues the executor's copies and
 * kernels on that stream; end waits for the stream and restores the device.
 */
tutti_result_t tt_cuda_dev_begin(struct tutti_comm *comm, void *after, int *prev_dev);
/* Those two as the engine's hooks (engine.h). */
extern const struct tt_dev_hooks tt_cuda_dev_hooks;
tutti_result_t tt_cuda_dev_end(struct tutti_comm *comm, int prev_dev);
void tt_cuda_dev_free(struct tutti_comm *comm);

/*
 * Device-path work w (a collective, or a point-to-point batch whose operations all take the
 * device path), or a staged call's host part, on CUDA-wrapped stream s (cuda_async.c): with
 * comm->cuda.async it is queued on the communicator's runner and s waits on the GPU until it is
 * done (returns at once); otherwise it runs now on this thread, after an event recorded on s, and
 * returns once done. Takes w->ops either way. tt_cuda_async_prepare (from tt_cuda_dev_prepare,
 * device current) decides which (TUTTI_CUDA_ASYNC, the driver's stream memory operations);
 * tt_cuda_async_free undoes it.
 */
tutti_result_t tt_cuda_dev_on_stream(struct tutti_comm *comm, struct tt_work *w, tutti_stream_t s);
tutti_result_t tt_cuda_async_prepare(struct tutti_comm *comm);
void tt_cuda_async_free(struct tutti_comm *comm);
/* The runner without the device path (a stream of its own for the probe; device current), for
 * a communicator with ranks in this process: their staged calls then hold no host function
 * (cuda_stream.c, queue_host_part), which CUDA runs one at a time. Freed as the device path's. */
tutti_result_t tt_cuda_runner_prepare(struct tutti_comm *comm);

#endif
