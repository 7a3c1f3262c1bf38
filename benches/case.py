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
import statistics
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
# native/baseline pairs for the core's overhead: windows differ by ~5% on a 2-core machine, and
# a 95% CI of +-2% on their ratio takes about 30 pairs
OVERHEAD_PAIRS = 30


@dataclasses.dataclass
class CaseSpec:
    strategy: str
    preset: str
    device: str
    accumulate: int
    live_tensors: int
    world_size: int = 1
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
            f"{self.device}{f'-w{self.world_size}' if self.world_size > 1 else ''}-r{self.round}"
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
    """Times windows of one workload, with a strategy's collector or as the plain loop.

    Under DDP (``workload.ddp`` set) every micro-batch but the last runs under ``no_sync``, and
    the window also reports ``sync``: the last backward (which all-reduces) minus the median of
    the others (which do not), the communication the backward did not hide.
    """

    def __init__(self, workload: Workload, strategy: str | None) -> None:
        import strategies

        self.workload = workload
        self.model = workload.model
        self.ddp = workload.ddp
        self.clock = make_clock(workload.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        target = self.ddp if self.ddp is not None else self.model
        self.collector = (
            strategies.GradientCollector(target, strategy=strategy) if strategy else None
        )

    def window(
        self, batches, tokens: float, plain: bool = False, update: bool = True
    ) -> dict[str, float]:
        """One timed window; ``plain`` runs the baseline loop on the same model instead, and
        ``update=False`` leaves the window's gradients without stepping."""
        clock, loss_of = self.clock, self.workload.loss
        collector = None if plain else self.collector
        forward, backwards = 0.0, []
        t0 = clock()
        if collector is None:
            self.model.zero_grad(set_to_none=True)
            micro_batches = self._plain_micro_batches(batches)
        else:
            collector.__enter__()
            micro_batches = collector.micro_batches(batches)
        t1 = clock()
        for batch in micro_batches:
            a = clock()
            loss = loss_of(batch, tokens)
            b = clock()
            if collector is None:
                loss.backward()
            else:
                collector.backward(loss)
            c = clock()
            forward += b - a
            backwards.append(c - b)
        t2 = clock()
        if collector is not None:
            collector.__exit__(None, None, None)
        t3 = clock()
        if update and collector is None:
            self.optimizer.step()
        elif update:
            collector.step(self.optimizer)
        t4 = clock()
        timing = {
            "reset": (t1 - t0) + (t3 - t2),
            "forward": forward,
            "backward": sum(backwards),
            "update": t4 - t3,
            "window": t4 - t0,
        }
        if self.ddp is not None and len(backwards) > 1:
            timing["sync"] = backwards[-1] - statistics.median(backwards[:-1])
        return timing

    def _plain_micro_batches(self, batches):
        for i, batch in enumerate(batches):
            if self.ddp is not None and i < len(batches) - 1:
                with self.ddp.no_sync():
                    yield batch
            else:
                yield batch

    def first_window_grads(self, batches, tokens: float) -> dict[str, torch.Tensor | None]:
        """Run one window without its update; the gradients it leaves."""
        self.window(batches, tokens, update=False)
        return {n: p.grad for n, p in self.model.named_parameters()}


class AllReduceCounter:
    """Counts DDP's all-reduces: a communication hook that runs the default one, counted."""

    def __init__(self, ddp) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        self.calls = 0

        def counted_allreduce_hook(state, bucket):
            self.calls += 1
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, counted_allreduce_hook)


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


# -- the case -------------------------------------------------------------------------------
def _rank() -> tuple[int, int, int]:
    """(rank, local rank, world size) as torchrun sets them; (0, 0, 1) in a plain process."""
    env = os.environ
    return int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("WORLD_SIZE", 1))


def run_case(spec: CaseSpec) -> dict[str, Any] | None:
    """Measure one case; under torchrun every rank measures and rank 0 returns the row."""
    rank, local_rank, world = _rank()
    torch.set_num_threads(spec.threads)
    for module in spec.plugins:
        importlib.import_module(module)
    if world > 1:
        import torch.distributed as dist

        if spec.device == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if spec.device == "cuda" else "gloo")
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
    # two windows of data per rank, made before any clock runs, alternated so that no window
    # is cached twice; rank r holds windows w * world + r, so ranks hold different tokens
    mine = [workload.batches(w * world + rank) for w in range(2)]
    # the reference: the whole global batch's gradient without any strategy (and without DDP)
    every = [b for r in range(world) for b in workload.batches(r)]
    expected = reference_grads(workload, every, workload.window_tokens(every))
    del every
    allreduce = None
    if world > 1:
        workload.distribute()
        allreduce = AllReduceCounter(workload.ddp)
    data = [(batches, workload.distributed_window_tokens(batches)) for batches in mine]

    strategy = None if spec.strategy == BASELINE else spec.strategy
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
    allreduce_calls: list[int] = []
    windows = max(spec.repeat, OVERHEAD_PAIRS) if interleave else spec.repeat
    for i in range(windows):
        batches, tokens = data[i % 2]
        if interleave and i % 2:  # ABBA order: drift hits both alike
            baseline_windows.append(runner.window(batches, tokens, plain=True)["window"])
        calls = allreduce.calls if allreduce else 0
        timing = runner.window(batches, tokens)
        allreduce_calls.append((allreduce.calls if allreduce else 0) - calls)
        if interleave and not i % 2:
            baseline_windows.append(runner.window(batches, tokens, plain=True)["window"])
        for phase, seconds in timing.items():
            samples[phase].append(seconds)
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
    if spec.memray and world == 1:
        memory.update(memray_pass(runner, data, spec))
    if baseline_windows:
        samples["baseline_window"] = baseline_windows
    if world > 1:  # each window's phase from the slowest rank; the worst check and memory
        samples, check, memory = _slowest_rank(samples, check, memory, world)
        torch.distributed.destroy_process_group()
        if rank != 0:
            return None

    phases = {phase: stats.summarize(v) for phase, v in samples.items() if v and phase in PHASES}
    overhead = None
    if baseline_windows:
        ratio = stats.ratio_of_medians(samples["window"], samples["baseline_window"], paired=True)
        overhead = {**ratio, "baseline": stats.summarize(samples["baseline_window"])}
    tokens_per_window = data[0][1] * world
    window_median = phases["window"]["median_s"]
    return {
        "status": "ok",
        "error": None,
        "params": workload.num_params(),
        "tokens_per_window": tokens_per_window,
        "tokens_per_second": tokens_per_window / window_median if window_median else None,
        "flops_per_window": workload.flops_per_window() * world,
        "phases": phases,
        "samples": samples,
        "overhead": overhead,
        "allreduce_per_window": statistics.median(allreduce_calls) if allreduce else None,
        "memory": memory,
        "grad_check": check,
    }


def _slowest_rank(samples, check, memory, world: int):
    """Gather every rank's figures: per window the slowest rank's phase; the worst check."""
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, (samples, check, memory))
    merged = {
        phase: [max(per_rank) for per_rank in zip(*(g[0][phase] for g in gathered), strict=True)]
        for phase in samples
    }
    worst = max((g[1] for g in gathered), key=lambda c: c["max_rel_diff"])
    worst = {**worst, "ok": all(g[1]["ok"] for g in gathered)}
    peak = {}
    for key in ("peak_rss_bytes", "cuda_peak_allocated_bytes", "cuda_peak_reserved_bytes"):
        values = [g[2][key] for g in gathered if g[2].get(key) is not None]
        peak[key] = max(values) if values else None  # None stays None: no GPU, no GPU peak
    return merged, worst, {**memory, **peak, "over_ranks": "max"}


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
        "world_size": spec.world_size,
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
    """``SPEC OUT`` (the sweep's form), or flags for one case run by hand, e.g. under torchrun
    across machines: ``python -m benches.case --strategy lazy --preset base --out DIR``."""
    if argv and argv[0].startswith("-"):
        return by_hand(argv)
    spec = CaseSpec(**json.loads(Path(argv[0]).read_text()))
    row, code = measure(spec)
    if row is not None:
        out_path = Path(argv[1])
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(row, default=str))
        os.replace(tmp, out_path)  # the parent sees a whole row or none
    return code


def measure(spec: CaseSpec) -> tuple[dict[str, Any] | None, int]:
    """The case's row (None on ranks other than 0) and the exit code."""
    try:
        measured = run_case(spec)
        return (None if measured is None else row_for(spec, measured)), 0
    except Exception as err:  # the sweep records it and goes on
        traceback.print_exc()
        if _rank()[0] != 0:
            return None, 1  # torchrun ends the others; the sweep reads rank 0's log
        last = traceback.format_exception_only(err)[-1].strip().replace("\n", " ")
        return row_for(spec, failed_measure(last)), 1


def by_hand(argv: list[str]) -> int:
    import argparse
    import uuid

    from benches import envinfo, results

    parser = argparse.ArgumentParser(prog="python -m benches.case", description=main.__doc__)
    parser.add_argument("--strategy", required=True, help="a strategy name, or baseline")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--accumulate", type=int, default=4)
    parser.add_argument("--live-tensors", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--plugin", action="append", default=[])
    parser.add_argument("--out", required=True, help="directory; rank 0 appends its row")
    args = parser.parse_args(argv)
    spec = CaseSpec(
        strategy=args.strategy,
        preset=args.preset,
        device=args.device,
        accumulate=args.accumulate,
        live_tensors=args.live_tensors,
        world_size=_rank()[2],
        repeat=args.repeat,
        warmup=args.warmup,
        threads=args.threads,
        plugins=args.plugin,
        run_id=os.environ.get("ZEROGRAD_RUN_ID", uuid.uuid4().hex[:12]),
        out_dir=args.out,
        git=envinfo.git_state(),
    )
    row, code = measure(spec)
    if row is not None:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        results.append(args.out, row)
        print(f"{spec.case_id}: {row['status']} -> {Path(args.out) / results.RESULTS}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
