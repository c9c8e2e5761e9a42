#!/usr/bin/python3
"""kill_check.py -- a rank killed mid-training: every other rank raises within the timeout.

    kill_check.py [-n 3] [--timeout 20]          the driver: starts the ranks, judges them

The ranks train PyTorch DDP over tutti (init_process_group(timeout=...)); at step 5 rank 1
SIGKILLs itself, having written the time to a file. Every other rank must get a RuntimeError
naming tutti from its next (or pending) call, within the timeout of that moment, and exit 3;
the job must end (no hang) and leave nothing of tutti's in /dev/shm.
"""
import argparse, os, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch import free_port  # noqa: E402


def shm_names():
    return {n for n in os.listdir("/dev/shm") if n.startswith("tutti-")}


def rank_main(timeout, stamp):
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import tutti_torch  # noqa: F401
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("tutti", timeout=timedelta(seconds=timeout))
    torch.manual_seed(0)
    net = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    try:
        for step in range(100000):
            if rank == 1 and step == 5:
                with open(stamp, "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    except RuntimeError as e:
        waited = time.time() - float(open(stamp).read())
        print(f"kill_check: rank {rank}: raised {waited:.2f} s after rank 1 died: "
              f"{str(e).splitlines()[0][:300]}", flush=True)
        ok = "tutti" in str(e) and waited < timeout
        sys.exit(3 if ok else 4)
    sys.exit(5)  # never: the loop cannot end without rank 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stamp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        return rank_main(a.timeout, a.stamp)
    before = shm_names()
    stamp = os.path.join(tempfile.mkdtemp(prefix="kill_check."), "killed-at")
    port = str(free_port())
    procs = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--rank", "--timeout", str(a.timeout),
         "--stamp", stamp],
        env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.n), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=port, OMP_NUM_THREADS="1"))
        for r in range(a.n)]
    deadline = time.monotonic() + a.timeout + 90  # startup, then the timeout and some
    codes = [None] * a.n
    while None in codes and time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
    left = shm_names() - before
    print(f"kill_check: exit codes {codes} (rank 1: -9 expected, the others 3)")
    want = [3 if r != 1 else -signal.SIGKILL for r in range(a.n)]
    if codes != want:
        print("kill_check: FAIL: " + ("a rank hung" if None in codes else "wrong exit codes"))
        return 1
    if left:
        print(f"kill_check: FAIL: left in /dev/shm: {sorted(left)}")
        return 1
    print("kill_check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
