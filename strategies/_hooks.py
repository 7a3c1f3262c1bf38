"""Hooks on a leaf's AccumulateGrad node, shared by the core and the strategies.

A pre-hook on the node sees the incoming gradient before it is added to ``.grad``. Returning
``(None,)`` hands the node an undefined gradient, which it skips: that is how a gradient is
*written* into an existing buffer (``copy_``) instead of added, without a zeroing pass.
The node is weakly held by its tensor, so the caller keeps the returned node alive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

PreHook = Callable[[tuple[torch.Tensor | None, ...]], tuple[torch.Tensor | None, ...] | None]


def grad_accumulator(param: torch.Tensor) -> torch.autograd.graph.Node:
    """The AccumulateGrad node of a leaf tensor that requires grad."""
    with torch.enable_grad():
        return param.view_as(param).grad_fn.next_functions[0][0]


def register_prehook(param: torch.Tensor, hook: PreHook) -> tuple[torch.autograd.graph.Node, Any]:
    """Register ``hook`` on ``param``'s AccumulateGrad node: (node, handle), both kept by the
    caller (the node is weakly held by its tensor; ``handle.remove()`` takes the hook off)."""
    node = grad_accumulator(param)
    return node, node.register_prehook(hook)


def write_into_grad(param: torch.Tensor, grad: torch.Tensor | None) -> bool:
    """Copy ``grad`` into ``param.grad`` in place; False when there is nothing to write into."""
    if grad is None or param.grad is None:
        return False
    param.grad.copy_(grad)
    return True
