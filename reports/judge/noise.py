"""How much a figure varies where nothing changed: a case's process on a busy machine (CPU
pressure, involuntary switches), and a group's variance between processes and between machines,
the borrowing rule and the resolution it gives. ``verdicts`` decides with them.

- ``case_noise``: a process ran on a busy machine (``noisy``: stated beside the answer);
- ``group_key``: the cases that run the same loop (K, N, precision, grad_sync, recipe, ranks);
- ``noise``: the variance between processes per group, the borrowing rule (``pooled_from``) and
  the resolution; the variance between machines (``machines.between_machines``);
  ``paired_resolution`` where a group's strategies shared processes.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from msgspec import structs

from reports.judge import machines, stats
from reports.judge.rows import process_of
from reports.schema.records import CaseNoise, Entry, Row
from reports.schema.settings import LOOP
from reports.schema.verdict_records import Comparison, GroupNoise

MEMORY_KEYS = {"peak_memory": "peak_bytes", "held_memory": "held_bytes"}
NOISY_PRESSURE = 0.10  # median over pairs of the share of a window in which a task waited for a CPU
# where PSI is missing: involuntary context switches per second of the timed pairs (psutil). A
# one-thread process on a core of its own was preempted ~10 times a second here, one sharing
# its core with a busy loop 75-150 times (2-core EPYC VM, torch 2.13, a 256x256 matmul loop)
NOISY_SWITCHES_PER_S = 50.0
NOISE_METHOD = (
    "per group (K, N, precision, grad_sync, recipe, ranks): the variance of one process's log "
    "overhead between processes, pooled over the group's strategies with two or more processes "
    "(df = processes - strategies, or Satterthwaite's where strategies shared processes: "
    "stats.shared_df; between_sd); a comparison floors each side at what its own "
    "processes' pairs show (Yuen's standard error of a trimmed mean, averaged over that side's "
    "processes; within_sd: the group's average, which floors sd); a group without df borrows "
    "from the groups with the same settings at other K and N (pooled_from). resolution: "
    "the half-width of the interval of two strategies at the group's processes per strategy, "
    "at the level direction is decided (the difference called about half the time)"
)

MACHINE_METHOD = (
    "; between machines, where a group ran on more than one: the variance of the control "
    "strategy's per-machine mean figure over the machines with 2 or more of its processes "
    "(df = those machines - 1; fewer than 3 such machines: not measured), its processes' own "
    "noise included, never assumed zero"
)
MACHINE_LEVEL = "the variance between machines"


# -- per case ---------------------------------------------------------------------------------
def case_noise(row: Row) -> CaseNoise:
    """Whether a case ran on a busy machine, and by which signal: Linux PSI's CPU pressure
    where it exists, else involuntary context switches per second (psutil), else none."""
    pressure = row.cpu_pressure.median if row.cpu_pressure else None
    if pressure is not None:
        return CaseNoise("psi", pressure, NOISY_PRESSURE, pressure > NOISY_PRESSURE)
    switches = row.process.involuntary_per_s if row.process else None
    if switches is not None:
        limit = NOISY_SWITCHES_PER_S
        return CaseNoise("involuntary_switches", switches, limit, switches > limit)
    return CaseNoise()


def noisy_case(entry: Entry) -> bool:
    """Whether any of the case's processes ran under CPU pressure (``noisy``)."""
    return any(noisy(r) for r in entry.rows)


def noisy(row: Row) -> bool:
    return case_noise(row).noisy


# -- time: one figure per process, one interval per comparison -----------------------------------
def group_key(entry: Entry) -> tuple:
    """The group of cases that run the same loop: K, N and the case's swept settings (grad_sync,
    precision, recipe) and ranks. Noise between processes is estimated per group."""
    fields = tuple(sorted(case_fields(entry).items()))
    ranks = (entry.parallel, entry.world_size)
    return (entry.k, entry.n, fields, ranks)


def process_figures(entry: Entry) -> dict[str, float]:
    """The case's figure in each of its processes, the log of its paired overhead there (the
    trimmed mean of the log ratios of its pairs), keyed by the process it came from
    (``process_id``: strategies that shared a process, ``engine.rotation``, share it; a row
    without one is a process alone)."""
    return dict(paired_logs(entry, "window", "plain_window"))


def process_withins(entry: Entry) -> list[float]:
    """Per process, the variance of its figure that its own pairs show
    (``stats.process_within``)."""
    out = []
    for r in entry.rows:
        if r.samples.get("window") and r.samples.get("plain_window"):
            x = stats.process_within(r.samples["window"], r.samples["plain_window"])
            if x is not None:
                out.append(x)
    return out


def side_within(entry: Entry) -> float | None:
    """What one process of ``entry`` shows of its figure's variance inside it, averaged over
    its processes: the floor of its side of a comparison (``stats.contrast``)."""
    withins = process_withins(entry)
    return statistics.fmean(withins) if withins else None


def group_within(entries: list[Entry]) -> float | None:
    """The variance of one process's figure that its own pairs show, averaged over the
    processes of ``entries`` (the floor of a variance between them: ``stats.floored``)."""
    withins = [x for e in entries for x in process_withins(e)]
    return statistics.fmean(withins) if withins else None


def paired_within(ea: Entry, eb: Entry, shared: list[str]) -> float | None:
    """What one shared process's difference of two figures shows inside it: the variance of
    the trimmed mean of a's windows over b's, round by round (a rotated process runs every
    loop once a round, against one plain window), averaged over ``shared``."""
    rows_a = {process_of(r): r for r in ea.rows}
    rows_b = {process_of(r): r for r in eb.rows}
    withins = []
    for p in shared:
        a, b = rows_a[p].samples.get("window"), rows_b[p].samples.get("window")
        if a and b and len(a) == len(b):
            x = stats.process_within(a, b)
            if x is not None:
                withins.append(x)
    return statistics.fmean(withins) if withins else None


def paired_logs(entry: Entry, mine: str, other: str) -> list[tuple[str, float]]:
    """Per process that has them, its process and the log of its ``mine`` samples over their
    ``other`` pairs (``stats.process_log``)."""
    out = []
    for r in entry.rows:
        if r.samples.get(other) and r.samples.get(mine):
            x = stats.process_log(r.samples[mine], r.samples[other])
            if x is not None:
                out.append((process_of(r), x))
    return out


def noise(
    entries: list[Entry], min_effect: float, control: str | None = None
) -> dict[tuple, GroupNoise]:
    """Per group: the variance of one process's log overhead between processes, pooled over
    the group's strategies with two or more processes (its df), and the group's resolution;
    where its processes ran on more than one machine, the variance between machines of the
    ``control`` strategy's per-machine mean (``machines.between_machines``; without
    ``control``, the case with the control's extra processes: ``machines.control_of``).

    The borrowing rule: a group with no df of its own (one process per strategy, no control)
    borrows the variance pooled over the groups with the same settings other than K and N,
    and says which (``pooled_from``); a group that cannot borrow has no variance, and its time
    comparisons are ``unclear``. The variance between machines is never borrowed."""
    by_group: dict[tuple, list[Entry]] = defaultdict(list)
    for e in entries:
        by_group[group_key(e)].append(e)
    logs = {g: [process_figures(e) for e in here] for g, here in by_group.items()}
    out = {}
    for g, here in by_group.items():
        pooled, df = stats.pooled_variance(logs[g])
        pooled_from: list[list[int]] = []
        if not df:
            others = [o for o in by_group if o[2:] == g[2:] and o != g]
            pooled, df = stats.pooled_variance([x for o in others for x in logs[o]])
            pooled_from = [
                [o[0], o[1]] for o in sorted(others) if stats.pooled_variance(logs[o])[1]
            ]
        within = group_within(here)
        variance = stats.floored(pooled, within)
        counts = [len(x) for x in logs[g] if x]
        processes = statistics.median(counts) if counts else 0
        reference = machines.control_of(here, control)
        between = machines.between_machines(
            process_figures(reference) if reference else {},
            machines.process_machines([reference] if reference else []),
        )
        count = len(set(machines.process_machines(here).values()))
        resolution = stats.resolution(variance, df, processes, math.log1p(min_effect))
        if count > 1:  # what an unpaired comparison across its machines could tell apart
            resolution = across_resolution(
                variance, df, processes, between, count, math.log1p(min_effect)
            )
        out[g] = GroupNoise(
            k=g[0],
            n=g[1],
            case=dict(g[2]),
            processes=sum(counts),
            strategies=len(counts),
            processes_per_strategy=processes,
            sd=math.expm1(math.sqrt(variance)) if variance is not None else None,
            df=df,
            between_sd=math.expm1(math.sqrt(pooled)) if pooled is not None else None,
            within_sd=math.expm1(math.sqrt(within)) if within is not None else None,
            within=within,
            between=pooled,
            pooled_from=pooled_from,
            measured=df > 0,
            resolution=resolution,
            resolution_from="across machines" if count > 1 and resolution is not None else None,
            memory=memory_floors(here),
            variance=variance,
            machines=count,
            machine_from=reference.strategy if reference else None,
            control_machines=between.machines,
            machine_sd=math.expm1(math.sqrt(between.variance)) if between.measured else None,
            machine_df=between.df,
            machine_measured=between.measured,
            machine_variance=between.variance,
        )
    return out


def across_resolution(
    variance: float | None,
    df: int,
    processes: float,
    between: machines.Spread,
    count: int,
    margin: float | None = None,
) -> float | None:
    """The resolution of a group whose processes ran on ``count`` machines: two strategies'
    processes spread evenly over them, so that each side's mean carries the spread between
    machines over ``count``: the half-width of such a comparison's interval as
    ``across_machines`` widens it (``stats.widened``), at the level direction is decided;
    None where that spread is not measured (such comparisons are ``unclear``)."""
    if variance is None or df <= 0 or processes <= 0 or not between.measured:
        return None
    two = {"log": 0.0, "se": math.sqrt(variance * 2 / processes), "df": df, "method": ""}
    wide = stats.widened(two, between.variance * 2 / count, between.df, MACHINE_LEVEL)
    return math.expm1(stats.direction_t(wide["df"], wide["se"], margin) * wide["se"])


def memory_floors(entries: list[Entry]) -> dict[str, float]:
    """Per memory metric, the largest relative spread (max - min) / max of the figure between
    processes that ran the same loop: the plain loop of every process with the same swept
    settings, and each case's own processes."""
    out = {}
    for metric, key in MEMORY_KEYS.items():
        plain: dict[tuple, list[float]] = defaultdict(list)
        samples = []
        for e in entries:
            mine = [getattr(r.memory, key) for r in e.rows]
            others = [getattr(r.memory, f"plain_{key}") for r in e.rows]
            plain[tuple(sorted(case_fields(e).items()))] += [v for v in others if v is not None]
            samples.append([v for v in mine if v is not None])
        samples += list(plain.values())
        spreads = [(max(v) - min(v)) / max(v) for v in samples if len(v) > 1 and max(v) > 0]
        out[metric] = max(spreads, default=0.0)
    return out


def case_fields(entry: Entry) -> dict[str, Any]:
    """The case's swept settings other than strategy, K and N, and the sweep's training loop:
    every setting that changes the loop (``settings.LOOP``: grad_sync, precision, the recipe).
    Strategies are compared only with the same ones (a later axis lands here)."""
    return {name: getattr(entry, name) for name in LOOP}


def paired_resolution(
    spreads: dict[tuple, GroupNoise], comparisons: list[Comparison], min_effect: float
) -> None:
    """A group whose strategies shared processes (paired comparisons) can tell apart less than
    its unpaired figure says: its resolution becomes the median half-width of its paired
    comparisons' intervals at the level direction is decided (``stats.resolution``), in
    ``spreads``."""
    halves: dict[tuple, list[float]] = defaultdict(list)
    for c in comparisons:
        if c.timed and c.paired and c.se is not None and c.df and c.ci_high is not None:
            key = (c.k, c.n, repr(sorted(c.case.items())))
            halves[key].append(stats.direction_t(c.df, c.se, math.log1p(min_effect)) * c.se)
    for key, spread in spreads.items():
        here = halves.get((spread.k, spread.n, repr(sorted(spread.case.items()))))
        if here:
            half = statistics.median(here)
            spreads[key] = structs.replace(
                spread,
                resolution=math.expm1(half),
                resolution_from=f"{len(here)} paired comparisons",
            )
