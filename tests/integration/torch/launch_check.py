#!/usr/bin/python3
"""launch_check.py [env|tcp|file|timeout] -- one line changed in a PyTorch program: "tutti".

  env      init_process_group("tutti") and nothing else: what torchrun and tutti-run provide
  tcp      init_method="tcp://MASTER_ADDR:MASTER_PORT", rank and world_size given
  file     init_method="file://..." (a file named after MASTER_PORT, removed at the end)
  timeout  init_process_group(timeout=3 s); rank 1 skips an all_reduce that rank 0 makes: rank 0
           must raise "timed out" after about 3 s, not PyTorch's default 30 minutes

Each rank checks an all_reduce and a subgroup's broadcast against values it computes itself.
"""
import os, sys, time
from datetime import timedelta

import torch
import torch.distributed as dist
import tutti_torch  # noqa: F401

mode = sys.argv[1] if len(sys.argv) > 1 else "env"
rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
path = f"/tmp/tutti_torch_launch_check.{port}"
if mode == "env":
    dist.init_process_group("tutti")
elif mode == "tcp":
    dist.init_process_group("tutti", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=n)
elif mode == "file":
    dist.init_process_group("tutti", init_method=f"file://{path}", rank=rank, world_size=n)
elif mode == "timeout":
    dist.init_process_group("tutti", timeout=timedelta(seconds=3))
assert dist.get_rank() == rank and dist.get_world_size() == n
x = torch.full((1000,), float(rank + 1))
dist.all_reduce(x)
assert torch.equal(x, torch.full((1000,), n * (n + 1) / 2)), x[:4]
if n > 1:
    g = dist.new_group(list(range(1, n)))
    if rank >= 1:
        y = torch.arange(10) * rank
        dist.broadcast(y, src=n - 1, group=g)
        assert torch.equal(y, torch.arange(10) * (n - 1)), y
if mode == "timeout" and n > 1:
    if rank == 0:
        t0 = time.time()
        try:
            dist.all_reduce(torch.ones(4))
        except RuntimeError as e:
            took = time.time() - t0
            print(f"launch_check: rank 0 raised after {took:.1f} s: {str(e)[:200]}", flush=True)
            assert "timed out" in str(e) and 2.5 < took < 15, (took, str(e))
        else:
            raise AssertionError("an all_reduce that rank 1 never made completed")
    else:
        time.sleep(4.5)  # past rank 0's timeout, then leave without the call
    os._exit(0)
dist.barrier()
dist.destroy_process_group()
if mode == "file" and rank == 0:
    try:  # PyTorch's FileStore removes it itself once its last user is gone
        os.unlink(path)
    except FileNotFoundError:
        pass
print(f"launch_check: rank {rank}/{n} ({mode}): OK", flush=True)
