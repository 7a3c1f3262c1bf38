"""``native``: PyTorch's own ``zero_grad``.

With ``set_to_none=True`` (PyTorch's default since 2.0) ``.grad`` is dropped, so the first
backward of a window *assigns* (AccumulateGrad steals the incoming gradient) and the memory is
freed between windows. With ``set_to_none=False`` the gradients are zeroed in place, grouped by
device and dtype with ``_foreach_zero_`` as ``Optimizer.zero_grad`` does.
Both run over the collector's parameter list, as ``Optimizer.zero_grad`` runs over its
parameter groups (the plain loop's call), not ``Module.zero_grad``, which walks the module tree
on every call. Cost: one Python loop over the parameters; no kernels with ``set_to_none``.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from strategies.base import Strategy


class NativeStrategy(Strategy):
    name = "native"

    def __init__(self, set_to_none: bool = True) -> None:
        if not isinstance(set_to_none, bool):
            raise ValueError(f"set_to_none {set_to_none!r} is not a bool; valid: true, false")
        self.set_to_none = set_to_none

    def reset(self, collector) -> None:
        # what Optimizer.zero_grad does, over the collector's parameter list: Module.zero_grad
        # walks the module tree on every call (about 0.2 ms on the tiny preset's 57 modules,
        # 0.3% of a K=8 window and more at K=1), a cost the plain loop does not pay
        groups: dict[tuple, list[torch.Tensor]] = defaultdict(list)
        for p in collector.params:
            if p.grad is None:
                continue
            if self.set_to_none:
                p.grad = None
                continue
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            groups[(p.grad.device, p.grad.dtype)].append(p.grad)
        for grads in groups.values():
            torch._foreach_zero_(grads)

    def __repr__(self) -> str:
        return f"NativeStrategy(set_to_none={self.set_to_none})"
