"""A/A plugin: exact twins of three built-in strategies, and one with a planted slowdown.

A twin is the same class registered under another name, so a sweep measures it in processes of
its own: any verdict other than ``same``/``unclear`` between a twin and its original is a false
difference. ``sleepy`` is ``block`` plus 50 ms of sleep in every reset (``ZEROGRAD_SLEEPY_S`` sets
another): a real difference far beyond the noise, which the verdicts must find. ``busy`` is
``native`` plus a busy-wait of 0.65 ms per reset (``ZEROGRAD_BUSY_S``), about 5% of a tiny CPU
window: the size of difference the verdicts must find in a default sweep.
"""

from __future__ import annotations

import os
import time

import strategies
from strategies.block import BlockStrategy
from strategies.lazy import LazyStrategy
from strategies.native import NativeStrategy

TWINS = {"block_twin": "block", "native_twin": "native", "lazy_twin": "lazy"}
SLEEP_S = float(os.environ.get("ZEROGRAD_SLEEPY_S", "0.050"))
# about 5% of a tiny CPU window (K=1, N=0, --threads 1: ~15 ms): the difference users choose on
BUSY_S = float(os.environ.get("ZEROGRAD_BUSY_S", "0.00065"))


class SleepyStrategy(BlockStrategy):
    def reset(self, collector) -> None:
        time.sleep(SLEEP_S)
        super().reset(collector)


class BusyStrategy(NativeStrategy):
    """native plus a fixed busy-wait in every reset (a CPU that works, not one that sleeps)."""

    def reset(self, collector) -> None:
        end = time.perf_counter() + BUSY_S
        while time.perf_counter() < end:
            pass
        super().reset(collector)


for twin, cls in (
    ("block_twin", BlockStrategy),
    ("native_twin", NativeStrategy),
    ("lazy_twin", LazyStrategy),
):
    if twin not in strategies.available():
        strategies.register(twin, cls)
if "sleepy" not in strategies.available():
    strategies.register("sleepy", SleepyStrategy)
if "busy" not in strategies.available():
    strategies.register("busy", BusyStrategy)
