"""The typed records of what a report page says: ``analysis.report`` returns a ``Page``, which
the HTML template (``build``), the charts and the sweep's terminal tables
(``benches.sweep.summary``) read by attribute.

    Entry, VerdictFile --tables--> CaseLine, FlavourLine --+
                       --answer--> Answer (Pick)           +--analysis--> Page --> build, summary
    CaseLine ------frameworks----> PathLine, PathPick -----|
                       --recipe--> SettingLine             |
    Row, VerdictFile --tables----> Where ------------------|
    Row, RunFile ------runinfo---> TheRun -----------------+

A field's meaning is written where it is defined, here. Figures are in seconds and bytes; the
template formats them. No file holds them (verdicts.json is ``schema.verdict_records``), so they
live with the page; they import the standard library, msgspec, the schema's records and
``judge.targets.Target``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import Struct, field, structs

from reports.judge.efficiency import Efficiency
from reports.judge.targets import Target
from reports.schema.records import Entry, Paired, Row, RunFile
from reports.schema.row_parts import (
    Collectives,
    ErrorFigures,
    Framework,
    GradCheck,
    Json,
    Summary,
    Timeline,
)
from reports.schema.verdict_records import (
    BetweenRuns,
    Comparison,
    Decision,
    Growth,
    RunComparison,
    VerdictFile,
)


def shallow(record: Any) -> dict[str, Any]:
    """A record's fields by name, not copied (the rows and comparisons inside it stay records)."""
    return structs.asdict(record)


# -- a line per case -----------------------------------------------------------------------------
class CaseMemory(Struct):
    """A case's memory figures, each its median over processes (``verdicts.memory_figure``:
    exact figures, which agree between processes)."""

    held_bytes: float | None = None
    peak_bytes: float | None = None
    plain_held_bytes: float | None = None
    plain_peak_bytes: float | None = None
    param_bytes: float | None = None
    peak_rss_bytes: float | None = None
    growth_bytes_per_window: float | None = None
    plain_growth_bytes_per_window: float | None = None
    growth_measure: str | None = None  # what the growth is of: malloc, CUDA allocated or RSS


class ProcessLine(Struct):
    """A case's process figures over its rounds (psutil, ``tables.process_line``)."""

    involuntary_per_s: float | None = None  # the busiest process's
    voluntary_per_s: float | None = None
    pinned: bool = False
    cores: list[list[int]] = field(default_factory=list)  # each rank's or process's cores
    noise_signals: list[str] = field(default_factory=list)  # psi, involuntary_switches, none


class CaseLine(Struct):
    """One case of the report's tables (``tables.case_table``): a strategy with its options at
    K and N, pooled over its processes. A case none of whose processes finished has only the
    first block (``ok`` False)."""

    strategy: str
    k: int
    n: int
    rounds: int  # processes that finished
    failed: int  # processes that failed
    ok: bool  # some process finished
    noisy: bool  # a process ran under CPU pressure (noise.noisy_case)
    trace: str | None = None  # its torch.profiler trace, relative to the run (--profile)
    trace_present: bool = False  # ... and whether that file is beside the report
    # what a finished case measured (tables.measured_line)
    phases: dict[str, Summary] = field(default_factory=dict)  # per phase, every process's
    overhead: Paired | None = None  # its window over the plain loop's, paired, pooled
    vs_native: dict[str, Comparison] | None = None  # per metric; None for native itself
    memory: CaseMemory | None = None
    leak: Growth | None = None
    cpu_pressure: float | None = None  # the largest median PSI of its processes
    process: ProcessLine | None = None
    allreduce_per_window: float | None = None
    grad_check: GradCheck | None = None  # the worst over its processes
    rows: list[Row] = field(default_factory=list)  # its ok rows, one per process (columns.py)


class FlavourLine(Struct):
    """Under DDP/FSDP2/HSDP, one case and grad_sync flavour (``tables.flavour_table``)."""

    strategy: str
    k: int
    n: int
    grad_sync: str
    overhead: Paired
    window: Summary
    vs_every: Comparison | None  # verdicts.json's grad_sync comparison (None: every itself)
    collectives: Collectives  # its first process's
    held_bytes: float | None
    peak_bytes: float | None


class SettingLine(Struct):
    """--compare-settings: one case's loop against the same strategy's loop with the other
    setting (``recipe.settings_table``), as verdicts.json's ``settings`` states it."""

    strategy: str
    precision: str
    grad_sync: str
    k: int
    n: int
    a: str  # SETTING=VALUE of the case's loop
    b: str  # ... and of the other
    setting: str
    a_value: str
    b_value: str
    comparison: Comparison
    compile_s: float | None  # the case's compile time, median over its processes


class CoreOverhead(Struct):
    """The core's overhead at one K and N (``tables.core_overheads``): native's paired ratio to
    the plain loop."""

    k: int
    n: int
    native: Summary  # native's window
    plain: Summary  # the plain loop's window, every process's
    overhead: Paired
    ok: bool  # within targets.OVERHEAD_MAX and OVERHEAD_CI_MAX


class Flamegraph(Struct):
    """A process's memray flamegraph (``tables.flamegraphs``)."""

    strategy: str
    k: int
    n: int
    round: int
    path: str  # relative to the run
    present: bool  # still beside the report
    peak_bytes: int | None


class TimelineLine(Struct):
    """One window's memory over time, a strategy's or the plain loop's (``tables.timelines``)."""

    label: str  # the strategy, or "plain loop"
    timeline: Timeline


class CostLine(Struct):
    """The cost model against what a case measured (``tables.cost_table``)."""

    strategy: str
    n: int
    counts: Json  # row_parts.CostModel's
    predicted: Json
    reset: Summary  # the measured reset phase
    paired: Summary  # the measured paired cost per window
    reset_ratio: float | None  # measured reset / predicted
    explained: bool | None
    flags: list[str]
    coefficients: Json


class SlopePoint(Struct, frozen=True):
    live: int  # N, the unrelated live tensors
    reset: Summary  # the reset phase there


class Slope(Struct):
    """How a strategy's reset grows with live tensors at one K (``answer.reset_slopes``)."""

    strategy: str
    points: list[SlopePoint]  # by N
    slope_s: float  # seconds per live tensor (least squares; nan with one point)
    per_10k_s: float | None  # per 10,000 live tensors


class ErrorLine(Struct):
    """A strategy's window gradient error at one precision and K (``recipe.error_table``)."""

    strategy: str
    precision: str
    k: int
    n: int
    accumulation: ErrorFigures  # against the float64 sum of its micro-batch gradients
    total: ErrorFigures  # against a float64 copy of the model
    tolerance: float | None  # of the reference that accepted each window (rows.accepted)
    check_max_rel: float | None
    check_by: list[str]  # which references accepted the windows
    check_ok: bool | None
    windows: int | None
    # what total is against (GradCheck.total_reference): "float64 model", or the fp32 model
    # that stood in where an operator has no float64 kernel; empty for rows before it
    total_reference: list[str] = field(default_factory=list)


class CheckSummary(Struct):
    """The gradient checks of one precision over every ok case (``recipe.check_summary``)."""

    precision: str
    cases: int
    passed: int
    worst: float  # the largest max relative difference
    tolerance_min: float
    tolerance_max: float


class StrategyOptions(Struct, frozen=True):
    strategy: str  # the case's label, ``name:k=v``
    name: str
    options: str


class CompileTime(Struct, frozen=True):
    strategy: str
    median_s: float  # over its processes
    processes: int


class MfuLine(Struct):
    """A case's model FLOPs utilisation, median over its processes (a GPU's)."""

    strategy: str
    precision: str
    k: int
    n: int
    value: float
    peak_flops: float | None
    measure: str | None


class LoopSetting(Struct, frozen=True):
    """A setting that changes the loop (``settings.LOOP``), as "What was run" lists it from its
    declaration (``recipe.loop_settings``): every value the rows ran, spelled as the command
    line does, and the one the tables show (a swept setting's main value)."""

    name: str
    label: str
    values: list[str]
    shown: str
    swept: bool


class Recipe(Struct):
    """The training loop every case ran with (``recipe.recipe``), each setting as the rows say
    it (the same in every row of one sweep; joined with commas where not)."""

    loop: list[LoopSetting]  # every loop setting but those below and grad_sync (ranks)
    compile: bool
    compare_settings: str  # "" without --compare-settings
    options: list[StrategyOptions] = field(default_factory=list)
    compile_s: list[CompileTime] = field(default_factory=list)
    mfu: list[MfuLine] = field(default_factory=list)


class WallStep(Struct, frozen=True):
    step: str  # a case's step (engine.case.Wall.STEPS, the sweep's own)
    seconds: float  # summed over the processes
    share: float | None  # of the total


class Wall(Struct):
    """Where the sweep's wall time went (``runinfo.wall_time``)."""

    total_s: float
    processes: int  # a process shared by rotated strategies counts once
    time_only: int  # of them, processes added for time alone
    steps: list[WallStep]  # largest first
    # the sweep's own clock (run.json's ``wall``, where the sweep recorded it): its seconds
    # before the report, and the timed share, timed-window seconds over them
    sweep_s: float | None = None
    timed_share: float | None = None
    # per group, the half-width reached against what the wall allowed (judge.efficiency)
    efficiency: list[Efficiency] = field(default_factory=list)


class CaseProfile(Struct):
    """One profiled case (``profile.case_profile``): its trace and notes from the row's
    ``profile``, and, where the profiler gave figures, the comparison with the plain loop."""

    strategy: str
    k: int
    n: int
    trace: str | None
    trace_present: bool
    trace_bytes: int | None
    trace_note: str | None
    ranks_note: str | None
    warning: str | None
    how_to_open: str | None
    activities: list[str]
    pairs: int | None
    # none where the profiler failed
    diff: dict[str, list[Json]] | None = None  # per phase: profile.phase_diff's operator lines
    phases: list[Json] | None = None  # the strategy's window: profile.where_it_went
    plain_phases: list[Json] | None = None  # the plain loop's
    window_s: dict[str, float] | None = None  # per loop
    launches: Json | None = None  # per loop and phase (CUDA), profile.launches


class Profiles(Struct):
    """Every profiled case, and those at the answer's K and N (``here``: every one if none)."""

    cases: list[CaseProfile] = field(default_factory=list)
    here: list[CaseProfile] = field(default_factory=list)


# -- where it ran ---------------------------------------------------------------------------------
class MachineLine(Struct):
    """One machine a verdict counts (``machines.machine_of``), with its processes
    (``tables.where_it_ran``)."""

    machine: str  # machines.machine_of's id: the GPU's UUID, the Ray node's id, the host, local
    name: str  # readable: host, short node id, GPU name and short UUID
    processes: int  # the sweep's processes that ran on it (a rotated one counts once)
    failed: int  # of them, processes none of whose rows finished
    # other sweep processes on its node during a process's timed pairs (machines.co_tenancy),
    # over its processes with the stamps; None where none has them
    co_tenancy_median: float | None = None
    co_tenancy_max: int | None = None
    # the same on its host, which several Ray nodes may share (machines.host_of)
    host_sharing_median: float | None = None
    host_sharing_max: int | None = None
    unstamped: int = 0  # its processes without their timed pairs' stamps


class MachineSpreadLine(Struct):
    """A group's spread between machines (verdicts.json's ``noise_floor``), in words where it
    was not measured."""

    k: int
    n: int
    case: dict[str, Any]
    machines: int  # the group's processes ran on
    control: str | None  # the strategy it is estimated from
    control_machines: int  # machines with 2 or more of the control's processes
    sd: float | None  # between machines, as a fraction (GroupNoise.machine_sd)
    df: int
    measured: bool
    note: str  # "" where measured; else why not, and what it means


class Where(Struct):
    """Where the sweep ran (``tables.where_it_ran``): shown where it ran on more than one
    machine, node or host."""

    machines: list[MachineLine]
    nodes: int  # Ray nodes, else hosts (machines.node_of)
    hosts: int
    groups: list[MachineSpreadLine]


# -- the answer -----------------------------------------------------------------------------------
class Pick(Struct):
    """The fastest or the leanest strategy at the answer's K and N, or its runner-up."""

    strategy: str
    overhead: Paired | None = None  # fastest: its paired ratio to the plain loop
    window: Summary | None = None  # fastest: its window
    cv: float | None = None  # fastest: its window's coefficient of variation
    peak_bytes: float | None = None  # leanest: its peak ...
    held_bytes: float | None = None  # ... and what it holds between windows
    method: str | None = None  # leanest: how the peak was measured
    runner_up: Pick | None = None  # the next one (not for a runner-up)
    lead: Comparison | None = None  # this one against the runner-up, from verdicts.json


class Answer(Struct):
    """The answer at one K and N (``answer.answer``): fastest and leanest with their verdicts
    against the runner-up, and one sentence of advice from the verdicts."""

    k: int
    n: int
    candidates: int  # strategies that could be the answer (not leaking, not decided slower)
    under_pressure: list[str]  # measured under CPU pressure: stated beside the answer
    excluded_leaking: list[Growth]
    resolution: float | None  # the smallest difference the sweep tells apart here
    between_process_sd: float | None
    min_effect: float
    advice: str = ""
    fastest: Pick | None = None
    leanest: Pick | None = None
    # what this sweep could not see, in plain sentences (answer.unseen): an axis left at one value
    unseen: list[str] = field(default_factory=list)
    # a committed sample's full sweep on this kind of case (answer.full_sweep): its resolution
    full_sweep: Reference | None = None


class PathLine(Struct):
    """A framework's path at the answer's K and N (``frameworks.path_lines``)."""

    strategy: str  # its label: ``accelerate:sync_each_batch=true``
    framework: Framework  # its package, version, what of it was turned off
    overhead: Paired | None
    noisy: bool
    best: str | None  # the fastest strategy there (lowest overhead, not noisy)
    vs_best: Comparison | None  # the path's window against the best strategy's
    allreduce_per_window: float | None
    held_bytes: float | None
    peak_bytes: float | None
    grad_check_ok: bool | None


class PathPick(Struct):
    """The cheapest path (``frameworks.cheapest``), and its verdict against the next one."""

    strategy: str
    overhead: Paired | None
    runner_up: str | None = None
    lead: Comparison | None = None


class Reference(Struct):
    """A committed sample's full sweep (reports/samples/NAME), for what a shorter sweep missed."""

    sample: str  # the sample's folder name under reports/samples/
    resolution: float  # what it told apart at the answer's K and N
    rows: int  # its rows (processes)


# -- the page -------------------------------------------------------------------------------------
class TheRun(Struct):
    """The run as a whole (``runinfo.the_run``): its settings and environment, its rows, where
    its time went, its failed and noisy processes, pytest-benchmark's figures."""

    directory: Path
    world_size: int
    workload: str | None
    has_sync: bool  # some row has the DDP sync phase
    run: RunFile
    sweep: dict[str, Any]  # run.json's sweep options
    env: dict[str, Any]  # run.json's environment, with the first row's over it
    first: Row  # the row the settings are read from (rows.first_row)
    rows: int
    ok_rows: int
    wall: Wall
    parallel: str
    failed: list[Row]
    noisy: list[str]  # case ids of noisy processes
    noisy_pressure: float  # the rules' thresholds
    noisy_switches: float
    noise_signals: list[str]
    pytest_benchmark: dict[str, Any] | None
    results: str  # the results file's name


class Page(TheRun):
    """Everything index.html shows (``analysis.report``), in the order it shows it, and
    verdicts.json's content."""

    ks: list[int] = field(default_factory=list)
    ns: list[int] = field(default_factory=list)
    strategies: list[str] = field(default_factory=list)
    default: tuple[int, int] | None = None  # the answer's K and N
    # the strategy to use per group (verdicts.json's decisions), the one every group chose
    # (None where they differ) and the loop settings that differ between groups
    decisions: list[Decision] = field(default_factory=list)
    decided: str | None = None
    decision_axes: list[str] = field(default_factory=list)
    verdicts: VerdictFile | None = None  # the main flavour's and precision's: the tables'
    verdicts_json: VerdictFile | None = None  # every flavour's and precision's: verdicts.json
    # --base: each strategy at the working tree against itself at the base build, by case:
    # {(strategy, K, N): {metric: Comparison}}, the base's commit, and what it lacked
    builds: list[dict[str, Any]] = field(default_factory=list)
    base: str = ""
    base_missing: list[str] = field(default_factory=list)
    # the value of each swept loop setting the tables show (settings.main_values)
    main: dict[str, Any] = field(default_factory=dict)
    grad_sync: str = "last"  # the flavour the tables show
    precision: str = "fp32"  # the precision the tables show
    precisions: list[str] = field(default_factory=list)
    recipe: Recipe | None = None
    errors: list[ErrorLine] = field(default_factory=list)
    grad_checks: list[CheckSummary] = field(default_factory=list)
    settings: list[SettingLine] = field(default_factory=list)
    flavours: list[FlavourLine] = field(default_factory=list)
    cases: list[CaseLine] = field(default_factory=list)
    overheads: list[CoreOverhead] = field(default_factory=list)
    overhead_limit: tuple[float, float] = (0.0, 0.0)  # targets.OVERHEAD_MAX, OVERHEAD_CI_MAX
    targets: list[Target] = field(default_factory=list)
    flamegraphs: list[Flamegraph] = field(default_factory=list)
    profiles: Profiles = field(default_factory=Profiles)
    # at the answer's K and N (analysis.at_the_answer)
    timelines: list[TimelineLine] = field(default_factory=list)
    costs: list[CostLine] = field(default_factory=list)
    answer: Answer | None = None
    slopes: list[Slope] = field(default_factory=list)
    default_cases: list[CaseLine] = field(default_factory=list)
    paths: list[PathLine] = field(default_factory=list)  # --frameworks: cheapest first
    cheapest_path: PathPick | None = None
    where: Where | None = None  # more than one machine, node or host: where it ran


# -- the compare page -----------------------------------------------------------------------------
CaseKey = tuple[str, int, int, str]  # strategy (with " @precision" when not fp32), K, N, grad_sync


class Side(Struct):
    """One of the two runs of a comparison (``compare.side``)."""

    directory: Path
    name: str  # the folder's name
    run_id: str
    created: str
    preset: str
    device: str
    device_name: str
    torch: str
    threads: Any
    commit: str  # 12 characters
    dirty: bool
    rows: int
    ok_rows: int
    cases: dict[CaseKey, Entry]  # its ok cases
    failed: list[CaseKey]  # its cases none of whose processes finished
    min_effect: float


class PhasePair(Struct, frozen=True):
    """A phase's window summary in each run (context only, never a verdict)."""

    phase: str
    a: Summary
    b: Summary


class CompareLine(Struct):
    """One case of both runs (``compare.line``): B's overhead against A's on every metric."""

    strategy: str
    k: int
    n: int
    grad_sync: str
    label: str
    settings: dict[str, Any]  # B's sweep settings (rows.SWEEP_IDENTITY, preset aside)
    settings_differ: list[str]  # the settings A and B ran with differently
    overhead_a: Paired
    overhead_b: Paired
    metrics: dict[str, RunComparison]  # per metric
    window: RunComparison  # the window's, which the page leads with
    phases: list[PhasePair]


class ComparePage(Struct):
    """Everything compare.html shows (``compare.comparison``), and compare.json's content."""

    a: Side
    b: Side
    lines: list[CompareLine]
    comparisons: list[RunComparison]  # every metric of every line, judged together
    min_effect: float  # the larger of the two runs'
    rule: str
    between_runs: BetweenRuns
    counts: dict[str, int]  # window verdicts per word
    growth: list[Growth]  # run B's cases' memory growth
    only_a: list[CaseKey]
    only_b: list[CaseKey]
    failed: list[tuple[str, CaseKey]]  # ("A" or "B", the case)
