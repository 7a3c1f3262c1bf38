"""Reading asv's own result files, as ``asv.results.Results.load`` does (without importing asv).

``ASV_DIR/results/benchmarks.json`` says what each benchmark is (parameters, unit, version);
``ASV_DIR/results/<machine>/<hash>-<env>.json`` holds one commit's figures: the value per
parameter set, asv's statistics (99% CI, quartiles) and, with ``--record-samples``, the raw
samples (one per process for a paired track). ``reports.regressions.history`` judges and draws them.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

RESULTS = "results"
BENCHMARKS = "benchmarks.json"
MACHINE = "machine.json"


class HistoryError(ValueError):
    """A bad directory or results file: one line, exit 2."""


# the keys of asv's files that are read here, with the types asv writes (``asv.results``,
# ``asv.benchmarks``); another key is let through. Another type is a HistoryError naming the
# file and the field's path (``check``)
class Benchmark(Struct):
    """One benchmark of benchmarks.json."""

    name: str
    params: list[list[str]] | None = None  # each parameter's values, as asv's reprs
    param_names: list[str] | None = None
    version: str | None = None
    unit: str | None = None
    type: str | None = None
    rounds: int | None = None


class Machine(Struct):
    """machine.json, and a results file's ``params``."""

    machine: str | None = None


class ResultFile(Struct):
    """A results file (its ``results`` rows: ``ResultColumns``)."""

    commit_hash: str
    result_columns: list[str]
    results: dict[str, list[Any] | None]
    date: float | None = None  # JavaScript milliseconds
    env_name: str | None = None
    params: Machine | None = None


class ResultColumns(Struct):
    """A benchmark's row of a results file, column by column."""

    result: list[float | None] | None = None  # null: failed, NaN: skipped
    params: list[list[str]] | None = None
    version: str | None = None
    samples: list[list[float] | None] | None = None
    stats_ci_99_a: list[float | None] | None = None
    stats_ci_99_b: list[float | None] | None = None
    stats_q_25: list[float | None] | None = None
    stats_q_75: list[float | None] | None = None
    stats_repeat: list[float | None] | None = None


def check(path: Path, data: dict[str, Any], kind: type, where: str = "") -> None:
    """``data`` is a ``kind`` (the keys it names of their types), or a HistoryError naming the
    file, ``where`` in it (a benchmark) and the field's path."""
    try:
        msgspec.convert(data, kind)
    except msgspec.ValidationError as err:
        raise HistoryError(f"{str(path)!r}: {where}{err}") from None


def load_object(path: Path) -> dict[str, Any]:
    """A JSON file that holds an object, or a HistoryError naming it."""
    data = _load_json(path)
    if not isinstance(data, dict):
        raise HistoryError(f"{str(path)!r} is not a JSON object ({json.dumps(data)[:60]})")
    return data


# -- reading asv's files --------------------------------------------------------------------------
@dataclass
class Point:
    """One commit's figure for one benchmark and parameter set, as asv saved it."""

    commit: str
    date: int | None  # the commit's date, JavaScript milliseconds (asv's ``date``)
    value: float
    samples: list[float] | None = None  # asv's raw samples (``--record-samples``), all processes
    ci: tuple[float, float] | None = None  # asv's 99% CI of the median (stats_ci_99_a/b)
    quartiles: tuple[float, float] | None = None  # stats_q_25, stats_q_75
    repeat: int | None = None  # stats_repeat: how many samples asv's statistics saw

    def spread(self) -> tuple[float, float] | None:
        """The commit's interval: raw samples' range, else asv's 99% CI, else None."""
        xs = [x for x in self.samples or [] if finite_number(x)]
        if len(xs) > 1:
            return (min(xs), max(xs))
        if self.ci is not None:
            return self.ci
        return None

    def process_values(self) -> list[float] | None:
        """One figure per asv process where asv recorded them (a paired benchmark's samples)."""
        xs = [x for x in self.samples or [] if finite_number(x) and x > 0]
        return xs if len(xs) > 1 else None


@dataclass
class Series:
    benchmark: str
    params: tuple[str, ...]
    machine: str
    env: str
    points: list[Point] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def group(self) -> tuple[str, str]:
        return (self.machine, self.env)


def finite_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise HistoryError(f"cannot read {str(path)!r}: {err.strerror or err}") from None
    except ValueError as err:
        raise HistoryError(f"{str(path)!r} is not JSON ({err})") from None


def results_dir(asv_dir: Path) -> Path:
    """ASV_DIR/results, checked: a HistoryError naming what is missing."""
    if not asv_dir.is_dir():
        raise HistoryError(f"{str(asv_dir)!r} is not a directory")
    results = asv_dir / RESULTS
    if not results.is_dir():
        raise HistoryError(
            f"{str(asv_dir)!r} has no {RESULTS}/ directory; give the directory that holds "
            "asv's results/ (default .asv; run `asv run` first)"
        )
    if not (results / BENCHMARKS).is_file():
        raise HistoryError(f"{str(results)!r} has no {BENCHMARKS}; run `asv run` first")
    return results


def _column(fields: dict[str, Any], key: str, j: int) -> Any:
    values = fields.get(key)
    if not isinstance(values, list) or j >= len(values):
        return None
    return values[j]


def _point(fields: dict[str, Any], j: int, commit: str, date) -> Point:
    """The j-th value of one benchmark's row of a results file, with its statistics."""
    samples = _column(fields, "samples", j)
    a, b = _column(fields, "stats_ci_99_a", j), _column(fields, "stats_ci_99_b", j)
    q1, q3 = _column(fields, "stats_q_25", j), _column(fields, "stats_q_75", j)
    repeat = _column(fields, "stats_repeat", j)
    return Point(
        commit=commit,
        date=date if finite_number(date) else None,
        value=float(fields["result"][j]),
        samples=[float(x) for x in samples if finite_number(x)]
        if isinstance(samples, list)
        else None,
        ci=(float(a), float(b)) if finite_number(a) and finite_number(b) and a <= b else None,
        quartiles=(float(q1), float(q3)) if finite_number(q1) and finite_number(q3) else None,
        repeat=int(repeat) if finite_number(repeat) else None,
    )


def read_result_file(path: Path, benchmarks: dict[str, dict]) -> dict[str, Any]:
    """One asv results file: commit, date, env and a Point per (benchmark, parameter set).

    Mirrors ``asv.results.Results.load``: each benchmark's row lines up with
    ``result_columns`` (trailing None columns dropped); a parameterised benchmark's lists run
    over the product of its saved ``params``, matched to the current benchmarks.json by the
    parameters' values as asv does. Results of another benchmark version are skipped, as
    asv's publish skips them; ``null`` is a failure and NaN a skip: no point.
    """
    data = load_object(path)
    try:
        columns = data["result_columns"]
        rows = data["results"]
        commit = data["commit_hash"]
    except KeyError as err:
        raise HistoryError(f"{str(path)!r} is not an asv results file (no {err})") from None
    check(path, data, ResultFile)
    out: dict[str, Any] = {
        "commit": commit,
        "date": data.get("date"),
        "env": data.get("env_name") or path.stem.split("-", 1)[-1],
        "machine": (data.get("params") or {}).get("machine"),
        "points": {},
        "stale": [],
    }
    for name, row in rows.items():
        bench = benchmarks.get(name)
        if bench is None:
            continue
        if row is None:  # asv wrote no row: nothing measured
            continue
        fields = dict(zip(columns, row, strict=False))
        check(path, fields, ResultColumns, f"benchmark {name!r}: ")
        version = fields.get("version")
        if version is not None and bench.get("version") not in (None, version):
            out["stale"].append(name)
            continue
        saved = fields.get("params") or []
        values = fields.get("result")
        if values is None:
            continue
        index = {combo: j for j, combo in enumerate(itertools.product(*saved))}
        for combo in itertools.product(*(bench.get("params") or [])):
            j = index.get(combo)
            if j is None or j >= len(values) or not finite_number(values[j]):
                continue
            out["points"][(name, combo)] = _point(fields, j, commit, out["date"])
    return out


def _result_files(results: Path):
    """(machine, path) of every results file, machine folder by folder, as asv reads them."""
    for machine_dir in sorted(p for p in results.iterdir() if p.is_dir()):
        machine_file = machine_dir / MACHINE
        if not machine_file.is_file():  # asv skips a folder without machine.json too
            continue
        machine_info = load_object(machine_file)
        check(machine_file, machine_info, Machine)
        machine = machine_info.get("machine") or machine_dir.name
        for path in sorted(machine_dir.glob("*.json")):
            if path.name not in (MACHINE, BENCHMARKS):
                yield machine, path


def load(asv_dir: Path) -> dict[str, Any]:
    """Every series of the results directory, its benchmarks, commits and what was skipped."""
    results = results_dir(asv_dir)
    raw = _load_json(results / BENCHMARKS)
    if not isinstance(raw, dict):
        raise HistoryError(f"{str(results / BENCHMARKS)!r} is not asv's benchmarks.json")
    benchmarks = {k: v for k, v in raw.items() if isinstance(v, dict) and "name" in v}
    for name, bench in benchmarks.items():
        check(results / BENCHMARKS, bench, Benchmark, f"benchmark {name!r}: ")
    series: dict[tuple, Series] = {}
    stale: dict[str, int] = defaultdict(int)
    unreadable: list[str] = []
    commits: dict[tuple[str, str, str], dict[str, Any]] = {}
    files = 0
    for machine, path in _result_files(results):
        try:
            got = read_result_file(path, benchmarks)
        except HistoryError as err:  # asv skips such a file with a warning; so do we
            unreadable.append(str(err))
            continue
        files += 1
        for name in got["stale"]:
            stale[name] += 1
        commits[(machine, got["env"], got["commit"])] = {
            "machine": machine,
            "env": got["env"],
            "commit": got["commit"],
            "date": got["date"] if finite_number(got["date"]) else None,
            "values": len(got["points"]),
        }
        for (name, combo), point in got["points"].items():
            s = series.setdefault(
                (name, combo, machine, got["env"]),
                Series(benchmark=name, params=combo, machine=machine, env=got["env"]),
            )
            s.points.append(point)
    if files == 0 and unreadable:
        raise HistoryError(
            f"{str(results)!r} holds no readable asv results file ({len(unreadable)} "
            f"unreadable; the first: {unreadable[0]})"
        )
    if files == 0:
        raise HistoryError(f"{str(results)!r} holds no asv results files; run `asv run` first")
    for s in series.values():
        s.points.sort(key=lambda p: commit_order(p.date, p.commit))
    rank = {
        name: {c: i for i, c in enumerate(itertools.product(*(b.get("params") or [])))}
        for name, b in benchmarks.items()
    }
    return {
        "benchmarks": benchmarks,
        "series": sorted(
            series.values(),
            key=lambda s: (s.benchmark, rank[s.benchmark].get(s.params, 0), s.machine, s.env),
        ),
        "unreadable": unreadable,
        "commits": sorted(commits.values(), key=lambda c: commit_order(c["date"], c["commit"])),
        "files": files,
        "stale": dict(stale),
    }


def commit_order(date: int | None, commit: str) -> tuple:
    return (date is None, date or 0, commit)
