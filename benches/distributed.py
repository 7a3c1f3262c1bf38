"""Ranks and collectives: a case as N ranks of DistributedDataParallel (torchrun sets the env).

Every rank measures; rank 0 writes the row. Per window the slowest rank's phase is kept, and the
worst gradient check and the largest memory figures over ranks.
"""

from __future__ import annotations

import os
from typing import Any

import torch


def ranks() -> tuple[int, int, int]:
    """(rank, local rank, world size) as torchrun sets them; (0, 0, 1) in a plain process."""
    env = os.environ
    return int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("WORLD_SIZE", 1))


def init(device: str, local_rank: int) -> None:
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(local_rank)  # rank r on its own GPU
    dist.init_process_group("nccl" if device == "cuda" else "gloo")


def wrapper(device: torch.device):
    """model -> DistributedDataParallel(model) on this rank's own device."""

    def wrap(model: torch.nn.Module) -> torch.nn.parallel.DistributedDataParallel:
        ids = [torch.cuda.current_device()] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    return wrap


class AllReduceCounter:
    """Counts DDP's all-reduces: a communication hook that runs the default one, counted."""

    def __init__(self, ddp) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        self.calls = 0

        def counted_allreduce_hook(state, bucket):
            self.calls += 1
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, counted_allreduce_hook)


def gather(value: Any, world: int) -> list[Any]:
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, value)
    return gathered


def worst_check(check: dict[str, Any], world: int) -> dict[str, Any]:
    """The worst gradient check over ranks (every rank then knows whether to fail)."""
    checks = gather(check, world)
    worst = max(checks, key=lambda c: c["max_rel_diff"])
    return {**worst, "ok": all(c["ok"] for c in checks)}


def slowest(samples: dict[str, list], world: int) -> dict[str, list]:
    """Per window, each phase from the slowest rank (pressure: the highest)."""
    gathered = gather(samples, world)
    return {
        key: [
            max((v for v in per_rank if v is not None), default=None)
            for per_rank in zip(*(g[key] for g in gathered), strict=True)
        ]
        for key in samples
    }


def largest(memory: dict[str, Any], world: int) -> dict[str, Any]:
    """Each memory figure's largest value over ranks; a figure no rank measured stays None."""
    gathered = gather(memory, world)
    out = dict(memory)
    for key, value in memory.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = [g[key] for g in gathered if g.get(key) is not None]
            out[key] = max(values) if values else None
    return {**out, "over_ranks": "max"}
