"""A/A plugin: exact twins of three built-in strategies, and one with a planted slowdown.

A twin is the same class registered under another name, so a sweep measures it in processes of
its own: any verdict other than ``same``/``unclear`` between a twin and its original is a false
difference. ``sleepy`` is ``block`` plus 50 ms of sleep in every reset (``ZEROGRAD_SLEEPY_S`` sets
another): a real difference far beyond the noise, which the verdicts must find. ``busy`` is
``native`` plus a busy-wait in every reset of 5% of its own last window
(``ZEROGRAD_BUSY_FRACTION``): the size of difference the verdicts must find in a default
sweep. Sized from its own windows, because a window's length depends on the machine (a tiny
fp32 window took 13-15 ms on one 2-core box here, 30 ms on another) and on the precision
(bf16-autocast ran 3.3x longer than fp32 on CPU here): a fixed wait of 5% of one is 1.5% of
another, which ``same`` rightly calls no difference.
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
# of the strategy's own last window (from its reset to its finish): the difference users choose on
BUSY_FRACTION = float(os.environ.get("ZEROGRAD_BUSY_FRACTION", "0.05"))


class SleepyStrategy(BlockStrategy):
    def reset(self, collector) -> None:
        time.sleep(SLEEP_S)
        super().reset(collector)


class BusyStrategy(NativeStrategy):
    """native plus a busy-wait in every reset (a CPU that works, not one that sleeps) of
    ``BUSY_FRACTION`` of its last window's forward and backward (reset to finish, its own wait
    left out): the same share of a window on any machine, at any precision; the first window
    has none."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.last_s: float | None = None
        self.started = 0.0

    def reset(self, collector) -> None:
        if self.last_s is not None:
            end = time.perf_counter() + BUSY_FRACTION * self.last_s
            while time.perf_counter() < end:
                pass
        super().reset(collector)
        self.started = time.perf_counter()

    def finish(self, collector) -> None:
        super().finish(collector)
        self.last_s = time.perf_counter() - self.started


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
