"""Warm up until steady: a process starts timing once its windows stop getting faster.

A first window allocates, fills caches and (on a GPU) wakes the clocks and the launch queue;
later ones can keep drifting (the H200 sample's bf16 windows: the first half of a process's
pairs 7.4% slower than the second). A fixed count of warm-up pairs either wastes time or stops
too early, so warm-up runs until the latest pair (both loops' windows together; a rotated
process's round, every loop's window) is no faster than the one before it by more than the
pairs' own noise allows (``tolerance``: ``DRIFT``, or twice the spread of the pairs so far where
that is wider, so that a noisy window is not held to a tolerance below its noise), after
``least`` pairs (``--warmup``, and 2 at the least: one pair cannot show a drift).

What it costs is sized to what the process times: at most ``SHARE`` of the pairs it will time
(``least`` and 1 at the least), which stops the test where a process times too few for it. The
windows a checked process runs anyway before timing (the gradient check's, each loop's beside
the others') are its first warm-up pairs (``before``): steady there, it times at once. A group's
first time-only process warms up by the test; its later ones run as many warm-up pairs as it
needed (``learned``, ``needed``), untested. The row keeps every warm-up pair's seconds
(``samples["warmup"]``): how many it took, and why.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence

DRIFT = 0.02  # a pair this much faster than the one before it: still warming up
SHARE = 0.25  # warm-up pairs: at most this share of the pairs the process times
RULE = (
    f"warm up until the latest pair (a rotated process's round) is no faster than the one "
    f"before it by more than {DRIFT:.0%} or twice the pairs' own spread, after --warmup pairs "
    f"(2 at the least), at most {SHARE:.0%} of the pairs the process times (--warmup and 1 at "
    "the least); a checked process's gradient-check windows are its first warm-up pairs (steady "
    "there, it times at once); a group's later time-only processes warm up the pairs its "
    "first one needed, untested"
)


def tolerance(seconds: Sequence[float]) -> float:
    """How much faster than the pair before it a steady pair may be: ``DRIFT``, or twice the
    spread (the SD of successive log differences over sqrt 2) of the pairs after the first
    where three or more differences show it."""
    later = [math.log(s) for s in seconds[1:] if s > 0]
    steps = [b - a for a, b in itertools.pairwise(later)]
    if len(steps) < 3:
        return DRIFT
    return max(DRIFT, 2 * statistics.stdev(steps) / math.sqrt(2))


def steady(seconds: Sequence[float], least: int) -> bool:
    """Whether warm-up pairs that took ``seconds`` each may stop: ``least`` (at least 2) of
    them, and the last no more than ``tolerance`` faster than the one before it."""
    if len(seconds) < max(2, least):
        return False
    return seconds[-1] >= (1 - tolerance(seconds)) * seconds[-2]


def most(least: int, timed: int) -> int:
    """The warm-up pairs' cap: ``SHARE`` of the ``timed`` pairs, and ``least`` (``--warmup``)
    and 1 at the least. The test needs 2 pairs to see a drift; where the process times so few
    that a quarter of them is fewer, the cap stops it first (a time-only process of 2 rounds
    warms up 1, not 2)."""
    return max(1, least, math.ceil(SHARE * timed))


def needed(seconds: Sequence[float], least: int) -> int:
    """How many warm-up pairs a process that warmed up ``seconds`` needed before its windows
    were steady: the pairs before the two that showed it (1 at the least: a fresh process's
    first window allocates); all of them where it stopped at its cap."""
    if not seconds:
        return 1
    if not steady(seconds, least):
        return len(seconds)
    return max(1, len(seconds) - 2)


def warm_up(
    pair: Callable[[int], float],
    least: int,
    agree: Callable[[bool], bool] | None = None,
    timed: int | Callable[[list[float]], int] = 0,
    before: Sequence[float] = (),
    learned: int = 0,
) -> list[float]:
    """Run ``pair(i)`` (one warm-up pair, its seconds) until ``steady`` or the cap (``most`` of
    ``timed``, the pairs the process will time, or a function of the warm-up pairs so far that
    says so: a process with a deadline times what the time left holds); every pair's seconds,
    ``before``'s first: the windows the process ran before (the gradient check's), warm-up
    already; where they were steady no pair more runs, else the pairs after them are tested
    among themselves (a checked window, its reference beside it, is no measure of a timed one).
    ``learned``: run that many pairs, untested (a time-only process: ``needed`` by its group's
    first time-only process). ``agree(steady)``: under ranks, whether every rank is steady (each
    rank's windows are timed on its own, and ranks that stopped at different pairs would wait
    on each other's collectives for ever): all ranks stop together."""
    first = list(before)
    if learned:
        return first + [pair(len(first) + i) for i in range(learned)]
    seconds: list[float] = []
    while True:
        done = steady(first, least) if first and not seconds else steady(seconds, least)
        done = done or len(seconds) >= most(least, timed(seconds) if callable(timed) else timed)
        if agree is not None:  # every rank at its cap or steady: their caps may differ
            done = agree(done)
        if done:
            return first + seconds
        seconds.append(pair(len(first) + len(seconds)))
