"""Worker of the gloo tests (tests/test_distributed.py): one process per rank, spawned.

Each rank holds a different number of target tokens; after one window every rank's gradient must
equal the single-process gradient of the whole global batch.
"""

from __future__ import annotations

import json
import os
import traceback

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import strategies
from benches.engine import bound
from benches.engine.bound import Bound as Workload
from benches.engine.distributed import CollectiveCounter
from benches.engine.gradients import grad_check, reference_grads
from benches.workloads import protocol

K = 3


def tiny_workload() -> Workload:
    """The reference workload as the engine holds it (distributed normaliser included)."""
    return bound.build(protocol.DEFAULT, protocol.Settings(device="cpu", accumulate=K))


def rank_batches(workload: Workload, rank: int, world: int, window: int = 0):
    # a different window index per rank: different data, and different token counts
    return workload.batches(window * world + rank)


def global_reference(workload: Workload, world: int, window: int, per_rank_tokens=False):
    """The gradient of the whole global batch (every rank's micro-batches), in one process.

    With ``per_rank_tokens``: the pitfall instead, what DDP averages when each rank divides by
    its own token count.
    """
    if not per_rank_tokens:
        every = [b for r in range(world) for b in rank_batches(workload, r, world, window)]
        return reference_grads(workload, every, workload.window_tokens(every))
    total: dict[str, torch.Tensor] = {}
    for r in range(world):
        mine = rank_batches(workload, r, world, window)
        for name, g in reference_grads(workload, mine, workload.window_tokens(mine)).items():
            total[name] = total.get(name, 0) + g / world
    return total


def max_rel_diff(workload: Workload, expected: dict[str, torch.Tensor]) -> float:
    got = {n: p.grad for n, p in workload.model.named_parameters()}
    return grad_check(got, expected, tolerance=0.0)["max_rel_diff"]


def run(rank: int, world: int, port: int, out: str, names: list[str]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    results = []
    try:
        for name in names:
            for bucket_view in (False, True):
                results.append(check(rank, world, name, bucket_view))
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)


def check(rank: int, world: int, name: str, bucket_view: bool) -> dict:
    case = {"strategy": name, "bucket_view": bucket_view}
    workload = tiny_workload()
    expected = [global_reference(workload, world, w) for w in range(2)]
    model = DistributedDataParallel(workload.model, gradient_as_bucket_view=bucket_view)
    allreduce = CollectiveCounter(model, "ddp")
    try:
        collector = strategies.GradientCollector(model, strategy=name)
    except ValueError as err:
        return {**case, "refused": str(err)}
    try:
        per_micro, diffs = [], []
        for window in range(2):
            batches = rank_batches(workload, rank, world, window)
            tokens = workload.distributed_window_tokens(batches)
            with collector:
                for batch in collector.micro_batches(batches):
                    before = allreduce.allreduce
                    collector.backward(workload.loss(batch, tokens, model))
                    per_micro.append(allreduce.allreduce - before)
            diffs.append(max_rel_diff(workload, expected[window]))
        collector.close()
        pitfall = max_rel_diff(workload, global_reference(workload, world, 1, per_rank_tokens=True))
        return {
            **case,
            "max_rel_diff": max(diffs),
            "allreduce_per_micro": per_micro,
            "local_norm_rel_diff": pitfall,
            "local_tokens": workload.window_tokens(rank_batches(workload, rank, world)),
        }
    except Exception:
        return {**case, "error": traceback.format_exc()}


def run_sharded(
    rank: int, world: int, port: int, out: str, names: list[str], mesh: tuple[int, ...]
) -> None:
    """FSDP2 (1-D mesh) or HSDP (2-D): every strategy in every flavour its mesh allows."""
    from benches.engine.distributed import GRAD_SYNC, Parallel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    kind = "hsdp" if len(mesh) == 2 else "fsdp2"
    parallel = Parallel(kind, torch.device("cpu"), mesh)
    results = []
    try:
        for name in names:
            for flavour in GRAD_SYNC[kind]:
                results.append(check_sharded(rank, world, parallel, name, flavour))
        results.append(refusals(parallel))
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)


def check_sharded(rank: int, world: int, parallel, name: str, flavour: str) -> dict:
    from benches.engine.replicas import full

    case = {"strategy": name, "grad_sync": flavour}
    workload = tiny_workload()
    # the references at the unsharded weights, before fully_shard turns them into DTensors
    expected = [global_reference(workload, world, w) for w in range(2)]
    model = parallel.wrap(workload.model)
    counter = CollectiveCounter(model, parallel.kind)
    try:
        collector = strategies.GradientCollector(model, strategy=name, grad_sync=flavour)
    except ValueError as err:
        return {**case, "refused": str(err)}
    try:
        diffs, windows = [], []
        for window in range(2):  # no step between: a reset that does nothing shows as 2x
            batches = rank_batches(workload, rank, world, window)
            tokens = workload.distributed_window_tokens(batches)
            before = counter.snapshot()
            with collector:
                for batch in collector.micro_batches(batches):
                    collector.backward(workload.loss(batch, tokens, model))
            windows.append(counter.per_window(before, counter.snapshot()))
            got = {n: None if p.grad is None else full(p.grad) for n, p in model.named_parameters()}
            diffs.append(grad_check(got, expected[window], tolerance=0.0)["max_rel_diff"])
        collector.close()
        groups = len(counter.reduce_scatter)
        return {**case, "max_rel_diff": max(diffs), "windows": windows, "groups": groups}
    except Exception:
        return {**case, "error": traceback.format_exc()}


def refusals(parallel) -> dict:
    """What a sharded target refuses: grad_req write, and scatter on a 1-D mesh."""
    workload = tiny_workload()
    model = parallel.wrap(workload.model)
    out = {"strategy": None}
    for key, kwargs in (("write", {"grad_req": "write"}), ("scatter", {"grad_sync": "scatter"})):
        try:
            strategies.GradientCollector(model, strategy="block", **kwargs).close()
            out[key] = None
        except ValueError as err:
            out[key] = str(err)
    return out
