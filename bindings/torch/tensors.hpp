/*
 * tensors.hpp -- the operations' checks of their tensors (device, layout, dtype, sizes: a
 * RuntimeError naming the operation and the cause, before anything is sent) and the mapping of
 * tensors and reductions onto tutti's dtypes and operators.
 */
#pragma once

#include "pg.hpp"

#include <vector>

namespace tutti_torch
{

/* How a tensor's elements travel: tutti's dtype, elements per tensor element. */
struct Dt {
    tutti_dtype_t dt;
    int64_t mult;
    bool is_bool;
    bool is_complex;
};

/* t's dtype as tutti carries it; refuses the others. */
Dt dtypeOf(const at::Tensor &t, const char *fn);
/* A tensor tutti can take as it is: defined, on the CPU, dense, contiguous, of a dtype it has. */
Dt checked(const at::Tensor &t, const char *fn, const char *what = "tensor");
/* Elements of tutti's dtype in t. */
size_t count(const at::Tensor &t, const Dt &d);
/* The one tensor of a one-device call, checked. */
at::Tensor &single(std::vector<at::Tensor> &ts, const char *fn);
/* t must be like ref: same dtype and, with numel >= 0, that many elements. */
void like(const at::Tensor &t, const at::Tensor &ref, int64_t numel, const char *fn,
          const char *what);
/* root must be a rank of a group of size ranks. */
void rootIn(int64_t root, int size, const char *fn);

/* A reduction as tutti runs it: a built-in operator, or a premul-sum made on the worker. */
struct Red {
    tutti_op_t op = TUTTI_SUM;
    at::Tensor scalar; /* defined: PREMUL_SUM, this factor in the tensor's dtype */
};

/* The tutti operator of rop on t's dtype; refuses what tutti has not (BAND...) or what would not
 * map cleanly (SUM on bool, MAX on complex). */
Red reduction(const c10d::ReduceOp &rop, const at::Tensor &t, const char *fn);

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
void pack(const std::vector<at::Tensor> &ts, at::Tensor &flat);
void unpack(const at::Tensor &flat, std::vector<at::Tensor> &ts);
/* Elements in all of ts. */
int64_t total(const std::vector<at::Tensor> &ts);
/* The root's list of a gather (outputs) or scatter (inputs): n tensors like ref, and a
 * staging tensor for all of them; other ranks pass none and get an undefined one. */
at::Tensor rootList(const std::vector<std::vector<at::Tensor>> &lists, const at::Tensor &ref, int n,
                    bool is_root, int root, const char *fn, const char *what,
                    std::vector<at::Tensor> &list);

} // namespace tutti_torch
