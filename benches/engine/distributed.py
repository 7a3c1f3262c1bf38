"""Ranks and collectives: a case as N ranks of DDP, FSDP2 or HSDP (torchrun sets the env).

Every rank measures; rank 0 writes the row. Per window the slowest rank's phase is kept, and the
worst gradient check and the largest memory figures over ranks.

``Parallel`` is the one place a model is wrapped: DistributedDataParallel on this rank's own
device, or FSDP2 ``fully_shard`` of every block of every ``nn.ModuleList`` and then the root, on
a 1-D mesh (``fsdp2``) or a 2-D replicas x shards mesh (``hsdp``). It also makes an unsharded
copy of a sharded model (for the reference gradients and fresh replicas) and counts collectives.
"""

from __future__ import annotations

import copy
import functools
import os
import time
import weakref
from typing import Any

import torch
from torch import nn

from benches.engine.replicas import full, replica
from reports.schema.row_parts import ErrorFigures, GradCheck, Memory, ProcessFigures, given, made

PARALLEL = ("none", "ddp", "fsdp2", "hsdp")
# the flavours of gradient synchronisation each kind can run (strategies.collector.GRAD_SYNCS)
GRAD_SYNC = {
    "none": ("last",),
    "ddp": ("every", "last"),
    "fsdp2": ("every", "last"),
    "hsdp": ("every", "scatter", "last"),
}
REFERENCE_SYNC = "every"  # the flavour others are paired against: a backward that always syncs


def ranks() -> tuple[int, int, int]:
    """(rank, local rank, world size) as torchrun sets them; (0, 0, 1) in a plain process."""
    env = os.environ
    return int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("WORLD_SIZE", 1))


def local_device(device: str) -> torch.device:
    """This rank's own device: ``cuda:LOCAL_RANK`` on CUDA (rank r of a node on GPU r)."""
    kind = torch.device(device).type
    return torch.device("cuda", ranks()[1]) if kind == "cuda" else torch.device(kind)


def gpu_missing(device: torch.device, visible: int) -> str | None:
    """The one line of a rank whose GPU (``cuda:LOCAL_RANK``) this process cannot see (a node
    with fewer GPUs than ranks, a CPU build of torch, a scheduler that gave fewer), or None."""
    if device.index is None or device.index < visible:
        return None
    rank, _, world = ranks()
    shown = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
    return (
        f"rank {rank} of {world} needs GPU {device.index} of its node (its local rank), and this "
        f"process sees {visible} (CUDA_VISIBLE_DEVICES={shown}); valid: --world-size up to "
        "the GPUs a process is given, or --device cpu"
    )


def init(device: torch.device) -> None:
    import torch.distributed as dist

    if device.type == "cuda":
        missing = gpu_missing(device, torch.cuda.device_count())
        if missing:
            raise ValueError(missing)
        torch.cuda.set_device(device)  # rank r on its own GPU
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")


def parse_mesh(text: str | None, parallel: str, world: int) -> tuple[int, ...]:
    """The mesh shape: (world,) for ddp/fsdp2; (replicas, shards) for hsdp, default (2, N/2)."""
    if parallel != "hsdp":
        if text:
            raise ValueError(f"invalid --mesh {text!r} with --parallel {parallel}; valid: hsdp")
        return (world,)
    if not text:
        if world < 2 or world % 2:
            raise ValueError(
                f"invalid --world-size {world} for hsdp's default 2 x N/2 mesh; valid: an even "
                "number >= 2, or --mesh RxS with R * S = N"
            )
        return (2, world // 2)
    try:
        replicas, shards = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(
            f"invalid --mesh {text!r}; valid: RxS (replicas x shards), e.g. 2x2"
        ) from None
    if replicas < 1 or shards < 1 or replicas * shards != world:
        raise ValueError(
            f"invalid --mesh {text!r} for --world-size {world}; valid: RxS with R * S = {world}"
        )
    return (replicas, shards)


class Parallel:
    """How this case's models are wrapped: ``none``, ``ddp``, ``fsdp2`` or ``hsdp``."""

    def __init__(self, kind: str, device: torch.device, mesh: tuple[int, ...] = ()) -> None:
        if kind not in PARALLEL:
            raise ValueError(f"unknown parallel {kind!r}; valid: {', '.join(PARALLEL)}")
        self.kind, self.device, self.shape = kind, device, mesh
        self.mesh = None
        self._template: nn.Module | None = None  # an unsharded copy, made before sharding
        if self.sharded:
            from torch.distributed.device_mesh import init_device_mesh

            names = ("replicate", "shard") if len(mesh) == 2 else ("shard",)
            self.mesh = init_device_mesh(device.type, mesh, mesh_dim_names=names)

    @property
    def sharded(self) -> bool:
        return self.kind in ("fsdp2", "hsdp")

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module forward runs through: the model itself (none), a DDP wrapper, or the model
        sharded in place with ``fully_shard`` (its parameters become DTensor shards)."""
        if self.kind == "none":
            return model
        if self.kind == "ddp":
            ids = [self.device.index] if self.device.type == "cuda" else None
            return nn.parallel.DistributedDataParallel(model, device_ids=ids)
        from torch.distributed.fsdp import fully_shard

        if self._template is None:
            self._template = copy.deepcopy(model)
        blocks = [
            block
            for child in model.modules()
            if isinstance(child, nn.ModuleList)
            for block in child
            if any(True for _ in block.parameters())
        ]
        for block in reversed(blocks):  # an inner block before the one holding it
            fully_shard(block, mesh=self.mesh)
        return fully_shard(model, mesh=self.mesh)

    def unsharded(self, model: nn.Module) -> nn.Module:
        """A plain (never wrapped) module with ``model``'s current weights, whole; no gradients.
        For a sharded model this gathers every parameter (every rank must call it)."""
        if not self.sharded or self._template is None:
            return replica(model)
        plain = copy.deepcopy(self._template)
        with torch.no_grad():
            for mine, theirs in zip(plain.parameters(), model.parameters(), strict=True):
                mine.copy_(full(theirs.detach()))
                mine.grad = None
        return plain


class CollectiveCounter:
    """Counts the gradient collectives of a wrapped module, the real ones run as usual.

    DDP: all-reduces, through a communication hook (``counted_allreduce``) that calls the default
    one. FSDP2: the reduce-scatters of every FSDP group (``CountedReduceScatter``, which calls
    torch's default one) and, on an HSDP mesh, the all-reduces across replicas
    (``set_all_reduce_hook`` runs ``after_allreduce`` after each). ``seconds`` is the host time
    spent inside reduce-scatter calls (gloo: the collective itself; NCCL: the launch only).

    Every loop's replica carries one (``runner.Loop``), the plain loop's too, each counting into
    its own tally: a hook on one side of a pair only would be a bias in every paired ratio.
    ``instrumentation`` says what a module carries, so the two sides can be compared.
    """

    def __init__(self, module: nn.Module, kind: str) -> None:
        self.module, self.kind = module, kind  # what it counts on (``case.alike`` reads them)
        self.allreduce = 0
        self.reduce_scatter: dict[int, int] = {}  # per FSDP group
        self.seconds = 0.0
        if kind == "ddp":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            self.default_allreduce = default_hooks.allreduce_hook  # found once, not per bucket
            # DDP takes a communication hook only before its first backward
            module.register_comm_hook(self, counted_allreduce)
        elif kind in ("fsdp2", "hsdp"):
            self._count_fsdp(module, hsdp=kind == "hsdp")
        elif kind == "deepspeed":  # a DeepSpeed engine's own collectives (engine.frameworks)
            counted_deepspeed().add(self)

    def _count_fsdp(self, module: nn.Module, hsdp: bool) -> None:
        from strategies.collector import fsdp_modules

        counted = counted_reduce_scatter()
        for i, group in enumerate(fsdp_modules(module)):
            group.set_custom_reduce_scatter(counted(self, i))
            if hsdp:  # on a 1-D mesh the hook runs after the reduce-scatter instead
                group.set_all_reduce_hook(self.after_allreduce)

    def after_allreduce(self, _: torch.Tensor) -> None:
        """HSDP's all-reduce hook: one all-reduce across replicas done."""
        self.allreduce += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "allreduce": self.allreduce,
            "reduce_scatter": dict(self.reduce_scatter),
            "seconds": self.seconds,
        }

    @staticmethod
    def per_window(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """What one window added: all-reduces, reduce-scatters (in all, and per FSDP group)."""
        groups = {
            g: n - before["reduce_scatter"].get(g, 0) for g, n in after["reduce_scatter"].items()
        }
        return {
            "allreduce": after["allreduce"] - before["allreduce"],
            "reduce_scatter": sum(groups.values()),
            "reduce_scatter_per_group": sorted(set(groups.values())),
            "collective_seconds": after["seconds"] - before["seconds"],
        }


def counted_allreduce(counter: CollectiveCounter, bucket):
    """DDP's communication hook (state: the counter): counts the bucket, then the default
    all-reduce. One function for every replica, so both sides of a pair run the same code."""
    counter.allreduce += 1
    return counter.default_allreduce(None, bucket)  # None: the default process group


@functools.cache
def counted_reduce_scatter() -> type:
    """FSDP2's ``DefaultReduceScatter`` counted (calls per group, host seconds inside): one
    class, made once, for every replica, so both sides of a pair run the same code."""
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultReduceScatter

    class CountedReduceScatter(DefaultReduceScatter):
        def __init__(self, counter: CollectiveCounter, group: int) -> None:
            self.counter, self.group = counter, group
            counter.reduce_scatter[group] = 0

        def __call__(self, *args: Any, **kwargs: Any):
            self.counter.reduce_scatter[self.group] += 1
            start = time.perf_counter()
            try:
                return super().__call__(*args, **kwargs)
            finally:
                self.counter.seconds += time.perf_counter() - start

    return CountedReduceScatter


#: DeepSpeed's collectives by its backend's method (``deepspeed/comm/torch.py``), as counted
DEEPSPEED_COLLECTIVES = {
    "all_reduce": "allreduce",
    "all_reduce_coalesced": "allreduce",
    "inference_all_reduce": "allreduce",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
}


@functools.cache
def counted_deepspeed() -> weakref.WeakSet:
    """The counters of DeepSpeed's collectives: its process-wide backend's methods, counted
    into every live counter (one engine runs at a time), then called. Installed once."""
    from deepspeed.comm import comm

    counters: weakref.WeakSet = weakref.WeakSet()
    for method, tally in DEEPSPEED_COLLECTIVES.items():
        original = getattr(comm.cdb, method, None)
        if original is None:
            continue

        def counted(*args: Any, _original=original, _tally=tally, **kwargs: Any):
            for counter in counters:
                if _tally == "allreduce":
                    counter.allreduce += 1
                else:
                    counter.reduce_scatter[0] = counter.reduce_scatter.get(0, 0) + 1
            return _original(*args, **kwargs)

        setattr(comm.cdb, method, counted)
    return counters


def instrumentation(module: nn.Module) -> list[dict[str, Any]]:
    """What a wrapped module carries that the harness put there, by kind and not by tally: DDP's
    registered communication hooks (each hook's name and its state's type), or per FSDP group
    its reduce-scatter's type and its all-reduce hook; [] for a plain module. Two replicas of a
    pair must give equal lists."""
    if isinstance(module, nn.parallel.DistributedDataParallel):
        return [
            {"comm_hook": _name(hook), "state": type(state).__name__}
            for hook, state in module._comm_hooks
        ]
    from strategies.collector import fsdp_modules

    return [
        {
            "reduce_scatter": type(param_group._reduce_scatter_comm).__qualname__,
            "all_reduce_hook": _name(param_group._all_reduce_hook),
        }
        for group in fsdp_modules(module)
        for param_group in group._get_fsdp_state()._fsdp_param_groups
    ]


def _name(function: Any) -> str | None:
    if function is None:
        return None
    function = getattr(function, "__func__", function)  # a bound method: its function
    return f"{function.__module__}.{function.__qualname__}"


def every_rank(flag: bool) -> bool:
    """Whether ``flag`` holds on every rank (a collective: every rank calls it at the same
    point); ``flag`` itself without a process group."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    gathered: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, bool(flag))
    return all(gathered)


def gather(value: Any, world: int) -> list[Any]:
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, value)
    return gathered


def worst_check(
    check: GradCheck, errors: dict[str, ErrorFigures], world: int
) -> tuple[GradCheck, dict[str, ErrorFigures]]:
    """The worst gradient check over ranks, with that rank's error figures (every rank then
    knows whether to fail)."""
    checks = gather((given(check), errors), world)
    worst, worst_errors = max(checks, key=lambda c: c[0]["max_rel_diff"])
    return made(GradCheck, **{**worst, "ok": all(c["ok"] for c, _ in checks)}), worst_errors


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


def largest(memory: Memory, world: int) -> Memory:
    """Each memory figure's largest value over ranks; a figure no rank measured stays None."""
    mine = given(memory)
    return made(Memory, **_largest_of(mine, gather(mine, world)))


def busiest(figures: ProcessFigures, world: int) -> ProcessFigures:
    """A process's figures (``process.TimedPairsProcess``) over ranks: each the largest, and
    every rank's cores (``rank_affinity``, rank by rank)."""
    mine = given(figures)
    gathered = gather(mine, world)
    return made(
        ProcessFigures,
        **_largest_of(mine, gathered),
        rank_affinity=[g["affinity"] for g in gathered],
    )


def _largest_of(mine: dict[str, Any], gathered: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure of ``mine`` (a record's given fields) the largest over ranks."""
    out = dict(mine)
    for key, value in mine.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = [g[key] for g in gathered if g.get(key) is not None]
            out[key] = max(values) if values else None
    return {**out, "over_ranks": "max"}
