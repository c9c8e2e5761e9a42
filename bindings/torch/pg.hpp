/*
 * pg.hpp -- tutti as a torch.distributed process group: ProcessGroupTutti and its Work.
 *
 * A thin layer over include/tutti.h (never lib/). Each operation is checked on the calling
 * thread (device, layout, dtype, sizes: refused before anything is sent) and returns a Work at
 * once; the tutti call itself runs on the group's tutti host stream, in submission order, and
 * completes the Work and its Future there. Callbacks chained on a Future (DDP's communication
 * hooks) run on that worker as soon as the operation ends; an operation they submit runs there
 * and then, before anything queued later, so every rank orders it alike. Sends and receives
 * wait in a batch until something needs them (a wait on any of them, any other operation) and
 * then run as one tutti group: an isend and an irecv between two ranks cannot block each other.
 */
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include "tutti.h"

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tutti_torch
{

/* PyTorch 2 moved the operations from ProcessGroup to c10d::Backend, which a ProcessGroup
 * dispatches to; 1.13 (Debian 12's) has the operations on ProcessGroup itself. */
#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;
#else
using Base = c10d::ProcessGroup;
#endif

class ProcessGroupTutti;

class WorkTutti : public c10d::Work
{
  public:
    WorkTutti(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
              ProcessGroupTutti *batch_of);
    bool isCompleted() override;
    bool isSuccess() const override;
    std::exception_ptr exception() const override;
    bool wait(std::chrono::milliseconds timeout) override;
    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    void abort() override;

    /* The worker's verdict: finishes the Work, then completes the Future (running callbacks). */
    void complete(std::exception_ptr error);

  private:
    void runBatch() const;

    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    /* A send or receive still in its group's pending batch: the group that runs it. */
    ProcessGroupTutti *batch_of_;
};

/* One operation: what runs on the worker and the Work it completes. */
struct Op {
    const char *name;                    /* PyTorch's name of it ("allreduce") */
    std::function<tutti_result_t()> run; /* the tutti call(s), stream NULL; owns its tensors */
    std::function<void()> done;          /* after success: copies out of staging tensors */
    c10::intrusive_ptr<WorkTutti> work;
};

class ProcessGroupTutti : public Base
{
  public:
    ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                      double timeout_s);
    ~ProcessGroupTutti() override;

    const std::string getBackendName() const override { return "tutti"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &outputSplits,
                                                 std::vector<int64_t> &inputSplits,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    /* This rank refused operation fn (its checks threw) that its peers may still make: the
     * communicator is aborted in that operation's turn on the worker (after the work queued
     * before it), so the peers fail there instead of waiting for it or pairing it with this
     * rank's next call. */
    void refused(const char *fn) noexcept;
    /* Runs the pending sends and receives (a Work of theirs is waited on). */
    void flushBatch();
    /* Aborts the communicator: what runs or waits fails at once, here and on the peers. */
    void abortComm();
    /* The communicator's error state: "" while healthy. */
    std::string errorState() const;
    tutti_comm_t comm() const { return comm_; }

  private:
    c10::intrusive_ptr<WorkTutti> newWork(c10d::OpType type, const char *title,
                                          std::vector<at::Tensor> outputs, bool batched);
    c10::intrusive_ptr<c10d::Work> submit(Op op);
    c10::intrusive_ptr<c10d::Work> submitP2P(Op op);
    void launch(std::vector<Op> ops, bool group);
    void enqueue(std::vector<Op> ops, bool group);
    static tutti_result_t runOnWorker(void *arg);
    void execute(std::vector<Op> &ops, bool group);

    tutti_comm_t comm_ = nullptr;
    tutti_stream_t stream_ = nullptr;
    std::mutex mu_;         /* submission order, the pending batch */
    std::vector<Op> batch_; /* sends and receives not yet run */
};

/* Declared first in each operation: when the operation's checks throw, tells the group
 * (ProcessGroupTutti::refused) as the exception leaves. */
class RefusalGuard
{
  public:
    RefusalGuard(ProcessGroupTutti &pg, const char *fn)
        : pg_(pg), fn_(fn), unwinding_(std::uncaught_exceptions())
    {
    }
    ~RefusalGuard()
    {
        if (std::uncaught_exceptions() > unwinding_)
            pg_.refused(fn_);
    }

  private:
    ProcessGroupTutti &pg_;
    const char *fn_;
    int unwinding_;
};

/* Raises a RuntimeError "tutti: <what>: <tutti's message>" when r is not success. */
void check(tutti_result_t r, const char *what, tutti_comm_t comm);

} // namespace tutti_torch
