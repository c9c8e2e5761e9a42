#!/usr/bin/python3
"""ops_check.py -- every operation of the tutti backend, every dtype and reduction, on this
job's ranks (launch.py starts them), against values each rank computes itself: rank r's input
is a function of r only, so every rank knows every other rank's input and the exact result.

Also: subgroups, async work waited out of order, p2p exchanges, the refusals (device, layout,
dtype, operator, sizes, receive from any source), and a mismatch between ranks surfacing as a
RuntimeError with tutti's message. Prints "ops_check: OK <n> checks" on success.
"""
import os, sys, time, warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import tutti_torch  # noqa: F401  registers "tutti"

RANK, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
COMPLEX = [torch.complex64, torch.complex128]
ALL = FLOATS + INTS + [torch.bool] + COMPLEX
# The tensor forms of all_gather and reduce_scatter (PyTorch 1.13 names them both ways).
all_gather_t = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
reduce_scatter_t = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
warnings.filterwarnings("ignore", message=".*(is a private function|will be deprecated)")
checks = 0


def inp(r, dtype, n=37, prod=False):
    """Rank r's input: small integers, so sums and products are exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + r) % 3 != 0)
    v = 1 + (i + r) % 2 if prod else (i * 7 + 3 * r) % 4
    if dtype.is_complex:
        return (v.double() + 1j * (v.double() + 1)).to(dtype)
    return v.to(dtype)


def ref_reduce(op, dtype, n=37, ranks=None, factor=None):
    ranks = list(range(N)) if ranks is None else ranks
    xs = [inp(r, dtype, n, prod=op == "prod") for r in ranks]
    if dtype == torch.bool:
        st = torch.stack(xs)
        return {"min": st.all(0), "max": st.any(0), "prod": st.all(0)}[op]
    wide = torch.complex128 if dtype.is_complex else (
        torch.float64 if dtype.is_floating_point else torch.int64)
    st = torch.stack([x.to(wide) for x in xs])
    if op == "sum":
        out = st.sum(0)
    elif op == "prod":
        out = st.prod(0)
    elif op == "min":
        out = st.min(0).values
    elif op == "max":
        out = st.max(0).values
    elif op == "avg":
        out = st.sum(0) / len(ranks) if (dtype.is_floating_point or dtype.is_complex) else \
            torch.div(st.sum(0), len(ranks), rounding_mode="trunc")
    elif op == "premul":
        out = st.sum(0) * factor
    if dtype in INTS:
        # The dtype's own arithmetic: integers wrap.
        return out.to(torch.int64).to(dtype) if dtype != torch.uint8 else (out % 256).to(dtype)
    return out.to(dtype)


def same(got, want, what):
    global checks
    checks += 1
    if got.dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2, msg=what)
    else:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=lambda m: f"{what}: {m}")


def refused(fn, words, what):
    """fn must raise before anything is sent, with a message holding each of words."""
    global checks
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        assert not missing, f"{what}: message lacks {missing}: {msg}"
        checks += 1
        return
    raise AssertionError(f"{what}: was not refused")


OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def valid_ops(dtype):
    if dtype == torch.bool:
        return ["min", "max", "prod"]
    if dtype.is_complex:
        return ["sum", "avg"]
    return ["sum", "prod", "min", "max", "avg"]


def reductions(group=None, ranks=None):
    me = RANK if ranks is None else ranks.index(RANK)
    rs = list(range(N)) if ranks is None else ranks
    n = len(rs)
    for dt in ALL:
        for name in valid_ops(dt):
            x = inp(RANK, dt, prod=name == "prod")
            dist.all_reduce(x, op=OPS[name], group=group)
            same(x, ref_reduce(name, dt, ranks=rs), f"all_reduce {name} {dt}")
            root = n - 1
            x = inp(RANK, dt, prod=name == "prod")
            dist.reduce(x, dst=rs[root], op=OPS[name], group=group)
            if me == root:
                same(x, ref_reduce(name, dt, ranks=rs), f"reduce {name} {dt}")
            # reduce_scatter: rank j's block of the input list is inp(r)+j
            ins = [inp(RANK, dt, 5, prod=name == "prod") for _ in range(n)]
            out = torch.empty(5, dtype=dt)
            dist.reduce_scatter(out, ins, op=OPS[name], group=group)
            same(out, ref_reduce(name, dt, 5, ranks=rs), f"reduce_scatter {name} {dt}")
            flat = torch.cat([inp(RANK, dt, 5, prod=name == "prod")] * n)
            out = torch.empty(5, dtype=dt)
            reduce_scatter_t(out, flat, op=OPS[name], group=group)
            same(out, ref_reduce(name, dt, 5, ranks=rs), f"_reduce_scatter_base {name} {dt}")
        if dt in FLOATS + INTS:
            factor = 0.5 if dt in FLOATS else 2.0
            x = inp(RANK, dt)
            dist.all_reduce(x, op=dist._make_nccl_premul_sum(factor), group=group)
            same(x, ref_reduce("premul", dt, ranks=rs, factor=factor), f"premul_sum {dt}")
    # coalesced: several tensors of several sizes in one call
    xs = [inp(RANK, torch.float32, k) for k in (3, 37, 1000)]
    dist.all_reduce_coalesced(xs, group=group)
    for x in xs:
        same(x, ref_reduce("sum", x.dtype, x.numel(), ranks=rs), "all_reduce_coalesced")


def movement(group=None, ranks=None):
    rs = list(range(N)) if ranks is None else ranks
    me = rs.index(RANK)
    n = len(rs)
    for dt in ALL:
        root = rs[n - 1]
        x = inp(RANK, dt) if RANK == root else torch.zeros(37, dtype=dt)
        dist.broadcast(x, src=root, group=group)
        same(x, inp(root, dt), f"broadcast {dt}")
        outs = [torch.zeros(37, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, inp(RANK, dt), group=group)
        for j, o in enumerate(outs):
            same(o, inp(rs[j], dt), f"all_gather {dt}")
        out = torch.zeros(37 * n, dtype=dt)
        all_gather_t(out, inp(RANK, dt), group=group)
        same(out, torch.cat([inp(r, dt) for r in rs]), f"_all_gather_base {dt}")
        # in place: the input is this rank's block of the output
        out = torch.zeros(37 * n, dtype=dt)
        out[37 * me:37 * (me + 1)] = inp(RANK, dt)
        all_gather_t(out, out[37 * me:37 * (me + 1)], group=group)
        same(out, torch.cat([inp(r, dt) for r in rs]), f"_all_gather_base in place {dt}")
        # gather / scatter to the first rank of the group
        g = [torch.zeros(37, dtype=dt) for _ in range(n)] if me == 0 else None
        dist.gather(inp(RANK, dt), gather_list=g, dst=rs[0], group=group)
        if me == 0:
            for j, o in enumerate(g):
                same(o, inp(rs[j], dt), f"gather {dt}")
        s = [inp(rs[0] + 10 * j, dt) for j in range(n)] if me == 0 else None
        o = torch.zeros(37, dtype=dt)
        dist.scatter(o, scatter_list=s, src=rs[0], group=group)
        same(o, inp(rs[0] + 10 * me, dt), f"scatter {dt}")
        # all_to_all_single, equal and uneven splits (rank i sends i + j + 1 rows to j)
        src = torch.cat([inp(100 * RANK + j, dt, 3) for j in range(n)])
        dst = torch.zeros(3 * n, dtype=dt)
        dist.all_to_all_single(dst, src, group=group)
        same(dst, torch.cat([inp(100 * r + me, dt, 3) for r in rs]), f"all_to_all_single {dt}")
        ins = [inp(100 * RANK + j, dt, me + j + 1).reshape(-1, 1).repeat(1, 2) for j in range(n)]
        outs_want = [inp(100 * r + me, dt, i + me + 1).reshape(-1, 1).repeat(1, 2)
                     for i, r in enumerate(rs)]
        dst = torch.zeros(sum(o.shape[0] for o in outs_want), 2, dtype=dt)
        dist.all_to_all_single(dst, torch.cat(ins), output_split_sizes=[o.shape[0] for o in outs_want],
                               input_split_sizes=[i.shape[0] for i in ins], group=group)
        same(dst, torch.cat(outs_want), f"all_to_all_single splits {dt}")
        outs = [torch.zeros_like(w) for w in outs_want]
        dist.all_to_all(outs, ins, group=group)
        for o, w in zip(outs, outs_want):
            same(o, w, f"all_to_all {dt}")
    # all_gather_coalesced: two inputs of different sizes
    ins = [inp(RANK, torch.int64, 4), inp(RANK, torch.int64, 9)]
    outs = [[torch.zeros(4, dtype=torch.int64), torch.zeros(9, dtype=torch.int64)]
            for _ in range(n)]
    dist.all_gather_coalesced(outs, ins, group=group)
    for j in range(n):
        same(outs[j][0], inp(rs[j], torch.int64, 4), "all_gather_coalesced")
        same(outs[j][1], inp(rs[j], torch.int64, 9), "all_gather_coalesced")
    dist.barrier(group=group)


def p2p():
    if N < 2:
        return
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    for dt in ALL:
        # ring exchange with isend before irecv on every rank: must not block each other
        got = torch.zeros(1000, dtype=dt)
        big = torch.zeros(1 << 20, dtype=dt)
        reqs = [dist.isend(inp(RANK, dt, 1000), nxt), dist.irecv(got, prv),
                dist.isend(inp(RANK, dt, 1 << 20), nxt), dist.irecv(big, prv)]
        for r in reversed(reqs):
            r.wait()
        same(got, inp(prv, dt, 1000), f"isend/irecv ring {dt}")
        same(big, inp(prv, dt, 1 << 20), f"isend/irecv ring 1M {dt}")
    got = torch.zeros(7)
    ops = [dist.P2POp(dist.isend, inp(RANK, torch.float32, 7), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    same(got, inp(prv, torch.float32, 7), "batch_isend_irecv")
    # blocking send/recv, in the usual even/odd order
    t = torch.zeros(5, dtype=torch.int64)
    if RANK % 2 == 0:
        if RANK + 1 < N:
            dist.send(inp(RANK, torch.int64, 5), RANK + 1)
    else:
        dist.recv(t, RANK - 1)
        same(t, inp(RANK - 1, torch.int64, 5), "send/recv")


def async_out_of_order():
    xs = [inp(RANK, torch.float32, 1000 * (k + 1)) for k in range(6)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    futs = [w.get_future() for w in works]
    for k in reversed(range(6)):
        works[k].wait()
        assert works[k].is_completed() and works[k].is_success()
        # (Work.exception() has no Python binding that works in PyTorch 1.13, for any backend)
        same(xs[k], ref_reduce("sum", torch.float32, 1000 * (k + 1)), "async out of order")
    for k, f in enumerate(futs):
        same(f.wait()[0], ref_reduce("sum", torch.float32, 1000 * (k + 1)), "future value")
    # wait with a timeout: long enough, it returns True with the result in place
    x = inp(RANK, torch.float32)
    assert dist.all_reduce(x, async_op=True).wait(timedelta(seconds=30)) is True
    same(x, ref_reduce("sum", torch.float32), "wait(timeout)")
    if N >= 2:  # too short: it raises, and the call completes all the same
        x = inp(RANK, torch.float32)
        if RANK == 1:
            time.sleep(1.0)
        w = dist.all_reduce(x, async_op=True)
        if RANK == 0:
            refused(lambda: w.wait(timedelta(milliseconds=200)), ["tutti", "ran out"],
                    "wait(200 ms) for a rank 1 s late")
        w.wait()
        same(x, ref_reduce("sum", torch.float32), "wait after a wait ran out")
    # a chained future, as DDP's communication hooks do
    x = inp(RANK, torch.float64)
    fut = dist.all_reduce(x, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    same(fut.wait(), ref_reduce("sum", torch.float64) * 2, "future then")
    # a collective from inside a callback, waited there (PowerSGD does this)
    y = inp(RANK, torch.float32)

    def nested(f):
        dist.all_reduce(y)
        return f.value()[0] + y
    fut = dist.all_reduce(inp(RANK, torch.float32), async_op=True).get_future().then(nested)
    same(fut.wait(), 2 * ref_reduce("sum", torch.float32), "collective inside a callback")


def refusals():
    """Each refusal names its cause. A refused call is one this rank's peers may still make:
    the group is aborted in its turn, so no rank waits for it or pairs it with a later call
    (where every rank refuses alike, as here, every rank aborts). On a group of its own."""
    g = dist.new_group(list(range(N)))
    x = inp(RANK, torch.float32)
    w = dist.all_reduce(x, group=g, async_op=True)  # queued before the refusals: completes
    refused(lambda: dist.all_reduce(torch.zeros(4, 4).t(), group=g), ["tutti", "not contiguous"],
            "non-contiguous")
    w.wait()
    same(x, ref_reduce("sum", torch.float32), "a call queued before a refusal")
    for dt in (torch.float32, torch.int32, torch.bool):
        for bad in ("BAND", "BOR", "BXOR"):
            refused(lambda: dist.all_reduce(inp(RANK, dt), op=getattr(dist.ReduceOp, bad),
                                            group=g), ["tutti", bad, "not supported"],
                    f"{bad} {dt}")
    refused(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int16), group=g),
            ["tutti", "dtype", "Short"], "int16")
    with torch.inference_mode():  # the only non-CPU device a CPU-only PyTorch can dispatch to us
        refused(lambda: dist.all_reduce(torch.zeros(4, device="meta"), group=g),
                ["tutti", "meta", "CPU"], "meta device")
    refused(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.bool), group=g),
            ["tutti", "bool", "SUM"], "bool sum")
    refused(lambda: dist.all_reduce(torch.zeros(4, dtype=torch.complex64), op=dist.ReduceOp.MAX,
                                    group=g), ["complex"], "complex max")
    refused(lambda: dist.all_gather([torch.zeros(3)] * N, torch.zeros(4), group=g),
            ["tutti", "allgather", "3 elements where 4"], "all_gather sizes")
    # (torch.distributed checks dtypes itself; the process group's own method does not)
    refused(lambda: g.allgather([[torch.zeros(4, dtype=torch.int32)] * N], [torch.zeros(4)]),
            ["tutti", "Int", "Float"], "allgather dtypes")
    refused(lambda: reduce_scatter_t(torch.zeros(3), torch.zeros(3 * N + 1), group=g),
            ["tutti", "elements"], "_reduce_scatter_base sizes")
    refused(lambda: dist.all_to_all_single(torch.zeros(N), torch.zeros(N),
                                           input_split_sizes=[1] * (N + 1), group=g),
            ["tutti", "split sizes"], "all_to_all split count")
    refused(lambda: dist.recv(torch.zeros(3), group=g), ["tutti", "any source"],
            "recv_anysource")
    refused(lambda: dist.broadcast(torch.zeros(3), src=N, group=g), ["group"], "broadcast root")
    refused(lambda: dist.all_reduce(torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long),
                                                            torch.zeros(0), (3,)), group=g),
            ["tutti", "Sparse"], "sparse")
    if N > 1:  # the group is aborted on every rank: its next call fails, and nothing hangs
        refused(lambda: dist.all_reduce(torch.ones(3), group=g), ["tutti"],
                "a call after the refusals")
        assert g.error_state(), "the group is not in its error state after the refusals"


def refused_alone():
    """One rank refuses a call the others make: they fail there, naming the abort, and none
    pairs the refused call with the next one (which would be the same kind and size)."""
    if N < 2:
        return
    g = dist.new_group(list(range(N)))
    bad = torch.zeros(4, 4).t() if RANK == 1 else torch.ones(4, 4)
    for k in range(2):  # rank 1's second call must not meet the others' first
        x = bad if k == 0 else torch.ones(4, 4)
        try:
            dist.all_reduce(x, group=g)
        except RuntimeError as e:
            assert "tutti" in str(e), str(e)
            global checks
            checks += 1
        else:
            raise AssertionError(f"rank {RANK}: call {k} completed beside a refused call "
                                 f"(x[0, 0] = {x[0, 0].item()})")


def mismatch():
    """Ranks whose calls differ get a RuntimeError naming both calls; nothing hangs."""
    if N < 2:
        return
    g = dist.new_group(list(range(N)), backend="tutti")
    x = torch.zeros(4 if RANK == 0 else 5)
    global checks
    try:
        dist.all_reduce(x, group=g)
    except RuntimeError as e:
        assert "tutti" in str(e) and "differ" in str(e), str(e)
        checks += 1
    else:
        raise AssertionError("a count mismatch between ranks was not reported")
    # The same at a new communicator's first call, three times: on 4 ranks rank 0 used to wait
    # for rank 1 until the timeout (rank 2 found the mismatch while rank 1 was still
    # connecting; rank 1 then failed before it could tell rank 0 over a connection).
    for _ in range(3):
        g = dist.new_group(list(range(N)), timeout=timedelta(seconds=60))
        try:
            dist.all_reduce(torch.zeros(4 if RANK == 0 else 5), group=g)
        except RuntimeError as e:
            assert "tutti" in str(e) and "timed out" not in str(e), str(e)
            checks += 1
        else:
            raise AssertionError("a count mismatch between ranks was not reported")
    # abort: rank 0 aborts a group; its calls fail at once, the peers' fail too, and no hang
    g = dist.new_group(list(range(N)), backend="tutti")
    assert g.error_state() == ""
    if RANK == 0:
        g.abort()
        assert "aborted" in g.error_state(), g.error_state()
    try:
        dist.all_reduce(torch.ones(3), group=g)
    except RuntimeError as e:
        assert "tutti" in str(e), str(e)
        checks += 1
    else:
        raise AssertionError("a call on an aborted group completed")
    # the world group is untouched
    y = inp(RANK, torch.float32)
    dist.all_reduce(y)
    same(y, ref_reduce("sum", torch.float32), "world after a subgroup's failure")


def main():
    dist.init_process_group("tutti", timeout=timedelta(seconds=60))
    assert dist.get_backend() == "tutti" and dist.get_world_size() == N
    reductions()
    movement()
    p2p()
    async_out_of_order()
    refusals()
    refused_alone()
    if N >= 3:  # a subgroup of every other rank, and one of the ranks in reverse
        ranks = list(range(0, N, 2))
        g = dist.new_group(ranks)
        if RANK in ranks:
            reductions(g, ranks)
            movement(g, ranks)
    if N >= 2:
        rest = list(range(1, N))
        g = dist.new_group(rest)
        if RANK in rest:
            movement(g, rest)
    mismatch()
    dist.barrier()
    dist.destroy_process_group()
    print(f"ops_check: rank {RANK}/{N}: OK {checks} checks", flush=True)


if __name__ == "__main__":
    main()
