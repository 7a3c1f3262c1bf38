"""What memory a case holds and peaks at, from a pass separate from the timed one.

The pass builds a fresh replica of the model (no gradients) and a fresh collector inside a
tracker started before either exists, then runs ``MEMORY_WINDOWS`` windows of the strategy
alone; the plain loop gets the same pass, for reference.

- ``held_bytes``: gradient memory kept across windows, read right after the reset of the second
  window: the unique storages of every ``.grad`` of the target and of every tensor the strategy
  holds (its buffers). Exact, from the tensors; ballast is not in the target, so not counted.
- ``peak_bytes``: the peak, during the pass, of everything allocated since before the replica
  and the collector existed. CUDA: ``max_memory_allocated`` (peak stats reset before, the bytes
  allocated before subtracted). CPU: memray's tracker (aggregated capture, peak heap since it
  started); ``None`` where memray is not installed.
- ``timeline``: the last window's allocated bytes over time with its phases (``timeline``:
  the CUDA allocator's history, or the torch profiler's memory events on CPU).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benches.engine import timeline

MEMORY_WINDOWS = 2  # held bytes are read after the first window's reset: steady state


def tensors_of(value: Any, depth: int = 0):
    """Tensors reachable from a strategy's attributes (lists, tuples, dicts), a few levels deep."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, list | tuple | set):
        for item in value:
            yield from tensors_of(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from tensors_of(item, depth + 1)


def storage_bytes(tensors) -> int:
    """Bytes of the unique storages behind ``tensors`` (views of one buffer count once)."""
    from benches.engine.replicas import local

    storages = {}
    for t in tensors:
        storage = local(t).untyped_storage()  # a DTensor shard: this rank's own storage
        storages[(t.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())


def held_bytes(collector) -> int:
    """Unique storages of the target's gradients and of the strategy's own tensors."""
    params = {id(p) for p in collector.params}
    tensors = [p.grad for p in collector.params if p.grad is not None]
    for value in vars(collector.strategy).values():
        # the strategy's buffers, but not the parameters themselves (a strategy may list them)
        tensors += [t for t in tensors_of(value) if id(t) not in params]
    return storage_bytes(tensors)


def plain_held_bytes(model: torch.nn.Module) -> int:
    return storage_bytes(p.grad for p in model.parameters() if p.grad is not None)


class PeakTracker:
    """The peak of everything allocated since ``start``: CUDA allocator stats, or memray."""

    def __init__(self, device: torch.device, capture: Path | None) -> None:
        self.device, self.capture = device, capture
        self.method = None
        self._tracker = None

    def __enter__(self) -> PeakTracker:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.method = "torch.cuda.max_memory_allocated since before attach"
            return self
        try:
            import memray
        except ImportError:
            self.method = "unavailable: memray is not installed"
            return self
        assert self.capture is not None
        self.capture.unlink(missing_ok=True)
        self._tracker = memray.Tracker(
            self.capture,
            native_traces=False,
            # Python objects one by one, not pymalloc's 1 MiB arenas: whether a pass needs a
            # new arena depends on the heap before it, and counted 1 MiB in one loop's peak
            trace_python_allocators=True,
            file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS,
        )
        settle_threads()
        self._tracker.__enter__()
        self.method = "memray peak heap since before attach (aggregated capture)"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tracker is not None:
            settle_threads()
            self._tracker.__exit__(None, None, None)

    def peak(self) -> int | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.base
        if self._tracker is None:
            return None
        import memray

        reader = memray.FileReader(self.capture)
        try:
            return int(reader.metadata.peak_memory)
        finally:
            reader.close()


# how long a rank's communication threads are given to drop the work they finished
SETTLE_S = 0.05


def settle_threads() -> None:
    """Under ranks, a moment for the backend's threads to let go of finished collectives.

    memray starts and stops its tracker by setting a profile function on every Python thread
    state (Python 3.11 and 3.12 walk them without a lock). gloo's worker thread frees a
    finished collective's tensors by briefly creating a thread state of its own (to drop a
    Python object the tensor owned): a walk that meets one half made segfaults the rank (about
    1 FSDP2 case in 5 on 2 cores; CPython gh-137400). Every collective a window starts is
    waited for before it ends, so the threads only tidy up, and this wait (outside any timed
    region) lets them finish first."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        time.sleep(SETTLE_S)


def memory_pass(
    workload,
    strategy: str | None,
    data,
    capture: Path | None,
    parallel=None,
    grad_sync: str = "last",
    timeline_window: bool = True,
) -> dict:
    """held_bytes and peak_bytes of ``MEMORY_WINDOWS`` windows of a fresh replica (per rank:
    under FSDP2 the held gradients are this rank's shards), and a window's timeline from the
    same replica, no replica besides it: on CUDA its last window's (the allocator's history,
    recorded from before the first window, allocates nothing on the device: the peak is the
    same), on CPU one window more after the tracker (the profiler's own allocations would reach
    memray's peak; ``recorded_window``)."""
    gc.collect()
    if workload.device.type == "cuda":
        torch.cuda.empty_cache()
    held: list[int] = []
    # a sharded replica is built from the whole model (every weight gathered): shard it before
    # the tracker starts, so that the peak is the window's, not the build's
    sharded = _sharded_replica(workload, parallel)
    inline = timeline_window and workload.device.type == "cuda"
    drawn = None
    with PeakTracker(workload.device, capture) as tracker:
        loop = _fresh_loop(workload, strategy, parallel, grad_sync, sharded)
        del sharded

        def read_held() -> None:
            if loop.collector is not None:
                held.append(held_bytes(loop.collector))
            elif loop.path is not None:  # a framework's: its gradients where it keeps them
                held.append(storage_bytes(loop.path.held(loop.model)))
            else:
                held.append(plain_held_bytes(loop.model))

        stamps = timeline.Stamps()
        base = replica_bytes(loop)
        with timeline.Recorder(workload.device) if inline else contextlib.nullcontext() as rec:
            for i in range(MEMORY_WINDOWS):
                last = inline and i == MEMORY_WINDOWS - 1
                loop.window(
                    *data[i % len(data)], on_reset=read_held, stamps=stamps if last else None
                )
        if inline:
            drawn = timeline.window_timeline(rec.points(base), stamps, timeline.CUDA_METHOD, base)
    peak = tracker.peak()
    if timeline_window and not inline:  # after the tracker: the recorder's own allocations
        drawn = recorded_window(loop, data[MEMORY_WINDOWS % len(data)])
    loop.close()
    return {"held_bytes": held[-1], "peak_bytes": peak, "peak_method": tracker.method,
            "timeline": drawn}  # fmt: skip


def warm_up(workload, data, capture: Path | None, parallel=None, grad_sync: str = "last") -> None:
    """One window of the plain loop under a tracker, its figures thrown away: what a process
    allocates the first time it builds a replica, runs a window and starts a tracker (memray's
    own first use: about 30-90 KB on tiny CPU) then counts in neither loop's peak, so that
    whichever pass comes first is not the heavier (native against the plain loop, identical
    loops: equal within 1%). One window is enough: the first-use allocations are the first
    window's."""
    sharded = _sharded_replica(workload, parallel)
    try:
        with PeakTracker(workload.device, capture):
            loop = _fresh_loop(workload, None, parallel, grad_sync, sharded)
            del sharded
            loop.window(*data[0])
            loop.close()
    finally:
        if capture is not None:
            capture.unlink(missing_ok=True)


def recorded_window(loop, window) -> dict | None:
    """Allocated bytes over one more window of ``loop`` (a replica that ran windows before),
    CPU: the profiler's memory events from what the replica holds when the window starts
    (``replica_bytes``). The profiler reports no free of a block allocated before it started,
    so what the reset drops of the last window's (its gradients, set to None) is taken from the
    replica itself: the bytes it holds right after the reset against the level recorded there,
    one step at the reset's mark. Every later free is of the window's own allocations, seen."""
    stamps = timeline.Stamps()
    base = replica_bytes(loop)
    after_reset: list[int] = []
    with timeline.Recorder(loop.workload.device) as recorder:
        loop.window(*window, on_reset=lambda: after_reset.append(replica_bytes(loop)),
                    stamps=stamps)  # fmt: skip
    points = recorder.points(base)
    at_reset = dict(stamps.marks)["reset"]
    seen = [b for t, b in points if t <= at_reset]
    unseen = after_reset[0] - (seen[-1] if seen else base)
    if unseen:
        points = [(t, b + unseen if t > at_reset else b) for t, b in points]
        points.append((at_reset, (seen[-1] if seen else base) + unseen))
        points.sort(key=lambda point: point[0])
    return timeline.window_timeline(points, stamps, timeline.CPU_METHOD, base)


def _sharded_replica(workload, parallel):
    """(model, its FSDP2 module) for a sharded case; None otherwise."""
    if parallel is None or not parallel.sharded:
        return None
    model = parallel.unsharded(workload.model)
    return model, parallel.wrap(model)


def _fresh_loop(workload, strategy, parallel, grad_sync, sharded=None):
    from benches.engine.replicas import fresh_replica
    from benches.engine.runner import Loop

    if sharded is not None:
        model, module = sharded
        return Loop(workload, model, strategy, parallel, grad_sync, module)
    return Loop(workload, fresh_replica(workload.model, parallel), strategy, parallel, grad_sync)


def replica_bytes(loop) -> int:
    """The bytes a loop's replica holds: weights, gradients, optimizer state, strategy tensors."""
    params = list(loop.model.parameters())
    tensors = params + [p.grad for p in params if p.grad is not None]
    tensors += [t for state in loop.optimizer.state.values() for t in tensors_of(state)]
    if loop.collector is not None:
        ids = {id(p) for p in params}
        for value in vars(loop.collector.strategy).values():
            tensors += [t for t in tensors_of(value) if id(t) not in ids]
    return storage_bytes(tensors)


def flamegraph(capture: Path, out: Path) -> bool:
    """memray's flamegraph of a capture (the peak's call stacks), as an offline HTML file."""
    done = subprocess.run(
        [sys.executable, "-m", "memray", "flamegraph", "--no-web", "-f", "-o", out, capture],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


class _MallInfo2(ctypes.Structure):  # glibc >= 2.33's struct mallinfo2, every field a size_t
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@functools.cache
def _mallinfo2():
    """glibc's mallinfo2, or None (musl, macOS, an older glibc)."""
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    return function


def malloc_in_use() -> int | None:
    """Bytes malloc has handed out and not had back, over every arena (glibc's mallinfo2:
    in-use chunks plus mmapped ones; about 1 us). Unlike the resident set it does not move when
    the allocator keeps or returns freed pages, so a tensor freed and made again between two
    readings leaves it where it was, and only memory still held shows as growth."""
    function = _mallinfo2()
    if function is None:
        return None
    info = function()
    return int(info.uordblks + info.hblkhd)


def status_bytes(field: str) -> int | None:
    """A /proc/self/status figure (VmRSS, VmHWM) in bytes."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); psutil has no peak on Linux."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
