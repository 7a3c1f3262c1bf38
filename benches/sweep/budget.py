"""The budget's plan: which groups still have an ``unclear`` comparison on time, the
time-only processes of an added round (a group's strategies rotated in one process,
``engine.rotation``), and how long each kind of process is expected to take. The sweep
(``cli.SweepRun.spend_budget``) runs them."""

from __future__ import annotations

import dataclasses
import statistics
import time

from benches.engine import frameworks, results
from benches.engine.spec import CaseSpec
from benches.sweep.arguments import Sweep
from reports.schema.settings import group_of, group_of_record
from reports.schema.verdict_records import Verdict


def process_started() -> float:
    """When this process started, on the ``time.monotonic`` clock (psutil's create time)."""
    import psutil

    age = time.time() - psutil.Process().create_time()
    return time.monotonic() - max(0.0, age)


def wall_kind(spec: CaseSpec) -> tuple:
    """What a time-only process's wall time depends on: its group (K, N, the loop) and how many
    strategies it holds (a rotated process of six at K=4 took 25-49 s here, global alone 2-7 s)."""
    return (*group_of(spec), len(spec.rotation))


def expected_wall(walls: dict[tuple, list[float]], spec: CaseSpec) -> float:
    """How long a time-only process like ``spec`` should take: the median of its kind's so far,
    else the longest of any kind (0 before the first)."""
    mine = walls.get(wall_kind(spec))
    if mine:
        return statistics.median(mine)
    return max((max(w) for w in walls.values()), default=0.0)


def open_groups(sweep: Sweep) -> tuple[set[tuple], int]:
    """The groups (``settings.group_of``) with a strategy comparison on time that is still
    ``unclear``, and how many such comparisons there are."""
    from reports.judge import verdicts
    from reports.judge.rows import pooled

    entries = list(pooled(results.read(sweep.out)).values())
    control = sweep.control if sweep.control != "none" else None
    judged = verdicts.verdicts(entries, sweep.min_effect, sweep.looks, control)
    unclear = [c for c in judged.comparisons if c.timed and c.verdict == Verdict.UNCLEAR]
    groups = {group_of_record(c.k, c.n, c.case) for c in unclear}
    return groups, len(unclear)


# the report at the end: about 3x one look's verdicts (9 s against 3 s at 424 rows of a
# default sweep on a quiet machine here, 19 s on a busy one), and its tables and charts
REPORT_LOOKS, REPORT_S = 3.0, 10.0
SOLO = ("global",)  # searches every live tensor of its process: never shares one


def round_specs(group_cases: list[CaseSpec], round_: int, rotate: bool) -> list[CaseSpec]:
    """The time-only processes of one added round: per group (``settings.group_of``) one
    process of its strategies rotated with the plain loop (``engine.rotation``), besides one of
    its own for each ``SOLO`` strategy; each in a process of its own where ``rotate`` is off, or
    under ranks, compile or --compare-settings (one replica per loop there)."""
    added = [
        dataclasses.replace(c, round=round_, time_only=True, plain_timeline=False)
        for c in group_cases
    ]
    by_group: dict[tuple, list[CaseSpec]] = {}
    for c in added:
        # a framework's path holds its framework's process-wide state: never shared either
        solo = c.strategy in SOLO or frameworks.name_of(c.strategy)
        shared = not solo and c.parallel == "none" and not c.compile
        if rotate and shared and not c.compare_settings:
            by_group.setdefault(group_of(c), []).append(c)
    rotated = [cs for cs in by_group.values() if len(cs) >= 2]
    alone = [c for c in added if not any(c in cs for cs in rotated)]
    leads = [dataclasses.replace(cs[0], rotation=[c.label for c in cs]) for cs in rotated]
    return leads + alone
