"""One case of a sweep, run in its own fresh process: ``python -m benches.case SPEC OUT``.

A case is one strategy (or ``baseline``, the plain PyTorch loop without our core) at one K and
one ballast size. It checks the first window's gradients against a reference computed without
any strategy, warms up, then times ``repeat`` windows phase by phase; the ``native`` case
alternates its windows with ``baseline`` windows on the same model to measure the core's own
overhead. With ``memray`` a second pass tracks only a few windows under ``memray.Tracker``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benches import envinfo
from benches.workload import Workload
from reports import stats
from reports.rows import PHASES

BASELINE = "baseline"
GRAD_TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2}  # max relative difference allowed
MEMRAY_WINDOWS = 3


@dataclasses.dataclass
class CaseSpec:
    strategy: str
    preset: str
    device: str
    accumulate: int
    live_tensors: int
    repeat: int = 10
    warmup: int = 2
    threads: int = 1
    seed: int = 0
    dtype: str = "float32"
    memray: bool = False
    plugins: list[str] = dataclasses.field(default_factory=list)
    run_id: str = ""
    round: int = 0
    out_dir: str = "."
    git: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def case_id(self) -> str:
        return (
            f"{self.strategy}-k{self.accumulate}-n{self.live_tensors}-{self.preset}-"
            f"{self.device}-r{self.round}"
        )


# -- clocks and memory --------------------------------------------------------------------------
def make_clock(device: torch.device) -> Callable[[], float]:
    if device.type == "cuda":  # never an unsynchronised wall clock on CUDA

        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return clock
    return time.perf_counter


def _status_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); psutil has no peak on Linux."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# -- one window -----------------------------------------------------------------------------------
class Runner:
    """Times windows of one workload, with a strategy's collector or as the plain loop."""

    def __init__(self, workload: Workload, strategy: str | None) -> None:
        import strategies

        self.workload = workload
        self.model = workload.model
        self.clock = make_clock(workload.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.collector = (
            strategies.GradientCollector(self.model, strategy=strategy) if strategy else None
        )

    def window(self, batches, tokens: int, plain: bool = False) -> dict[str, float]:
        """One timed window; ``plain`` runs the baseline loop on the same model instead."""
        if plain or self.collector is None:
            return self._baseline_window(batches, tokens)
        clock, collector, loss_of = self.clock, self.collector, self.workload.loss
        forward = backward = 0.0
        t0 = clock()
        collector.__enter__()
        t1 = clock()
        for batch in batches:
            a = clock()
            loss = loss_of(batch, tokens)
            b = clock()
            collector.backward(loss)
            c = clock()
            forward += b - a
            backward += c - b
        t2 = clock()
        collector.__exit__(None, None, None)
        t3 = clock()
        collector.step(self.optimizer)
        t4 = clock()
        return {
            "reset": (t1 - t0) + (t3 - t2),
            "forward": forward,
            "backward": backward,
            "update": t4 - t3,
            "window": t4 - t0,
        }

    def _baseline_window(self, batches, tokens: int) -> dict[str, float]:
        clock, model, loss_of = self.clock, self.model, self.workload.loss
        forward = backward = 0.0
        t0 = clock()
        model.zero_grad(set_to_none=True)
        t1 = clock()
        for batch in batches:
            a = clock()
            loss = loss_of(batch, tokens)
            b = clock()
            loss.backward()
            c = clock()
            forward += b - a
            backward += c - b
        t2 = clock()
        self.optimizer.step()
        t3 = clock()
        return {
            "reset": t1 - t0,
            "forward": forward,
            "backward": backward,
            "update": t3 - t2,
            "window": t3 - t0,
        }

    def first_window_grads(self, batches, tokens: int) -> dict[str, torch.Tensor | None]:
        """Run one window without its update; the gradients it leaves."""
        if self.collector is None:
            self.model.zero_grad(set_to_none=True)
            for batch in batches:
                self.workload.loss(batch, tokens).backward()
        else:
            with self.collector:
                for batch in batches:
                    self.collector.backward(self.workload.loss(batch, tokens))
        return {n: p.grad for n, p in self.model.named_parameters()}


def reference_grads(workload: Workload, batches, tokens: int) -> dict[str, torch.Tensor]:
    """The window's gradient without any strategy: autograd.grad per micro-batch, summed."""
    names, params = zip(*workload.model.named_parameters(), strict=True)
    total: list[torch.Tensor | None] = [None] * len(params)
    for batch in batches:
        grads = torch.autograd.grad(workload.loss(batch, tokens), params, allow_unused=True)
        for i, g in enumerate(grads):
            if g is not None:
                total[i] = g if total[i] is None else total[i] + g
    return {n: t for n, t in zip(names, total, strict=True) if t is not None}


def grad_check(got: dict[str, torch.Tensor | None], expected, tolerance: float) -> dict[str, Any]:
    max_abs = max_rel = 0.0
    for name, ref in expected.items():
        g = got.get(name)
        g = torch.zeros_like(ref) if g is None else g
        diff = (g.float() - ref.float()).abs().max().item()
        scale = ref.float().abs().max().item()
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")))
    return {
        "max_abs_diff": max_abs,
        "max_rel_diff": max_rel,
        "tolerance": tolerance,
        "ok": max_rel <= tolerance,
    }


# -- the case --------------------------------------------------------------------------------
def run_case(spec: CaseSpec) -> dict[str, Any]:
    torch.set_num_threads(spec.threads)
    for module in spec.plugins:
        importlib.import_module(module)
    workload = Workload(
        preset=spec.preset,
        accumulate=spec.accumulate,
        live_tensors=spec.live_tensors,
        device=spec.device,
        dtype=spec.dtype,
        dropout=0.0,  # the gradient check compares windows: no random masks
        seed=spec.seed,
        threads=spec.threads,
    )
    device = workload.device
    # two windows of data, made before any clock runs, alternated so no window is cached twice
    data = [workload.batches(w) for w in range(2)]
    data = [(batches, workload.window_tokens(batches)) for batches in data]

    strategy = None if spec.strategy == BASELINE else spec.strategy
    expected = reference_grads(workload, *data[0])
    runner = Runner(workload, strategy)
    check = grad_check(runner.first_window_grads(*data[0]), expected, GRAD_TOLERANCE[spec.dtype])
    del expected
    runner.optimizer.step()
    interleave = spec.strategy == "native"  # the core's overhead over the plain loop

    for i in range(spec.warmup):
        runner.window(*data[i % 2])
        if interleave:
            runner.window(*data[i % 2], plain=True)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    rss_after_setup = _status_bytes("VmRSS")
    hwm_reset = reset_peak_rss()
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
    baseline_windows: list[float] = []
    footprint: list[int] = []  # memory after each window: a leak shows as a slope
    for i in range(spec.repeat):
        batches, tokens = data[i % 2]
        if interleave and i % 2:  # ABBA order: drift hits both alike
            baseline_windows.append(runner.window(batches, tokens, plain=True)["window"])
        timing = runner.window(batches, tokens)
        if interleave and not i % 2:
            baseline_windows.append(runner.window(batches, tokens, plain=True)["window"])
        for phase in PHASES:
            samples[phase].append(timing[phase])
        footprint.append(
            torch.cuda.memory_allocated(device)
            if device.type == "cuda"
            else (_status_bytes("VmRSS") or 0)
        )

    memory: dict[str, Any] = {
        "rss_after_setup_bytes": rss_after_setup,
        "peak_rss_bytes": _status_bytes("VmHWM") if hwm_reset else None,
        "peak_rss_is_since_setup": hwm_reset,
        "growth_bytes_per_window": stats.slope(range(len(footprint)), footprint),
        "growth_measure": "cuda_allocated" if device.type == "cuda" else "rss",
        "cuda_peak_allocated_bytes": (
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        ),
        "cuda_peak_reserved_bytes": (
            torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None
        ),
    }
    if spec.memray:
        memory.update(memray_pass(runner, data, spec))

    phases = {phase: stats.summarize(values) for phase, values in samples.items()}
    overhead = None
    if baseline_windows:
        ratio = stats.ratio_of_medians(samples["window"], baseline_windows, paired=True)
        overhead = {**ratio, "baseline": stats.summarize(baseline_windows)}
        samples["baseline_window"] = baseline_windows
    tokens_per_window = data[0][1]
    window_median = phases["window"]["median_s"]
    return {
        "status": "ok",
        "error": None,
        "params": workload.num_params(),
        "tokens_per_window": tokens_per_window,
        "tokens_per_second": tokens_per_window / window_median if window_median else None,
        "flops_per_window": workload.flops_per_window(),
        "phases": phases,
        "samples": samples,
        "overhead": overhead,
        "memory": memory,
        "grad_check": check,
    }


def memray_pass(runner: Runner, data, spec: CaseSpec) -> dict[str, Any]:
    """Track only a few measured windows; peak, allocation count and an offline flamegraph."""
    import memray

    directory = Path(spec.out_dir) / "memray"
    directory.mkdir(parents=True, exist_ok=True)
    capture = directory / f"{spec.case_id}.bin"
    capture.unlink(missing_ok=True)
    with memray.Tracker(capture, native_traces=False):
        for i in range(MEMRAY_WINDOWS):
            runner.window(*data[i % 2])
    reader = memray.FileReader(capture)
    meta = reader.metadata
    peak, count = meta.peak_memory, meta.total_allocations
    reader.close()
    flamegraph = directory / f"{spec.case_id}.html"
    done = subprocess.run(
        [sys.executable, "-m", "memray", "flamegraph", "--no-web", "-f", "-o", flamegraph, capture],
        capture_output=True,
        text=True,
    )
    return {
        "memray_windows": MEMRAY_WINDOWS,
        "memray_peak_bytes": peak,
        "memray_allocations": count,
        "memray_flamegraph": (
            str(flamegraph.relative_to(spec.out_dir)) if done.returncode == 0 else None
        ),
    }


def row_for(spec: CaseSpec, measured: dict[str, Any]) -> dict[str, Any]:
    """A results row: the case's identity first, then what was measured, then the environment."""
    return {
        "run_id": spec.run_id,
        "case_id": spec.case_id,
        "strategy": spec.strategy,
        "preset": spec.preset,
        "device": spec.device,
        "dtype": spec.dtype,
        "accumulate": spec.accumulate,
        "live_tensors": spec.live_tensors,
        "world_size": 1,
        "round": spec.round,
        "repeat": spec.repeat,
        "warmup": spec.warmup,
        "threads": spec.threads,
        "seed": spec.seed,
        **measured,
        "env": {**envinfo.environment(spec.device), **spec.git},
    }


def failed_measure(error: str) -> dict[str, Any]:
    return {
        "status": "failed",
        "error": error,
        "phases": {},
        "overhead": None,
        "memory": {},
        "grad_check": None,
        "params": None,
        "tokens_per_window": None,
    }


def main(argv: list[str]) -> int:
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = CaseSpec(**json.loads(spec_path.read_text()))
    try:
        row = row_for(spec, run_case(spec))
        code = 0
    except Exception as err:  # the sweep records it and goes on
        last = traceback.format_exception_only(err)[-1].strip().replace("\n", " ")
        row = row_for(spec, failed_measure(last))
        traceback.print_exc()
        code = 1
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(row, default=str))
    os.replace(tmp, out_path)  # the parent sees a whole row or none
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
