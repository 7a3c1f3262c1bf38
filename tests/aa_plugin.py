"""A/A plugin: exact twins of three built-in strategies, and one with a planted slowdown.

A twin is the same class registered under another name, so a sweep measures it in processes of
its own: any verdict other than ``same``/``unclear`` between a twin and its original is a false
difference. ``sleepy`` is ``block`` plus 50 ms of sleep in every reset (``ZEROGRAD_SLEEPY_S`` sets
another): a real difference far beyond the noise, which the verdicts must find. ``busy`` is
``native`` plus a busy-wait per reset (``ZEROGRAD_BUSY_S``, default 0.65 ms), sized to about
5% of a tiny CPU window: the size of difference the verdicts must find in a default sweep. A
window's length depends on the machine (13-15 ms on one 2-core box here, 30 ms on another), so
a test sets ``ZEROGRAD_BUSY_S`` from ``busy_seconds()``, measured on the machine it runs on.
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


def busy_seconds(fraction: float = 0.05, windows: int = 30) -> float:
    """``fraction`` of the median window of the plain loop on the tiny reference workload
    (K=1, N=0, one thread), measured here and now: the busy-wait that makes ``busy`` that much
    slower than native on this machine. Called by a test before its sweep, never at import."""
    import statistics

    import torch

    from benches.engine import bound
    from benches.engine.runner import Loop
    from benches.workloads import protocol

    threads = torch.get_num_threads()
    settings = protocol.Settings(
        device="cpu", precision="fp32", seed=0, accumulate=1, live_tensors=0, threads=1,
        preset="tiny", deterministic=True,
    )  # fmt: skip
    try:
        workload = bound.build(protocol.DEFAULT, settings)
        batches = workload.batches(0)
        tokens = workload.window_tokens(batches)
        loop = Loop(workload, workload.model, None)
        seconds = [loop.window(batches, tokens)["window"] for _ in range(windows + 5)][5:]
    finally:
        torch.set_num_threads(threads)
    return fraction * statistics.median(seconds)
