"""Reading a sweep's rows back: the results file, and rows pooled per case across rounds."""

from __future__ import annotations

import json
import warnings
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from reports.judge import stats
from reports.schema.records import Entry, Paired, RecordError, Row
from reports.schema.row_parts import GradCheck, Summary
from reports.schema.settings import (
    ADDED_LATER,
    CASE_KEY,
    ENTRY_IDENTITY,
    SWEEP_IDENTITY,
    case_key,
    label,
    spell,
)

__all__ = ["ADDED_LATER", "CASE_KEY", "SWEEP_IDENTITY", "case_key", "label", "spell"]

RESULTS = "results.jsonl"
PHASES = ("reset", "forward", "backward", "update", "window", "sync")  # sync: DDP only
SCHEMA_VERSION = 2  # 2: paired overhead per row, held/peak memory, no baseline case
# a row's paired samples of its loop against another loop of the same strategy in one process,
# (this loop's windows, the other loop's): the engine writes them, judge.verdicts judges them
LOOP_SAMPLES = {
    "grad_sync": ("flavour_window", "reference_flavour_window"),  # its flavour against every
    "settings": ("setting_window", "other_setting_window"),  # against --compare-settings'
}


class SchemaError(ValueError):
    """Rows this version cannot read: one line saying which and why."""


def read(directory: str | Path) -> list[Row]:
    """Every readable row of DIR/results.jsonl, each a ``Row``; a corrupt line is skipped with a
    warning; a row this version cannot read (another schema, a field it does not know, an ok row
    without its identity, a field of the wrong type) is a SchemaError naming it, and so is a
    file with no readable row (empty, or every line corrupt). No file: no rows."""
    path = Path(directory) / RESULTS
    if not path.exists():
        return []
    rows = []
    corrupt: list[tuple[int, ValueError]] = []  # warned only when a row is left
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
            except ValueError as err:
                corrupt.append((number, err))
                continue
            version = row.get("schema_version", 1)
            if version != SCHEMA_VERSION:
                raise SchemaError(
                    f"{path}:{number}: schema_version {version} rows cannot be read (this "
                    f"version reads {SCHEMA_VERSION}: paired overheads and exact memory); "
                    "rerun the sweep"
                )
            for key, value in ADDED_LATER.items():
                row.setdefault(key, value)
            if row.get("status") == "ok":
                if "case_id" not in row:
                    raise SchemaError(f"{path}:{number}: an ok row has no field 'case_id'")
                missing = [key for key in CASE_KEY if key not in row]
                if missing:
                    raise SchemaError(
                        f"{path}:{number}: row {row.get('case_id', '?')!r} has no field "
                        f"{missing[0]!r} (a case's identity: {', '.join(CASE_KEY)})"
                    )
                bad = malformed(row)
                if bad:
                    raise SchemaError(f"{path}:{number}: row {row.get('case_id', '?')!r}: {bad}")
            try:
                rows.append(Row.from_json(row, f"row {row.get('case_id', '?')!r}"))
            except RecordError as err:
                raise SchemaError(f"{path}:{number}: {err}") from None
    if not rows and corrupt:
        number, err = corrupt[0]
        raise SchemaError(
            f"{path}: no readable row, every line is corrupt (line {number}: {err}); a sweep "
            "writes one JSON object per line"
        )
    if not rows:
        raise SchemaError(f"{path} is empty: no row to read")
    for number, err in corrupt:
        warnings.warn(f"{path}:{number}: skipped a corrupt line ({err})", stacklevel=2)
    return rows


# the fields of an ok row the reports read, with the JSON type each must have (null allowed)
OBJECTS = (
    "phases",
    "samples",
    "overhead",
    "memory",
    "cpu_pressure",
    "grad_check",
    "wall_s",
    "env",
    "cost_model",
    "accumulation_error",
    "total_error",
    "grad_sync_vs_every",
    "settings_vs",
    "collectives_per_window",
)
TEXTS = ("strategy", "options", "grad_sync", "precision", "device", "workload", "preset")
COUNTS = ("accumulate", "live_tensors", "repeat", "warmup", "threads", "world_size", "round")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def malformed(row: dict[str, Any]) -> str | None:
    """What is wrong with an ok row's shape, naming the field ('field 'samples' is a str ...'),
    or None: so a hand-edited or foreign row is one line, never a traceback in the report."""
    for key in OBJECTS:
        if row.get(key) is not None and not isinstance(row[key], dict):
            return f"field {key!r} is a {_kind(row[key])}; valid: an object or null"
    for key in TEXTS:
        if key in row and not isinstance(row[key], str):
            return f"field {key!r} is a {_kind(row[key])}; valid: a string"
    for key in COUNTS:
        value = row.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"field {key!r} is {json.dumps(value)}; valid: an integer >= 0"
    for phase, values in (row.get("samples") or {}).items():
        if not isinstance(values, list) or not all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values
        ):
            return f"field 'samples.{phase}' is not a list of numbers ({json.dumps(values)[:60]})"
    for key, value in (row.get("memory") or {}).items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key.endswith(("_bytes", "_per_window")) and value is not None and not number:
            return f"field 'memory.{key}' is {json.dumps(value)[:60]}; valid: a number or null"
    return None


def process_of(row: Row) -> str:
    """The process a row's figures came from: strategies that shared one (a rotated process)
    share its ``process_id`` within their run; a row without one was a process of its own (its
    ``case_id``, which ``read`` requires of an ok row, names its round)."""
    return f"{row.run_id}/{row.process_id or row.case_id}"


def first_row(rows: list[Row]) -> Row:
    """The row a page reads the run's settings and environment from: the first ok one, else
    the first; an empty ``Row`` (every figure None) when there is none."""
    return next((r for r in rows if r.ok), rows[0] if rows else Row())


def memory_note(rows: list[Row], key: str) -> Any:
    """A memory field that says how a figure was measured (``peak_method``, ``growth_measure``:
    the same in every process of a case), from the first process that has it."""
    values = (getattr(r.memory, key) for r in rows)
    return next((value for value in values if value is not None), None)


REFERENCE = "native"  # PyTorch's own zero_grad: the reports' reference strategy, listed first


def strategy_order(name: str) -> tuple:
    """The order reports list strategies in: the reference first, then by name."""
    return (name != REFERENCE, name)


def pooled(rows: list[Row]) -> dict[tuple, Entry]:
    """One entry per case: ok rounds' raw samples pooled and summarised again, the paired
    ratio over its processes; failures kept."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        groups[case_key(row)].append(row)
    out = {}
    for key, group in groups.items():
        ok = [r for r in group if r.ok]
        case = dict(zip(CASE_KEY, key, strict=True))
        entry = Entry(
            # the report's name of the case's strategy: a strategy with options is another one
            strategy=label(case["strategy"], case["options"]),
            name=case["strategy"],
            options=case["options"],
            k=case["accumulate"],
            n=case["live_tensors"],
            **{name: case[name] for name in ENTRY_IDENTITY},
            rows=ok,
            failed=[r for r in group if not r.ok],
        )
        if ok:
            entry.samples = {
                phase: [s for r in ok for s in r.samples.get(phase, [])] for phase in PHASES
            }
            entry.phases = {
                p: Summary.of(stats.summarize(v)) for p, v in entry.samples.items() if v
            }
            entry.overhead = paired_overhead(entry)
        out[key] = entry
    return out


def paired_overhead(entry: Entry) -> Paired:
    """A case's paired ratio, its processes' pairs pooled (a hierarchical bootstrap, seeded
    by the case)."""
    groups = [
        stats.log_ratios(r.samples["window"], r.samples["plain_window"])
        for r in entry.rows
        if r.samples.get("plain_window")
    ]
    seed = zlib.crc32(repr((entry.strategy, entry.k, entry.n)).encode())
    return Paired.from_stats(stats.paired(groups, seed=seed))


def accepted(check: GradCheck) -> tuple[float, float, str]:
    """A gradient check's difference and tolerance against the reference that accepted it (the
    float64 sum, or the same additions in the gradient's dtype), and which one."""
    if check.accepted_by == "same-order sum":
        return check.same_order_max_rel_diff, check.same_order_tolerance, "same-order sum"
    return check.max_rel_diff, check.tolerance, "float64 sum"
