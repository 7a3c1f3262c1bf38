"""The report's frameworks section (``--frameworks``): each framework's path at the answer's K
and N, against the plain loop and against the fastest strategy, with its collectives and
memory and what of the framework was turned off; and the cheapest path, the answer among the
frameworks at the user's settings."""

from __future__ import annotations

import math

from reports.judge import decision, verdicts
from reports.page.records import CaseLine, PathLine, PathPick
from reports.schema.verdict_records import VerdictFile


def is_path(line: CaseLine) -> bool:
    """A framework's path: its rows say which framework ran it."""
    return any(r.framework is not None for r in line.rows)


def _ratio(line: CaseLine) -> float:
    ratio = line.overhead.ratio if line.overhead else None
    return ratio if ratio is not None else math.inf


def path_lines(cases: list[CaseLine], result: VerdictFile) -> list[PathLine]:
    """One line per path that finished among ``cases`` (one K and N), cheapest first."""
    finished = [c for c in cases if c.ok]
    paths = sorted((c for c in finished if is_path(c)), key=_ratio)
    strategies = [c for c in finished if not is_path(c)]
    best = min(strategies, key=_ratio, default=None)
    out = []
    for line in paths:
        framework = next(r.framework for r in line.rows if r.framework is not None)
        memory = line.memory
        vs_best = (
            verdicts.lookup(result, line.strategy, best.strategy, line.k, line.n, "window")
            if best
            else None
        )
        out.append(
            PathLine(
                strategy=line.strategy,
                framework=framework,
                overhead=line.overhead,
                noisy=line.noisy,
                best=best.strategy if best else None,
                vs_best=vs_best,
                allreduce_per_window=line.allreduce_per_window,
                held_bytes=memory.held_bytes if memory else None,
                peak_bytes=memory.peak_bytes if memory else None,
                grad_check_ok=line.grad_check.ok if line.grad_check else None,
            )
        )
    return out


def cheapest(lines: list[PathLine], result: VerdictFile, k: int, n: int) -> PathPick | None:
    """The path with the lowest paired overhead that no verdict calls slower than another
    path (CPU pressure is in the intervals: the page marks such a path, never drops it), with
    its verdict against the next one (``same``/``unclear``: not told apart)."""
    measured = [line for line in lines if line.overhead is not None]
    slower = decision.slower_than_another([line.strategy for line in measured], result, k, n)
    ranked = [line for line in measured if line.strategy not in slower] or measured
    if not ranked:
        return None
    first = ranked[0]
    pick = PathPick(strategy=first.strategy, overhead=first.overhead)
    if len(ranked) > 1:
        pick.runner_up = ranked[1].strategy
        pick.lead = verdicts.lookup(result, first.strategy, ranked[1].strategy, k, n, "window")
    return pick
