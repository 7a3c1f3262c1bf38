"""Reading a sweep's rows back: the results file, and rows pooled per case across rounds."""

from __future__ import annotations

import json
import warnings
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec

from reports.judge import stats
from reports.schema.records import LOOP_SAMPLES, RESULTS, ROW, SCHEMA_VERSION, Entry, Paired, Row
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

__all__ = [
    "ADDED_LATER",
    "CASE_KEY",
    "LOOP_SAMPLES",
    "RESULTS",
    "SCHEMA_VERSION",
    "SWEEP_IDENTITY",
    "case_key",
    "label",
    "spell",
]

PHASES = ("reset", "forward", "backward", "update", "window", "sync")  # sync: DDP only


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
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = _row(line, f"{path}:{number}")
            except SchemaError:
                raise
            except ValueError as err:  # not JSON, or not an object: a corrupt line
                corrupt.append((number, err))
                continue
            missing = row.settle()
            if row.ok and row.case_id is None:
                raise SchemaError(f"{path}:{number}: an ok row has no field 'case_id'")
            if row.ok and missing:
                raise SchemaError(
                    f"{path}:{number}: row {row.case_id!r} has no field {missing[0]!r} (a "
                    f"case's identity: {', '.join(CASE_KEY)})"
                )
            rows.append(row)
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


def _row(line: bytes, where: str) -> Row:
    """One line of results.jsonl as a ``Row``, typed by msgspec. A line that is not a JSON
    object is a ValueError (corrupt: skipped); a row of another schema version, or one that is
    not a ``Row``, a SchemaError naming the field's path."""
    try:
        row = ROW.decode(line)
    except msgspec.ValidationError:
        data = msgspec.json.decode(line)  # JSON, but not a Row: which version, which field
    except msgspec.DecodeError:  # not JSON to msgspec: Python's json reads NaN, older rows'
        try:
            data = json.loads(line)
        except ValueError as err:
            raise ValueError(str(err)) from None
    else:
        _version(row.schema_version, where)
        return row
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    _version(data.get("schema_version"), where)
    try:
        return msgspec.convert(data, Row)
    except msgspec.ValidationError as err:
        raise SchemaError(f"{where}: row {data.get('case_id', '?')!r}: {err}") from None


def _version(version: Any, where: str) -> None:
    """A row of another schema version (or one whose version is not an integer: ``"2"``) is a
    SchemaError showing the value as the file writes it."""
    version = 1 if version is None else version
    if type(version) is not int or version != SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: rows of schema_version {json.dumps(version)} cannot be read (this "
            f"version reads {SCHEMA_VERSION}: paired overheads and exact memory); rerun the sweep"
        )


def process_of(row: Row) -> str:
    """The process a row's figures came from: strategies that shared one (a rotated process)
    share its ``process_id`` within their run; a row without one was a process of its own (its
    ``case_id``, which ``read`` requires of an ok row, names its round)."""
    return f"{row.run_id}/{row.process_id or row.case_id}"


def first_row(rows: list[Row]) -> Row:
    """The row a page reads the run's settings and environment from: the first ok one, else
    the first; an empty ``Row`` (every figure None) when there is none."""
    return next((r for r in rows if r.ok), rows[0] if rows else Row.from_json({}))


def memory_note(rows: list[Row], key: str) -> Any:
    """A memory field that says how a figure was measured (``peak_method``, ``growth_measure``:
    the same in every process of a case), from the first process that has it."""
    values = (getattr(r.memory, key) for r in rows)
    return next((value for value in values if value is not None), None)


REFERENCE = "native"  # PyTorch's own zero_grad: the reports' reference strategy, listed first


def strategy_order(name: str) -> tuple:
    """The order reports list strategies in: the reference first, then by name."""
    return (name != REFERENCE, name)


def phase_summaries(samples: dict[str, list]) -> dict[str, Summary]:
    """Per phase (``PHASES``), a series of windows summarised (``stats.summarize``): a case's
    pooled over its processes, or one row's (``summaries.phases``)."""
    return {p: Summary(**stats.summarize(v)) for p, v in samples.items() if v and p in PHASES}


def pooled(rows: list[Row], summarised: bool = True) -> dict[tuple, Entry]:
    """One entry per case: ok rounds' raw samples pooled and summarised again, the paired
    ratio over its processes (its bootstrap: seconds at a few hundred rows); failures kept.
    ``summarised`` off: the entries' rows and samples only, for a reader of process figures
    (the budget's pairs plan)."""
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
            if summarised:
                entry.phases = phase_summaries(entry.samples)
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
