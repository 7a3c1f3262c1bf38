"""This machine's side of a sweep's settings (a cluster's: ``benches.sweep.cluster.resources``):
the device and its preset, a process's threads and pinning, whether a workload builds here, and
a case's timeout from the device's speed. Every problem is a one-line ``UsageError``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from benches.engine import bound, gradients, memory
from benches.engine.growth import GROWTH_WINDOWS
from benches.engine.spec import PAIRS_FACTOR
from benches.engine.warmup import most as warmup_most
from benches.sweep.outdir import UsageError
from benches.sweep.values import threads_per_rank
from benches.workloads import protocol
from benches.workloads.transformer import PRESETS
from reports.schema.settings import FIELDS, SETTINGS

DEVICES = ("auto", "cpu", "cuda")
# seconds per micro-batch forward+backward to budget for, by device: the timeout scales with it
SECONDS_PER_MICRO_BATCH = {
    "cpu": {"tiny": 0.5, "small": 3.0, "base": 30.0, "big": 100.0},
    "cuda": {"tiny": 0.5, "small": 0.5, "base": 1.0, "big": 2.0},
}


def check_gpus(device: str, world_size: int) -> None:
    """Ranks on CUDA need a GPU each on this node (torchrun's LOCAL_WORLD_SIZE)."""
    import torch

    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))  # torchrun: this node's
    if local_world > 1 and device == "cuda" and local_world > torch.cuda.device_count():
        raise UsageError(
            f"--world-size {world_size} needs {world_size} GPUs; "
            f"valid here: 1 to {torch.cuda.device_count()}"
        )


def default_threads(device: str, world_size: int = 1) -> int:
    """A process's threads on this machine (no cluster; a cluster's: ``cluster.place
    .threads_of``): one per rank on CPU (pinned to a core of its own: the spread between
    processes is smallest there, and a case never competes with its own threads); on CUDA the
    machine's cores (the host only launches; the sweep runs one process at a time here)."""
    return world_size if device == "cpu" else os.cpu_count() or 1


def device_and_preset(args: argparse.Namespace, here: bool = True) -> tuple[str, str]:
    """--device (auto: cuda where there is one) and --preset (default: tiny on CPU, base on
    CUDA), checked. Not ``here`` (a cluster's: the GPUs are its nodes', ``resolve`` decides
    from them): ``auto`` stands as cpu while the options are checked."""
    import torch

    if args.device not in DEVICES:
        raise UsageError(f"unknown device {args.device!r}; valid devices: {', '.join(DEVICES)}")
    device = args.device
    if not here:
        device = "cpu" if device == "auto" else device
    elif device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise UsageError("device 'cuda' is not available here (no CUDA GPU); valid: auto, cpu")
    return device, preset_of(args, device)


def preset_of(args: argparse.Namespace, device: str) -> str:
    """--preset, checked, or the device's default."""
    # tiny on CPU: a default sweep (every strategy, K 1 and 4, N 0 and 100,000) fits its
    # 15-minute budget on 2 cores with rounds to spare; small's windows take 0.6-5 s there
    preset = args.preset or ("base" if device == "cuda" else "tiny")
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    return preset


def builds_here(device: str) -> bool:
    """Whether this machine can build a workload on ``device`` (a login node has no GPU)."""
    if device != "cuda":
        return True
    import torch

    return torch.cuda.is_available()


def case_timeout(
    args, device: str, preset: str, pairs: tuple[int, int], parallel: str, loop: dict[str, Any]
) -> float:
    """--timeout in seconds, or one scaled with the preset, the largest K and every window a
    case runs (setup, the gradient check, the pairs, the memory pass, the timeline, the cost
    model, the float64 window; the flavour and settings pairs where they run). ``loop``: the
    recipe's settings and the swept values (``recipe_settings``, ``axis_values``)."""
    if args.timeout is not None:
        try:
            timeout = float(args.timeout)
        except ValueError:
            raise UsageError(f"--timeout {args.timeout!r} is not a number of seconds") from None
        if not timeout > 0:
            raise UsageError(f"--timeout {args.timeout!r} must be > 0 seconds")
        return timeout
    repeat, warmup = pairs
    recipe, k = loop, max(loop["accumulate"])
    world_size = int(args.world_size)
    per = SECONDS_PER_MICRO_BATCH[device][preset]
    # a time-only process may run up to PAIRS_FACTOR x the pairs (the budget's plan), and
    # warm-up runs until steady (engine.warmup, at most a share of the pairs more)
    pairs_most = PAIRS_FACTOR * repeat + warmup_most(warmup, PAIRS_FACTOR * repeat)
    windows = 2 * pairs_most + 3 * gradients.CHECK_WINDOWS + 2 * memory.MEMORY_WINDOWS
    windows += 2 * 2 + 1  # the timeline's windows (strategy, plain), the cost model's count
    windows += 8  # the float64 model's window of total_error (float64 runs slower)
    windows += GROWTH_WINDOWS  # the plain loop alone: its growth per window
    if parallel in ("fsdp2", "hsdp"):  # the flavour pass: pairs of the strategy's windows
        windows += 2 * (repeat + warmup)
    if recipe["compare_settings"]:  # the other setting's loop: pairs with the strategy's
        windows += 2 * (repeat + warmup) + 2
    low = [*recipe["precision"], recipe["compare_settings"]]
    if device == "cpu" and any("bf16" in item for item in low):
        per *= 3  # bf16 matmuls on a CPU without bf16 units: slower than fp32
    compiling = 600 if recipe["compile"] or "compile" in recipe["compare_settings"] else 0
    return (120 + compiling + per * k * windows) * world_size


def check_workload(spec: str, device: str, preset: str, accumulate: int, seed: int) -> None:
    """Build the workload once here and call everything the protocol requires on one window
    (``batches(0)``, ``normaliser`` of it, ``loss`` of its first micro-batch), so that a spec
    or a workload that breaks the protocol is one usage line, not N failed cases."""
    import gc

    import torch

    step = "building it"
    try:
        made = bound.build(
            spec, protocol.Settings(device=device, seed=seed, accumulate=accumulate, preset=preset)
        )
        step = "batches(0)"
        batches = made.batches(0)
        step = "normaliser(batches(0))"
        tokens = made.window_tokens(batches)
        step = "loss(the first micro-batch)"
        loss = made.loss(batches[0], tokens)
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
            shown = f"a tensor of shape {tuple(loss.shape)}" if torch.is_tensor(loss) else loss
            raise protocol.WorkloadError(
                f"--workload {spec!r}: loss gave {shown!r}; valid: a one-element tensor that "
                "requires grad (the micro-batch's loss)"
            )
        del batches, loss
    except protocol.WorkloadError as err:
        raise UsageError(str(err)) from None
    except SystemExit as err:  # a workload's sys.exit is its failure, not the sweep's exit
        raise UsageError(f"--workload {spec!r} called sys.exit({err.code!r})") from None
    except Exception as err:
        raise UsageError(
            f"--workload {spec!r}: {step} raised {type(err).__name__}: "
            + str(err).replace("\n", " ")
        ) from None
    del made
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def find_workload(spec: str) -> None:
    """The workload's factory imported, unbuilt (a machine that cannot build it on the sweep's
    device: a login node without the nodes' GPUs); a bad spec is one usage line."""
    try:
        protocol.load(spec)
    except protocol.WorkloadError as err:
        raise UsageError(str(err)) from None
    except SystemExit as err:
        raise UsageError(f"--workload {spec!r} called sys.exit({err.code!r})") from None


def honours(args: argparse.Namespace, workload: str) -> None:
    """Every setting only a workload applies (``settings.WORKLOAD``) that the command gives a
    value other than its default (``--checkpointing on``; ``--preset`` has none: any) is one
    the workload declares it honours (``protocol.honoured``), or the sweep is refused: its rows
    would name a setting their model never ran."""
    given = {}
    for f in SETTINGS:
        value = (
            getattr(args, f.metadata["dest"] or f.name, None) if f.metadata["workload"] else None
        )
        if value is None:
            continue
        values = str(value).split(",") if f.metadata["swept"] else [str(value)]
        if any(v.strip() != str(f.default) for v in values):  # its default: what it runs anyway
            given[f.name] = value
    if not given:
        return
    try:
        declared = protocol.honoured(protocol.load(workload), workload)
    except protocol.WorkloadError as err:
        raise UsageError(str(err)) from None
    for name, value in given.items():
        if name not in declared:
            flag = FIELDS[name].metadata["flag"]
            raise UsageError(
                f"{flag} {value}: the workload {workload!r} does not honour {name} (it declares "
                f"honours = {declared!r}; protocol.py: a workload names what it applies)"
            )


def pinning(asked: bool | None, threads: int, world_size: int) -> bool:
    """--pin / --no-pin on this machine (a cluster's: ``cluster.resources.pinning_of``), or the
    default: on with one thread per rank where psutil can pin (Linux) and every rank gets a
    core of its own. --pin where it cannot hold is a usage error."""
    from benches.engine import process

    cores = process.allowed_cores()
    per_rank = threads_per_rank(threads, world_size)
    fits = cores is not None and per_rank * world_size <= len(cores)
    if asked is None:
        return per_rank == 1 and fits
    if asked and cores is None:
        raise UsageError("--pin: psutil cannot pin here (no cpu_affinity); valid: --no-pin")
    if asked and not fits:
        raise UsageError(
            f"--pin: {world_size} rank(s) x {per_rank} thread(s) need {per_rank * world_size} "
            f"cores, this process may use {len(cores)}; valid: fewer --threads, or --no-pin"
        )
    return asked
