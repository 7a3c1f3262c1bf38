"""Warm up until steady: a process starts timing once its windows stop getting faster.

A first window allocates, fills caches and (on a GPU) wakes the clocks and the launch queue;
later ones can keep drifting (the H200 sample's bf16 windows: the first half of a process's
pairs 7.4% slower than the second). A fixed count of warm-up pairs either wastes time or stops
too early, so warm-up runs until the latest pair (both loops' windows together) is no more
than ``DRIFT`` faster than the one before it, after ``least`` pairs (``--warmup``, and 2 at
the least: one pair cannot show a drift) and never past ``most`` (``CAP`` beyond ``least``).
The row keeps every warm-up pair's seconds (``samples["warmup"]``): how many it took, and
why.
"""

from __future__ import annotations

from collections.abc import Callable

DRIFT = 0.02  # a pair this much faster than the one before it: still warming up
CAP = 8  # warm-up pairs beyond --warmup, at the most
RULE = (
    f"warm up until the latest pair (both loops' windows) is no more than {DRIFT:.0%} faster "
    f"than the one before it, after --warmup pairs (2 at the least), at most {CAP} more"
)


def steady(seconds: list[float], least: int) -> bool:
    """Whether warm-up pairs that took ``seconds`` each may stop: ``least`` (at least 2) of
    them, and the last no more than ``DRIFT`` faster than the one before it."""
    if len(seconds) < max(2, least):
        return False
    return seconds[-1] >= (1 - DRIFT) * seconds[-2]


def warm_up(
    pair: Callable[[int], float],
    least: int,
    agree: Callable[[bool], bool] | None = None,
) -> list[float]:
    """Run ``pair(i)`` (one warm-up pair, its seconds) until ``steady`` or ``least + CAP``
    pairs; every pair's seconds. ``agree(steady)``: under ranks, whether every rank is steady
    (each rank's windows are timed on its own, and ranks that stopped at different pairs would
    wait on each other's collectives for ever): all ranks stop together."""
    seconds: list[float] = []
    while len(seconds) < max(2, least) + CAP:
        seconds.append(pair(len(seconds)))
        done = steady(seconds, least)
        if agree is not None:
            done = agree(done)
        if done:
            break
    return seconds
