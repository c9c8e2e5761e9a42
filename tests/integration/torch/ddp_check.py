#!/usr/bin/python3
"""ddp_check.py -- PyTorch's own DistributedDataParallel, unchanged, over tutti and over gloo:
the same model (the reference MLP, 784-1024-1024-10), seeds, Fashion-MNIST batches and
optimizer, 50 steps each, must end at the same parameters within float tolerance.

Variants: plain; no_sync accumulation (two micro-batches a step, the first under no_sync); the
fp16 compression hook; PowerSGD (rank 2, from step 2); ZeroRedundancyOptimizer. Each variant
runs on a gloo group and on the tutti world group of the same job, one after the other.
"""
import os, sys, time, warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import tutti_torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench",
                                "ddp-torch"))
from train_torch import DATA, load, model, part  # noqa: E402  (the benchmark's MLP and data)

warnings.filterwarnings("ignore")
RANK, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
STEPS, B, LR = 50, 128, 0.05
# Float64 throughout: sums in another order differ in the last bits, and 50 steps of SGD with
# momentum amplify that some 1e5-fold (in float32 two orders of summing over 4 ranks end 4e-2
# apart); in float64 the same amplification stays far below these tolerances. fp16 compression
# rounds each rank's gradient and each partial sum to 11 bits: with more than 2 ranks the order
# of the sums shows: over 4 ranks gloo's order and tutti's end 5e-2 apart (a wrong average or
# a lost bucket moves them by more than 0.5); over 2 ranks both are exact.
TOL = {"plain": (1e-9, 1e-6), "no_sync": (1e-9, 1e-6), "zero": (1e-9, 1e-6),
       "fp16": (1e-9, 0.15), "powersgd": (1e-9, 1e-6)}


GLOO = None


def serialized_powersgd(state, bucket):
    """PowerSGD for the gloo reference, each bucket's chain waited out before the next starts.
    Unchanged, PowerSGD over gloo on CPU fails in PyTorch 1.13 (its callbacks' all-reduces
    interleave with later buckets' in a different order on each rank: gloo reports "op.preamble
    .length <= op.nbytes" or a reset connection); tutti runs them where the chain stands."""
    fut = powerSGD_hook.powerSGD_hook(state, bucket)
    fut.wait()
    return fut


def train(variant, pg, xtr, ytr, perm):
    torch.manual_seed(1)
    net = model(1024, 2).double()
    ddp = DDP(net, process_group=pg)
    if variant == "fp16":
        ddp.register_comm_hook(pg, default_hooks.fp16_compress_hook)
    if variant == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=pg, matrix_approximation_rank=2,
                                            start_powerSGD_iter=2, random_seed=0)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook if pg is not GLOO else
                               serialized_powersgd)
    if variant == "zero":
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                      process_group=pg, lr=LR, momentum=0.9)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=0.9)
    lossf = nn.CrossEntropyLoss(reduction="sum")
    first, count = part(B, RANK, N)
    for s in range(STEPS):
        idx = perm[s * B + first: s * B + first + count]
        opt.zero_grad()
        if variant == "no_sync":
            half = len(idx) // 2
            with ddp.no_sync():
                (lossf(ddp(xtr[idx[:half]]), ytr[idx[:half]]) * (N / B)).backward()
            (lossf(ddp(xtr[idx[half:]]), ytr[idx[half:]]) * (N / B)).backward()
        else:
            (lossf(ddp(xtr[idx]), ytr[idx]) * (N / B)).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def local(xtr, ytr, perm):
    """The same training in this process alone, on the whole global batch: the reference DDP's
    averaged gradients must match (plain, no_sync and ZeRO do the same arithmetic)."""
    torch.manual_seed(1)
    net = model(1024, 2).double()
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    lossf = nn.CrossEntropyLoss(reduction="sum")
    for s in range(STEPS):
        opt.zero_grad()
        for r in range(N):
            first, count = part(B, r, N)
            idx = perm[s * B + first: s * B + first + count]
            (lossf(net(xtr[idx]), ytr[idx]) / B).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def main():
    torch.set_num_threads(1)
    dist.init_process_group("tutti")
    global GLOO
    gloo = GLOO = dist.new_group(backend="gloo")
    # The first 6,400 training images, in a shuffled order every run and backend share.
    xtr, ytr = load("train", DATA, limit=STEPS * B)
    xtr = xtr.double()
    perm = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    start = torch.cat([p.detach().reshape(-1) for p in model(1024, 2).double().parameters()])
    worst, same_math = 0.0, {}
    for variant in ("plain", "no_sync", "fp16", "powersgd", "zero"):
        t0 = time.time()
        ref = train(variant, gloo, xtr, ytr, perm)
        t1 = time.time()
        got = train(variant, dist.group.WORLD, xtr, ytr, perm)
        t2 = time.time()
        moved = (ref - start).norm().item()
        rel = (got - ref).norm().item() / moved
        tol = TOL[variant][N > 2]
        print(f"ddp_check: rank {RANK}/{N} {variant:8s}: |tutti - gloo| / |gloo - start| = "
              f"{rel:.1e} (tolerance {tol:.0e}); gloo {t1 - t0:.1f} s, tutti {t2 - t1:.1f} s",
              flush=True)
        assert moved > 0.1, f"{variant}: training did not move the parameters"
        assert rel < tol, f"{variant}: tutti and gloo ended {rel:.2e} apart"
        worst = max(worst, rel / tol)
        if variant in ("plain", "no_sync", "zero"):  # the arithmetic of the one-process run
            same_math[variant] = (got, moved)
    if RANK == 0:  # (every rank holds the same parameters: DDP's own promise, checked above)
        one = local(xtr, ytr, perm)
        for variant, (got, moved) in same_math.items():
            # (scaled before the sum there, after it here: apart in the last bits)
            rl = (got - one).norm().item() / moved
            print(f"ddp_check: {variant:8s}: |tutti - one process| / |moved| = {rl:.1e} "
                  "(tolerance 1e-06)", flush=True)
            assert rl < 1e-6, f"{variant}: tutti and the one-process run ended {rl:.2e} apart"
            worst = max(worst, rl / 1e-6)
    dist.barrier()
    dist.destroy_process_group()
    print(f"ddp_check: rank {RANK}/{N}: OK (worst {worst:.2f} of tolerance)", flush=True)


if __name__ == "__main__":
    main()
