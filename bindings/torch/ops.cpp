/*
 * ops.cpp -- ProcessGroupTutti's collectives: each checks its tensors on the calling thread
 * (tensors.hpp: refusing, before anything is sent, what tutti cannot take) and submits the
 * tutti call. Lists of tensors that tutti wants in one buffer go through a staging tensor,
 * copied on the worker in the operation's turn. All-to-all, point to point, barrier: p2p.cpp.
 */
#include "tensors.hpp"

#include <c10/util/Exception.h>

namespace tutti_torch
{

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::broadcast(std::vector<at::Tensor> &tensors,
                                                            const c10d::BroadcastOptions &opts)
{
    RefusalGuard guard(*this, "broadcast");
    at::Tensor t = single(tensors, "broadcast");
    Dt d = checked(t, "broadcast");
    rootIn(opts.rootRank, getSize(), "broadcast");
    TORCH_CHECK(opts.rootTensor == 0,
                "tutti: broadcast: rootTensor must be 0 (one tensor per process)");
    int root = static_cast<int>(opts.rootRank);
    tutti_comm_t c = comm_;
    return submit({"broadcast",
                   [=] {
                       return tutti_broadcast(t.data_ptr(), t.data_ptr(), count(t, d), d.dt, root,
                                              c, nullptr);
                   },
                   nullptr, newWork(c10d::OpType::BROADCAST, "tutti:broadcast", {t}, false)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allreduce(std::vector<at::Tensor> &tensors,
                                                            const c10d::AllreduceOptions &opts)
{
    RefusalGuard guard(*this, "allreduce");
    at::Tensor t = single(tensors, "allreduce");
    Dt d = checked(t, "allreduce");
    Red r = reduction(opts.reduceOp, t, "allreduce");
    tutti_comm_t c = comm_;
    return submit({"allreduce",
                   [=] {
                       return withOp(r, d.dt, c, [&](tutti_op_t op) {
                           return tutti_all_reduce(t.data_ptr(), t.data_ptr(), count(t, d), d.dt,
                                                   op, c, nullptr);
                       });
                   },
                   nullptr, newWork(c10d::OpType::ALLREDUCE, "tutti:all_reduce", {t}, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                       const c10d::AllreduceCoalescedOptions &opts)
{
    RefusalGuard guard(*this, "allreduce_coalesced");
    TORCH_CHECK(!tensors.empty(), "tutti: allreduce_coalesced: no tensors");
    std::vector<Red> reds;
    for (const at::Tensor &t : tensors) {
        checked(t, "allreduce_coalesced");
        reds.push_back(reduction(opts.reduceOp, t, "allreduce_coalesced"));
    }
    std::vector<at::Tensor> ts = tensors;
    tutti_comm_t c = comm_;
    return submit(
        {"allreduce_coalesced",
         [=] {
             /* One group: tutti packs small ones into one call. */
             tutti_result_t e = tutti_group_start();
             for (size_t i = 0; i < ts.size() && e == TUTTI_SUCCESS; i++) {
                 Dt d = dtypeOf(ts[i], "allreduce_coalesced");
                 e = withOp(reds[i], d.dt, c, [&](tutti_op_t op) {
                     return tutti_all_reduce(ts[i].data_ptr(), ts[i].data_ptr(), count(ts[i], d),
                                             d.dt, op, c, nullptr);
                 });
             }
             tutti_result_t g = tutti_group_end();
             return e != TUTTI_SUCCESS ? e : g;
         },
         nullptr,
         newWork(c10d::OpType::ALLREDUCE_COALESCED, "tutti:all_reduce_coalesced", ts, false)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce(std::vector<at::Tensor> &tensors,
                                                         const c10d::ReduceOptions &opts)
{
    RefusalGuard guard(*this, "reduce");
    at::Tensor t = single(tensors, "reduce");
    Dt d = checked(t, "reduce");
    rootIn(opts.rootRank, getSize(), "reduce");
    TORCH_CHECK(opts.rootTensor == 0,
                "tutti: reduce: rootTensor must be 0 (one tensor per process)");
    Red r = reduction(opts.reduceOp, t, "reduce");
    int root = static_cast<int>(opts.rootRank);
    tutti_comm_t c = comm_;
    return submit({"reduce",
                   [=] {
                       return withOp(r, d.dt, c, [&](tutti_op_t op) {
                           return tutti_reduce(t.data_ptr(), t.data_ptr(), count(t, d), d.dt, op,
                                               root, c, nullptr);
                       });
                   },
                   nullptr, newWork(c10d::OpType::REDUCE, "tutti:reduce", {t}, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                             std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &)
{
    RefusalGuard guard(*this, "allgather");
    at::Tensor in = single(inputs, "allgather");
    Dt d = checked(in, "allgather", "input");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
                "tutti: allgather wants one list of ", getSize(), " output tensors (one per rank)");
    for (const at::Tensor &o : outputs[0])
        like(o, in, in.numel(), "allgather", "output");
    std::vector<at::Tensor> outs = outputs[0];
    at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
    tutti_comm_t c = comm_;
    return submit({"allgather",
                   [=] {
                       return tutti_all_gather(in.data_ptr(), flat.data_ptr(), count(in, d), d.dt,
                                               c, nullptr);
                   },
                   [=]() mutable { unpack(flat, outs); },
                   newWork(c10d::OpType::ALLGATHER, "tutti:all_gather", outputs[0], false)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::_allgather_base(at::Tensor &output,
                                                                  at::Tensor &input,
                                                                  const c10d::AllgatherOptions &)
{
    RefusalGuard guard(*this, "_allgather_base");
    Dt d = checked(input, "_allgather_base", "input");
    like(output, input, input.numel() * getSize(), "_allgather_base", "output");
    at::Tensor in = input, out = output;
    tutti_comm_t c = comm_;
    return submit(
        {"_allgather_base",
         [=] {
             return tutti_all_gather(in.data_ptr(), out.data_ptr(), count(in, d), d.dt, c, nullptr);
         },
         nullptr, newWork(c10d::OpType::_ALLGATHER_BASE, "tutti:_allgather_base", {out}, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                       std::vector<at::Tensor> &inputs,
                                       const c10d::AllgatherOptions &)
{
    RefusalGuard guard(*this, "allgather_coalesced");
    const int n = getSize();
    TORCH_CHECK(!inputs.empty(), "tutti: allgather_coalesced: no input tensors");
    TORCH_CHECK(outputs.size() == static_cast<size_t>(n), "tutti: allgather_coalesced wants ", n,
                " output lists (one per rank), got ", outputs.size());
    for (const at::Tensor &in : inputs)
        checked(in, "allgather_coalesced", "input");
    for (const auto &list : outputs) {
        TORCH_CHECK(list.size() == inputs.size(), "tutti: allgather_coalesced: an output list has ",
                    list.size(), " tensors for ", inputs.size(), " inputs");
        for (size_t j = 0; j < list.size(); j++)
            like(list[j], inputs[j], inputs[j].numel(), "allgather_coalesced", "output");
    }
    std::vector<at::Tensor> ins = inputs, flats;
    for (const at::Tensor &in : ins)
        flats.push_back(at::empty({in.numel() * n}, in.options()));
    std::vector<std::vector<at::Tensor>> outs = outputs;
    std::vector<at::Tensor> all;
    for (const auto &list : outputs)
        all.insert(all.end(), list.begin(), list.end());
    tutti_comm_t c = comm_;
    return submit(
        {"allgather_coalesced",
         [=] {
             tutti_result_t e = tutti_group_start();
             for (size_t j = 0; j < ins.size() && e == TUTTI_SUCCESS; j++) {
                 Dt d = dtypeOf(ins[j], "allgather_coalesced");
                 e = tutti_all_gather(ins[j].data_ptr(), flats[j].data_ptr(), count(ins[j], d),
                                      d.dt, c, nullptr);
             }
             tutti_result_t g = tutti_group_end();
             return e != TUTTI_SUCCESS ? e : g;
         },
         [=]() mutable {
             for (size_t j = 0; j < ins.size(); j++)
                 for (int r = 0; r < n; r++)
                     outs[r][j].view({-1}).copy_(
                         flats[j].narrow(0, r * ins[j].numel(), ins[j].numel()));
         },
         newWork(c10d::OpType::ALLGATHER_COALESCED, "tutti:all_gather_coalesced", all, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::gather(std::vector<std::vector<at::Tensor>> &outputs,
                          std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
    RefusalGuard guard(*this, "gather");
    const int n = getSize();
    at::Tensor in = single(inputs, "gather");
    Dt d = checked(in, "gather", "input");
    rootIn(opts.rootRank, n, "gather");
    int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> outs;
    at::Tensor flat = rootList(outputs, in, n, getRank() == root, root, "gather", "output", outs);
    tutti_comm_t c = comm_;
    return submit({"gather",
                   [=] {
                       return tutti_gather(in.data_ptr(),
                                           flat.defined() ? flat.data_ptr() : nullptr, count(in, d),
                                           d.dt, root, c, nullptr);
                   },
                   [=]() mutable {
                       if (flat.defined())
                           unpack(flat, outs);
                   },
                   newWork(c10d::OpType::GATHER, "tutti:gather", outs, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::scatter(std::vector<at::Tensor> &outputs,
                           std::vector<std::vector<at::Tensor>> &inputs,
                           const c10d::ScatterOptions &opts)
{
    RefusalGuard guard(*this, "scatter");
    const int n = getSize();
    at::Tensor out = single(outputs, "scatter");
    Dt d = checked(out, "scatter", "output");
    rootIn(opts.rootRank, n, "scatter");
    int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> ins;
    at::Tensor flat = rootList(inputs, out, n, getRank() == root, root, "scatter", "input", ins);
    tutti_comm_t c = comm_;
    return submit({"scatter",
                   [=]() mutable {
                       if (flat.defined())
                           pack(ins, flat);
                       return tutti_scatter(flat.defined() ? flat.data_ptr() : nullptr,
                                            out.data_ptr(), count(out, d), d.dt, root, c, nullptr);
                   },
                   nullptr, newWork(c10d::OpType::SCATTER, "tutti:scatter", {out}, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::reduce_scatter(std::vector<at::Tensor> &outputs,
                                  std::vector<std::vector<at::Tensor>> &inputs,
                                  const c10d::ReduceScatterOptions &opts)
{
    RefusalGuard guard(*this, "reduce_scatter");
    const int n = getSize();
    at::Tensor out = single(outputs, "reduce_scatter");
    Dt d = checked(out, "reduce_scatter", "output");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(n),
                "tutti: reduce_scatter wants one list of ", n, " input tensors (one per rank)");
    for (const at::Tensor &i : inputs[0])
        like(i, out, out.numel(), "reduce_scatter", "input");
    Red r = reduction(opts.reduceOp, out, "reduce_scatter");
    std::vector<at::Tensor> ins = inputs[0];
    at::Tensor flat = at::empty({out.numel() * n}, out.options());
    tutti_comm_t c = comm_;
    return submit({"reduce_scatter",
                   [=]() mutable {
                       pack(ins, flat);
                       return withOp(r, d.dt, c, [&](tutti_op_t op) {
                           return tutti_reduce_scatter(flat.data_ptr(), out.data_ptr(),
                                                       count(out, d), d.dt, op, c, nullptr);
                       });
                   },
                   nullptr,
                   newWork(c10d::OpType::REDUCE_SCATTER, "tutti:reduce_scatter", {out}, false)});
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupTutti::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                        const c10d::ReduceScatterOptions &opts)
{
    RefusalGuard guard(*this, "_reduce_scatter_base");
    Dt d = checked(output, "_reduce_scatter_base", "output");
    like(input, output, output.numel() * getSize(), "_reduce_scatter_base", "input");
    Red r = reduction(opts.reduceOp, output, "_reduce_scatter_base");
    at::Tensor in = input, out = output;
    tutti_comm_t c = comm_;
    return submit(
        {"_reduce_scatter_base",
         [=] {
             return withOp(r, d.dt, c, [&](tutti_op_t op) {
                 return tutti_reduce_scatter(in.data_ptr(), out.data_ptr(), count(out, d), d.dt, op,
                                             c, nullptr);
             });
         },
         nullptr,
         newWork(c10d::OpType::_REDUCE_SCATTER_BASE, "tutti:_reduce_scatter_base", {out}, false)});
}

} // namespace tutti_torch
