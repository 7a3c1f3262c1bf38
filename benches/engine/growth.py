"""Memory kept window after window: the readings a case takes to tell a leak (the reports'
leak judge, ``leaks``, judges them). On CPU malloc's bytes in use (glibc), else the resident
set; on CUDA the allocator's bytes. Read between timed pairs and after them, never inside a
timed window."""

from __future__ import annotations

import itertools
import statistics

import torch

from benches.engine import memory

# windows of the plain loop alone after the timed pairs: its own growth per window, beside which
# a strategy's growth is a leak (the reports' leak judge reads at least this many windows)
GROWTH_WINDOWS = 4
# a shared process whose timed rounds keep at most this much per round (every loop's window,
# the plain loop's included, each round) keeps at most this much in any one loop's window: in
# a steady state no loop frees, round after round, what another keeps. A quarter of the leak
# judge's 64 KiB: such a process's loops need no windows alone (the judge reads the round's
# figure as each strategy's, a bound). Above it, each loop's windows run alone (``footprint``).
QUIET_ROUND_BYTES = 16 * 2**10


def growth_measure(device: torch.device) -> str:
    """What a case reads to see memory kept: CUDA's allocated bytes on a GPU; on CPU the bytes
    malloc has out (glibc), else the resident set."""
    if device.type == "cuda":
        return "cuda_allocated"
    return "malloc_in_use" if memory.malloc_in_use() is not None else "rss"


def footprint_bytes(device: torch.device) -> int:
    """The process's memory now, as ``growth_measure`` says."""
    measure = growth_measure(device)
    if measure == "cuda_allocated":
        return torch.cuda.memory_allocated(device)
    if measure == "malloc_in_use":
        return memory.malloc_in_use() or 0
    return memory.status_bytes("VmRSS") or 0


def per_window(readings: list[int]) -> float | None:
    """Bytes kept per window: the median of the window-to-window increments of ``readings``.
    Not a least-squares slope: the resident set moves in steps of whole freed tensors (on small,
    native's process dropped by 49 MB in one window and took 25 MB back in the next), and a
    one-off step that would tilt a slope by MBs per window moves a median not at all, while a
    leak adds its bytes in every window."""
    steps = [b - a for a, b in itertools.pairwise(readings)]
    return statistics.median(steps) if steps else None


def plain_footprint(runner, workload, timed) -> list[int]:
    """The process's memory before and after each of GROWTH_WINDOWS windows of the plain loop
    alone, off the clock, after the pairs: its own growth. Memory read around each window of a
    pair cannot tell whose a byte is (what one loop frees the other reuses: on small, native's
    windows seemed to add 6 MB each and the plain loop's to free as much), so it runs alone."""
    assert runner.plain is not None
    return footprint(runner.plain, workload.device, timed)


def footprint(loop, device: torch.device, timed) -> list[int]:
    """The process's memory before and after each of ``GROWTH_WINDOWS`` windows of ``loop``
    alone, off the clock (a case's plain loop, or each loop of a shared process)."""
    readings = [footprint_bytes(device)]
    for i in range(GROWTH_WINDOWS):
        loop.window(*timed[i % 2])
        readings.append(footprint_bytes(device))
    return readings


def quiet(rounds: list[int]) -> bool:
    """Whether a shared process's footprint around its timed rounds (before the first and after
    each) shows it kept at most ``QUIET_ROUND_BYTES`` per round, over ``GROWTH_WINDOWS`` rounds
    at least."""
    kept = per_window(rounds)
    return len(rounds) > GROWTH_WINDOWS and kept is not None and kept <= QUIET_ROUND_BYTES
