/*
 * ops.cpp -- ProcessGroupTutti's operations: each checks its tensors on the calling thread
 * (refusing, before anything is sent, what tutti cannot take) and submits the tutti call.
 * Lists of tensors that tutti wants in one buffer go through a staging tensor, copied on the
 * worker in the operation's turn.
 */
#include "pg.hpp"

#include <c10/util/Exception.h>

namespace tutti_torch
{

namespace
{

const char *const kDtypes =
    "float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool, complex64, complex128";

/* How a tensor's elements travel: tutti's dtype, elements per tensor element. */
struct Dt {
    tutti_dtype_t dt;
    int64_t mult;
    bool is_bool;
    bool is_complex;
};

Dt dtypeOf(const at::Tensor &t, const char *fn)
{
    switch (t.scalar_type()) {
    case at::kHalf: return {TUTTI_FLOAT16, 1, false, false};
    case at::kBFloat16: return {TUTTI_BFLOAT16, 1, false, false};
    case at::kFloat: return {TUTTI_FLOAT32, 1, false, false};
    case at::kDouble: return {TUTTI_FLOAT64, 1, false, false};
    case at::kChar: return {TUTTI_INT8, 1, false, false};
    case at::kByte: return {TUTTI_UINT8, 1, false, false};
    case at::kInt: return {TUTTI_INT32, 1, false, false};
    case at::kLong: return {TUTTI_INT64, 1, false, false};
    case at::kBool: return {TUTTI_UINT8, 1, true, false};
    case at::kComplexFloat: return {TUTTI_FLOAT32, 2, false, true};
    case at::kComplexDouble: return {TUTTI_FLOAT64, 2, false, true};
    default:
        TORCH_CHECK(false, "tutti: ", fn, " does not support dtype ", t.scalar_type(),
                    " (supported: ", kDtypes, ")");
    }
}

/* A tensor tutti can take as it is: defined, on the CPU, dense, contiguous, of a dtype it has. */
Dt checked(const at::Tensor &t, const char *fn, const char *what = "tensor")
{
    TORCH_CHECK(t.defined(), "tutti: ", fn, ": the ", what, " is undefined");
    TORCH_CHECK(t.device().is_cpu(), "tutti: ", fn, ": the ", what, " is on ", t.device(),
                "; this build of the tutti backend serves CPU tensors only");
    TORCH_CHECK(t.layout() == at::kStrided, "tutti: ", fn, ": the ", what, " is ", t.layout(),
                "; only dense (strided) tensors are supported");
    TORCH_CHECK(t.is_contiguous(), "tutti: ", fn, ": the ", what,
                " is not contiguous; pass tensor.contiguous()");
    return dtypeOf(t, fn);
}

size_t count(const at::Tensor &t, const Dt &d)
{
    return static_cast<size_t>(t.numel() * d.mult);
}

at::Tensor &single(std::vector<at::Tensor> &ts, const char *fn)
{
    TORCH_CHECK(ts.size() == 1, "tutti: ", fn,
                " takes one tensor per process (one device per process), got ", ts.size());
    checked(ts[0], fn);
    return ts[0];
}

/* t must be like ref: same dtype and, with numel >= 0, that many elements. */
void like(const at::Tensor &t, const at::Tensor &ref, int64_t numel, const char *fn,
          const char *what)
{
    checked(t, fn, what);
    TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "tutti: ", fn, ": the ", what, " is ",
                t.scalar_type(), " but the input is ", ref.scalar_type());
    TORCH_CHECK(numel < 0 || t.numel() == numel, "tutti: ", fn, ": the ", what, " has ", t.numel(),
                " elements where ", numel, " are needed");
}

void rootIn(int64_t root, int size, const char *fn)
{
    TORCH_CHECK(root >= 0 && root < size, "tutti: ", fn, ": root rank ", root,
                " is outside the group [0, ", size, ")");
}

/* A reduction as tutti runs it: a built-in operator, or a premul-sum made on the worker. */
struct Red {
    tutti_op_t op = TUTTI_SUM;
    at::Tensor scalar; /* defined: PREMUL_SUM, this factor in the tensor's dtype */
};

const char *opName(c10d::ReduceOp::RedOpType op)
{
    switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "an unknown operator";
    }
}

Red reduction(const c10d::ReduceOp &rop, const at::Tensor &t, const char *fn)
{
    Dt d = dtypeOf(t, fn);
    Red r;
    auto op = rop.op_;
    switch (op) {
    case c10d::ReduceOp::SUM: r.op = TUTTI_SUM; break;
    case c10d::ReduceOp::AVG: r.op = TUTTI_AVG; break;
    case c10d::ReduceOp::PRODUCT: r.op = TUTTI_PROD; break;
    case c10d::ReduceOp::MIN: r.op = TUTTI_MIN; break;
    case c10d::ReduceOp::MAX: r.op = TUTTI_MAX; break;
    case c10d::ReduceOp::PREMUL_SUM: {
        auto *s = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(rop.supplement_.get());
        TORCH_CHECK(s, "tutti: ", fn, ": PREMUL_SUM without its factor");
        double f = s->double_factor;
        if (!s->tensor_factors.empty()) {
            const at::Tensor &ft = s->tensor_factors[0];
            TORCH_CHECK(ft.device().is_cpu() && ft.numel() == 1, "tutti: ", fn,
                        ": the PREMUL_SUM factor must be a one-element CPU tensor");
            f = ft.item<double>();
        }
        r.op = TUTTI_SUM;
        r.scalar = at::scalar_tensor(f, t.options());
        break;
    }
    default:
        TORCH_CHECK(false, "tutti: ", fn, ": ReduceOp.", opName(op),
                    " is not supported (tutti reduces with SUM, PRODUCT, MIN, MAX, AVG and "
                    "PREMUL_SUM)");
    }
    if (d.is_bool)
        TORCH_CHECK(op == c10d::ReduceOp::MIN || op == c10d::ReduceOp::MAX ||
                        op == c10d::ReduceOp::PRODUCT,
                    "tutti: ", fn, ": ReduceOp.", opName(op),
                    " on bool tensors is not supported: the result would not stay 0 or 1 "
                    "(MIN is a logical and, MAX a logical or, PRODUCT an and)");
    if (d.is_complex)
        TORCH_CHECK(op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG, "tutti: ", fn,
                    ": ReduceOp.", opName(op),
                    " on complex tensors is not supported (SUM and AVG are)");
    return r;
}

/* Runs call(op) with r's operator: a premul-sum is made for the call and freed after it. */
template <typename F>
tutti_result_t withOp(const Red &r, tutti_dtype_t dt, tutti_comm_t comm, F call)
{
    if (!r.scalar.defined())
        return call(r.op);
    tutti_op_t op;
    tutti_result_t e =
        tutti_op_create_premul_sum(&op, r.scalar.data_ptr(), dt, TUTTI_SCALAR_HOST_IMMEDIATE, comm);
    if (e != TUTTI_SUCCESS)
        return e;
    e = call(op);
    tutti_op_destroy(op, comm);
    return e;
}

/* Copies the tensors into consecutive blocks of flat / out of them. */
void pack(const std::vector<at::Tensor> &ts, at::Tensor &flat)
{
    int64_t at = 0;
    for (const at::Tensor &t : ts) {
        flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
        at += t.numel();
    }
}

void unpack(const at::Tensor &flat, std::vector<at::Tensor> &ts)
{
    int64_t at = 0;
    for (at::Tensor &t : ts) {
        t.view({-1}).copy_(flat.narrow(0, at, t.numel()));
        at += t.numel();
    }
}

int64_t total(const std::vector<at::Tensor> &ts)
{
    int64_t n = 0;
    for (const at::Tensor &t : ts)
        n += t.numel();
    return n;
}

/* The root's list of a gather (outputs) or scatter (inputs): n tensors like ref, and a
 * staging tensor for all of them; other ranks pass none and get an undefined one. */
at::Tensor rootList(const std::vector<std::vector<at::Tensor>> &lists, const at::Tensor &ref, int n,
                    bool is_root, int root, const char *fn, const char *what,
                    std::vector<at::Tensor> &list)
{
    if (!is_root) {
        TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "tutti: ", fn,
                    " takes ", what, " tensors on the root only (rank ", root, ")");
        return at::Tensor();
    }
    TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(n), "tutti: ", fn,
                " wants, on the root, one list of ", n, " ", what, " tensors");
    for (const at::Tensor &t : lists[0])
        like(t, ref, ref.numel(), fn, what);
    list = lists[0];
    return at::empty({ref.numel() * n}, ref.options());
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::broadcast(std::vector<at::Tensor> &tensors,
                                                            const c10d::BroadcastOptions &opts)
{
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

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall_base(at::Tensor &output,
                                                                at::Tensor &input,
                                                                std::vector<int64_t> &outSplits,
                                                                std::vector<int64_t> &inSplits,
                                                                const c10d::AllToAllOptions &)
{
    const int n = getSize();
    Dt d = checked(input, "alltoall_base", "input");
    like(output, input, -1, "alltoall_base", "output");
    at::Tensor in = input, out = output;
    tutti_comm_t c = comm_;
    if (outSplits.empty() && inSplits.empty()) {
        TORCH_CHECK(in.numel() % n == 0 && out.numel() == in.numel(),
                    "tutti: alltoall_base: ", "without split sizes the input (", in.numel(),
                    " elements) and output (", out.numel(),
                    ") must be equal and divide by the group's ", n, " ranks");
        return submit({"alltoall_base",
                       [=] {
                           return tutti_all_to_all(in.data_ptr(), out.data_ptr(), count(in, d) / n,
                                                   d.dt, c, nullptr);
                       },
                       nullptr,
                       newWork(c10d::OpType::ALLTOALL_BASE, "tutti:all_to_all", {out}, false)});
    }
    /* Split sizes count rows (dimension 0); a missing list means equal rows. */
    auto rows = [&](const at::Tensor &t, std::vector<int64_t> s, const char *what) {
        TORCH_CHECK(t.dim() > 0, "tutti: alltoall_base: a 0-dimensional ", what,
                    " has no rows to split");
        if (s.empty()) {
            TORCH_CHECK(t.size(0) % n == 0, "tutti: alltoall_base: the ", what, "'s ", t.size(0),
                        " rows do not divide by the group's ", n, " ranks");
            s.assign(n, t.size(0) / n);
        }
        TORCH_CHECK(s.size() == static_cast<size_t>(n), "tutti: alltoall_base: ", s.size(), " ",
                    what, " split sizes for ", n, " ranks");
        int64_t sum = 0;
        for (int64_t v : s) {
            TORCH_CHECK(v >= 0, "tutti: alltoall_base: a negative ", what, " split size (", v, ")");
            sum += v;
        }
        TORCH_CHECK(sum == t.size(0), "tutti: alltoall_base: the ", what, " split sizes add up to ",
                    sum, " rows but the ", what, " has ", t.size(0));
        return s;
    };
    std::vector<int64_t> is = rows(in, inSplits, "input"), os = rows(out, outSplits, "output");
    int64_t irow = in.size(0) ? in.numel() / in.size(0) : 0;
    int64_t orow = out.size(0) ? out.numel() / out.size(0) : 0;
    TORCH_CHECK(in.size(0) == 0 || out.size(0) == 0 || irow == orow,
                "tutti: alltoall_base: input rows have ", irow, " elements, output rows ", orow);
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t soff = 0, roff = 0;
    for (int i = 0; i < n; i++) {
        sc[i] = static_cast<size_t>(is[i] * irow * d.mult);
        rc[i] = static_cast<size_t>(os[i] * orow * d.mult);
        sd[i] = soff;
        rd[i] = roff;
        soff += sc[i];
        roff += rc[i];
    }
    return submit({"alltoall_base",
                   [=] {
                       return tutti_all_to_allv(in.data_ptr(), sc.data(), sd.data(), out.data_ptr(),
                                                rc.data(), rd.data(), d.dt, c, nullptr);
                   },
                   nullptr,
                   newWork(c10d::OpType::ALLTOALL_BASE, "tutti:all_to_allv", {out}, false)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall(std::vector<at::Tensor> &outputs,
                                                           std::vector<at::Tensor> &inputs,
                                                           const c10d::AllToAllOptions &)
{
    const int n = getSize();
    TORCH_CHECK(outputs.size() == static_cast<size_t>(n) && inputs.size() == static_cast<size_t>(n),
                "tutti: alltoall wants ", n, " input and ", n, " output tensors, got ",
                inputs.size(), " and ", outputs.size());
    Dt d = checked(inputs[0], "alltoall", "input");
    for (const at::Tensor &t : inputs)
        like(t, inputs[0], -1, "alltoall", "input");
    for (const at::Tensor &t : outputs)
        like(t, inputs[0], -1, "alltoall", "output");
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t soff = 0, roff = 0;
    for (int i = 0; i < n; i++) {
        sc[i] = count(inputs[i], d);
        rc[i] = count(outputs[i], d);
        sd[i] = soff;
        rd[i] = roff;
        soff += sc[i];
        roff += rc[i];
    }
    std::vector<at::Tensor> ins = inputs, outs = outputs;
    at::Tensor fin = at::empty({total(ins)}, inputs[0].options());
    at::Tensor fout = at::empty({total(outs)}, inputs[0].options());
    tutti_comm_t c = comm_;
    return submit({"alltoall",
                   [=]() mutable {
                       pack(ins, fin);
                       return tutti_all_to_allv(fin.data_ptr(), sc.data(), sd.data(),
                                                fout.data_ptr(), rc.data(), rd.data(), d.dt, c,
                                                nullptr);
                   },
                   [=]() mutable { unpack(fout, outs); },
                   newWork(c10d::OpType::ALLTOALL, "tutti:all_to_all", outputs, false)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::send(std::vector<at::Tensor> &tensors, int dst,
                                                       int /* tag: messages pair in call order */)
{
    at::Tensor t = single(tensors, "send");
    Dt d = checked(t, "send");
    rootIn(dst, getSize(), "send (destination)");
    tutti_comm_t c = comm_;
    return submitP2P({"send",
                      [=] { return tutti_send(t.data_ptr(), count(t, d), d.dt, dst, c, nullptr); },
                      nullptr, newWork(c10d::OpType::SEND, "tutti:send", {t}, true)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::recv(std::vector<at::Tensor> &tensors, int src,
                                                       int /* tag */)
{
    at::Tensor t = single(tensors, "recv");
    Dt d = checked(t, "recv");
    rootIn(src, getSize(), "recv (source)");
    tutti_comm_t c = comm_;
    return submitP2P({"recv",
                      [=] { return tutti_recv(t.data_ptr(), count(t, d), d.dt, src, c, nullptr); },
                      nullptr, newWork(c10d::OpType::RECV, "tutti:recv", {t}, true)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::recvAnysource(std::vector<at::Tensor> &, int)
{
    TORCH_CHECK(false, "tutti: recv from any source (recv_anysource, recv without src) is not "
                       "supported: tutti pairs each receive with a named sender; pass src");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::barrier(const c10d::BarrierOptions &)
{
    tutti_comm_t c = comm_;
    return submit({"barrier", [=] { return tutti_barrier(c, nullptr); }, nullptr,
                   newWork(c10d::OpType::BARRIER, "tutti:barrier", {}, false)});
}

} // namespace tutti_torch
