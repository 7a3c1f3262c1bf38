"""Reading a sweep's rows back: the results file, and rows pooled per case across rounds."""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

from reports import stats

RESULTS = "results.jsonl"
PHASES = ("reset", "forward", "backward", "update", "window", "sync")  # sync: DDP only
# a case's identity: every setting that changes its figures (benches.engine.spec uses the same list)
SWEEP_IDENTITY = (
    "workload",
    "preset",
    "device",
    "world_size",
    "parallel",
    "mesh",
    "repeat",
    "warmup",
    "threads",
    "seed",
    "optimizer",
    "clip_norm",
    "compile",
    "compare_settings",
    "pin",
)
# settings added to the identity after rows were written without them: what those rows ran
ADDED_LATER = {"pin": False}  # before --pin no case process was pinned
# swept per case: the strategy with its options, K, N, the grad_sync flavour, the precision
CASE_KEY = (
    "strategy",
    "options",
    "accumulate",
    "live_tensors",
    "grad_sync",
    "precision",
    *SWEEP_IDENTITY,
)
SCHEMA_VERSION = 2  # 2: paired overhead per row, held/peak memory, no baseline case


class SchemaError(ValueError):
    """Rows this version cannot read: one line saying which and why."""


def read(directory: str | Path) -> list[dict[str, Any]]:
    """Every readable row of DIR/results.jsonl; a corrupt line is skipped with a warning."""
    path = Path(directory) / RESULTS
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
            except ValueError as err:
                warnings.warn(f"{path}:{number}: skipped a corrupt line ({err})", stacklevel=2)
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
                missing = [key for key in CASE_KEY if key not in row]
                if missing:
                    raise SchemaError(
                        f"{path}:{number}: row {row.get('case_id', '?')!r} has no field "
                        f"{missing[0]!r} (a case's identity: {', '.join(CASE_KEY)})"
                    )
            rows.append(row)
    return rows


def case_key(row: dict[str, Any]) -> tuple:
    return tuple(row.get(k) for k in CASE_KEY)


REFERENCE = "native"  # PyTorch's own zero_grad: the reports' reference strategy, listed first


def strategy_order(name: str) -> tuple:
    """The order reports list strategies in: the reference first, then by name."""
    return (name != REFERENCE, name)


def spell(value: Any) -> str:
    """A setting's value as the command line spells it: true, false, none, 1.0, adamw."""
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else str(value)


def label(strategy: str, options: str) -> str:
    """``name`` or ``name:k=v:k2=v2``: how reports and verdicts.json name a strategy case."""
    return f"{strategy}:{options}" if options else strategy


def pooled(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """One entry per case: ok rounds' raw samples pooled and summarised again; failures kept."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[case_key(row)].append(row)
    out = {}
    for key, group in groups.items():
        ok = [r for r in group if r.get("status") == "ok"]
        entry: dict[str, Any] = {
            **dict(zip(CASE_KEY, key, strict=True)),
            # the report's name of the case's strategy: a strategy with options is another one
            "strategy": label(key[0], key[1]),
            "name": key[0],
            "rounds": len(ok),
            "failed": [r for r in group if r.get("status") != "ok"],
            "rows": ok,
        }
        if ok:
            samples = {
                phase: [s for r in ok for s in r.get("samples", {}).get(phase, [])]
                for phase in PHASES
            }
            entry["samples"] = samples
            entry["phases"] = {p: stats.summarize(v) for p, v in samples.items() if v}
        out[key] = entry
    return out


def accepted(check: dict[str, Any]) -> tuple[float, float, str]:
    """A gradient check's difference and tolerance against the reference that accepted it (the
    float64 sum, or the same additions in the gradient's dtype), and which one."""
    if check.get("accepted_by") == "same-order sum":
        return check["same_order_max_rel_diff"], check["same_order_tolerance"], "same-order sum"
    return check["max_rel_diff"], check["tolerance"], "float64 sum"


def finite(value: Any) -> Any:
    """JSON has no NaN or infinity: a missing figure is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
