"""The typed records of what the report judged, and the one reader and writer of each file.

    Entry (reports.schema.records) --verdicts--> GroupNoise, Comparison, CaseOverhead, Growth
        --> VerdictFile (verdicts.json)
    two runs' entries --compare--> RunComparison --> CompareFile (compare.json)

A field's meaning is written where the field is defined, here; an attribute that does not exist
is an AttributeError at once. The records are msgspec Structs: each file's ``from_json`` reads it
typed (a value of the wrong type, an unknown or missing field is a one-line ``RecordError``
naming its path; ``gate`` only checks a file's shape first, for its one-line errors) and its
``to_json``/``write`` writes it. K and N are ``k`` and ``n``.

This module imports only the standard library, msgspec and ``reports.schema.records``; the
rules that fill the records are in ``reports.judge.verdicts`` (words), ``reports.judge.leaks``
(growth) and ``reports.regressions.compare``.
"""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any, ClassVar, Self

from msgspec import Struct, field, structs, to_builtins

from reports.schema.records import Paired, RecordError, convert, write_json

VERDICTS_SCHEMA_VERSION = 1  # of verdicts.json and compare.json (rows: rows.SCHEMA_VERSION)


def held_to_version(data: dict[str, Any], what: str) -> None:
    """A verdicts.json or compare.json of another ``schema_version`` (or one that is not an
    integer) is a RecordError naming the version found, as the file writes it, and the one
    this version reads; a file without one is of version 1, the first."""
    if not isinstance(data, dict):
        raise RecordError(f"{what} is not an object")
    found = data.get("schema_version", 1)
    if type(found) is not int or found != VERDICTS_SCHEMA_VERSION:
        shown = json.dumps(found)
        raise RecordError(
            f"{what} has schema_version {shown}; this version reads {VERDICTS_SCHEMA_VERSION} "
            "(make it again with this version: python -m reports build DIR, or compare)"
        )


VERDICTS = "verdicts.json"
COMPARE = "compare.json"


class Verdict(enum.StrEnum):
    """A comparison's word: the same string in the JSON files and on the pages."""

    LOWER = "lower"
    HIGHER = "higher"
    SAME = "same"
    UNCLEAR = "unclear"

    @property
    def mirrored(self) -> Verdict:
        """The word of b against a."""
        return {Verdict.LOWER: Verdict.HIGHER, Verdict.HIGHER: Verdict.LOWER}.get(self, self)


WORDS = tuple(Verdict)  # lower, higher, same, unclear


# -- comparisons ----------------------------------------------------------------------------------
# a time comparison's test; ``paired`` where its processes measured both sides (engine.rotation);
# ``machines`` where its sides ran on more than one
TEST = ("log", "se", "df", "p", "p_same", "ci90_low", "ci90_high", "processes", "paired")
TEST += ("machines",)
HEAD = ("a", "b", "k", "n", "case", "metric", "ratio", "ci_low", "ci_high", "significant")
HEAD += ("verdict", "confidence", "method")


class Comparison(Struct, forbid_unknown_fields=True):
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
    case: dict[str, Any]  # the swept settings both sides share (noise.case_fields)
    metric: str  # window, peak_memory or held_memory
    ratio: float | None = None  # a / b; None when a side has no figure
    ci_low: float | None = None  # the 95% interval (bounds where confidence is None)
    ci_high: float | None = None
    significant: bool = False  # time: q < alpha over the sweep; memory: the figures differ
    verdict: Verdict = Verdict.UNCLEAR
    confidence: float | None = None
    method: str | None = None  # how the interval (or the exact figure) was made
    # a time comparison's test: the log estimate, its standard error and df, p (t-test of
    # ratio 1: reported, not judged), the 90% interval (same: two one-sided tests) and each
    # side's processes
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
    # the machines its two sides' processes ran on (machines.machine_of), where more than one
    # (None: one); unpaired, its interval carries the variance between machines too
    machines: int | None = None
    noisy: bool = False  # a side ran under CPU pressure (noise.case_noise)
    # time: the p of the claim that decided its word (p for lower/higher decided against ratio
    # 1, else the margin's claim's: p_beyond or p_same) adjusted over the sweep
    # (Benjamini-Hochberg, each family: verdicts.decide_time)
    q: float | None = None
    # time: the p of two one-sided tests that the ratio lies inside 1 +- min_effect
    # (claims.equivalence_p); absent in files older than that rule
    p_same: float | None = None
    # time: the p of the one-sided test that the ratio lies beyond 1 +- min_effect on its
    # estimate's side (claims.beyond_p); absent in files older than that rule
    p_beyond: float | None = None
    # time, decided lower/higher: whether its 95% interval also clears the margin ("beyond the
    # 2% margin"); absent in files older than the rule that decides direction against ratio 1
    beyond: bool | None = None
    # time, unclear: why, in a few words ("too few data", "on the margin"; verdicts.unclear_why)
    why: str | None = None

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

        return structs.replace(
            self,
            a=self.b,
            b=self.a,
            ratio=inv(self.ratio),
            ci_low=inv(self.ci_high),
            ci_high=inv(self.ci_low),
            verdict=self.verdict.mirrored,
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
        for key in ("beyond", "why"):  # only where the rule said something
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def to_json(self) -> dict[str, Any]:
        """verdicts.json's strategy comparison: a time comparison has its test and ``q``."""
        return self._json((*HEAD, "test", "noisy", "q"))

    @classmethod
    def from_json(cls, data: Any, what: str = "a comparison") -> Self:
        """Every key ``to_json`` always writes must be there (a verdict is never defaulted)."""
        made = convert(cls, data, what)
        missing = [key for key in (*HEAD, "noisy", *cls.EXTRA) if key not in data]
        if missing:
            raise RecordError(f"{what} has no field {missing[0]!r}")
        return made

    EXTRA: ClassVar[tuple[str, ...]] = ()  # the subclass's keys, always written


class LoopComparison(Comparison):
    """A case's loop against another loop of the same strategy, paired in each of its
    processes: ``grad_sync`` (a = its flavour, b = every) or ``settings`` (a = its setting,
    b = the ``--compare-settings`` one); verdicts.json's ``grad_sync`` and ``settings``."""

    strategy: str = ""  # the case's strategy label
    pairs: int = 0  # paired windows of the two loops over the case's processes
    EXTRA: ClassVar[tuple[str, ...]] = ("strategy", "pairs")

    def to_json(self) -> dict[str, Any]:
        order = ("strategy", "k", "n", "a", "b", "case", "metric", "ratio", "ci_low", "ci_high")
        order += ("confidence", "test", "method", "pairs", "verdict", "noisy", "q")
        order += ("significant",)
        return self._json(order)


class RunComparison(Comparison):
    """Run B's case against run A's same case (compare.json): a = ``B:strategy``."""

    strategy: str = ""  # the case's strategy (a precision other than fp32: ``name @bf16``)
    resolution: float | None = None  # the case's group's resolution (verdicts.GroupNoise)
    # a time comparison left without an interval (the variance between runs not measured):
    # why, in one sentence, and the 95% interval its two runs' processes give alone (without
    # the variance between runs), which the gate reads (regressions.gate.unjudged)
    unjudged: str | None = None
    processes_low: float | None = None
    processes_high: float | None = None
    EXTRA: ClassVar[tuple[str, ...]] = ("strategy", "resolution")

    def to_json(self) -> dict[str, Any]:
        out = self._json(("strategy", *HEAD, "test", "noisy", "resolution", "q"))
        if self.unjudged is not None:
            out.update(
                unjudged=self.unjudged,
                processes_low=self.processes_low,
                processes_high=self.processes_high,
            )
        return out


# -- a group's noise, a case's overhead, a case's growth ------------------------------------------
class GroupNoise(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The variance between processes of a group of cases that run the same loop (K, N and
    the settings in ``case``; noise.group_key), and what it lets the sweep tell apart."""

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
    # half-width, noise.paired_resolution)
    resolution_from: str | None = None
    variance: float | None = None  # of one process's log figure (not in the file: sd holds it)
    # sd is the larger of these two (stats.floored): the SD between processes as measured, and
    # what one process's own pairs show (Yuen's standard error of its trimmed mean, averaged
    # over the group's processes); absent in files older than the floor
    between_sd: float | None = None
    within_sd: float | None = None
    within: float | None = None  # log-scale variance (not in the file: within_sd holds it)
    # the variance between processes as measured, before any floor (not in the file:
    # between_sd holds it); a comparison floors each side at its own processes' pairs
    between: float | None = None
    # between machines (machines.between_machines), in the file only where the group's
    # processes ran on more than one machine (absent: one machine, as every older file)
    machines: int = 1  # the machines the group's processes ran on (machines.machine_of)
    machine_from: str | None = None  # the control strategy the spread was estimated from
    control_machines: int = 0  # machines with 2 or more of its processes
    # the SD of one machine's mean figure of the control between those machines, as a fraction
    # of the ratio (its processes' own noise over their count included: nothing subtracted)
    machine_sd: float | None = None
    machine_df: int = 0  # control_machines - 1; 0: not measured (fewer than 3 such machines)
    machine_measured: bool = False
    machine_variance: float | None = None  # log scale (not in the file: machine_sd holds it)

    HIDDEN: ClassVar[tuple[str, ...]] = ("variance", "machine_variance", "within", "between")
    MACHINE: ClassVar[tuple[str, ...]] = (
        "machines",
        "machine_from",
        "control_machines",
        "machine_sd",
        "machine_df",
        "machine_measured",
    )

    def to_json(self) -> dict[str, Any]:
        hidden = self.HIDDEN if self.machines > 1 else (*self.HIDDEN, *self.MACHINE)
        return {
            key: getattr(self, key) for key in GroupNoise.__struct_fields__ if key not in hidden
        }

    @classmethod
    def from_json(cls, data: Any, what: str = "a noise_floor entry") -> GroupNoise:
        noise = convert(cls, data, what)
        variance = math.log1p(noise.sd) ** 2 if noise.sd is not None else None
        machine = math.log1p(noise.machine_sd) ** 2 if noise.machine_sd is not None else None
        within = math.log1p(noise.within_sd) ** 2 if noise.within_sd is not None else None
        return structs.replace(noise, variance=variance, machine_variance=machine, within=within)


class CaseOverhead(Struct, frozen=True, forbid_unknown_fields=True):
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
        paired = {k: v for k, v in data.items() if k not in head}
        return convert(cls, {**{key: data[key] for key in head}, "paired": paired}, what)


GROWTH = (  # a measured growth verdict's figures, bytes per window (reports.judge.leaks)
    "growth_bytes_per_window",
    "plain_growth_bytes_per_window",
    "strategy_growth_bytes_per_window",
    "excess_bytes_per_window",
    "windows",
    "plain_windows",
)


class Growth(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A case's memory growth per window and its word (``reports.judge.leaks``): ``leaks``,
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
        keys = Growth.__struct_fields__
        if self.verdict == "unmeasured":
            keys = tuple(key for key in keys if key not in GROWTH)
        return {key: getattr(self, key) for key in keys}

    @classmethod
    def from_json(cls, data: Any, what: str = "a growth verdict") -> Growth:
        return convert(cls, data, what)


# -- the decision per group ----------------------------------------------------------------------
class Decision(Struct, kw_only=True, forbid_unknown_fields=True):
    """The strategy to use in one group of a sweep (``reports.judge.decision``, by its RULE):
    verdicts.json's ``decisions``, the page's answer and the terminal's."""

    k: int
    n: int
    case: dict[str, Any]  # the group's loop settings (noise.case_fields)
    use: str | None  # None: no candidate finished cleanly
    fastest: str | None = None  # lowest paired overhead (point estimate)
    ties: list[str] = field(default_factory=list)  # not decided slower than fastest
    slower: list[str] = field(default_factory=list)  # decided higher than another candidate
    left_out: list[str] = field(default_factory=list)  # leaking
    # candidates measured under CPU pressure (noise.noisy_case): stated, never left out
    under_pressure: list[str] = field(default_factory=list)
    by: str | None = None  # what chose among the ties: time, peak_memory, held_memory or order
    why: str = ""  # one sentence
    # the comparisons that could change the choice: unclear ones of the choice against the
    # fastest (more processes could put it out of the tie set), as "a/b: ratio (CI)" lines
    open: list[str] = field(default_factory=list)
    resolution: float | None = None  # the group's (GroupNoise.resolution)

    def to_json(self) -> dict[str, Any]:
        return to_builtins(self)

    @classmethod
    def from_json(cls, data: Any, what: str = "a decision") -> Decision:
        return convert(cls, data, what)


# -- the files ------------------------------------------------------------------------------------
class ErrorControl(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the error rate is controlled over a sweep's time comparisons."""

    method: str
    alpha: float
    looks: int  # how often an adaptive sweep could look at its data (at most)
    # the level these verdicts were held to: an interim look's share of alpha, or the final
    # look's, all that the looks taken before it left (claims.final_alpha)
    alpha_per_look: float
    comparisons: int  # time comparisons in the family
    looks_taken: int = 1  # the looks this judgement is the last of (older files: absent)
    spending: str = ""  # the alpha-spending rule (claims.SPENDING)

    def to_json(self) -> dict[str, Any]:
        return to_builtins(self)


class VerdictFile(Struct, kw_only=True, forbid_unknown_fields=True):
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
    # the answer per group (reports.judge.decision); an older file has none
    decisions: list[Decision] = field(default_factory=list)
    decision_rule: str = ""

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
            "decision_rule": self.decision_rule,
            "decisions": [d.to_json() for d in self.decisions],
        }

    @classmethod
    def from_json(cls, data: Any) -> VerdictFile:
        if not isinstance(data, dict):
            raise RecordError("verdicts.json is not an object")
        held_to_version(data, "verdicts.json")
        lists = {
            "noise_floor": GroupNoise,
            "overheads": CaseOverhead,
            "comparisons": Comparison,
            "grad_sync": LoopComparison,
            "settings": LoopComparison,
            "memory_growth": Growth,
            "decisions": Decision,
        }
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in lists:
                values[key] = [
                    lists[key].from_json(x, f"{key}[{i}]") for i, x in enumerate(_list(value, key))
                ]
            elif key != "leaks":  # derived from memory_growth
                values[key] = value
        return convert(cls, values, VERDICTS)

    def write(self, directory: str | Path, name: str = VERDICTS) -> Path:
        return write_json(Path(directory) / name, self.to_json())


def _list(value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise RecordError(f"field {key!r} is {str(value)[:60]}; valid: a list")
    return value


class RunRef(Struct, frozen=True, forbid_unknown_fields=True):
    """One run of a comparison of two runs: where it is, its id, its commit."""

    directory: str
    run_id: str
    commit: str

    def to_json(self) -> dict[str, Any]:
        return to_builtins(self)


class Resolution(Struct, frozen=True, forbid_unknown_fields=True):
    """The resolution at K, N (the groups' there)."""

    k: int
    n: int
    resolution: float | None

    def to_json(self) -> dict[str, Any]:
        return to_builtins(self)


class BetweenRuns(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The variance of a case's figure between two runs (``stats.between_runs``)."""

    variance: float | None
    sd: float | None
    df: int
    cases: int  # the time comparisons it was measured from
    rule: str
    needs: int = 2  # the cases it needs to be measured at all (stats.BETWEEN_RUNS_CASES)
    why: str | None = None  # where it was not measured: why, in one sentence

    def to_json(self) -> dict[str, Any]:
        return to_builtins(self)


class CompareFile(Struct, kw_only=True, forbid_unknown_fields=True):
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
        held_to_version(data, "compare.json")
        parts = {
            "resolution": lambda v: [
                convert(Resolution, x, f"resolution[{i}]")
                for i, x in enumerate(_list(v, "resolution"))
            ],
            "comparisons": lambda v: [
                RunComparison.from_json(x, f"comparisons[{i}]")
                for i, x in enumerate(_list(v, "comparisons"))
            ],
            "leaks": lambda v: [
                Growth.from_json(x, f"leaks[{i}]") for i, x in enumerate(_list(v, "leaks"))
            ],
        }
        values = {key: parts[key](v) if key in parts else v for key, v in data.items()}
        return convert(cls, values, "compare.json")

    def write(self, directory: str | Path, name: str = COMPARE) -> Path:
        return write_json(Path(directory) / name, self.to_json())
