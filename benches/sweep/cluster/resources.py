"""What a cluster's nodes offer a sweep, decided from the nodes (never from the driver): the
device ``auto`` means, the threads a process runs, its pinning, the processes at once per node
(``slots``) and what one process asks Ray for (``demand``). ``arguments.resolve`` and
``place.RayPlace`` both use them; this module imports neither (the sweep it reads is
``record``'s), so neither imports the other, type-only imports included."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from benches.sweep.outdir import UsageError
from benches.sweep.record import Sweep
from benches.sweep.values import threads_per_rank


def device_of(asked: str, nodes: list[dict[str, Any]]) -> str:
    """``--device`` on the cluster: ``auto`` is cuda where a node has a GPU, else cpu (the
    nodes' GPUs, never the driver's)."""
    if asked != "auto":
        return asked
    return "cuda" if any(gpus(n) >= 1 for n in nodes) else "cpu"


def threads_of(
    nodes: list[dict[str, Any]], device: str, world_size: int, per_node: int | None = None
) -> int:
    """The default ``--threads`` (a process's total) on the cluster: 1 on CPU (one core of its
    own, as on one machine: a rank each with ranks); on CUDA the CPUs of a node over the
    processes it runs at once (its GPUs over the ranks, at most ``--per-node``), the least of
    the nodes that have the GPUs, so that every GPU of every node is used; a whole number of
    threads per rank, at least one."""
    if device != "cuda":
        return world_size
    shares = []
    for n in nodes:
        at_once = int(gpus(n) // world_size)
        if per_node:
            at_once = min(at_once, per_node)
        if at_once >= 1:
            shares.append(int(cpus(n) // at_once))
    return threads_per_rank(min(shares, default=world_size), world_size) * world_size


def pinning_of(asked: bool | None, nodes: list[dict[str, Any]], sweep: Sweep) -> bool:
    """``--pin`` on the cluster, from its nodes' hosts: the default is on where each rank runs
    one thread and every process at once on a host gets cores of its own (as on one machine);
    ``--pin`` where they cannot is refused (``check_pinning``)."""
    ask = demand(sweep)
    counts = slots(nodes, sweep, ask)
    if asked is None:
        if threads_per_rank(sweep.threads, sweep.world_size) != 1:
            return False
        try:
            check_pinning(nodes, counts, sweep, pin=True)
        except UsageError:
            return False
        return True
    if asked:
        check_pinning(nodes, counts, sweep, pin=True)
    return bool(asked)


def cpus(node: dict[str, Any]) -> float:
    return node["resources"].get("CPU", 0)


def gpus(node: dict[str, Any]) -> float:
    return node["resources"].get("GPU", 0)


def demand(sweep: Sweep) -> dict[str, float]:
    """What one process asks of its node, exactly what it uses: its threads (``--threads`` is
    the process's total, each rank at least one) in CPUs, a GPU per rank on CUDA."""
    ranks = sweep.world_size
    return {
        "num_cpus": threads_per_rank(sweep.threads, ranks) * ranks,
        "num_gpus": ranks if sweep.device == "cuda" else 0,
    }


def slots(nodes: list[dict[str, Any]], sweep: Sweep, ask: dict[str, float]) -> dict[str, int]:
    """Processes at once per node: ``--per-node`` (``--exclusive``: 1; default one on CPU, its
    GPUs over the ranks on CUDA), no more than its CPUs and GPUs hold; a UsageError where no
    node can ever run one, naming what was asked, what the nodes offer and the flag that
    fixes it."""
    out = {}
    for n in nodes:
        fits = math.floor(cpus(n) / ask["num_cpus"]) if ask["num_cpus"] else 1
        if ask["num_gpus"]:
            fits = min(fits, math.floor(gpus(n) / ask["num_gpus"]))
        default = 1 if sweep.device != "cuda" else max(1, int(gpus(n) // max(1, ask["num_gpus"])))
        out[n["node_id"]] = min(fits, sweep.per_node or default)
    if not any(out.values()):
        offered = "; ".join(f"{n['host']}: {cpus(n):g} CPUs, {gpus(n):g} GPUs" for n in nodes)
        ranks = f" over {sweep.world_size} ranks" if sweep.world_size > 1 else ""
        raise UsageError(
            f"--cluster {sweep.cluster}: no node can run a process that asks "
            f"{ask['num_cpus']:g} CPUs ({sweep.threads} threads{ranks}) and "
            f"{ask['num_gpus']:g} GPUs; the nodes offer: {offered or 'none'}; "
            f"{fix(nodes, sweep, ask)}"
        )
    return out


def fix(nodes: list[dict[str, Any]], sweep: Sweep, ask: dict[str, float]) -> str:
    """The flag that makes a process fit a node: fewer GPUs (``--world-size``, or
    ``--device cpu`` where no node has one), else fewer CPUs (``--threads``)."""
    with_gpus = [n for n in nodes if gpus(n) >= ask["num_gpus"]]
    if not with_gpus:
        most = int(max((gpus(n) for n in nodes), default=0))
        if most >= 1:
            return f"valid: --world-size {most} or fewer, or --device cpu"
        return "valid: --device cpu (no node has a GPU)"
    most = int(max(cpus(n) for n in with_gpus))
    if most >= sweep.world_size:
        return f"valid: --threads {most} or fewer"
    return f"valid: --world-size {max(1, most)} or fewer (a CPU per rank at least)"


def check_pinning(
    nodes: list[dict[str, Any]], counts: dict[str, int], sweep: Sweep, pin: bool | None = None
) -> None:
    """--pin (``pin``: as if given): every process at once on a host gets cores of its own
    (its threads, as ``demand`` asks), or a UsageError."""
    if not (sweep.pin if pin is None else pin):
        return
    hosts: Counter = Counter()
    offered: Counter = Counter()
    for n in nodes:
        hosts[n["host"]] += counts.get(n["node_id"], 0)
        offered[n["host"]] += cpus(n)
    each = demand(sweep)["num_cpus"]
    for host, processes in hosts.items():
        need = processes * each
        if need > offered[host]:
            raise UsageError(
                f"--pin: {processes} processes at once on {host} x {each:g} cores each "
                f"({sweep.threads} threads) need {need:g} cores, its nodes offer "
                f"{offered[host]:g}; valid: --no-pin, a lower --per-node, or fewer --threads"
            )
