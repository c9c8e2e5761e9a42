"""tutti as a torch.distributed backend.

    import tutti_torch
    torch.distributed.init_process_group("tutti")

Importing this module registers the backend "tutti" with torch.distributed. Every rank
rendezvous through PyTorch's own store (env://, tcp://, file://, torchrun, tutti-run): rank 0
creates the communicator's id and puts it there, the others read it. The timeout of
init_process_group / new_group bounds every wait of the communicator; when the program gives
none (PyTorch's 30-minute default) and TUTTI_TIMEOUT is set, TUTTI_TIMEOUT holds.
"""
import os
from datetime import timedelta

import torch.distributed as dist

from _tutti_torch import ProcessGroupTutti, version  # noqa: F401

__all__ = ["ProcessGroupTutti", "version"]


def _timeout_s(timeout):
    default = getattr(dist, "default_pg_timeout", timedelta(minutes=30))
    if (timeout is None or timeout == default) and os.environ.get("TUTTI_TIMEOUT"):
        return 0.0  # <= 0: the communicator takes TUTTI_TIMEOUT
    if timeout is None:
        timeout = default
    return max(timeout.total_seconds(), 0.001)


def _create(store, rank, size, timeout):
    return ProcessGroupTutti(store, rank, size, _timeout_s(timeout))


if "tutti" not in getattr(dist.Backend, "_plugins", {}) and \
        "TUTTI" not in getattr(dist.Backend, "_plugins", {}):
    try:
        dist.Backend.register_backend("tutti", _create, devices=["cpu"])
    except TypeError:  # PyTorch before 2.1: no devices argument
        dist.Backend.register_backend("tutti", _create)
