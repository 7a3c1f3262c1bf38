"""``lazy``: an O(1) reset; the first gradient of a window *writes*, later ones add.

Where it comes from: djl #2304 reverted DJL's collector to "no zeroing"; DeepSpeed ZeRO-3 writes
the gradient on micro-step 0 and adds afterwards. Here the reset only advances a window counter:
no gradient memory is touched. A pre-hook on each parameter's AccumulateGrad node copies the
window's first gradient over the persistent ``.grad`` (so NaN/Inf left from before are gone) and
lets later ones add. At window end, only parameters that got no gradient are zeroed.
Cost: reset O(1); one Python hook call per parameter per backward; finish O(parameters) only
when some parameter got nothing. Memory: one persistent gradient buffer per parameter.
"""

from __future__ import annotations

import torch

from strategies import _hooks
from strategies.base import Strategy


class LazyStrategy(Strategy):
    name = "lazy"
    runs_under = ("none", "ddp")  # its hooks never run under FSDP2

    def attach(self, collector) -> None:
        if collector.fsdp:
            raise ValueError(
                "strategy 'lazy' cannot run under FSDP2 (fully_shard): its AccumulateGrad hooks "
                "sit on the sharded parameters, whose .grad FSDP2 writes by reduce-scatter "
                "outside autograd, so they never run; use block, foreach or native"
            )
        self._window = 0
        self._fresh = 0  # parameters that got a gradient in the current window
        self._seen = [-1] * len(collector.params)  # last window each parameter got a gradient
        self._hooks = []
        for i, p in enumerate(collector.params):
            if p.grad is None:  # persistent storage from the start, not stolen per window
                p.grad = torch.zeros_like(p)
            self._hooks.append(_hooks.register_prehook(p, self._first_writes(i, p)))

    def _first_writes(self, i: int, param: torch.Tensor):
        seen = self._seen

        def hook(grads: tuple[torch.Tensor | None, ...]) -> tuple[None] | None:
            if seen[i] == self._window:
                return None  # later gradients of the window add as usual
            seen[i] = self._window
            self._fresh += 1
            # grads[0] is None when grad_req "write" already wrote it: nothing left to do
            return (None,) if _hooks.write_into_grad(param, grads[0]) else None

        return hook

    def reset(self, collector) -> None:
        self._window += 1
        self._fresh = 0

    def finish(self, collector) -> None:
        if self._fresh == len(self._seen):
            return
        for i, p in enumerate(collector.params):
            if self._seen[i] != self._window and p.grad is not None:
                p.grad.zero_()

    def detach(self, collector) -> None:
        for _, handle in self._hooks:
            handle.remove()
        self._hooks = []
