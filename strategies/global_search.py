"""``global``: zero the ``.grad`` of every live leaf tensor in the process.

Where it comes from: DJL's PyTorch ``GradientCollector`` zeroed gradients by searching every
array its managers tracked (djl #2101), so each reset paid for every live array, model or not:
training slowed down linearly and memory leaked (djl #2210). This strategy reproduces that hazard
on purpose, with Python's own process-wide registry of objects (``gc.get_objects()``).
Cost: O(live Python objects) per window, plus one ``zero_`` per gradient found; it also zeroes
gradients of tensors outside the target (another model's, an unrelated cache's).
"""

from __future__ import annotations

import gc

import torch

from strategies.base import Strategy

_Tensor = torch.Tensor


class GlobalStrategy(Strategy):
    name = "global"

    def reset(self, collector) -> None:
        for obj in gc.get_objects():
            # type() and is_leaf before .grad: reading .grad of a non-leaf warns, and isinstance
            # would call __class__ on arbitrary proxies
            if issubclass(type(obj), _Tensor) and obj.is_leaf:
                grad = obj.grad
                if grad is not None:
                    grad.zero_()
