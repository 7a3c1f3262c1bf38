"""Leaks as a verdict: a strategy whose windows keep memory, beyond what the plain loop's keep.

Every timed pair reads the process's memory (resident set on CPU, CUDA's allocated bytes on a GPU)
around each of its two windows, so a row holds what the strategy's windows added per window
(``memory.growth_bytes_per_window``: the slope of their summed additions) and what the plain
loop's windows beside them added in the same process (``plain_growth_bytes_per_window``).

A case ``leaks`` when, in the median of its processes, its strategy's windows grow by more than
``LEAK_BYTES`` per window over at least ``LEAK_WINDOWS`` windows, beyond the plain loop's own
growth. Why 64 KiB: the plain loop and native, block, lazy and global grew by at most a few KiB
per window on tiny and small (README, "Leaks"), while the allocator moves the resident set in
steps (glibc extends its heap by 128 KiB): one such step between the 2nd and 3rd of 4 windows is
a slope of 51 KiB per window, a step over 8 windows less. Above 64 KiB per window for 4 windows
the strategy kept 256 KiB or more, window after window, which no one-off step explains. Fewer
windows, or rows without the plain loop's figure (older rows): ``unmeasured``, never guessed.
"""

from __future__ import annotations

import statistics
from typing import Any

LEAK_BYTES = 64 * 2**10  # per window, beyond the plain loop's growth in the same process
LEAK_WINDOWS = 4  # the fewest windows a slope is judged over
WORDS = ("leaks", "steady", "unmeasured")
RULE = (
    f"leaks: the strategy's windows grow by more than {LEAK_BYTES // 2**10} KiB per window "
    f"(over at least {LEAK_WINDOWS} windows) beyond the plain loop's growth in the same process, "
    "in the median of the case's processes; steady otherwise; unmeasured with fewer windows"
)


def process_excess(row: dict[str, Any]) -> tuple[float, float, float] | None:
    """(growth, plain loop's growth, excess) per window of one process, or None unmeasured."""
    memory = row.get("memory") or {}
    growth = memory.get("growth_bytes_per_window")
    plain = memory.get("plain_growth_bytes_per_window")
    if growth is None or plain is None or (memory.get("growth_windows") or 0) < LEAK_WINDOWS:
        return None
    return growth, plain, growth - max(plain, 0.0)


def judge(entry: dict[str, Any]) -> dict[str, Any]:
    """A pooled case's growth figures and its word."""
    measured = [m for m in map(process_excess, entry.get("rows", [])) if m is not None]
    out: dict[str, Any] = {
        "strategy": entry["strategy"],
        "k": entry["accumulate"],
        "n": entry["live_tensors"],
        "case": {"grad_sync": entry["grad_sync"], "precision": entry["precision"]},
        "processes": len(measured),
        "measure": next(
            (r["memory"].get("growth_measure") for r in entry.get("rows", []) if r.get("memory")),
            None,
        ),
    }
    if not measured:
        return {**out, "verdict": "unmeasured"}
    growth, plain, excess = (statistics.median(column) for column in zip(*measured, strict=True))
    leaks = growth > LEAK_BYTES and excess > LEAK_BYTES
    return {
        **out,
        "verdict": "leaks" if leaks else "steady",
        "growth_bytes_per_window": growth,
        "plain_growth_bytes_per_window": plain,
        "excess_bytes_per_window": excess,
        "windows": min(r["memory"]["growth_windows"] for r in entry["rows"] if process_excess(r)),
    }


def growth_verdicts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ok case's growth word, in the order verdicts.json lists cases."""
    ok = [e for e in entries if e.get("rows")]
    ordered = sorted(ok, key=lambda e: (e["accumulate"], e["live_tensors"], e["strategy"]))
    return [judge(e) for e in ordered]


def leaking(result: dict[str, Any], k: int, n: int) -> list[str]:
    """The strategies of verdicts.json's ``result`` that leak at K, N (any precision, flavour)."""
    return sorted({c["strategy"] for c in result.get("leaks", []) if (c["k"], c["n"]) == (k, n)})


def lookup(result: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any] | None:
    """A pooled case's growth verdict in verdicts.json's ``result``."""
    case = {"grad_sync": entry["grad_sync"], "precision": entry["precision"]}
    key = (entry["strategy"], entry["accumulate"], entry["live_tensors"], case)
    return next(
        (
            c
            for c in result.get("memory_growth", [])
            if (c["strategy"], c["k"], c["n"], c["case"]) == key
        ),
        None,
    )


def describe(c: dict[str, Any]) -> str:
    """One line: who leaks, where, how much, against the plain loop."""
    case = c.get("case") or {}
    where = f"K={c.get('k')} N={c.get('n')}" + (
        f" {case['precision']}" if case.get("precision") not in (None, "fp32") else ""
    )
    return (
        f"leaks: {c['strategy']} {where} grows {c['growth_bytes_per_window'] / 2**10:,.1f} KiB "
        f"per window (plain loop {c['plain_growth_bytes_per_window'] / 2**10:+,.1f} KiB, "
        f"{c.get('measure') or 'memory'}, {c['windows']} windows, {c['processes']} processes)"
    )
