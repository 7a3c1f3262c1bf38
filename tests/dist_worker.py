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


def tiny_workload(checkpointing: str = "off") -> Workload:
    """The reference workload as the engine holds it (distributed normaliser included)."""
    settings = protocol.Settings(device="cpu", accumulate=K, checkpointing=checkpointing)
    return bound.build(protocol.DEFAULT, settings)


def freeze(workload: Workload) -> None:
    """A fine-tune's shape: only the last decoder layer's weights train, its biases and norms'
    bias frozen beside them (mixed ``requires_grad`` inside one module, one FSDP2 group)."""
    for name, p in workload.model.named_parameters():
        p.requires_grad_(name.startswith("decoder.1.") and name.endswith("weight"))


def frozen_with_grad(model: torch.nn.Module) -> list[str]:
    """The frozen parameters that got a ``.grad`` (none may)."""
    return [n for n, p in model.named_parameters() if not p.requires_grad and p.grad is not None]


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
            results.append(check(rank, world, name, False, frozen=True))
            results.append(check(rank, world, name, False, checkpointing="on"))
        from benches.engine.distributed import Parallel

        parallel = Parallel("ddp", torch.device("cpu"))
        pairs = {"pairs": paired_loops(rank, world, parallel), "mismatch": mismatch(parallel)}
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)
    with open(f"{out}.pair.{rank}", "w") as f:
        json.dump(pairs, f)


def check(
    rank: int,
    world: int,
    name: str,
    bucket_view: bool,
    frozen: bool = False,
    checkpointing: str = "off",
) -> dict:
    case = {
        "strategy": name,
        "bucket_view": bucket_view,
        "frozen": frozen,
        "checkpointing": checkpointing,
    }
    workload = tiny_workload(checkpointing)
    if frozen:
        freeze(workload)
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
            "frozen_with_grad": frozen_with_grad(model),
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
            first = GRAD_SYNC[kind][0]
            results.append(check_sharded(rank, world, parallel, name, first, frozen=True))
        results.append(refusals(parallel))
        pairs = {"pairs": paired_loops(rank, world, parallel), "mismatch": None}
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)
    with open(f"{out}.pair.{rank}", "w") as f:
        json.dump(pairs, f)


def check_sharded(
    rank: int, world: int, parallel, name: str, flavour: str, frozen: bool = False
) -> dict:
    from benches.engine.replicas import full

    case = {"strategy": name, "grad_sync": flavour, "frozen": frozen}
    workload = tiny_workload()
    if frozen:
        freeze(workload)
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
        return {
            **case,
            "max_rel_diff": max(diffs),
            "windows": windows,
            "groups": groups,
            "frozen_with_grad": frozen_with_grad(model),
        }
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


def paired_loops(rank: int, world: int, parallel) -> list[dict]:
    """A case's loops as the engine builds them (``PairedRunner``: the strategy's, the plain
    loop's, and ``--compare-settings``' other), per flavour: what each replica
    carries (``distributed.instrumentation``), whether the hooks are the very same code with a
    tally of each loop's own, and the collectives each loop counted per window over 4 pairs."""
    from benches.engine import training
    from benches.engine.distributed import GRAD_SYNC, instrumentation
    from benches.engine.runner import PairedRunner

    out = []
    for name in ("native",):  # what a replica carries is the engine's, not the strategy's
        for flavour in GRAD_SYNC[parallel.kind]:
            workload = tiny_workload()
            runner = PairedRunner(workload, name, parallel, flavour)
            runner.add_plain()
            runner.add_other(training.Recipe().replace("optimizer", "sgd"))
            loops = {"strategy": runner.strategy, "plain": runner.plain, "other": runner.other}
            windows: dict[str, list] = {role: [] for role in loops}
            for i in range(4):
                batches = rank_batches(workload, rank, world, i % 2)
                tokens = workload.distributed_window_tokens(batches)
                for run, roles in (
                    (runner.pair, ("strategy", "plain")),
                    (runner.setting_pair, ("other",)),
                ):
                    before = {role: loops[role].counter.snapshot() for role in roles}
                    run(i, batches, tokens)  # one window of each loop of the pair
                    for role in roles:
                        now = loops[role].counter.snapshot()
                        windows[role].append(loops[role].counter.per_window(before[role], now))
            out.append(
                {
                    "strategy": name,
                    "grad_sync": flavour,
                    "instrumentation": {r: instrumentation(lp.module) for r, lp in loops.items()},
                    "same_code": same_code(loops),
                    "windows": windows,
                }
            )
            runner.close()
    return out


def same_code(loops: dict) -> bool:
    """Every loop's hooks are the very same function or class, each with its own loop's counter
    as its tally (never another's, never none)."""
    seen: set = set()
    for loop in loops.values():
        module = loop.module
        if isinstance(module, DistributedDataParallel):
            hooks = [(hook, state) for hook, state in module._comm_hooks]
            if [state for _, state in hooks] != [loop.counter]:
                return False
            seen.add(tuple(hook for hook, _ in hooks))
            continue
        from strategies.collector import fsdp_modules

        groups = [g for m in fsdp_modules(module) for g in m._get_fsdp_state()._fsdp_param_groups]
        if not groups or any(
            getattr(g._reduce_scatter_comm, "counter", None) is not loop.counter for g in groups
        ):
            return False
        hooks = {g._all_reduce_hook for g in groups}
        if hooks != {None} and any(getattr(h, "__self__", None) is not loop.counter for h in hooks):
            return False
        kinds = {type(g._reduce_scatter_comm) for g in groups}
        seen.add((frozenset(kinds), frozenset(getattr(h, "__func__", h) for h in hooks)))
    return len(seen) == 1


def mismatch(parallel) -> str | None:
    """The case's guard (``case.alike``) on a strategy's loop beside a DDP replica without the
    counting hook (as the plain loop's was before): its one-line error, None if it let it by."""
    from types import SimpleNamespace

    from benches.engine import case
    from benches.engine.runner import PairedRunner

    runner = PairedRunner(tiny_workload(), "native", parallel, "last")
    # a loop whose counter never installed its hook: what it counts on, not a hook on it
    ddp = DistributedDataParallel(tiny_workload().model)
    bare = SimpleNamespace(counter=SimpleNamespace(module=ddp, kind="ddp"))
    try:
        case.alike(runner.strategy, bare)
    except RuntimeError as err:
        return str(err)
    finally:
        runner.close()
    return None
