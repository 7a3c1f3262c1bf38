"""The steps every case's process takes, whether it measures one strategy (``case``) or several
sharing it (``shared``): where its time goes (``Wall``), its setup and data, the gradient
check, the cost model's counts and the memory pass."""

from __future__ import annotations

import importlib
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from benches.engine import bound, builds, costmodel, distributed, gradients, memory, process
from benches.engine.spec import CaseSpec
from benches.workloads import protocol
from reports.schema.row_parts import ErrorFigures, GradCheck, Memory, Timeline, made
from reports.schema.settings import WORKLOAD as WORKLOAD_SETTINGS


class Wall:
    """Wall-clock seconds per step of a case, lap by lap (the sweep adds the process's start)."""

    STEPS = (
        "setup",
        "compile",
        "gradient_check",
        "warmup",
        "timed_pairs",
        "plain_growth",
        "other_pairs",
        "profile",
        "cost_model",
        "memory_pass",
        "teardown",
    )

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.STEPS, 0.0)
        self._last = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] += now - self._last
        self._last = now


def setup(spec: CaseSpec) -> bound.Bound:
    """Cores, threads, plugins, this rank's device and process group, and the workload."""
    if spec.pin:  # first: every thread started after this inherits the cores
        process.pin_cores(spec.threads)
    if spec.base:  # --base: the base build's package, for its strategies' loops
        builds.activate(spec.out_dir, spec.base)
    torch.set_num_threads(spec.threads)
    for module in spec.plugins:
        importlib.import_module(module)
    device = distributed.local_device(spec.device)  # rank r of a node on cuda:r
    if spec.parallel != "none":
        distributed.init(device)
    recipe = spec.recipe  # the training loop's settings, checked
    settings = protocol.Settings(
        device=str(device),
        precision=spec.precision,
        seed=spec.seed,
        accumulate=spec.accumulate,
        live_tensors=spec.live_tensors,
        threads=spec.threads,
        deterministic=True,  # the gradient check compares windows: no random masks
        # every setting a workload applies (preset, checkpointing, ...: declared workload=True)
        **{name: getattr(spec, name) for name in WORKLOAD_SETTINGS},
    )
    workload = bound.build(spec.workload, settings)
    workload.recipe = recipe
    return workload


def case_data(workload: bound.Bound, rank: int, world: int) -> tuple[list, list]:
    """The data of every window, made before any clock runs: this rank's windows with their
    normaliser, and each window's whole global batch for its reference. Rank r holds windows
    w * world + r, so ranks hold different tokens."""
    windows = range(gradients.CHECK_WINDOWS)
    mine = [workload.batches(w * world + rank) for w in windows]
    every = [[b for r in range(world) for b in workload.batches(w * world + r)] for w in windows]
    data = [(batches, workload.distributed_window_tokens(batches)) for batches in mine]
    references = [(batches, workload.window_tokens(batches)) for batches in every]
    return data, references


def check_gradients(
    spec: CaseSpec, loop, workload, data, references, parallel, cache=None, seconds=None
) -> tuple[GradCheck, dict[str, ErrorFigures]]:
    """The strategy's windows (``loop``) against the reference (a failure raises: the case
    fails); the check's figures and the first window's error figures (by the row's field
    names). ``cache``: references a process's strategies share (``gradients.References``);
    ``seconds``: a list that gets each checked window's seconds (warm-up pairs they are)."""
    from benches.engine import training

    world = spec.world_size
    check, errors = gradients.check_windows(
        loop,
        workload,
        data,
        references,
        training.grad_tolerance(spec.precision, spec.accumulate, world),
        parallel,
        cache,
        seconds,
    )
    if spec.parallel != "none":
        check, errors = distributed.worst_check(check, errors, world)
    if not check.ok:
        raise gradients.GradientCheckError(gradients.failure(check))
    return check, errors


def cost_counts(
    spec: CaseSpec, loop, workload, timed, coefficients: dict | None = None
) -> dict[str, Any] | None:
    """The cost model's coefficients and counts of the strategy's ``loop``, off the clock;
    none for the control's extra processes and time-only ones (they measure noise or time,
    nothing else), nor for a framework's path (the model counts a collector's work).
    ``coefficients``: this process's, where several strategies share it (calibrated once)."""
    if spec.control or spec.time_only or loop.path is not None:
        return None
    return {
        "coefficients": coefficients or costmodel.calibrate(workload.device),
        "counts": costmodel.count(loop, *timed[0]),
    }


def captures(spec: CaseSpec, rank: int) -> tuple[Path, Path]:
    """Where the memory pass's memray captures go: the strategy's and the plain loop's."""
    directory = Path(spec.out_dir) / "memray"
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{spec.case_id}.rank{rank}"
    return directory / f"{stem}.bin", directory / f"{stem}.plain.bin"


def plain_memory(workload, spec: CaseSpec, data, parallel, rank: int) -> dict:
    """The plain loop's memory pass (after one thrown away: ``memory.warm_up``), its timeline
    where ``spec.plain_timeline`` (and not a control's extra process)."""
    _, plain_capture = captures(spec, rank)
    try:
        memory.warm_up(workload, data, plain_capture, parallel, spec.grad_sync)
        return memory.memory_pass(
            workload, None, data, plain_capture, parallel, spec.grad_sync,
            spec.plain_timeline and not spec.control,
        )  # fmt: skip
    finally:
        plain_capture.unlink(missing_ok=True)


def strategy_memory(workload, spec: CaseSpec, data, parallel, rank: int, plain: dict) -> Memory:
    """The strategy's memory pass beside the plain loop's (``plain_memory``), as the row's
    record; memray's flamegraph if asked."""
    capture, _ = captures(spec, rank)
    try:
        # the control's extra processes only measure noise: no timeline (the report draws the
        # first process's)
        mine = memory.memory_pass(
            workload, spec.label, data, capture, parallel, spec.grad_sync, not spec.control
        )
        figures = made(
            Memory,
            held_bytes=mine["held_bytes"],
            peak_bytes=mine["peak_bytes"],
            peak_method=mine["peak_method"],
            plain_held_bytes=plain["held_bytes"],
            plain_peak_bytes=plain["peak_bytes"],
            # this rank's share: a sharded parameter counts its local shard
            param_bytes=memory.storage_bytes(workload.model.parameters()),
            memory_windows=memory.MEMORY_WINDOWS,
            timeline=timeline(mine["timeline"]),
            plain_timeline=timeline(plain["timeline"]),
            memray_flamegraph=None,
        )  # memray_capture only with --keep-captures
        # a flamegraph page is ~4.5 MB (memray's viewer): none for the control's extra processes
        if spec.memray and capture.exists() and rank == 0 and not spec.control:
            page = capture.with_name(f"{spec.case_id}.html")
            if memory.flamegraph(capture, page):
                figures.memray_flamegraph = str(page.relative_to(spec.out_dir))
        if spec.keep_captures and capture.exists():
            figures.memray_capture = str(capture.relative_to(spec.out_dir))
        return figures
    finally:
        if not spec.keep_captures:
            capture.unlink(missing_ok=True)


def memory_figures(workload, spec: CaseSpec, data, parallel, rank: int) -> Memory:
    """The memory pass, for the strategy and for the plain loop; memray's flamegraph if asked."""
    plain = plain_memory(workload, spec, data, parallel, rank)
    return strategy_memory(workload, spec, data, parallel, rank, plain)


def timeline(figures: dict[str, Any] | None) -> Timeline | None:
    """A window's memory over time (``memory.memory_pass``'s), as the row's record."""
    return None if figures is None else made(Timeline, **figures)


def error_line(err: BaseException) -> str:
    """The failure in one line; a SystemExit says who called it (a plugin's strategy or the
    workload: the case's own code never exits)."""
    if isinstance(err, SystemExit):
        return (
            f"SystemExit: sys.exit({err.code!r}) called inside the case (its strategy or workload)"
        )
    return traceback.format_exception_only(err)[-1].strip().replace("\n", " ")
