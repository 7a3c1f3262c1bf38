"""Memory over one window: allocated bytes against time, with the window's phases marked.

CUDA: the caching allocator's own history (``torch.cuda.memory._record_memory_history`` and a
snapshot): every allocation and free of the device's tensors, with its host time. CPU: the torch
profiler's memory events (``profile_memory=True``): every allocation and free of a CPU tensor,
with its time, exact (memray's snapshots were tried first: sampled every millisecond, they miss
a reset that frees the gradients and a forward that allocates again within one sample). Both
start from the bytes the replica holds when the window starts, counted exactly from storages:
weights, gradients, optimizer state and the strategy's own tensors.

What it cannot see: memory that is not a tensor of this device (Python objects; on CUDA NCCL
buffers and cuBLAS workspaces), memory an allocator keeps cached but not allocated, and tensors
allocated before the window that are not the replica's (other models, the ballast). Times are
host times: on CUDA an allocation is stamped when the host asks for it, not when a kernel runs.
"""

from __future__ import annotations

import time
from typing import Any

import torch

MAX_POINTS = 300  # per timeline in the row: bins keep their lowest and highest values
HISTORY_ENTRIES = 200_000
CPU_METHOD = (
    "torch profiler memory events (every CPU tensor allocation and free) from the replica's "
    "tensor bytes at the window's start"
)
CUDA_METHOD = (
    "CUDA caching allocator history (every allocation and free; host times) from the replica's "
    "tensor bytes at the window's start"
)


class Stamps:
    """Host times of a window's phase boundaries, for ``Loop.window(stamps=...)``."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = []

    def mark(self, label: str) -> None:
        self.marks.append((label, time.time()))


class Recorder:
    """Records one window's allocations and frees: the allocator's history on CUDA, the
    profiler's memory events on CPU. ``points(base)`` gives (unix seconds, bytes), starting
    from ``base``, the bytes allocated when the window starts."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._profiler = None

    def __enter__(self) -> Recorder:
        if self.device.type == "cuda":
            # sizes and times only: no stack context to record or to symbolise
            torch.cuda.memory._record_memory_history(context=None, max_entries=HISTORY_ENTRIES)
            return self
        # the profiler's own switch (torch.profiler.profile wraps it): memory events only, and
        # none of the per-op parsing its __exit__ would do
        from torch._C._profiler import _ExperimentalConfig
        from torch.autograd import (
            ProfilerActivity,
            ProfilerConfig,
            ProfilerState,
            _enable_profiler,
            _prepare_profiler,
        )

        config = ProfilerConfig(
            ProfilerState.KINETO, False, True, False, False, False, _ExperimentalConfig()
        )  # record_shapes, profile_memory, with_stack, with_flops, with_modules
        _prepare_profiler(config, {ProfilerActivity.CPU})
        _enable_profiler(config, {ProfilerActivity.CPU})
        self._profiler = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._profiler is not None:
            from torch.autograd import _disable_profiler

            self._events = _disable_profiler().events()
        else:
            self._snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)

    def points(self, base: int) -> list[tuple[float, int]]:
        if self._profiler is not None:
            cpu = torch._C._autograd.DeviceType.CPU
            changes = [
                (e.start_ns() / 1e9, e.nbytes())
                for e in self._events
                if e.name() == "[memory]" and e.device_type() == cpu
            ]
        else:
            index = self.device.index if self.device.index is not None else 0
            changes = [
                (e["time_us"] / 1e6, e["size"] if e["action"] == "alloc" else -e["size"])
                for e in self._snapshot["device_traces"][index]
                if e["action"] in ("alloc", "free_completed")
            ]
        changes.sort(key=lambda change: change[0])
        points, level = [], base
        for t, delta in changes:
            level += delta
            points.append((t, level))
        return points


def window_timeline(
    points: list[tuple[float, int]], stamps: Stamps, method: str, base: int
) -> dict[str, Any] | None:
    """The points inside the stamped window, as milliseconds from its start, from the level it
    starts at (``base`` and any change recorded before the first stamp), and its phases."""
    if len(stamps.marks) < 2:
        return None
    start, end = stamps.marks[0][1], stamps.marks[-1][1]
    before = [b for t, b in points if t < start]
    inside = [(start, before[-1] if before else base)]
    inside += [(t, b) for t, b in points if start <= t <= end]
    inside.append((end, inside[-1][1]))  # the level the window ends at
    return {
        "method": method,
        "start_bytes": base,
        "window_ms": (end - start) * 1e3,
        "points": downsample([((t - start) * 1e3, b) for t, b in inside]),
        "phases": [[label, (t - start) * 1e3] for label, t in stamps.marks],
    }


def downsample(points: list[tuple[float, int]], limit: int = MAX_POINTS) -> list[list[float]]:
    """At most about ``limit`` points: the first and the last, and in equal time bins between
    them each bin's lowest and highest (min/max decimation: no dip and no peak is lost)."""
    if len(points) <= limit:
        return [[t, b] for t, b in points]
    first, last = points[0][0], points[-1][0]
    bins = max(1, (limit - 2) // 2)
    width = (last - first) / bins or 1.0
    kept: dict[int, list[tuple[float, int]]] = {}
    for t, b in points[1:-1]:
        key = min(int((t - first) / width), bins - 1)
        low_high = kept.setdefault(key, [(t, b), (t, b)])
        if b < low_high[0][1]:
            low_high[0] = (t, b)
        if b > low_high[1][1]:
            low_high[1] = (t, b)
    middle = sorted({p for pair in kept.values() for p in pair})
    return [[t, b] for t, b in [points[0], *middle, points[-1]]]
