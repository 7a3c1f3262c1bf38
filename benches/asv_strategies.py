"""asv suites: what each gradient-collection strategy costs, commit by commit.

    asv run HEAD~3..HEAD                      # from the repository root; see asv.conf.json
    asv continuous --factor 1.3 main HEAD     # gate a change: flags what got 1.3x slower

Each concrete class only says what to build; the metrics come from the mixins in asv_common.
Workload: the ``tiny`` preset (``ZEROGRAD_ASV_PRESET`` picks another), one thread, seed 0.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from benches.asv_common import (
    STRATEGIES,
    Benchmark,
    PairedOverheadMixin,
    PeakmemWindowMixin,
    TimeResetMixin,
    TimeWindowMixin,
    TrackGpuPeakMixin,
    interleaved_medians,
    require_strategy,
    window,
)


class StrategyWindow(TimeWindowMixin):
    """A whole window (reset, K forward+backward, finish, step) over accumulation steps K and
    precision (fp32; bf16: bf16 weights and .grad; the precision parameter started a new
    series of this benchmark)."""

    params: ClassVar[list] = [STRATEGIES, [1, 4], ["fp32", "bf16"]]
    param_names: ClassVar[list] = ["strategy", "accumulate", "precision"]

    def options(self, accumulate: int, precision: str) -> dict:
        return {"accumulate": accumulate, "precision": precision}


class StrategyOverhead(PairedOverheadMixin):
    """Each strategy's window over the plain loop's, paired in one process, over K.

    The figure decided on over commits (``python -m reports history``): unpaired times of two
    commits come from two processes, which differ by more than most changes on a shared machine.
    """

    params: ClassVar[list] = [STRATEGIES, [1, 4]]
    param_names: ClassVar[list] = ["strategy", "accumulate"]

    def options(self, accumulate: int) -> dict:
        return {"accumulate": accumulate}


class StrategyReset(TimeResetMixin):
    """The reset hook over unrelated live tensors: only ``global`` should grow with them."""

    params: ClassVar[list] = [STRATEGIES, [0, 10_000]]
    param_names: ClassVar[list] = ["strategy", "live_tensors"]

    def options(self, live_tensors: int) -> dict:
        return {"live_tensors": live_tensors}


class StrategyPeakmem(PeakmemWindowMixin):
    """Host peak RSS of the process that built the workload and ran its windows."""

    def options(self) -> dict:
        return {}


class StrategyGpuPeak(TrackGpuPeakMixin):
    """Peak GPU memory of one window, per strategy (skipped without CUDA)."""

    def options(self) -> dict:
        return {}


class CoreOverhead(Benchmark):
    """The core's own cost: native windows over plain-PyTorch windows, alternated in-process."""

    params: ClassVar[list] = []
    param_names: ClassVar[list] = []
    rounds = 1  # the ratio is already a median of interleaved windows
    windows = 20

    def options(self) -> dict:
        return {}

    def setup(self) -> None:
        require_strategy("native")
        self.window = window("native", device=self.device)
        self.window.run_plain()  # both kinds warm before either is timed

    def track_core_overhead(self) -> float:
        native, plain = interleaved_medians(self.window.run, self.window.run_plain, self.windows)
        return native / plain

    track_core_overhead.unit = "ratio"


class ResetVsMemset(Benchmark):
    """A fused reset over one ``zero_`` of a buffer of the same bytes, timed interleaved."""

    params: ClassVar[list] = [["flat", "foreach"]]
    param_names: ClassVar[list] = ["strategy"]
    rounds = 1  # the ratio is already a median of interleaved resets
    resets = 200

    def options(self) -> dict:
        return {}

    def setup(self, strategy: str) -> None:
        super().setup(strategy)
        numel = sum(p.numel() for p in self.window.model.parameters())
        self.memset = torch.ones(numel, device=self.window.work.device)

    def track_reset_vs_memset(self, strategy: str) -> float:
        collector = self.window.collector
        reset = collector.strategy.reset
        sync = torch.cuda.synchronize if self.window.cuda else (lambda: None)

        def reset_once() -> None:
            reset(collector)
            sync()

        def memset_once() -> None:
            self.memset.zero_()
            sync()

        ours, memset = interleaved_medians(reset_once, memset_once, self.resets)
        return ours / memset

    track_reset_vs_memset.unit = "ratio"
