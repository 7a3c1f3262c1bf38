"""The typed records inside a row: what one process measured, part by part.

Each class is one object of a results.jsonl line (``records.Row``'s ``memory``, ``process``,
``grad_check``, ...), with one field per key the engine writes, each commented with what it
means and where it is written. They are msgspec Structs: ``records.Row``'s decoder reads them
typed (a key none of them has, or a value of the wrong type, names its path) and the encoder
writes them with the same keys.

Kept as plain JSON, because their keys are data, not fields: the cost model's counts,
coefficients and terms (``benches.engine.costmodel``), a profile's per-role, per-phase operator
tables (``benches.engine.profiling.median_window``, read by ``reports.page.profile`` only), and a
row's ``samples``, ``wall_s`` and ``env`` (keyed by phase, step and fact).

This module imports only the standard library and msgspec.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from msgspec import UNSET, Struct, field, structs

Json = dict[str, Any]


class Record(Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A record of a file: keyword fields, and a key it does not have is refused on reading."""


@cache
def _optional(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in structs.fields(cls) if not f.required)


def made(cls, **given: Any):
    """A record as the engine makes it where it measures: ``cls(**given)``, so a field the
    record does not have is a TypeError at that line. A field with a default that it is not
    given is ``msgspec.UNSET`` and left out of its JSON: the engine's rows keep the keys each
    kind of row has always had (a time-only row's memory has no memory-pass keys, a failed row
    no figures). A record read from a file has every field."""
    return cls(**given, **{name: UNSET for name in _optional(cls) if name not in given})


def given(record: Any) -> Json:
    """The fields of a record that are not ``UNSET``, by name (to merge records)."""
    return {
        name: value
        for name in record.__struct_fields__
        if (value := getattr(record, name)) is not UNSET
    }


class Summary(Record, kw_only=True):
    """A series of seconds summarised (``reports.judge.stats.summarize``): a phase's windows, the
    plain loop's, a reset's. An empty series has ``n`` 0 and nothing else."""

    n: int = 0
    median_s: float | None = None
    ci_low_s: float | None = None  # a CI of the median from order statistics ...
    ci_high_s: float | None = None
    ci_confidence: float | None = None  # ... at 0.95, or None: [min, max] below 6 samples
    iqr_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    mean_s: float | None = None
    cv: float | None = None  # standard deviation / mean


class Timeline(Record, kw_only=True):
    """Memory over one window (``benches.engine.timeline.window_timeline``)."""

    method: str  # how the bytes were read: the CUDA allocator's history, the profiler's events
    start_bytes: int  # the replica's bytes when the window starts
    window_ms: float
    points: list[list[float]]  # (ms from the window's start, bytes), min/max decimated
    phases: list[list[Any]]  # (boundary's name, ms from the window's start)


class Memory(Record, kw_only=True):
    """The row's ``memory``: the memory pass (``benches.engine.case.memory_figures``: one
    window of each loop, separate from the timed pairs) and the memory context of the timed
    pairs (``case.timed_pairs``: RSS, growth window after window). A time-only process has the
    context only; a rotated one neither (every field None)."""

    # the memory pass (none in a time-only process)
    held_bytes: int | None = None  # gradient storage the strategy keeps between windows
    peak_bytes: int | None = None  # the strategy's window's peak above its start
    peak_method: str | None = None  # how the peak was measured: CUDA stats or memray
    plain_held_bytes: int | None = None  # the same, for the plain loop
    plain_peak_bytes: int | None = None
    param_bytes: int | None = None  # this rank's parameters (a shard counts its local part)
    memory_windows: int | None = None  # windows the memory pass ran
    timeline: Timeline | None = None  # the last window over time (engine.timeline)
    plain_timeline: Timeline | None = None
    memray_flamegraph: str | None = None  # --memray: the flamegraph page, relative to the run
    memray_capture: str | None = None  # --keep-captures: memray's capture, relative to the run
    over_ranks: str | None = None  # "max": each figure the largest over ranks (distributed)
    # the timed pairs' context (engine.growth, engine.memory)
    rss_after_setup_bytes: int | None = None
    peak_rss_bytes: int | None = None  # VmHWM over the timed pairs
    peak_rss_is_since_setup: bool | None = None  # False: the kernel could not reset VmHWM
    growth_bytes_per_window: float | None = None  # median increment per timed pair
    growth_windows: int | None = None
    growth_readings: list[int] | None = None  # the footprint before the pairs and after each
    plain_growth_bytes_per_window: float | None = None  # the plain loop's own, windows alone
    plain_growth_windows: int | None = None
    plain_growth_readings: list[int] | None = None
    growth_measure: str | None = None  # what the footprint is: malloc, CUDA allocated or RSS
    # a shared process's: "alone" (each loop's windows alone after the rounds), or "round" (the
    # process's footprint around each timed round, every loop's window in it: a bound on each
    # strategy's; its rounds kept at most engine.growth.QUIET_ROUND_BYTES); null: a pair's
    growth_scope: str | None = None


class ProcessFigures(Record, kw_only=True):
    """The row's ``process``: psutil's view of the process over its timed pairs
    (``benches.engine.process.TimedPairsProcess``); under ranks each figure the busiest rank's
    (``engine.distributed.busiest``)."""

    seconds: float | None = None  # wall time of the timed pairs
    user_s: float | None = None
    system_s: float | None = None
    voluntary_switches: int | None = None
    involuntary_switches: int | None = None  # the scheduler took the CPU away: a busy machine
    involuntary_per_s: float | None = None
    rss_peak_bytes: int | None = None
    rss_final_bytes: int | None = None
    uss_peak_bytes: int | None = None
    uss_final_bytes: int | None = None
    affinity: list[int] | None = None  # the cores it could run on (rank 0's)
    rank_affinity: list[list[int]] | None = None  # every rank's, rank by rank
    over_ranks: str | None = None  # "max" under ranks
    measure: str | None = None  # how it was read


class GradCheck(Record, kw_only=True):
    """The row's ``grad_check``: the worst of the checked windows against the reference
    (``benches.engine.gradients.check_windows``; under ranks the worst rank's)."""

    ok: bool | None = None
    max_rel_diff: float | None = None  # against the reference's largest value
    max_abs_diff: float | None = None
    tolerance: float | None = None  # engine.training.grad_tolerance
    worst_parameter: str | None = None
    accepted_by: str | None = None  # "float64 sum" or "same-order sum" (None: failed)
    same_order_max_rel_diff: float | None = None  # against the sum in the gradients' dtype
    same_order_tolerance: float | None = None
    window: int | None = None  # which window was the worst, from 1
    windows: int | None = None  # how many were checked
    # the reference of the row's total_error: "float64 model", or "fp32 model (no float64
    # kernel: aten._grouped_mm)" where an operator has none (gradients.model_reference); None
    # in rows written before it was recorded
    total_reference: str | None = None


class ErrorFigures(Record, kw_only=True):
    """The row's ``accumulation_error`` (the first window against the float64 sum of its
    micro-batch gradients) and ``total_error`` (against one float64 pass over the window's
    whole batch): ``benches.engine.gradients.errors``."""

    max_rel: float | None = None
    norm_rel: float | None = None


class CostMeasured(Record, kw_only=True):
    """What the cost model is judged against: the case's reset phase and its paired cost per
    window (the strategy's window less the plain loop's, pair by pair)."""

    reset: Summary
    paired_cost: Summary


class CostModel(Record, kw_only=True):
    """The row's ``cost_model``: the prediction for this case (``benches.engine.figures.
    cost_figures``, ``engine.costmodel``) against what its timed pairs measured, judged when the
    row is read (``reports.judge.summaries.cost_model``)."""

    counts: Json  # per window: launches, bytes, objects, visits, hook calls, drops, windows
    coefficients: Json  # seconds per counted thing, calibrated in this process
    predicted: Json  # reset_s, hooks_s, total_s and each term (reset_terms_s)
    # what the timed pairs measured against it, judged: derived when the row is read
    # (``reports.judge.summaries.cost_model``), stored in rows written before 2026-12-07
    measured: CostMeasured | None = None
    explained: bool | None = None  # the measured reset within the model's band
    flags: list[str] = field(default_factory=list)  # where they part, in words


class Profile(Record, kw_only=True):
    """The row's ``profile`` (``--profile``): a pair of windows under torch.profiler, off the
    clock (``benches.engine.profiling.profiled_pair``, rank 0's)."""

    activities: list[str] = field(default_factory=list)  # cpu, cuda
    pairs: int | None = None  # profiled pairs the figures are medians over
    rank: int | None = None
    ranks_note: str | None = None
    how_to_open: str | None = None
    warning: str | None = None  # the profiler failed: no figures, the case still ran
    # per role ("strategy", "plain"), per phase: operators, seconds, outside_s, launches
    windows: Json | None = None
    trace: str | None = None  # the first pair's Chrome trace, relative to the run
    trace_bytes: int | None = None
    trace_trimmed: bool | None = None  # over the size limit: the strategy's window only
    trace_note: str | None = None


class Mfu(Record, kw_only=True):
    """The row's ``mfu``: model FLOPs utilisation on a GPU (``benches.engine.figures.mfu``)."""

    value: float
    peak_flops: float | None = None
    measure: str | None = None


class CpuPressure(Record, kw_only=True):
    """The row's ``cpu_pressure``: per pair the larger of its windows' share of wall time in
    which some task waited for a CPU (PSI), over the timed pairs."""

    median: float | None = None
    max: float | None = None
    measure: str | None = None


class Collectives(Record, kw_only=True):
    """The row's ``collectives_per_window`` under ranks: the strategy window's gradient
    collectives, medians over pairs (``benches.engine.figures.collectives_figure``)."""

    allreduce: float | None = None
    reduce_scatter: float | None = None
    reduce_scatter_per_group: list[Any] = field(default_factory=list)
    reduce_scatter_seconds: float | None = None
    seconds_measure: str | None = None


class Framework(Record, kw_only=True):
    """A framework's path's row (``benches.engine.frameworks.figure``): the framework's
    package and version, and what of it is turned off (not accumulation: logging, ...)."""

    package: str = ""
    version: str | None = None
    turned_off: list[str] = field(default_factory=list)


class LoopRatio(Record, kw_only=True):
    """A paired ratio of one process (``stats.paired``'s public figures): the row's
    ``overhead`` (the strategy's window over the plain loop's), ``grad_sync_vs_every`` (its
    flavour over ``every``) and ``settings_vs`` (the case's loop over ``--compare-settings``'),
    derived from the row's samples when read (``reports.judge.summaries``; the engine writes
    only which loops the last two pair). The report pools samples, not these; they are the
    process's own figure."""

    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairs: int = 0
    processes: int = 0
    estimate: str | None = None
    confidence: float | None = None
    method: str | None = None
    plain: Summary | None = None  # overhead: the plain loop's windows
    split_half: float | None = None  # overhead: |log| of the plain window's odd over even ones
    grad_sync: str | None = None  # grad_sync_vs_every: the flavour ...
    against: str | None = None  # ... and the one it is against
    setting: str | None = None  # settings_vs: the setting, the case's value and the other
    mine: Any = None
    other: Any = None


class Placement(Record, kw_only=True):
    """The row's ``placement``: where its process ran (``benches.engine.envinfo.placement``). A
    local sweep writes it too (its host, no node id); a row without it (older runs) ran on the
    sweep's one machine. The machine a verdict counts is what the process held: its GPU
    (``device_uuid``) on CUDA, or with ranks the set of its ranks' GPUs (``rank_devices``),
    else the node (``node_id``), else the host (``reports.judge.machines.machine_of``)."""

    host: str | None = None  # the host's name (socket.gethostname)
    node_id: str | None = None  # the Ray node's id; null outside a cluster
    device_index: int | None = None  # torch's CUDA device index in the process; null on CPU
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES as the process saw it
    device_name: str | None = None  # the GPU's name, or the CPU model
    device_uuid: str | None = None  # the GPU's UUID (torch's device properties); null on CPU
    # with ranks on CUDA, every local rank's GPU UUID, rank 0 first (null where one has none):
    # the GPUs the process holds, its machine; null on CPU and with one rank
    rank_devices: list[str | None] | None = None
    cores: list[int] | None = None  # the CPUs the process could run on (rank 0's)
    # the wall-clock stamps (Unix seconds) of its timed pairs' start and end: the report counts
    # from them the other sweep processes that shared its node meanwhile
    pairs_start: float | None = None
    pairs_end: float | None = None
    # the process's own start and end (Unix seconds), stamped by the sweep's launcher
    started: float | None = None
    ended: float | None = None
    queued_s: float | None = None  # on a cluster: seconds from its submission to its start
    attempt: int | None = None  # on a cluster: 1, or 2 for the retry of a process lost once
