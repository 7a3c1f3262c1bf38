"""The typed records of what a sweep wrote, and the one reader and writer of each of its files.

    run.json ------RunFile.read--> RunFile
    results.jsonl --rows.read--> Row --rows.pooled--> Entry (a case over its processes, with
        its Paired ratio) --verdicts--> the records of ``reports.schema.verdict_records``

A field's meaning is written where the field is defined, here. A record's attribute that does
not exist is an AttributeError at once, never a silent ``None`` from ``.get``. The records are
msgspec Structs: msgspec reads each file typed (a value of the wrong type, or a key a record does
not have, is one line naming its path) and writes it with the same keys. One
name per thing in the records: K and N are ``k`` and ``n`` in an Entry, though rows say
``accumulate`` and ``live_tensors`` (``rows.pooled`` maps them).

This module imports only the standard library and msgspec; the rules that fill the records are in
``reports.judge.rows`` (reading and pooling rows) and ``reports.judge.stats`` (paired ratios).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, field

from reports.schema.row_parts import (
    Collectives,
    CostModel,
    CpuPressure,
    ErrorFigures,
    Framework,
    GradCheck,
    LoopRatio,
    Memory,
    Mfu,
    Placement,
    ProcessFigures,
    Profile,
    Record,
    Summary,
)
from reports.schema.settings import (
    ADDED_LATER,
    AXES,
    FIXED,
    HINTS,
    EntryIdentity,
    RowIdentity,
)

# -- results.jsonl: the file the engine writes and ``reports.judge.rows`` reads --------------------
RESULTS = "results.jsonl"
SCHEMA_VERSION = 2  # 2: paired overhead per row, held/peak memory, no baseline case
# a row's paired samples of its loop against another loop of the same strategy in one process,
# (this loop's windows, the other loop's): the engine writes them, judge.verdicts judges them
LOOP_SAMPLES = {
    "grad_sync": ("flavour_window", "reference_flavour_window"),  # its flavour against every
    "settings": ("setting_window", "other_setting_window"),  # against --compare-settings'
}


class RecordError(ValueError):
    """A JSON object that is not the record it should be: one line naming the field."""


def convert(cls, data: Any, what: str):
    """``cls`` from a JSON value (msgspec checks every field, the records inside it too): a
    value of the wrong type, a key ``cls`` does not have or a missing field is a RecordError,
    ``WHAT: Expected `int`, got `str` - at `$.memory.held_bytes```."""
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as err:
        raise RecordError(f"{what}: {err}") from None


def builtin(value: Any) -> Any:
    """What msgspec cannot write as it is: a numpy or torch scalar as its number, else text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def encode(data: Any) -> bytes:
    """JSON text of records and plain values (``builtin`` for the rest). msgspec writes a NaN
    or an infinity as null: JSON has neither."""
    return msgspec.json.encode(data, enc_hook=builtin)


def write_json(path: Path, data: Any) -> Path:
    """A JSON file written whole or not at all (a temporary file, then a rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(encode(data), indent=1))
    tmp.replace(path)
    return path


# -- a paired ratio -------------------------------------------------------------------------------
class Paired(Record, frozen=True, kw_only=True):
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
        return cls(**{k: v for k, v in result.items() if k in cls.__struct_fields__})

    def to_json(self) -> dict[str, Any]:
        if self.estimate is None:  # no pairs
            keys: tuple[str, ...] = ("ratio", "ci_low", "ci_high", "pairs", "processes")
        else:
            keys = self.__struct_fields__
        return {key: getattr(self, key) for key in keys}


# -- the run: run.json -----------------------------------------------------------------------------
RUN = "run.json"


class UnreadableFile(RecordError):
    """A file that is not a JSON object at all (a cut-off write, another program's file)."""


# the sweep's options (run.json's ``sweep``, written from ``benches.sweep.record.Sweep``) as
# the reports read them: every setting the sweep holds, typed by its declaration, and the
# sweep's own options they read; another option is kept as it is
SweepOptions = msgspec.defstruct(
    "SweepOptions",
    [
        *((f.name, HINTS[f.name] | None, None) for f in FIXED),
        *((f.name, list[HINTS[f.name]] | None, None) for f in AXES),
        ("min_effect", float | None, None),
        *((name, int | None, None) for name in ("looks", "rounds", "per_node", "controls")),
        *((name, bool | None, None) for name in ("quick", "exclusive")),
        ("cluster", str | None, None),
    ],
    kw_only=True,
    module=__name__,
)


class RunFile(Struct, kw_only=True):
    """DIR/run.json: the sweep as it was started. ``benches.sweep.cli`` writes it once, whole,
    from ``to_json``; ``read`` is its one reader (the report, compare, and --resume's checks). A
    key it does not know is left out (a later version's run.json still reads; the rows are the
    data)."""

    run_id: str | None = None  # the id every row of the run carries
    created: str | None = None  # when the sweep started, ISO 8601 in UTC
    sweep: dict[str, Any] | None = {}  # the sweep's options (benches.sweep.record.Sweep)
    case_settings: dict[str, Any] | None = {}  # rows.SWEEP_IDENTITY's values
    env: dict[str, Any] | None = {}  # the machine and commit (engine.envinfo)
    # --cluster: Ray's version, its nodes and the processes each took at once, as the sweep
    # joined it (benches.sweep.cluster.place.RayPlace.record); empty on this machine
    cluster: dict[str, Any] | None = {}
    # what the sweep did, written again after each look and at its end: the looks it took
    # (the report's alpha spends what they left), each look's plan (what was open, the
    # processes and pairs it added and why), and where its wall time went (the timed share)
    looks_taken: int | None = None
    plan: list[dict[str, Any]] | None = []
    wall: dict[str, Any] | None = {}

    def __post_init__(self) -> None:  # null reads as empty
        for name in ("sweep", "case_settings", "env", "cluster", "plan", "wall"):
            if getattr(self, name) is None:
                setattr(self, name, {})

    @classmethod
    def read(cls, directory: str | Path) -> RunFile | None:
        """DIR's run.json, or None when there is none. Not JSON or not an object is an
        ``UnreadableFile``; a part of the wrong type a RecordError naming the file and the
        field's path."""
        path = Path(directory) / RUN
        if not path.exists():
            return None
        try:
            data = msgspec.json.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError) as err:
            raise UnreadableFile(f"{str(path)!r} is not readable JSON ({err})") from None
        if not isinstance(data, dict):
            raise UnreadableFile(f"{str(path)!r} is not a JSON object ({str(data)[:60]})")
        run = convert(cls, data, str(path))
        convert(SweepOptions, run.sweep, f"{path}: field 'sweep'")
        return run

    def to_json(self) -> dict[str, Any]:
        """The JSON object run.json holds (the sweep writes it whole)."""
        return msgspec.to_builtins(self, enc_hook=builtin)

    @property
    def min_effect(self) -> float | None:
        value = self.sweep.get("min_effect")
        return float(value) if value is not None else None

    @property
    def looks(self) -> int:
        """How many times an adaptive sweep could look at its verdicts (1: a fixed sweep)."""
        return int(self.sweep.get("looks") or 1)

    def decided(self) -> list[dict[str, Any]]:
        """The time comparisons interim looks decided, as the plan keeps them (each look's
        ``decided``: ``reports.judge.verdicts.decision_of``), the latest look's last."""
        return [d for look in self.plan or [] if look for d in look.get("decided") or []]

    def taken(self, rounds: list[int]) -> int:
        """The looks the sweep took: as it recorded them, else (a run.json older than that)
        from its added rounds' numbers ``rounds`` (look j added rounds 2^(j-2) to 2^(j-1) - 1)."""
        if self.looks_taken:
            return min(self.looks_taken, self.looks)
        return min(self.looks, 1 + max(rounds, default=0).bit_length())


# -- a row: one process of one case ---------------------------------------------------------------
class Row(RowIdentity, kw_only=True):
    """One process of one case, as the engine wrote it (``benches.engine.figures.row_for``): a
    line of results.jsonl, read by ``rows.read`` and nowhere else. The JSON keys are these
    fields; a key that is not one of them is refused there, naming it. Its first fields are the
    case's identity (``settings.RowIdentity``: every identity setting, in ``CASE_KEY``'s order;
    ``settle`` makes one the file lacks None, and ``read`` requires every one of an ok row).
    Figures a failed process never measured are null. The objects inside a row (``samples``,
    ``memory``, ...) keep the keys the engine wrote; each field's comment says where they are
    defined."""

    # the process
    schema_version: int | None = None  # rows.SCHEMA_VERSION when written (read refuses others)
    run_id: str | None = None  # the sweep that ran it
    case_id: str | None = None  # the case and round: unique in its run
    process_id: str | None = None  # shared by the strategies of one rotated process
    round: Annotated[int, Meta(ge=0)] = 0
    time_only: bool = False  # a process the sweep added for time alone: its timed pairs only
    control: bool = False  # one of the control's extra processes (noise only)
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None  # a failed process's one line
    # what it measured (benches.engine.figures.measured_part)
    params: int | None = None
    # the parameters that require grad (a fine-tune's frozen base does not); older rows: None
    trainable_params: int | None = None
    tokens_per_window: int | None = None
    tokens_per_second: float | None = None
    flops_per_window: float | None = None
    mfu: Mfu | None = None  # a GPU's model FLOPs utilisation
    # per phase, one per pair: what the summaries below are derived from when read
    samples: dict[str, list[float | None]] | None = {}
    # stored only in rows written before 2026-12-07 (the engine summarised then); read through
    # reports.judge.summaries (phases, overhead), which derives them from the samples otherwise
    phases: dict[str, Summary] | None = {}  # per phase, over its pairs
    overhead: LoopRatio | None = None  # the process's paired ratio (stats.paired)
    cpu_pressure: CpuPressure | None = None  # PSI over the timed pairs: median, max
    allreduce_per_window: float | None = None
    collectives_per_window: Collectives | None = None  # figures.collectives_figure
    framework: Framework | None = None  # a framework's path: its version, what is off
    # which loops a loop's samples pair (figures.grad_sync_ratio, setting_ratio); their ratio:
    # summaries.loop_ratio
    grad_sync_vs_every: LoopRatio | None = None
    settings_vs: LoopRatio | None = None
    memory: Memory | None = field(default_factory=Memory)  # the memory pass and growth
    grad_check: GradCheck | None = None  # engine.gradients.check_windows
    accumulation_error: ErrorFigures | None = None  # engine.gradients.errors
    total_error: ErrorFigures | None = None
    process: ProcessFigures | None = None  # psutil over the timed pairs (engine.process)
    build_order: list[str] | None = None  # a rotated process's replica build order
    compile_s: float | None = None
    cost_model: CostModel | None = None  # figures.cost_figures; judged: summaries.cost_model
    profile: Profile | None = None  # engine.profiling: the profiled pair
    wall_s: dict[str, float | None] | None = None  # the process's seconds per step
    env: dict[str, Any] | None = {}  # engine.envinfo, git, process start
    placement: Placement | None = None  # where the process ran (envinfo.placement)

    def settle(self) -> list[str]:
        """A row read back made whole: an identity setting the file lacks is the value rows ran
        before it existed (``ADDED_LATER``) or None, an object written null is empty. The
        identity settings it lacked (an ok row must have every one)."""
        missing = [name for name in RowIdentity.__struct_fields__ if getattr(self, name) is UNSET]
        for name in missing:
            setattr(self, name, ADDED_LATER.get(name))
        for name, empty in (("phases", dict), ("samples", dict), ("env", dict), ("memory", Memory)):
            if getattr(self, name) is None:
                setattr(self, name, empty())
        return [name for name in missing if name not in ADDED_LATER]

    @classmethod
    def from_json(cls, data: Any, what: str = "a row") -> Row:
        """A row from its JSON object (settled); a key that is not a field, of the row or of a
        part, or a value of the wrong type, is a RecordError naming its path."""
        row = convert(cls, data, what)
        row.settle()
        return row

    def to_json(self) -> dict[str, Any]:
        """The row's JSON object with the engine's keys: a field the engine was never given
        (``row_parts.made``) has none."""
        return msgspec.to_builtins(self, enc_hook=builtin)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


ROW = msgspec.json.Decoder(Row)  # a results.jsonl line, typed (``rows.read``)


# -- a case pooled over its processes -------------------------------------------------------------
class Entry(EntryIdentity, kw_only=True):
    """One case pooled over its processes (``rows.pooled``): a strategy with its options at
    K and N, with the sweep's settings and one value of each swept loop setting (``settings.
    EntryIdentity``: grad_sync, precision, ...; what its rows say); its ok rows (one per
    process) and its failed ones."""

    strategy: str  # the report's name of the case: ``name`` or ``name:k=v`` (rows.label)
    name: str  # the registered strategy
    options: str  # its options, ``k=v:k2=v2``, or ""
    k: int  # accumulation steps K (a row's ``accumulate``)
    n: int  # unrelated live tensors N (a row's ``live_tensors``)
    rows: list[Row] = []  # ok rows, one per process
    failed: list[Row] = []  # rows of failed processes
    samples: dict[str, list[float]] = {}  # per phase, every process's
    phases: dict[str, Summary] = {}  # per phase, every process's
    overhead: Paired = Paired()  # the paired ratio, pooled

    @property
    def rounds(self) -> int:
        """Processes that finished (the control's extra ones included)."""
        return len(self.rows)


# -- a case's noise -------------------------------------------------------------------------------
class CaseNoise(Struct, frozen=True):
    """Whether a case's process ran on a busy machine, and by which signal
    (``noise.case_noise``): ``psi``, ``involuntary_switches`` or None (no signal)."""

    signal: str | None = None
    value: float | None = None
    threshold: float | None = None
    noisy: bool = False
