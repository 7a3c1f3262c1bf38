"""Leaks as a verdict: a strategy whose windows keep memory, beyond what the plain loop's keep.

Every case reads its process's memory (``memory.growth_measure``: CUDA's allocated bytes on a
GPU; on CPU the bytes glibc's malloc has out, ``mallinfo2``, else the resident set) before its
timed pairs and after each, one window of the strategy and one of the plain loop:
``memory.growth_bytes_per_window`` is the median of those ``growth_windows`` increments. Then the
plain loop runs ``plain_growth_windows`` windows alone in the same process, off the clock:
``plain_growth_bytes_per_window``, the median of its increments, is its own growth. (Memory read
around each window of a pair cannot say whose a byte is: what one loop frees, the other reuses.)
A median, not a slope: the resident set moves in steps of whole freed tensors (on small,
native's process fell by 49 MB in one window and took 25 MB back in the next), which tilt a
least-squares slope by MBs per window and move a median not at all, while a leak adds its bytes
in every window; malloc's bytes in use do not see those steps at all (pages kept or returned).

A case ``leaks`` when, in the median of its processes, its strategy's window (a pair's growth
less the plain loop's per window) grows by more than ``LEAK_BYTES`` beyond the plain loop's own
window, over at least ``LEAK_WINDOWS`` windows: under FSDP2 on gloo both loops grow by 17 KiB
per window here, which is the loop's, not a strategy's leak (a plain loop that shrinks lends
nothing). Why 64 KiB: with malloc's bytes in use,
native, block, lazy and global grew by at most 0.8 KiB per window (median increment; no single
window above 4 KiB) on tiny and small at K=1 and 4, and the plain loop alone as little (README,
"Leaks"): 64 KiB is 80 times that, and a strategy keeping it leaks 640 MB over 10,000
windows. Fewer windows, or rows without the plain loop's own figure (time-only processes, older
rows): ``unmeasured``, never guessed.
"""

from __future__ import annotations

import statistics

from msgspec import structs

from reports.judge.rows import memory_note
from reports.schema.records import Entry, Row
from reports.schema.verdict_records import Growth, VerdictFile

LEAK_BYTES = 64 * 2**10  # per window, beyond the plain loop's growth in the same process
LEAK_WINDOWS = 4  # the fewest windows a slope is judged over
WORDS = ("leaks", "steady", "unmeasured")
RULE = (
    f"leaks: the strategy's window (a timed pair's growth less a plain-loop window's) grows by "
    f"more than {LEAK_BYTES // 2**10} KiB beyond the plain loop's own window (its windows alone "
    f"in the same process, after the pairs), over at least {LEAK_WINDOWS} windows, in the "
    "median of the case's processes; a shared process whose timed rounds kept at most 16 KiB "
    "a round: its growth per round, a bound on each strategy's (no loop's windows alone); "
    "steady otherwise; unmeasured with fewer windows or no plain-loop figure"
)


def process_excess(row: Row) -> tuple[float, float | None, float, float] | None:
    """One process's growth per pair, the plain loop's alone per window, the strategy's window's
    share of the pair (the pair less a plain window) and its excess over a plain window's; or
    None unmeasured. A plain loop that shrinks lends nothing. A shared process read around its
    rounds (``growth_scope`` "round"): its growth per round is each of them (a bound: every
    loop's window is in a round), with no plain loop's of its own."""
    memory = row.memory
    growth = memory.growth_bytes_per_window
    if memory.growth_scope == "round":
        if growth is None or (memory.growth_windows or 0) < LEAK_WINDOWS:
            return None
        return growth, None, growth, growth
    plain = memory.plain_growth_bytes_per_window
    windows = min(memory.growth_windows or 0, memory.plain_growth_windows or 0)
    if growth is None or plain is None or windows < LEAK_WINDOWS:
        return None
    own = growth - max(plain, 0.0)
    return growth, plain, own, own - max(plain, 0.0)


def judge(entry: Entry) -> Growth:
    """A pooled case's growth figures and its word."""
    measured = [m for m in map(process_excess, entry.rows) if m is not None]
    rows = [r for r in entry.rows if process_excess(r)]
    case = Growth(
        strategy=entry.strategy,
        k=entry.k,
        n=entry.n,
        case={"grad_sync": entry.grad_sync, "precision": entry.precision},
        processes=len(measured),
        measure=memory_note(entry.rows, "growth_measure"),
        verdict="unmeasured",
    )
    if not measured:
        return case
    columns = (
        statistics.median(known) if (known := [v for v in column if v is not None]) else None
        for column in zip(*measured, strict=True)
    )
    growth, plain, own, excess = columns
    return structs.replace(
        case,
        verdict="leaks" if excess > LEAK_BYTES else "steady",
        growth_bytes_per_window=growth,
        plain_growth_bytes_per_window=plain,
        strategy_growth_bytes_per_window=own,
        excess_bytes_per_window=excess,
        windows=min(r.memory.growth_windows for r in rows),
        plain_windows=min(
            (r.memory.plain_growth_windows for r in rows if r.memory.plain_growth_windows),
            default=None,
        ),
    )


def growth_verdicts(entries: list[Entry]) -> list[Growth]:
    """Every ok case's growth word, in the order verdicts.json lists cases."""
    ok = [e for e in entries if e.rows]
    ordered = sorted(ok, key=lambda e: (e.k, e.n, e.strategy))
    return [judge(e) for e in ordered]


def leaking(result: VerdictFile, k: int, n: int) -> list[str]:
    """The strategies of verdicts.json's ``result`` that leak at K, N (any precision, flavour)."""
    return sorted({c.strategy for c in result.leaks if (c.k, c.n) == (k, n)})


def lookup(result: VerdictFile, entry: Entry) -> Growth | None:
    """A pooled case's growth verdict in verdicts.json's ``result``."""
    case = {"grad_sync": entry.grad_sync, "precision": entry.precision}
    key = (entry.strategy, entry.k, entry.n, case)
    return next(
        (c for c in result.memory_growth if (c.strategy, c.k, c.n, c.case) == key),
        None,
    )


def describe(c: Growth) -> str:
    """One line: who leaks, where, how much, against the plain loop."""
    precision = c.case.get("precision")
    where = f"K={c.k} N={c.n}" + (f" {precision}" if precision not in (None, "fp32") else "")
    own, plain = c.strategy_growth_bytes_per_window, c.plain_growth_bytes_per_window
    return (
        f"leaks: {c.strategy} {where} grows {own / 2**10:,.1f} KiB per window (plain loop "
        f"{plain / 2**10:+,.1f} KiB, "
        f"{c.measure or 'memory'}, {c.windows} windows, {c.processes} "
        f"process{'es' if c.processes != 1 else ''})"
    )
