#!/usr/bin/python3
"""allreduce.py -- dist.all_reduce through PyTorch, the tutti backend against gloo, side by side.

    bench/ddp-torch/allreduce.py [--ranks 2] [--pairs 3] [--build build]

Each pair runs one job per backend, gloo then tutti (alternating, on the same machine a moment
apart): N ranks (processes, one thread each) time float32 sum all-reduces of 8 B to 64 MiB,
each size warmed up and then repeated for about 0.3 s (a count rank 0 picks); a rank's time per call is the mean over
its repetitions and the job's the slowest rank's. Prints every job, then per size the median
over the pairs: latency in microseconds and bus bandwidth (2(N-1)/N x bytes / time, GB/s),
and the tutti / gloo ratio.
"""
import argparse, os, socket, statistics, subprocess, sys, time

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
         64 << 20]


def rank_main(backend, port, rank, n):
    import torch
    import torch.distributed as dist
    if backend == "tutti":
        import tutti_torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)
    out = []
    for size in SIZES:
        x = torch.ones(size // 4)
        for _ in range(3):
            dist.all_reduce(x)
        # How many calls make about 0.3 s: rank 0's estimate, the same on every rank.
        t0 = time.perf_counter()
        dist.all_reduce(x)
        r = torch.tensor([max(5, int(0.3 / max(time.perf_counter() - t0, 1e-6)))])
        dist.broadcast(r, src=0)
        reps = int(r.item())
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(x)
        t = torch.tensor([(time.perf_counter() - t0) / reps], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out.append(t.item())
    if rank == 0:
        print(" ".join(f"{t:.9f}" for t in out), flush=True)
    dist.destroy_process_group()


def job(py, backend, n, env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ps = [subprocess.Popen([py, __file__, "--rank", str(r), "--ranks", str(n), "--backend",
                            backend, "--port", str(port)], env=env, stdout=subprocess.PIPE,
                           text=True) for r in range(n)]
    outs = [p.communicate(timeout=900)[0] for p in ps]
    if any(p.returncode for p in ps):
        sys.exit(f"{backend} job failed: {[p.returncode for p in ps]}")
    return [float(v) for v in outs[0].split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "..", "build"))
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    ap.add_argument("--port", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        return rank_main(a.backend, a.port, a.rank, a.ranks)
    n = a.ranks
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(os.path.abspath(a.build), "bindings", "torch"))
    res = {"gloo": [], "tutti": []}
    for p in range(a.pairs):
        for b in ("gloo", "tutti"):
            res[b].append(job(sys.executable, b, n, env))
            print(f"pair {p + 1} {b:5s}: " + " ".join(f"{t * 1e6:.1f}" for t in res[b][-1])
                  + " us", flush=True)
    f = 2 * (n - 1) / n
    print(f"\n# {n} ranks, float32 sum, median of {a.pairs} alternating pairs")
    print(f"{'bytes':>10} {'gloo us':>10} {'tutti us':>10} {'gloo GB/s':>10} {'tutti GB/s':>11}"
          f" {'tutti/gloo':>10}")
    for i, size in enumerate(SIZES):
        g = statistics.median(r[i] for r in res["gloo"])
        t = statistics.median(r[i] for r in res["tutti"])
        print(f"{size:>10} {g * 1e6:>10.1f} {t * 1e6:>10.1f} {f * size / g / 1e9:>10.2f} "
              f"{f * size / t / 1e9:>11.2f} {g / t:>9.1f}x")


if __name__ == "__main__":
    main()
