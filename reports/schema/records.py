"""The typed records of what a sweep wrote, and the one reader and writer of each of its files.

    run.json ------RunFile.read--> RunFile
    results.jsonl --rows.read--> Row --rows.pooled--> Entry (a case over its processes, with
        its Paired ratio) --verdicts--> the records of ``reports.schema.verdict_records``

A field's meaning is written where the field is defined, here. A record's attribute that does
not exist is an AttributeError at once (slots), never a silent ``None`` from ``.get``. The JSON
files keep their keys: each record's ``to_json`` writes them and ``from_json`` reads them. One
name per thing in the records: K and N are ``k`` and ``n`` in an Entry, though rows say
``accumulate`` and ``live_tensors`` (``rows.pooled`` maps them).

This module imports only the standard library; the rules that fill the records are in
``reports.judge.rows`` (reading and pooling rows) and ``reports.judge.stats`` (paired ratios).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from reports.schema.fieldtypes import checker, shown, wrong, wrong_type
from reports.schema.row_parts import (
    PARTS,
    Collectives,
    CostModel,
    CpuPressure,
    ErrorFigures,
    GradCheck,
    LoopRatio,
    Memory,
    Mfu,
    Placement,
    ProcessFigures,
    Profile,
    Summary,
    part_to_json,
)
from reports.schema.settings import EntryIdentity, RowIdentity


class RecordError(ValueError):
    """A JSON object that is not the record it should be: one line naming the field."""


def field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def build(cls, data: Any, what: str, required: tuple[str, ...] = ()):
    """``cls`` from a JSON object whose keys are its fields (the records inside it already
    built); an unknown key, a missing field (one without a default, or one of ``required``: a
    field the file always holds), a value not of its field's type (``fieldtypes``) or a
    non-object is a RecordError naming the field and what it must be."""
    if not isinstance(data, dict):
        raise RecordError(f"{what} is not an object ({shown(data)})")
    names = set(field_names(cls))
    unknown = [key for key in data if key not in names]
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    missing = [key for key in required if key not in data]
    if missing:
        raise RecordError(f"{what} has no field {missing[0]!r}")
    bad = wrong_type(cls, data)
    if bad is not None:
        raise RecordError(inside(what, wrong(*bad)))
    try:
        return cls(**data)
    except TypeError as err:  # a required field is missing
        raise RecordError(f"{what}: {err}") from None


def inside(what: str, message: str) -> str:
    """``message`` about a field (``field 'x' ...``) of ``what``: a part named as a field
    (``row 'r': field 'memory'``) makes one dotted name (``row 'r': field 'memory.x' ...``)."""
    head, sep, name = what.rpartition("field '")
    if sep and name.endswith("'") and "'" not in name[:-1] and message.startswith("field '"):
        return f"{head}field '{name[:-1]}.{message.removeprefix(sep)}"
    return f"{what}: {message}"


def part(cls, data: Any, what: str):
    """``build`` for a part of a row, the records inside it (its class's ``NESTED``) first."""
    nested = getattr(cls, "NESTED", {})
    if nested and isinstance(data, dict):
        data = {
            key: part(nested[key], value, inside(what, f"field {key!r}"))
            if key in nested and value is not None
            else value
            for key, value in data.items()
        }
    return build(cls, data, what)


def finite(value: Any) -> Any:
    """JSON has no NaN or infinity: a missing figure is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """A JSON file written whole or not at all (a temporary file, then a rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(finite(data), indent=1, allow_nan=False))
    tmp.replace(path)
    return path


# -- a paired ratio -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Paired:
    """A case's paired ratio, strategy window / plain-loop window of the same process, pooled
    over its processes (``stats.paired``): no pairs, no figure."""

    ratio: float | None = None
    pairs: int = 0
    processes: int = 0
    estimate: str | None = None  # what the ratio is: the trimmed mean of the pairs' log ratios
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None  # 0.95, or None for bounds (fewer than 6 pairs)
    method: str | None = None  # how the interval was made

    @classmethod
    def from_stats(cls, result: dict[str, Any]) -> Paired:
        """From ``stats.paired``'s result (its draws and log estimate stay behind)."""
        names = field_names(cls)
        return cls(**{k: v for k, v in result.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        if self.estimate is None:  # no pairs
            keys: tuple[str, ...] = ("ratio", "ci_low", "ci_high", "pairs", "processes")
        else:
            keys = field_names(Paired)
        return {key: getattr(self, key) for key in keys}


# -- the run: run.json -----------------------------------------------------------------------------
RUN = "run.json"
# the sweep's options (run.json's ``sweep``) the reports read, with their types: another option
# is kept as it is (the sweep's own record, ``benches.sweep.arguments.Sweep``, wrote them)
SWEEP_READ = {
    key: checker(hint)
    for key, hint in {
        "min_effect": float | None,
        "looks": int | None,
        "rounds": int | None,
        "repeat": int | None,
        "warmup": int | None,
        "quick": bool | None,
        "accumulate": list[int] | None,
        "live_tensors": list[int] | None,
        "precision": list[str] | None,
        "grad_sync": list[str] | None,
        "workload": str | None,
        "preset": str | None,
        "device": str | None,
        "cluster": str | None,
        "per_node": int | None,
        "exclusive": bool | None,
        "controls": int | None,
    }.items()
}


class UnreadableFile(RecordError):
    """A file that is not a JSON object at all (a cut-off write, another program's file)."""


@dataclass(slots=True)
class RunFile:
    """DIR/run.json: the sweep as it was started. ``benches.sweep.cli`` writes it once, whole,
    with ``write``; ``read`` is its one reader (the report, compare, and --resume's checks)."""

    run_id: str | None = None  # the id every row of the run carries
    created: str | None = None  # when the sweep started, ISO 8601 in UTC
    sweep: dict[str, Any] = field(default_factory=dict)  # the sweep's options (arguments.Sweep)
    case_settings: dict[str, Any] = field(default_factory=dict)  # rows.SWEEP_IDENTITY's values
    env: dict[str, Any] = field(default_factory=dict)  # the machine and commit (engine.envinfo)
    # --cluster: Ray's version, its nodes and the processes each took at once, as the sweep
    # joined it (benches.sweep.cluster.place.RayPlace.record); empty on this machine
    cluster: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: str | Path) -> RunFile | None:
        """DIR's run.json, or None when there is none. Not JSON or not an object is an
        ``UnreadableFile``; a part of the wrong type, or a key it does not know, a RecordError
        naming the file and the field. A key it does not know is left out (a later version's
        run.json still reads; the rows are the data)."""
        path = Path(directory) / RUN
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UnreadableFile(f"{str(path)!r} is not readable JSON ({err})") from None
        if not isinstance(data, dict):
            raise UnreadableFile(f"{str(path)!r} is not a JSON object ({json.dumps(data)[:60]})")
        for key in ("sweep", "env", "case_settings", "cluster"):
            if data.get(key) is None:
                data.pop(key, None)
            elif not isinstance(data[key], dict):
                raise RecordError(f"{path}: field {key!r} is not an object")
        for key, value in data.get("sweep", {}).items():
            kind = SWEEP_READ.get(key)
            if kind is not None and not kind.fits(value):
                raise RecordError(f"{path}: {wrong(f'sweep.{key}', kind.explain(value))}")
        names = field_names(cls)
        return build(cls, {k: v for k, v in data.items() if k in names}, str(path))

    def to_json(self) -> dict[str, Any]:
        """The JSON object run.json holds (the sweep writes it whole)."""
        return {name: getattr(self, name) for name in field_names(RunFile)}

    @property
    def min_effect(self) -> float | None:
        value = self.sweep.get("min_effect")
        return float(value) if value is not None else None

    @property
    def looks(self) -> int:
        """How many times an adaptive sweep looked at its verdicts (1: a fixed sweep)."""
        return int(self.sweep.get("looks") or 1)


# -- a row: one process of one case ---------------------------------------------------------------
@dataclass(slots=True)
class Row(RowIdentity):
    """One process of one case, as the engine wrote it (``benches.engine.figures.row_for``): a
    line of results.jsonl, read by ``rows.read`` and nowhere else. The JSON keys are these
    fields; a key that is not one of them is refused there, naming it. Its first fields are the
    case's identity (``settings.RowIdentity``: every identity setting, in ``CASE_KEY``'s order,
    null where a failed row has none; ``read`` requires every one of an ok row). Figures a
    failed process never measured are null. The objects inside a row (``samples``, ``memory``,
    ...) keep the keys the engine wrote; each field's comment says where they are defined."""

    # the process
    schema_version: int | None = None  # rows.SCHEMA_VERSION when written (read refuses others)
    run_id: str | None = None  # the sweep that ran it
    case_id: str | None = None  # the case and round: unique in its run
    process_id: str | None = None  # shared by the strategies of one rotated process
    round: int = 0
    time_only: bool = False  # a process the sweep added for time alone: its timed pairs only
    control: bool = False  # one of the control's extra processes (noise only)
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None  # a failed process's one line
    # what it measured (benches.engine.figures.measured_part)
    params: int | None = None
    tokens_per_window: int | None = None
    tokens_per_second: float | None = None
    flops_per_window: float | None = None
    mfu: Mfu | None = None  # a GPU's model FLOPs utilisation
    phases: dict[str, Summary] = field(default_factory=dict)  # per phase, over its pairs
    samples: dict[str, list[float]] = field(default_factory=dict)  # per phase, one per pair
    overhead: LoopRatio | None = None  # the process's paired ratio (stats.paired)
    cpu_pressure: CpuPressure | None = None  # PSI over the timed pairs: median, max
    allreduce_per_window: float | None = None
    collectives_per_window: Collectives | None = None  # figures.collectives_figure
    grad_sync_vs_every: LoopRatio | None = None  # figures.grad_sync_ratio
    settings_vs: LoopRatio | None = None  # figures.setting_ratio
    memory: Memory = field(default_factory=Memory)  # the memory pass and growth
    grad_check: GradCheck | None = None  # engine.gradients.check_windows
    accumulation_error: ErrorFigures | None = None  # engine.gradients.errors
    total_error: ErrorFigures | None = None
    process: ProcessFigures | None = None  # psutil over the timed pairs (engine.process)
    build_order: list[str] | None = None  # a rotated process's replica build order
    compile_s: float | None = None
    cost_model: CostModel | None = None  # figures.cost_figures
    profile: Profile | None = None  # engine.profiling: the profiled pair
    wall_s: dict[str, float] | None = None  # the process's seconds per step
    env: dict[str, Any] = field(default_factory=dict)  # engine.envinfo, git, process start
    placement: Placement | None = None  # where the process ran (envinfo.placement)

    # the objects a row always has (empty where nothing was measured): null reads as empty
    OBJECTS: ClassVar[tuple[str, ...]] = ("phases", "samples", "memory", "env")

    @classmethod
    def from_json(cls, data: Any, what: str = "a row") -> Row:
        """A row from its JSON object, each part (``row_parts.PARTS``) its record; a key that
        is not a field, of the row or of a part, is a RecordError naming it."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if not (k in cls.OBJECTS and v is None)}
            for key, kind in PARTS.items():
                if data.get(key) is not None:  # ``build`` refuses one that is not an object
                    data[key] = part(kind, data[key], f"{what}: field {key!r}")
            phases = data.get("phases")
            if isinstance(phases, dict):
                data["phases"] = {
                    name: part(Summary, figures, f"{what}: field 'phases.{name}'")
                    for name, figures in phases.items()
                }
        return build(cls, data, what)

    def to_json(self) -> dict[str, Any]:
        """The row's JSON object: every field of the row and of its parts, with the engine's
        keys (a field the engine did not write is null)."""
        return {name: part_to_json(getattr(self, name)) for name in field_names(Row)}

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# -- a case pooled over its processes -------------------------------------------------------------
@dataclass(slots=True)
class Entry(EntryIdentity):
    """One case pooled over its processes (``rows.pooled``): a strategy with its options at
    K and N, with the sweep's settings and one value of each swept loop setting (``settings.
    EntryIdentity``: grad_sync, precision, ...; what its rows say); its ok rows (one per
    process) and its failed ones."""

    strategy: str  # the report's name of the case: ``name`` or ``name:k=v`` (rows.label)
    name: str  # the registered strategy
    options: str  # its options, ``k=v:k2=v2``, or ""
    k: int  # accumulation steps K (a row's ``accumulate``)
    n: int  # unrelated live tensors N (a row's ``live_tensors``)
    rows: list[Row] = field(default_factory=list)  # ok rows, one per process
    failed: list[Row] = field(default_factory=list)  # rows of failed processes
    samples: dict[str, list[float]] = field(default_factory=dict)  # per phase, every process's
    phases: dict[str, Summary] = field(default_factory=dict)  # per phase, every process's
    overhead: Paired = field(default_factory=lambda: Paired())  # the paired ratio, pooled

    @property
    def rounds(self) -> int:
        """Processes that finished (the control's extra ones included)."""
        return len(self.rows)


# -- a case's noise -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CaseNoise:
    """Whether a case's process ran on a busy machine, and by which signal
    (``verdicts.case_noise``): ``psi``, ``involuntary_switches`` or None (no signal)."""

    signal: str | None = None
    value: float | None = None
    threshold: float | None = None
    noisy: bool = False
