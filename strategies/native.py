"""``native``: PyTorch's own ``zero_grad``.

With ``set_to_none=True`` (PyTorch's default since 2.0) ``.grad`` is dropped, so the first
backward of a window *assigns* (AccumulateGrad steals the incoming gradient) and the memory is
freed between windows. With ``set_to_none=False`` the gradients are zeroed in place, grouped by
device and dtype with ``_foreach_zero_`` as ``Optimizer.zero_grad`` does.
Cost: one Python loop over the parameters; no kernels with ``set_to_none``.
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

    def attach(self, collector) -> None:
        # Module.zero_grad is the native call, but only when it touches nothing but the target
        # (grad_req null parameters have no .grad, so they don't count)
        module = collector.module
        ours = {id(p) for p in collector.params} | {id(p) for p in collector.null_params}
        self._module = (
            module
            if module is not None and all(id(p) in ours for p in module.parameters())
            else None
        )

    def reset(self, collector) -> None:
        if self._module is not None:
            self._module.zero_grad(set_to_none=self.set_to_none)
            return
        # a list target, or a module with grad_req null parameters: the same as zero_grad
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
