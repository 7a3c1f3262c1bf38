"""The profiled pair's side of the report (``--profile``): where each phase went, operator by
operator, and how the strategy's window differs from the plain loop's in the same process.

Rows carry, per loop and phase, every operator's calls and self times as the profiler's
``key_averages`` gave them (``benches/engine/profiling.py``); this module only compares them.

The difference against the plain loop, per phase: an operator is listed when its calls differ
(exact counts: ``added``, ``removed``, ``more``, ``fewer``), or, with the same calls, when its
self time differs by at least ``TIME_FACTOR`` and ``TIME_FLOOR_S`` between the least self time
of each side over the profiled windows (a stall of the machine only ever adds time), and
every window of one side lies beyond every window of the other (``higher``, ``lower``: a few
windows each, so only a large and clean difference of time is named; identical loops on a
busy machine named a lone stalled window otherwise; a call count is exact). The phase's
host time that no operator covers ("Python and dispatch between operators") is one more line,
held to the time rule: ``global``'s reset is there, a walk over every Python object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reports.judge.rows import strategy_order
from reports.page.records import CaseLine, CaseProfile, Profiles
from reports.schema.records import Entry, Row

PHASES = ("reset", "forward", "backward", "update")
TOP = 8  # operators per phase in the "where it went" table
TIME_FACTOR = 2.0
TIME_FLOOR_S = 50e-6
OUTSIDE = "(outside any operator: Python and dispatch)"


def operators(phase: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> calls, self CPU seconds (the least over the profiled windows: a stall of the
    machine only adds time), self device seconds (the median; None on CPU)."""
    return {
        op[0]: {
            "calls": op[1],
            "self_s": op[4],
            "device_s": op[3],
            "most_s": op[5] if len(op) > 5 else None,  # rows from before the most was kept
        }
        for op in phase.get("operators", [])
    }


def calls_word(mine: int, plain: int) -> str | None:
    if mine == plain:
        return None
    if plain == 0:
        return "added"
    if mine == 0:
        return "removed"
    return "more" if mine > plain else "fewer"


def time_word(
    mine: float, plain: float, mine_most: float | None = None, plain_most: float | None = None
) -> str | None:
    """``higher`` / ``lower`` when the least times differ by TIME_FACTOR and TIME_FLOOR_S and
    (where the most are known) every window of one side is beyond every one of the other."""
    if abs(mine - plain) < TIME_FLOOR_S:
        return None
    if mine >= TIME_FACTOR * plain and (plain_most is None or mine > plain_most):
        return "higher"
    if plain >= TIME_FACTOR * mine and (mine_most is None or plain > mine_most):
        return "lower"
    return None


def phase_diff(mine: dict[str, Any], plain: dict[str, Any]) -> list[dict[str, Any]]:
    """The operators of one phase whose calls or time differ from the plain loop's, largest
    time difference first; the time outside every operator last unless it differs."""
    a, b = operators(mine), operators(plain)
    zero = {"calls": 0, "self_s": 0.0, "device_s": None, "most_s": 0.0}
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name, zero), b.get(name, zero)
        word = calls_word(x["calls"], y["calls"]) or time_word(
            x["self_s"], y["self_s"], x["most_s"], y["most_s"]
        )
        if word is not None:
            out.append(_line(name, word, x, y))
    outside = time_word(
        mine["least_outside_s"],
        plain["least_outside_s"],
        mine.get("most_outside_s"),
        plain.get("most_outside_s"),
    )
    if outside is not None:
        x = {"calls": None, "self_s": mine["least_outside_s"], "device_s": None}
        y = {"calls": None, "self_s": plain["least_outside_s"], "device_s": None}
        out.append(_line(OUTSIDE, outside, x, y))
    return sorted(out, key=lambda line: -abs(line["delta_s"]))


def _line(name: str, word: str, mine: dict, plain: dict) -> dict[str, Any]:
    calls = None if mine["calls"] is None else mine["calls"] - plain["calls"]
    return {
        "name": name,
        "word": word,
        "calls": mine["calls"],
        "plain_calls": plain["calls"],
        "delta_calls": calls,
        "self_s": mine["self_s"],
        "plain_self_s": plain["self_s"],
        "delta_s": mine["self_s"] - plain["self_s"],
        "device_s": mine.get("device_s"),
        "plain_device_s": plain.get("device_s"),
    }


def diff(windows: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per phase, the strategy's window against the plain loop's (``phase_diff``)."""
    return {p: phase_diff(windows["strategy"][p], windows["plain"][p]) for p in PHASES}


def where_it_went(window: dict[str, Any], top: int = TOP) -> list[dict[str, Any]]:
    """Per phase of one window: its seconds, the top operators by self time, the rest, and the
    share no operator covers."""
    out = []
    for phase in PHASES:
        figures = window[phase]
        ops = figures.get("operators", [])
        seconds = figures["seconds"]
        out.append(
            {
                "phase": phase,
                "seconds": seconds,
                "outside_s": figures["outside_s"],
                "outside_share": figures["outside_s"] / seconds if seconds else None,
                "launches": figures.get("launches"),
                "operators": [
                    {"name": n, "calls": c, "self_s": s, "device_s": d}
                    for n, c, s, d, *_ in ops[:top]
                ],
                "others": len(ops[top:]),
                "others_s": sum(op[2] for op in ops[top:]),
            }
        )
    return out


def launches(windows: dict[str, Any]) -> dict[str, Any] | None:
    """Kernel launches per phase and window for both loops (CUDA), and the strategy's phase
    with the most; None on CPU."""
    if windows["strategy"][PHASES[0]].get("launches") is None:
        return None
    per = {
        role: {p: windows[role][p]["launches"] for p in PHASES} for role in ("strategy", "plain")
    }
    mine = per["strategy"]
    return {
        **per,
        "window": {role: sum(per[role].values()) for role in per},
        "most": max(PHASES, key=lambda p: mine[p]),
    }


def _profiled_row(entry: Entry) -> Row | None:
    """The case's first process that was profiled (the control's extra processes and
    time-only rounds never are)."""
    return next((r for r in entry.rows if r.profile), None)


def trace_of(entry: Entry) -> str | None:
    """The case's trace file, relative to the report (None: not profiled)."""
    row = _profiled_row(entry)
    return (row.profile.trace or None) if row else None


def kept(directory: Path, trace: str | None) -> bool:
    """Whether a row's trace file is still beside the report."""
    return bool(trace) and (directory / trace).is_file()


def with_traces(directory: Path, lines: list[CaseLine]) -> list[CaseLine]:
    """The case table's lines, each saying whether its trace is beside the report."""
    for line in lines:
        line.trace_present = kept(directory, line.trace)
    return lines


def case_profile(directory: Path, entry: Entry) -> CaseProfile | None:
    """One case's profile for the report; None when it was not profiled."""
    row = _profiled_row(entry)
    if row is None:
        return None
    figures = row.profile
    trace = figures.trace
    out = CaseProfile(
        strategy=entry.strategy,
        k=entry.k,
        n=entry.n,
        trace=trace,
        trace_present=kept(directory, trace),
        trace_bytes=figures.trace_bytes,
        trace_note=figures.trace_note,
        ranks_note=figures.ranks_note,
        warning=figures.warning,
        how_to_open=figures.how_to_open,
        activities=figures.activities,
        pairs=figures.pairs,
    )
    windows = figures.windows
    if windows:
        out.diff = diff(windows)
        out.phases = where_it_went(windows["strategy"])
        out.plain_phases = where_it_went(windows["plain"])
        out.window_s = {role: windows[role]["seconds"] for role in ("strategy", "plain")}
        out.launches = launches(windows)
    return out


def profiles(directory: Path, entries: list[Entry], default) -> Profiles:
    """Every profiled case (trace links, warnings), and the profiles at the default K and N,
    in strategy order, for the section under each strategy."""
    ordered = sorted(
        entries,
        key=lambda e: (e.k, e.n, strategy_order(e.strategy)),
    )
    cases = [p for p in (case_profile(directory, e) for e in ordered) if p is not None]
    here = [c for c in cases if default and (c.k, c.n) == tuple(default)]
    return Profiles(cases=cases, here=here or cases)
