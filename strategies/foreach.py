"""``foreach``: zero the target's gradients with one fused ``torch._foreach_zero_`` call.

Where it comes from: MXNet's multi-tensor zeroing kernel made ``zero_grad`` 50x faster than a
loop of per-array zeroes (mxnet #16716); PyTorch's optimizers use ``_foreach_zero_`` for
``zero_grad(set_to_none=False)``. Cost: one Python call per window; on CUDA a few fused kernel
launches instead of one per parameter. Memory stays allocated between windows.
"""

from __future__ import annotations

import torch

from strategies.base import Strategy


class ForeachStrategy(Strategy):
    name = "foreach"

    def reset(self, collector) -> None:
        grads = [g for p in collector.params if (g := p.grad) is not None]
        if grads:
            torch._foreach_zero_(grads)
