"""The typed records between the report's layers, and the one reader and writer of each file.

    results.jsonl --rows.read--> Row --rows.pooled--> Entry (a case over its processes)
        --verdicts--> GroupNoise, Paired, Comparison, Growth --> VerdictFile (verdicts.json)
        --compare---> RunComparison --> CompareFile (compare.json)

A field's meaning is written where the field is defined, here. A record's attribute that does
not exist is an AttributeError at once (slots), never a silent ``None`` from ``.get``. The JSON
files keep their keys: each record's ``to_json`` writes them and ``from_json`` reads them
(``gate`` only checks a file's shape first, for its one-line errors). One name per thing in the
records: K and N are ``k`` and ``n`` everywhere here, though rows say ``accumulate`` and
``live_tensors`` (``rows.pooled`` maps them).

This module imports only the standard library; the rules that fill the records are in
``reports.verdicts`` (words), ``reports.leaks`` (growth) and ``reports.rows`` (reading and
pooling rows).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

VERDICTS_SCHEMA_VERSION = 1  # of verdicts.json and compare.json (rows: rows.SCHEMA_VERSION)
VERDICTS = "verdicts.json"
COMPARE = "compare.json"
WORDS = ("lower", "higher", "same", "unclear")
FLIP = {"lower": "higher", "higher": "lower", "same": "same", "unclear": "unclear"}


class RecordError(ValueError):
    """A JSON object that is not the record it should be: one line naming the field."""


def _fields(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _build(cls, data: Any, what: str, required: tuple[str, ...] = ()):
    """``cls`` from a JSON object whose keys are its fields; an unknown key, a missing field
    (one without a default, or one of ``required``: a field the file always holds) or a
    non-object is a RecordError."""
    if not isinstance(data, dict):
        raise RecordError(f"{what} is not an object ({json.dumps(data)[:60]})")
    names = set(_fields(cls))
    unknown = [key for key in data if key not in names]
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    missing = [key for key in required if key not in data]
    if missing:
        raise RecordError(f"{what} has no field {missing[0]!r}")
    try:
        return cls(**data)
    except TypeError as err:  # a required field is missing
        raise RecordError(f"{what}: {err}") from None


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
        names = _fields(cls)
        return cls(**{k: v for k, v in result.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        if self.estimate is None:  # no pairs
            keys: tuple[str, ...] = ("ratio", "ci_low", "ci_high", "pairs", "processes")
        else:
            keys = _fields(Paired)
        return {key: getattr(self, key) for key in keys}


# -- the run: run.json -----------------------------------------------------------------------------
RUN = "run.json"


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

    @classmethod
    def read(cls, directory: str | Path) -> RunFile | None:
        """DIR's run.json, or None when there is none. Not JSON or not an object is an
        ``UnreadableFile``; a part of the wrong type, or a key it does not know, a RecordError
        naming the file and the field."""
        path = Path(directory) / RUN
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UnreadableFile(f"{str(path)!r} is not readable JSON ({err})") from None
        if not isinstance(data, dict):
            raise UnreadableFile(f"{str(path)!r} is not a JSON object ({json.dumps(data)[:60]})")
        for key in ("sweep", "env", "case_settings"):
            if data.get(key) is None:
                data.pop(key, None)
            elif not isinstance(data[key], dict):
                raise RecordError(f"{path}: field {key!r} is not an object")
        min_effect = data.get("sweep", {}).get("min_effect")
        if min_effect is not None and (
            isinstance(min_effect, bool) or not isinstance(min_effect, int | float)
        ):
            raise RecordError(
                f"{path}: field 'sweep.min_effect' is {json.dumps(min_effect)}; valid: a fraction"
            )
        return _build(cls, data, str(path))

    def to_json(self) -> dict[str, Any]:
        """The JSON object run.json holds (the sweep writes it whole)."""
        return {name: getattr(self, name) for name in _fields(RunFile)}

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
class Row:
    """One process of one case, as the engine wrote it (``benches.engine.figures.row_for``): a
    line of results.jsonl, read by ``rows.read`` and nowhere else. The JSON keys are these
    fields; a key that is not one of them is refused there, naming it. Figures a failed process
    never measured are null. The objects inside a row (``samples``, ``memory``, ...) keep the
    keys the engine wrote; each field's comment says where they are defined."""

    # the case's identity (rows.CASE_KEY, the engine's CaseSpec.identity); ``read`` requires
    # every one of an ok row
    strategy: str | None = None
    options: str = ""
    accumulate: int | None = None  # K: micro-batches per window
    live_tensors: int | None = None  # N: unrelated live tensors in the process
    grad_sync: str | None = None
    precision: str | None = None
    workload: str | None = None
    preset: str | None = None
    device: str | None = None
    world_size: int | None = None
    parallel: str | None = None
    mesh: str | None = None
    repeat: int | None = None
    warmup: int | None = None
    threads: int | None = None
    seed: int | None = None
    optimizer: str | None = None
    clip_norm: float | None = None
    compile: bool | None = None
    compare_settings: str | None = None
    pin: bool | None = None
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
    mfu: dict[str, Any] | None = None  # value, peak_flops, measure
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)  # stats.summarize per phase
    samples: dict[str, list[float]] = field(default_factory=dict)  # per phase, one per pair
    overhead: dict[str, Any] | None = None  # the process's paired ratio (stats.paired)
    cpu_pressure: dict[str, Any] | None = None  # PSI over the timed pairs: median, max
    allreduce_per_window: float | None = None
    collectives_per_window: dict[str, Any] | None = None  # figures.collectives_figure
    grad_sync_vs_every: dict[str, Any] | None = None  # figures.grad_sync_ratio
    settings_vs: dict[str, Any] | None = None  # figures.setting_ratio
    memory: dict[str, Any] = field(default_factory=dict)  # engine.case.memory_figures
    grad_check: dict[str, Any] | None = None  # engine.gradients.check
    accumulation_error: dict[str, Any] | None = None  # engine.gradients.errors
    total_error: dict[str, Any] | None = None
    process: dict[str, Any] | None = None  # psutil over the timed pairs (engine.process)
    build_order: list[str] | None = None  # a rotated process's replica build order
    compile_s: float | None = None
    cost_model: dict[str, Any] | None = None  # figures.cost_figures
    profile: dict[str, Any] | None = None  # engine.profiling: the profiled pair
    wall_s: dict[str, float] | None = None  # the process's seconds per step
    env: dict[str, Any] = field(default_factory=dict)  # engine.envinfo, git, process start

    @classmethod
    def from_json(cls, data: Any, what: str = "a row") -> Row:
        return _build(cls, data, what)

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _fields(Row)}

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# -- a case pooled over its processes -------------------------------------------------------------
@dataclass(slots=True)
class Entry:
    """One case pooled over its processes (``rows.pooled``): a strategy with its options at
    K and N, with one grad_sync flavour, precision and the sweep's settings; its ok rows (one
    per process) and its failed ones."""

    strategy: str  # the report's name of the case: ``name`` or ``name:k=v`` (rows.label)
    name: str  # the registered strategy
    options: str  # its options, ``k=v:k2=v2``, or ""
    k: int  # accumulation steps K (a row's ``accumulate``)
    n: int  # unrelated live tensors N (a row's ``live_tensors``)
    grad_sync: str
    precision: str
    # the sweep's settings (rows.SWEEP_IDENTITY, the engine's CaseSpec.identity): no default
    # here, an entry has what its rows say
    workload: str
    preset: str
    device: str
    world_size: int
    parallel: str
    mesh: str
    repeat: int
    warmup: int
    threads: int
    seed: int
    optimizer: str
    clip_norm: float | None
    compile: bool
    compare_settings: str
    pin: bool
    rows: list[Row] = field(default_factory=list)  # ok rows, one per process
    failed: list[Row] = field(default_factory=list)  # rows of failed processes
    samples: dict[str, list[float]] = field(default_factory=dict)  # per phase, every process's
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)  # stats.summarize per phase
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


# -- comparisons ----------------------------------------------------------------------------------
# a time comparison's test; ``paired`` where its processes measured both sides (engine.rotation)
TEST = ("log", "se", "df", "p", "ci90_low", "ci90_high", "processes", "paired")
HEAD = ("a", "b", "k", "n", "case", "metric", "ratio", "ci_low", "ci_high", "significant")
HEAD += ("verdict", "confidence", "method")


@dataclass(slots=True)
class Comparison:
    """a against b on one metric: the ratio a / b, its interval and its verdict word.

    Strategy against strategy in one group of a sweep (verdicts.json's ``comparisons``); the
    subclasses below are a case's loop against its other loop, and run B against run A. A time
    comparison (metric ``window``) is decided in two steps: its test (``stats.contrast``) when
    it is made, its word once the sweep's p-values are adjusted together
    (``verdicts.decide_time`` sets ``q``, ``significant`` and ``verdict``); a memory comparison
    is exact and decided when made."""

    a: str  # the strategy (or loop, or run) on top of the ratio
    b: str
    k: int  # accumulation steps K
    n: int  # unrelated live tensors N
    case: dict[str, Any]  # the swept settings both sides share (verdicts.case_fields)
    metric: str  # window, peak_memory or held_memory
    ratio: float | None = None  # a / b; None when a side has no figure
    ci_low: float | None = None  # the 95% interval (bounds where confidence is None)
    ci_high: float | None = None
    significant: bool = False  # time: q < alpha over the sweep; memory: the figures differ
    verdict: str = "unclear"  # lower, higher, same or unclear (records.WORDS)
    confidence: float | None = None
    method: str | None = None  # how the interval (or the exact figure) was made
    # a time comparison's test: the log estimate, its standard error and df, p (t-test of
    # ratio 1), the 90% interval (same: two one-sided tests) and each side's processes
    log: float | None = None
    se: float | None = None
    df: float | None = None
    p: float | None = None
    ci90_low: float | None = None
    ci90_high: float | None = None
    processes: list[int] | None = None
    # True: the two sides' figures differenced process by process, in the processes that
    # measured both (stats.paired_contrast); None: an unpaired contrast
    paired: bool | None = None
    noisy: bool = False  # a side ran under CPU pressure (verdicts.case_noise)
    q: float | None = None  # time: p adjusted over the sweep (Benjamini-Hochberg)

    @property
    def timed(self) -> bool:
        return self.metric == "window"

    def measured(self, result: dict[str, Any]) -> Self:
        """Take a measurement's figures (``stats.contrast``, ``stats.widened``,
        ``verdicts.decide_exact``): a figure it does not give keeps its value here."""
        for key, value in result.items():
            setattr(self, key, value)
        return self

    def inverted(self) -> Self:
        """b against a: the ratio and its interval inverted, the word mirrored."""

        def inv(x):
            return 1 / x if x else None

        return dataclasses.replace(
            self,
            a=self.b,
            b=self.a,
            ratio=inv(self.ratio),
            ci_low=inv(self.ci_high),
            ci_high=inv(self.ci_low),
            verdict=FLIP[self.verdict],
        )

    def test(self) -> dict[str, Any]:
        """A time comparison's test as the files hold it (``se``, ``df`` and the 90% interval
        only where an interval was made); nothing for a memory comparison."""
        if not self.timed:
            return {}
        return {
            key: getattr(self, key)
            for key in TEST
            if key in ("log", "p", "processes") or getattr(self, key) is not None
        }

    def _json(self, order: tuple[str, ...]) -> dict[str, Any]:
        """The fields in ``order`` (``test``: the test's keys); ``q`` only for time."""
        out: dict[str, Any] = {}
        for key in order:
            if key == "test":
                out.update(self.test())
            elif key != "q" or self.timed:
                out[key] = getattr(self, key)
        return out

    def to_json(self) -> dict[str, Any]:
        """verdicts.json's strategy comparison: a time comparison has its test and ``q``."""
        return self._json((*HEAD, "test", "noisy", "q"))

    @classmethod
    def from_json(cls, data: Any, what: str = "a comparison") -> Self:
        """Every key ``to_json`` always writes must be there (a verdict is never defaulted)."""
        return _build(cls, data, what, (*HEAD, "noisy", *cls.EXTRA))

    EXTRA: ClassVar[tuple[str, ...]] = ()  # the subclass's keys, always written


@dataclass(slots=True)
class LoopComparison(Comparison):
    """A case's loop against another loop of the same strategy, paired in each of its
    processes: ``grad_sync`` (a = its flavour, b = every) or ``settings`` (a = its setting,
    b = the ``--compare-settings`` one); verdicts.json's ``grad_sync`` and ``settings``."""

    strategy: str = ""  # the case's strategy label
    pairs: int = 0  # paired windows of the two loops over the case's processes
    EXTRA: ClassVar[tuple[str, ...]] = ("strategy", "pairs")

    def to_json(self) -> dict[str, Any]:
        order = ("strategy", "k", "n", "a", "b", "case", "metric", "ratio", "ci_low", "ci_high")
        order += ("confidence", "test", "method", "pairs", "verdict", "noisy", "q", "significant")
        return self._json(order)


@dataclass(slots=True)
class RunComparison(Comparison):
    """Run B's case against run A's same case (compare.json): a = ``B:strategy``."""

    strategy: str = ""  # the case's strategy (a precision other than fp32: ``name @bf16``)
    resolution: float | None = None  # the case's group's resolution (verdicts.GroupNoise)
    EXTRA: ClassVar[tuple[str, ...]] = ("strategy", "resolution")

    def to_json(self) -> dict[str, Any]:
        return self._json(("strategy", *HEAD, "test", "noisy", "resolution", "q"))


# -- a group's noise, a case's overhead, a case's growth ------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupNoise:
    """The variance between processes of a group of cases that run the same loop (K, N and
    the settings in ``case``; verdicts.group_key), and what it lets the sweep tell apart."""

    k: int
    n: int
    case: dict[str, Any]
    processes: int  # the group's processes, over its strategies
    strategies: int
    processes_per_strategy: float  # the median
    sd: float | None  # between processes, as a fraction of the ratio
    df: int  # of the variance (0: none measured, nothing borrowed)
    pooled_from: list[list[int]]  # [K, N] of the groups the variance was borrowed from
    measured: bool  # df > 0
    resolution: float | None  # the smallest difference the sweep could call (stats.resolution)
    memory: dict[str, float]  # per memory metric: the largest spread between identical loops
    # where the resolution came from when not from sd: "N paired comparisons" (their median
    # half-width, verdicts.paired_resolution)
    resolution_from: str | None = None
    variance: float | None = None  # of one process's log figure (not in the file: sd holds it)

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _fields(GroupNoise) if key != "variance"}

    @classmethod
    def from_json(cls, data: Any, what: str = "a noise_floor entry") -> GroupNoise:
        noise = _build(cls, data, what)
        variance = math.log1p(noise.sd) ** 2 if noise.sd is not None else None
        return dataclasses.replace(noise, variance=variance)


@dataclass(frozen=True, slots=True)
class CaseOverhead:
    """A case's paired ratio in verdicts.json's ``overheads``."""

    strategy: str
    k: int
    n: int
    case: dict[str, Any]
    paired: Paired

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "k": self.k,
            "n": self.n,
            "case": self.case,
            **self.paired.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, what: str = "an overheads entry") -> CaseOverhead:
        head = ("strategy", "k", "n", "case")
        if not isinstance(data, dict) or not all(key in data for key in head):
            raise RecordError(f"{what} has no {', '.join(head)}")
        paired = _build(Paired, {k: v for k, v in data.items() if k not in head}, what)
        return cls(**{key: data[key] for key in head}, paired=paired)


GROWTH = (  # a measured growth verdict's figures, bytes per window (reports.leaks)
    "growth_bytes_per_window",
    "plain_growth_bytes_per_window",
    "strategy_growth_bytes_per_window",
    "excess_bytes_per_window",
    "windows",
    "plain_windows",
)


@dataclass(frozen=True, slots=True)
class Growth:
    """A case's memory growth per window and its word (``reports.leaks``): ``leaks``,
    ``steady``, or ``unmeasured`` (then no figure)."""

    strategy: str
    k: int
    n: int
    case: dict[str, Any]  # grad_sync and precision
    processes: int  # processes with a measured growth
    measure: str | None  # what was read: malloc_in_use, cuda_allocated or rss
    verdict: str
    growth_bytes_per_window: float | None = None  # a timed pair's growth, median
    plain_growth_bytes_per_window: float | None = None  # the plain loop's windows alone
    strategy_growth_bytes_per_window: float | None = None  # a pair less a plain window
    excess_bytes_per_window: float | None = None  # the strategy's beyond the plain loop's
    windows: int | None = None  # the fewest timed pairs a process measured
    plain_windows: int | None = None

    @property
    def leaks(self) -> bool:
        return self.verdict == "leaks"

    def to_json(self) -> dict[str, Any]:
        keys = _fields(Growth)
        if self.verdict == "unmeasured":
            keys = tuple(key for key in keys if key not in GROWTH)
        return {key: getattr(self, key) for key in keys}

    @classmethod
    def from_json(cls, data: Any, what: str = "a growth verdict") -> Growth:
        return _build(cls, data, what)


# -- the files ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ErrorControl:
    """How the error rate is controlled over a sweep's time comparisons."""

    method: str
    alpha: float
    looks: int  # how often an adaptive sweep looked at its data
    alpha_per_look: float
    comparisons: int  # time comparisons in the family

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class VerdictFile:
    """verdicts.json: every verdict of one sweep (the HTML shows what it says)."""

    min_effect: float  # the smallest difference that matters (--min-effect)
    noise_floor: list[GroupNoise]  # per group
    noise_floor_method: str
    noisy_by: list[str]  # the signals that judged cases noisy: psi, involuntary_switches, none
    rule: str  # the verdict rule, in words
    error_control: ErrorControl
    overheads: list[CaseOverhead]  # each case's paired ratio to the plain loop
    comparisons: list[Comparison]  # strategy against strategy, every group and metric
    grad_sync: list[LoopComparison]  # each case's flavour against every (ranks)
    settings: list[LoopComparison]  # each case's setting against --compare-settings'
    memory_growth: list[Growth]  # every case's
    leak_rule: str
    schema_version: int = VERDICTS_SCHEMA_VERSION

    @property
    def leaks(self) -> list[Growth]:
        return [g for g in self.memory_growth if g.leaks]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "min_effect": self.min_effect,
            "noise_floor": [g.to_json() for g in self.noise_floor],
            "noise_floor_method": self.noise_floor_method,
            "noisy_by": self.noisy_by,
            "rule": self.rule,
            "error_control": self.error_control.to_json(),
            "overheads": [o.to_json() for o in self.overheads],
            "comparisons": [c.to_json() for c in self.comparisons],
            "grad_sync": [c.to_json() for c in self.grad_sync],
            "settings": [c.to_json() for c in self.settings],
            "memory_growth": [g.to_json() for g in self.memory_growth],
            "leaks": [g.to_json() for g in self.leaks],
            "leak_rule": self.leak_rule,
        }

    @classmethod
    def from_json(cls, data: Any) -> VerdictFile:
        if not isinstance(data, dict):
            raise RecordError("verdicts.json is not an object")
        lists = {
            "noise_floor": GroupNoise,
            "overheads": CaseOverhead,
            "comparisons": Comparison,
            "grad_sync": LoopComparison,
            "settings": LoopComparison,
            "memory_growth": Growth,
        }
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in lists:
                values[key] = [
                    lists[key].from_json(x, f"{key}[{i}]") for i, x in enumerate(_list(value, key))
                ]
            elif key == "error_control":
                values[key] = _build(ErrorControl, value, key)
            elif key != "leaks":  # derived from memory_growth
                values[key] = value
        return _build(cls, values, VERDICTS)

    def write(self, directory: str | Path, name: str = VERDICTS) -> Path:
        return write_json(Path(directory) / name, self.to_json())


def _list(value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise RecordError(f"{key!r} is not a list")
    return value


@dataclass(frozen=True, slots=True)
class RunRef:
    """One run of a comparison of two runs: where it is, its id, its commit."""

    directory: str
    run_id: str
    commit: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Resolution:
    """The resolution at K, N (the groups' there)."""

    k: int
    n: int
    resolution: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class BetweenRuns:
    """The variance of a case's figure between two runs (``stats.between_runs``)."""

    variance: float | None
    sd: float | None
    df: int
    cases: int  # the time comparisons it was measured from
    rule: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class CompareFile:
    """compare.json: run B's cases against run A's (the compare page shows what it says)."""

    a: RunRef
    b: RunRef
    min_effect: float
    resolution: list[Resolution]
    rule: str
    between_runs: BetweenRuns
    comparisons: list[RunComparison]
    leaks: list[Growth]  # run B's cases that keep memory window after window
    leak_rule: str
    schema_version: int = VERDICTS_SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "min_effect": self.min_effect,
            "resolution": [r.to_json() for r in self.resolution],
            "rule": self.rule,
            "between_runs": self.between_runs.to_json(),
            "comparisons": [c.to_json() for c in self.comparisons],
            "leaks": [g.to_json() for g in self.leaks],
            "leak_rule": self.leak_rule,
        }

    @classmethod
    def from_json(cls, data: Any) -> CompareFile:
        if not isinstance(data, dict):
            raise RecordError("compare.json is not an object")
        parts = {
            "a": lambda v: _build(RunRef, v, "a"),
            "b": lambda v: _build(RunRef, v, "b"),
            "resolution": lambda v: [
                _build(Resolution, x, f"resolution[{i}]") for i, x in enumerate(_list(v, "r"))
            ],
            "between_runs": lambda v: _build(BetweenRuns, v, "between_runs"),
            "comparisons": lambda v: [
                RunComparison.from_json(x, f"comparisons[{i}]")
                for i, x in enumerate(_list(v, "comparisons"))
            ],
            "leaks": lambda v: [
                Growth.from_json(x, f"leaks[{i}]") for i, x in enumerate(_list(v, "leaks"))
            ],
        }
        values = {key: parts[key](v) if key in parts else v for key, v in data.items()}
        return _build(cls, values, "compare.json")

    def write(self, directory: str | Path, name: str = COMPARE) -> Path:
        return write_json(Path(directory) / name, self.to_json())
