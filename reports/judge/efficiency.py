"""How close a sweep came to what the machine allowed: per group, the 95% half-width its time
comparisons reached against the one the sweep's wall time would give were it all timed pairs
of that group (issue 54's figure; docs/method.md#efficiency).

The ideal: every second of the sweep spent on rotated rounds of the group, a round being one
timed pair of each of its strategies with the plain loop beside it (``c_round``, the seconds
one costs, as the group's processes measured it), so that each strategy gets ``R = wall /
c_round`` pairs in one process, and two of them differ by a mean of log ratios whose variance
is ``2 s2_pair / R`` (``s2_pair``: one pair's log-ratio variance in a process, as measured,
the budget's plan's figure). Its half-width is ``1.96 sqrt(2 s2_pair / R)``: no process offset
(rotated strategies share it), no warm-up, no check, no t for few processes. Efficiency is that
over the median half-width the group's comparisons reached (log scale): 1 is what the
machine's noise allows in this time; 0.24 is an interval four times wider. It can pass 1: a
comparison of two rotated strategies shares their plain window's noise, and the trimmed mean
drops the outliers the raw variance counts. A count of decided comparisons measures the
machine's noise; this measures the harness.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from msgspec import Struct

from reports.judge import stats
from reports.judge.noise import case_fields
from reports.schema.records import Entry
from reports.schema.settings import group_of_record
from reports.schema.verdict_records import Comparison

Z95 = 1.959964  # the normal's 97.5% point: the ideal has the df of a process that never ends
RULE = (
    "efficiency: the 95% half-width the group's time comparisons would have were all the "
    "sweep's wall time timed rotated rounds of the group, 1.96 sqrt(2 s2_pair c_round / wall), "
    "over the median half-width they reached (log scale); s2_pair is one pair's log-ratio "
    "variance in a process and c_round the seconds a round of one pair per strategy costs, "
    "both as the group's processes measured them"
)


class Efficiency(Struct, frozen=True, kw_only=True):
    """One group's efficiency and the figures behind it (``RULE``)."""

    k: int
    n: int
    case: dict
    wall_s: float  # the sweep's wall before the report (or its processes' seconds)
    c_round: float  # seconds of one round: a timed pair of each strategy
    s2_pair: float  # one pair's log-ratio variance in a process
    comparisons: int  # time comparisons with an interval
    ideal: float  # the half-width the wall would give, a fraction
    reached: float | None  # the median half-width the comparisons reached
    efficiency: float | None  # ideal over reached (log scale)

    @property
    def label(self) -> str:
        others = ", ".join(f"{k}={v}" for k, v in self.case.items() if v not in (None, "none"))
        return f"K={self.k} N={self.n:,}" + (f" ({others})" if others else "")

    def to_json(self) -> dict:
        return {f: getattr(self, f) for f in self.__struct_fields__}


def _by_group(entries: Sequence[Entry]) -> dict[tuple, list[Entry]]:
    out: dict[tuple, list[Entry]] = {}
    for e in entries:
        out.setdefault(group_of_record(e.k, e.n, case_fields(e)), []).append(e)
    return out


def _group_costs(entries: list[Entry]) -> tuple[float, float | None, float | None]:
    """(the group's process seconds, c_round, s2_pair) from its ok rows."""
    seconds, round_s, variances = 0.0, 0.0, []
    for e in entries:
        timed = pairs = 0.0
        for r in e.rows:
            wall = r.wall_s or {}
            seconds += wall.get("total") or 0.0
            mine, plain = r.samples.get("window") or [], r.samples.get("plain_window") or []
            if mine and plain and wall.get("timed_pairs"):
                timed, pairs = timed + wall["timed_pairs"], pairs + len(mine)
                logs = stats.log_ratios(mine, plain)
                if logs.size >= 2:
                    variances.append(float(logs.var(ddof=1)))
        if pairs:
            round_s += timed / pairs  # a pair of this strategy (with its plain window)
    c_round = round_s or None
    return seconds, c_round, statistics.fmean(variances) if variances else None


def half_width(c: Comparison) -> float | None:
    """A time comparison's 95% half-width on the log scale; None without an interval."""
    return stats.half_width(c.ci_low, c.ci_high) if c.timed else None


def efficiency(
    entries: Sequence[Entry], comparisons: Sequence[Comparison], sweep_s: float | None
) -> list[Efficiency]:
    """Per group with timed pairs: its efficiency (``RULE``). ``sweep_s`` is the sweep's wall
    before the report (run.json's); without it, the processes' seconds summed."""
    groups = _by_group(entries)
    costs = {g: _group_costs(es) for g, es in groups.items()}
    total = sum(seconds for seconds, _, _ in costs.values())
    widths: dict[tuple, list[float]] = {}
    for c in comparisons:
        width = half_width(c)
        if width is not None:
            widths.setdefault(group_of_record(c.k, c.n, c.case), []).append(width)
    out = []
    for g, es in groups.items():
        seconds, c_round, s2_pair = costs[g]
        if not (c_round and s2_pair and seconds and total):
            continue
        wall = sweep_s or total
        ideal = Z95 * math.sqrt(2 * s2_pair * c_round / wall)
        reached = statistics.median(widths[g]) if widths.get(g) else None
        out.append(
            Efficiency(
                k=es[0].k,
                n=es[0].n,
                case=case_fields(es[0]),
                wall_s=wall,
                c_round=c_round,
                s2_pair=s2_pair,
                comparisons=len(widths.get(g, [])),
                ideal=math.expm1(ideal),
                reached=math.expm1(reached) if reached is not None else None,
                efficiency=ideal / reached if reached else None,
            )
        )
    return out
