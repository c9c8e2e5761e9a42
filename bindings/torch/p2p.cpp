/*
 * p2p.cpp -- ProcessGroupTutti's all-to-alls, sends and receives (batched until something
 * needs them: pg.cpp), and barrier.
 */
#include "tensors.hpp"

#include <c10/util/Exception.h>

namespace tutti_torch
{

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall_base(at::Tensor &output,
                                                                at::Tensor &input,
                                                                std::vector<int64_t> &outSplits,
                                                                std::vector<int64_t> &inSplits,
                                                                const c10d::AllToAllOptions &)
{
    RefusalGuard guard(*this, "alltoall_base");
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
    RefusalGuard guard(*this, "alltoall");
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
    RefusalGuard guard(*this, "send");
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
    RefusalGuard guard(*this, "recv");
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
    RefusalGuard guard(*this, "recvAnysource");
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
