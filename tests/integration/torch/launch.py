#!/usr/bin/python3
"""launch.py -- run a test script on N local ranks, the way a user would launch PyTorch.

    launch.py [-n N] [--via env|torchrun|tutti-run] [--timeout S] script [args]

  env        N processes with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (a free
             loopback port): PyTorch's env:// rendezvous.
  torchrun   python3 -m torch.distributed.run --nproc_per_node N (a free master port).
  tutti-run  tutti-run -n N python3 script (TUTTI_RUN names tutti-run).

Exits 0 when every rank exited 0 within the timeout (the whole job: everything still running is
killed at it, and that fails: a job that hangs never passes).
"""
import argparse, os, signal, socket, subprocess, sys, time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--via", default="env", choices=["env", "torchrun", "tutti-run"])
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    py = sys.executable
    port = str(free_port())
    base = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    procs = []
    if a.via == "env":
        for r in range(a.n):
            env = dict(base, RANK=str(r), WORLD_SIZE=str(a.n), LOCAL_RANK=str(r),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            procs.append(subprocess.Popen([py, a.script] + a.args, env=env,
                                          start_new_session=True))
    elif a.via == "torchrun":
        # --redirects 1 --tee 1: with their defaults ("0") torchrun of PyTorch 1.13 fails under
        # Python 3.11 (Debian 12) before it starts anything: Std.from_str("0") finds no enum
        # member and returns None. Any single-bit value parses.
        procs.append(subprocess.Popen(
            [py, "-m", "torch.distributed.run", "--nproc_per_node", str(a.n),
             "--master_addr", "127.0.0.1", "--master_port", port, "--redirects", "1", "--tee",
             "1", a.script] + a.args,
            env=base, start_new_session=True))
    else:
        run = os.environ.get("TUTTI_RUN", "tutti-run")
        procs.append(subprocess.Popen([run, "-n", str(a.n), py, a.script] + a.args, env=base,
                                      start_new_session=True))
    deadline = time.monotonic() + a.timeout
    codes = [None] * len(procs)
    while None in codes and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        time.sleep(0.05)
    if None in codes:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(f"launch.py: FAIL: still running after {a.timeout:.0f} s (a hang): killed",
              file=sys.stderr)
        return 1
    bad = [c for c in codes if c != 0]
    print(f"launch.py: {a.via} -n {a.n} {os.path.basename(a.script)}: exit codes {codes}")
    return 0 if not bad else (bad[0] if bad[0] > 0 else 128 - bad[0])


if __name__ == "__main__":
    sys.exit(main())
