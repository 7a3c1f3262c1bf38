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
    handle = _Handle(node.register_prehook(hook), param)
    return node, handle


def live_prehooks(param: torch.Tensor) -> int:
    """How many pre-hooks registered here are on ``param``'s node now (the cost model's count)."""
    return _LIVE.get(id(param), 0)


# id(param) -> live pre-hooks; a live handle holds its param, so the id cannot be reused
_LIVE: dict[int, int] = {}


class _Handle:
    """torch's removable handle, keeping ``live_prehooks`` right (nothing in the hook's path)."""

    __slots__ = ("_handle", "_param")

    def __init__(self, handle: Any, param: torch.Tensor) -> None:
        self._handle, self._param = handle, param
        _LIVE[id(param)] = live_prehooks(param) + 1

    def remove(self) -> None:
        if self._param is not None:
            self._handle.remove()
            self._forget()

    def _forget(self) -> None:
        key = id(self._param)
        _LIVE[key] -= 1
        if not _LIVE[key]:
            del _LIVE[key]
        self._param = None

    def __del__(self) -> None:
        # a collector dropped without close(): its count goes with it, so that a new tensor
        # with a reused id does not inherit it (the node, held only by its owner, goes too)
        if getattr(self, "_param", None) is not None:
            self._forget()


def write_into_grad(param: torch.Tensor, grad: torch.Tensor | None) -> bool:
    """Copy ``grad`` into ``param.grad`` in place; False when there is nothing to write into."""
    if grad is None or param.grad is None:
        return False
    param.grad.copy_(grad)
    return True
