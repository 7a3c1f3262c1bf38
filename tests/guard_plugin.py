"""Plugin strategies that misbehave the way real code does, for the guards' tests.

``exits`` is ``native`` whose reset calls ``sys.exit(3)`` (a library that exits instead of
raising): its case must be one failed row, never the sweep's exit status. ``leaky`` is ``native``
that keeps ``ZEROGRAD_LEAK_BYTES`` (default 4 MiB) of written memory per reset, as a cache that
is never trimmed does: its growth per window must be the verdict ``leaks``.
"""

from __future__ import annotations

import os
import sys

import torch

import strategies
from strategies.native import NativeStrategy

LEAK_BYTES = int(os.environ.get("ZEROGRAD_LEAK_BYTES", str(4 * 2**20)))


class ExitingStrategy(NativeStrategy):
    def reset(self, collector) -> None:
        sys.exit(3)


class LeakyStrategy(NativeStrategy):
    """native plus LEAK_BYTES kept per reset (zeros, so the pages are touched and counted)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.kept: list[torch.Tensor] = []

    def reset(self, collector) -> None:
        self.kept.append(torch.zeros(LEAK_BYTES // 4, dtype=torch.float32))
        super().reset(collector)


for name, cls in (("exits", ExitingStrategy), ("leaky", LeakyStrategy)):
    if name not in strategies.available():
        strategies.register(name, cls)
