/*
 * tensors.cpp -- what the operations check of their tensors, and how tensors map onto tutti's
 * dtypes and operators (tensors.hpp).
 */
#include "tensors.hpp"

#include <c10/util/Exception.h>

namespace tutti_torch
{

static const char *const kDtypes =
    "float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool, complex64, complex128";

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
Dt checked(const at::Tensor &t, const char *fn, const char *what)
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

static const char *opName(c10d::ReduceOp::RedOpType op)
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

} // namespace tutti_torch
