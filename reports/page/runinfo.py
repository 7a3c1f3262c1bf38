"""The run as a whole, for the report's page: DIR/run.json (the sweep's settings and
environment), pytest-benchmark's figures beside it, where the sweep's wall time went, and its
failed and noisy processes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from reports.judge import noise, verdicts
from reports.judge.rows import RESULTS, SchemaError, first_row, process_of
from reports.page.records import TheRun, Wall, WallStep
from reports.schema.records import RecordError, Row, RunFile


def run_info(directory: Path) -> RunFile:
    """DIR/run.json (empty when there is none: the rows are the data); one that is not a JSON
    object (the sweep writes it whole, so another program's or a hand-edited file), or whose
    parts have the wrong type, is a SchemaError naming the file and the field: its settings
    (``--min-effect``, ``--looks``) decide verdicts, never silently defaulted."""
    try:
        return RunFile.read(directory) or RunFile()
    except RecordError as err:
        raise SchemaError(str(err)) from None


# the keys of pytest-benchmark's --benchmark-json that the page reads, with their types (and
# benches/conftest.py's ``zerograd_order``); another key is let through, another type is a
# SchemaError naming the field's path
class _Stats(Struct):
    median: float | None = None
    iqr: float | None = None
    min: float | None = None
    mean: float | None = None
    stddev: float | None = None
    ops: float | None = None
    rounds: int | None = None


class _Bench(Struct):
    name: str | None = None
    fullname: str | None = None
    group: str | None = None
    stats: _Stats | None = None
    extra_info: dict[str, Any] | None = None


class _Cpu(Struct):
    brand_raw: str | None = None


class _Order(Struct):
    seed: int | None = None


class _Machine(Struct):
    cpu: _Cpu | None = None
    processor: str | None = None
    zerograd_order: _Order | None = None


class _Commit(Struct):
    id: str | None = None


class PytestBenchmark(Struct):
    benchmarks: list[_Bench] | None = None
    datetime: str | None = None
    version: str | None = None
    machine_info: _Machine | None = None
    commit_info: _Commit | None = None


def _pytest_benchmark(directory: Path) -> dict[str, Any] | None:
    """pytest-benchmark's --benchmark-json output, reduced to what the table shows. Not JSON
    (a cut-off write) is said on the page; a value of the wrong type is a SchemaError."""
    path = directory / "pytest-benchmark.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        return {"error": f"{path.name} is not valid JSON ({err})", "benchmarks": []}
    if not isinstance(data, dict):
        raise SchemaError(f"{path} is not a JSON object ({json.dumps(data)[:60]})")
    try:
        msgspec.convert(data, PytestBenchmark)
    except msgspec.ValidationError as err:
        raise SchemaError(f"{path}: {err}") from None
    machine, commit = data.get("machine_info") or {}, data.get("commit_info") or {}
    benchmarks = []
    for bench in data.get("benchmarks") or []:
        st = bench.get("stats") or {}
        benchmarks.append(
            {
                "name": bench.get("name") or bench.get("fullname", "?"),
                "group": bench.get("group") or "",
                "median_s": st.get("median"),
                "iqr_s": st.get("iqr"),
                "min_s": st.get("min"),
                "mean_s": st.get("mean"),
                "stddev_s": st.get("stddev"),
                "rounds": st.get("rounds"),
                "ops": st.get("ops"),
                "extra": ", ".join(f"{k}={v}" for k, v in (bench.get("extra_info") or {}).items()),
            }
        )
    benchmarks.sort(key=lambda b: (b["group"], b["median_s"] or math.inf))
    return {
        "error": None,
        "benchmarks": benchmarks,
        "datetime": data.get("datetime"),
        "version": data.get("version"),
        "machine": (machine.get("cpu") or {}).get("brand_raw") or machine.get("processor"),
        "commit": (commit.get("id") or "")[:12],
        "order": machine.get("zerograd_order"),  # the shuffled order's seed (benches/conftest)
    }


def the_run(directory: Path, rows: list[Row], run: RunFile) -> TheRun:
    """What the page says of the run as a whole: its settings and environment, its rows,
    where its time went, its failed and noisy processes, pytest-benchmark's figures."""
    ok_rows = [r for r in rows if r.ok]
    first = first_row(rows)
    return TheRun(
        directory=directory,
        world_size=max((r.world_size or 1 for r in rows), default=1),
        workload=first.workload,
        has_sync=any(r.samples.get("sync") for r in ok_rows),
        run=run,
        sweep=run.sweep,
        env=environment(run, first),
        first=first,
        rows=len(rows),
        ok_rows=len(ok_rows),
        wall=wall_time(rows, run),
        parallel=first.parallel or "none",
        failed=[r for r in rows if not r.ok],
        noisy=[r.case_id for r in ok_rows if noise.noisy(r)],
        noisy_pressure=noise.NOISY_PRESSURE,
        noisy_switches=noise.NOISY_SWITCHES_PER_S,
        # which signal judged the rows: psi where it exists, else involuntary switches
        noise_signals=sorted({noise.case_noise(r).signal or "none" for r in ok_rows}),
        pytest_benchmark=_pytest_benchmark(directory),
        results=RESULTS,
    )


def environment(run: RunFile, first: Row) -> dict[str, Any]:
    """The run's machine and commit: run.json's, with the first row's over it (the row was
    measured; run.json says where the sweep started)."""
    return {**run.env, **first.env}


def wall_time(rows: list[Row], run: RunFile | None = None) -> Wall:
    """Where the sweep's wall time went: each step's seconds summed over its cases' processes
    (the rows' ``wall_s``), largest first, with its share of the total; the sweep's own clock
    and its timed share where run.json has them (``run.wall``)."""
    steps: dict[str, float] = {}
    for r in rows:
        for step, seconds in (r.wall_s or {}).items():
            if step != "total":
                steps[step] = steps.get(step, 0.0) + seconds
    total = sum(steps.values())
    ordered = sorted(steps.items(), key=lambda item: -item[1])
    return Wall(
        total_s=total,
        # strategies that shared a process (engine.rotation) count it once
        processes=len({process_of(r) for r in rows if r.wall_s}),
        time_only=len({process_of(r) for r in rows if r.time_only}),
        steps=[WallStep(s, v, v / total if total else None) for s, v in ordered],
        sweep_s=(run.wall or {}).get("sweep_s") if run else None,
        timed_share=(run.wall or {}).get("timed_share") if run else None,
    )


def min_effect_of(run: RunFile) -> float:
    """The run's --min-effect (the default where run.json has none)."""
    return run.min_effect if run.min_effect is not None else verdicts.DEFAULT_MIN_EFFECT


def control_of(run: RunFile) -> str | None:
    """The run's control strategy (``--control``: run.json's ``sweep.control``), whose
    processes measure the spread between machines; None where it has none (or ``none``)."""
    control = run.sweep.get("control")
    return control if isinstance(control, str) and control != "none" else None
