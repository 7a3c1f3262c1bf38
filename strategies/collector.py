"""The accumulation core: one collector, any strategy, windows of micro-batches.

``GradientCollector`` owns the window protocol (reset at the start, finish at the end),
grad_req modes, and the update (``step``) decoupled from backward, as MXNet's Estimator split
its GradientUpdateHandler out of the training step so that accumulation became possible
(mxnet #16869, #16900). What happens to gradient memory is the strategy's business.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from strategies import _hooks
from strategies.base import Strategy
from strategies.registry import get

GRAD_REQS = ("add", "write", "null")
T = TypeVar("T")

_FREED_GRAPH = "Trying to backward through the graph a second time"


def _one_line(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _named_leaves(target: nn.Module | Iterable[torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
    if isinstance(target, nn.Module):
        return list(target.named_parameters())  # tied weights appear once
    if isinstance(target, torch.Tensor):
        raise ValueError(
            "target is a single tensor; pass an nn.Module or a list of leaf tensors, e.g. [t]"
        )
    try:
        items = list(target)
    except TypeError:
        raise ValueError(
            f"target {type(target).__name__!r} is neither an nn.Module nor an iterable of "
            "leaf tensors"
        ) from None
    named, seen = [], set()
    for i, t in enumerate(items):
        if not isinstance(t, torch.Tensor):
            raise ValueError(
                f"target item {i} is a {type(t).__name__}, not a tensor; "
                "a block is an iterable of leaf tensors"
            )
        if not t.is_leaf:
            raise ValueError(f"target item {i} is not a leaf tensor; only leaves collect .grad")
        if id(t) not in seen:  # the same tensor twice is one parameter (tied weights)
            seen.add(id(t))
            named.append((str(i), t))
    return named


def _resolve_modes(grad_req: str | Mapping[str, str], names: list[str]) -> dict[str, str]:
    if isinstance(grad_req, str):
        if grad_req not in GRAD_REQS:
            raise ValueError(f"unknown grad_req {grad_req!r}; valid modes: {', '.join(GRAD_REQS)}")
        return dict.fromkeys(names, grad_req)
    if not isinstance(grad_req, Mapping):
        raise ValueError(
            f"grad_req {grad_req!r} is neither a mode ({', '.join(GRAD_REQS)}) "
            "nor a dict {name: mode}"
        )
    known = set(names)
    for name, mode in grad_req.items():
        if name not in known:
            raise ValueError(
                f"grad_req names unknown parameter {name!r}; valid names: {_one_line(names)}"
            )
        if mode not in GRAD_REQS:
            raise ValueError(
                f"unknown grad_req {mode!r} for {name!r}; valid modes: {', '.join(GRAD_REQS)}"
            )
    return {name: grad_req.get(name, "add") for name in names}


class GradientCollector:
    """Collects the gradients of one target over windows of micro-batches.

    >>> collector = GradientCollector(model, strategy="lazy")
    >>> with collector:                       # one window
    ...     for x, y in micro_batches:
    ...         collector.backward(loss_fn(model(x), y))
    >>> collector.step(optimizer, clip_norm=1.0)
    """

    def __init__(
        self,
        target: nn.Module | Iterable[torch.Tensor],
        strategy: str | Strategy = "native",
        grad_req: str | Mapping[str, str] = "add",
    ) -> None:
        self.module = target if isinstance(target, nn.Module) else None
        #: the DistributedDataParallel wrapper when the target is one: micro_batches() skips its
        #: all-reduce on all but the last micro-batch of a window (no_sync)
        self.ddp = target if isinstance(target, DistributedDataParallel) else None
        named = [(n, p) for n, p in _named_leaves(target) if p.requires_grad]
        if not named:
            raise ValueError(
                "target has no parameter requiring grad; nothing to collect "
                "(set requires_grad=True on at least one tensor)"
            )
        modes = _resolve_modes(grad_req, [n for n, _ in named])
        if isinstance(strategy, str):
            strategy = get(strategy)
        elif not isinstance(strategy, Strategy):
            raise ValueError(
                f"strategy {strategy!r} is neither a registered name nor a Strategy instance"
            )
        if getattr(strategy, "_zerograd_collector", None) is not None:
            raise ValueError(f"strategy instance {strategy!r} is already adopted by a collector")

        self.grad_req = modes
        self.named_params = [(n, p) for n, p in named if modes[n] != "null"]
        self.params = [p for _, p in self.named_params]
        self.null_params = [p for n, p in named if modes[n] == "null"]
        # before the strategy's own hooks, so that a written gradient is what they see
        self._write_nodes = [
            self._write_hook(p) for n, p in self.named_params if modes[n] == "write"
        ]
        self.strategy = strategy
        self._in_window = False
        self._closed = False
        self.windows = 0
        try:
            strategy.attach(self)  # may refuse a combination (e.g. flat with DDP bucket views)
        except BaseException:
            self._remove_write_hooks()
            raise
        strategy._zerograd_collector = self
        for p in self.null_params:  # no gradient is computed for them while attached
            p.requires_grad_(False)
            p.grad = None

    @staticmethod
    def _write_hook(param: torch.Tensor) -> tuple[Any, Any]:
        # grad_req "write": every backward writes over .grad instead of adding to it.
        def write(grads: tuple[torch.Tensor | None, ...]) -> tuple[None] | None:
            return (None,) if _hooks.write_into_grad(param, grads[0]) else None

        return _hooks.register_prehook(param, write)

    # -- the window -------------------------------------------------------------------------
    def __enter__(self) -> GradientCollector:
        self._check_open("open a window")
        if self._in_window:
            raise RuntimeError(
                "this collector's window is already open; windows of one collector cannot nest "
                "(use a second collector for another target)"
            )
        self.strategy.reset(self)
        self._in_window = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.strategy.finish(self)
        finally:
            self._in_window = False
            self.windows += 1

    def micro_batches(self, items: Iterable[T]) -> Iterator[T]:
        """Iterate a window's micro-batches; run forward and backward inside the loop.

        For a DistributedDataParallel target, every micro-batch but the last runs under
        ``no_sync()``: gradients accumulate locally and only the last backward all-reduces.
        """
        items = list(items)
        for i, item in enumerate(items):
            if self.ddp is not None and i < len(items) - 1:
                with self.ddp.no_sync():
                    yield item
            else:
                yield item

    def backward(self, loss: torch.Tensor, retain_graph: bool | None = None) -> None:
        """Back-propagate one micro-batch's loss into the window's gradients."""
        if not self._in_window:
            raise RuntimeError(
                "collector.backward() called outside a window; call it inside `with collector:`"
            )
        try:
            torch.autograd.backward(loss, retain_graph=retain_graph)
        except RuntimeError as err:
            if _FREED_GRAPH in str(err):
                raise RuntimeError(
                    "backward through a graph whose buffers were already freed; pass "
                    "retain_graph=True to the earlier collector.backward() of the same graph"
                ) from None
            raise

    # -- the update ---------------------------------------------------------------------------
    def step(
        self,
        optimizer: torch.optim.Optimizer,
        clip_norm: float | None = None,
        scaler: torch.amp.GradScaler | None = None,
    ) -> torch.Tensor | None:
        """Unscale once, clip the window's gradient, step, update the scaler.

        Returns the total gradient norm before clipping when ``clip_norm`` is given.
        """
        self._check_open("step")
        if self._in_window:
            raise RuntimeError(
                "collector.step() called inside a window; call it after the `with` block closes"
            )
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm {clip_norm!r} must be a positive number or None")
        if scaler is not None:
            scaler.unscale_(optimizer)  # once per window, before clipping
        norm = None
        if clip_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(self.params, clip_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        return norm

    def close(self) -> None:
        """Detach the strategy: its hooks and buffers go; null parameters require grad again."""
        if self._closed:
            return
        if self._in_window:
            raise RuntimeError("collector.close() called inside its window; close it after")
        self._closed = True
        try:
            self.strategy.detach(self)
        finally:
            self.strategy._zerograd_collector = None
            self._remove_write_hooks()
            for p in self.null_params:
                p.requires_grad_(True)

    def _remove_write_hooks(self) -> None:
        for _, handle in self._write_nodes:
            handle.remove()
        self._write_nodes = []

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"cannot {what}: this collector is closed")

    def __repr__(self) -> str:
        return (
            f"GradientCollector({len(self.params)} params, strategy={self.strategy!r}, "
            f"windows={self.windows})"
        )
