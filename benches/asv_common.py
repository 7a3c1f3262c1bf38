"""What the asv suites share: settings, seeded builders, the base class and the metric mixins.

The layout follows scikit-learn's ``asv_benchmarks/``: mixins supply the metric methods
(``time_window``, ``peakmem_window``, ``track_*``), the concrete classes in ``asv_strategies``
only say what to build. asv installs zerograd at each commit and imports this module from the
working tree, so it must import against every commit: ``strategies`` is imported lazily, and a
strategy the commit lacks raises NotImplementedError in ``setup`` (asv's skip), as scipy does.

    ZEROGRAD_ASV_PRESET=small asv run ...   # the workload preset; default tiny
"""

from __future__ import annotations

import functools
import gc
import os
import statistics
import time
from abc import ABC, abstractmethod
from typing import ClassVar

import torch

from benches.workload import Workload

# Every strategy the suite knows, written out: asv parameters must not depend on the installed
# version (numpy's rule), or results of different commits would not line up.
STRATEGIES = ["global", "block", "native", "lazy", "foreach", "flat"]
PRESET = os.environ.get("ZEROGRAD_ASV_PRESET", "tiny")
THREADS = 1  # pinned: 2-core machines are shared, and more threads add noise, not signal
SEED = 0


def require_strategy(name: str) -> None:
    """Skip (NotImplementedError) where the installed commit lacks ``name``."""
    try:
        import strategies
    except ImportError as err:
        raise NotImplementedError(f"no strategies package at this commit: {err}") from None
    if name not in strategies.available():
        raise NotImplementedError(f"strategy {name!r} not at this commit")


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise NotImplementedError("needs a CUDA GPU")


def workload(accumulate: int = 1, live_tensors: int = 0, device: str = "cpu") -> Workload:
    """The seeded workload: each window gets its own model, so collectors never share one."""
    return Workload(
        preset=PRESET,
        accumulate=accumulate,
        live_tensors=live_tensors,
        device=device,
        dropout=0.0,
        seed=SEED,
        threads=THREADS,
    )


class Window:
    """One strategy's collector on a workload, and one training window with it."""

    def __init__(self, strategy: str | None, work: Workload) -> None:
        import strategies

        self.work = work
        self.model = work.model
        self.batches = work.batches(0)  # made once: the windows time training, not data
        self.tokens = work.window_tokens(self.batches)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.collector = (
            strategies.GradientCollector(self.model, strategy=strategy) if strategy else None
        )
        self.cuda = work.device.type == "cuda"

    def run(self) -> None:
        """A window: reset, K forward+backward, finish, optimizer step."""
        collector, loss = self.collector, self.work.loss
        with collector:
            for batch in self.batches:
                collector.backward(loss(batch, self.tokens))
        collector.step(self.optimizer)
        if self.cuda:  # asv reads a wall clock: the GPU's work must be done when we return
            torch.cuda.synchronize()

    def run_plain(self) -> None:
        """The same window as plain PyTorch, without the core: the overhead's yardstick."""
        self.model.zero_grad(set_to_none=True)
        for batch in self.batches:
            self.work.loss(batch, self.tokens).backward()
        self.optimizer.step()
        if self.cuda:
            torch.cuda.synchronize()


@functools.cache
def window(strategy: str | None, **options) -> Window:
    """A warm window, built once per process and case (asv runs each case in its own process).

    Warm: attach-time work and the first window's allocations stay out of what is timed.
    """
    torch.set_num_threads(THREADS)
    result = Window(strategy, workload(**options))
    result.run()
    gc.collect()
    return result


class Benchmark(ABC):
    """asv settings shared by every suite: a short run on a shared 2-core machine.

    Abstract until a concrete suite says what to build (``options``): asv skips abstract classes,
    so the mixins below are never collected as benchmarks of their own.
    """

    timer = time.perf_counter
    rounds = 2  # two processes per timed case: a noisy neighbour rarely hits both
    repeat = (3, 8, 3.0)  # (min samples, max samples, seconds); asv's default is 10/20 s
    warmup_time = 0.05
    timeout = 120
    param_names: ClassVar[list] = ["strategy"]
    params: ClassVar[list] = [STRATEGIES]
    device = "cpu"  # the time and host-memory suites; track_gpu_peak_bytes asks for cuda

    @abstractmethod
    def options(self, *params) -> dict:
        """Workload options for this case, from the parameters after the strategy."""

    def setup(self, strategy: str, *params) -> None:
        # asv runs setup before every sample; the window is built once per process
        require_strategy(strategy)
        self.window = window(strategy, device=self.device, **self.options(*params))


class TimeWindowMixin(Benchmark):
    def time_window(self, *params) -> None:
        self.window.run()


class PeakmemWindowMixin(Benchmark):
    rounds = 1  # a peak, not a distribution: one process per case keeps a commit under 5 min

    def peakmem_window(self, *params) -> None:
        self.window.run()


class TrackGpuPeakMixin(Benchmark):
    """GPU memory at the window's peak, from torch.cuda's peak stats (skipped without CUDA)."""

    device = "cuda"
    rounds = 1

    def setup(self, strategy: str, *params) -> None:
        require_cuda()
        super().setup(strategy, *params)

    def track_gpu_peak_bytes(self, *params) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.window.run()
        return torch.cuda.max_memory_allocated()

    track_gpu_peak_bytes.unit = "bytes"


class TimeResetMixin(Benchmark):
    """The strategy's reset hook alone, after a window that gave every parameter a gradient."""

    # asv runs setup once per sample, not per call: one call per sample, and no warm-up call,
    # so every timed reset meets gradients a window filled (not ones already reset)
    number = 1
    warmup_time = 0
    repeat = (10, 30, 5.0)

    def setup(self, strategy: str, *params) -> None:
        super().setup(strategy, *params)
        self.window.run()  # untimed: gradients to reset (native's set_to_none left None)

    def time_reset(self, *params) -> None:
        collector = self.window.collector
        collector.strategy.reset(collector)


def interleaved_medians(a, b, rounds: int) -> tuple[float, float]:
    """Median seconds of ``a()`` and ``b()`` timed in ABBA order, so drift hits both alike."""
    ta: list[float] = []
    tb: list[float] = []
    clock = time.perf_counter
    for i in range(rounds):
        for fn, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            start = clock()
            fn()
            out.append(clock() - start)
    return statistics.median(ta), statistics.median(tb)
