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
#: when a window's gradients are reduced across ranks: after every micro-batch, only after the
#: last (DDP ``no_sync``, FSDP2 ``set_requires_gradient_sync(False)``), or, on a 2-D (HSDP) mesh,
#: reduce-scattered every micro-batch and all-reduced across replicas only after the last
GRAD_SYNCS = ("every", "last", "scatter")
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


def fsdp_modules(target: object) -> list[nn.Module]:
    """The FSDP2 (``fully_shard``) modules of a target whose root is one; [] otherwise."""
    if not torch.distributed.is_available():
        return []
    from torch.distributed.fsdp import FSDPModule

    if not isinstance(target, FSDPModule):
        return []
    return [m for m in target.modules() if isinstance(m, FSDPModule)]


def _mesh_dims(target: nn.Module) -> int:
    """The number of dimensions of the device mesh an FSDP2 target's parameters live on."""
    param = next(target.parameters())
    mesh = getattr(param, "device_mesh", None)
    return mesh.ndim if mesh is not None else 1


def check_grad_sync(mode: str, fsdp_root: nn.Module | None = None) -> None:
    """A ValueError naming the valid flavours unless ``mode`` can run on this target."""
    valid = ["every", "last"]
    if fsdp_root is not None and _mesh_dims(fsdp_root) == 2:
        valid.append("scatter")
    if mode not in valid:
        why = " (scatter needs FSDP2 on a 2-D HSDP mesh)" if mode in GRAD_SYNCS else ""
        raise ValueError(f"unknown grad_sync {mode!r}{why}; valid here: {', '.join(valid)}")


def synced(items: Iterable[T], module: nn.Module | None, grad_sync: str = "last") -> Iterator[T]:
    """Yield a window's micro-batches, each with the gradient synchronisation ``grad_sync`` asks
    of ``module`` (a DistributedDataParallel wrapper, an FSDP2 root, or anything else: then the
    micro-batches pass through). The caller runs forward and backward inside the loop.
    ``GradientCollector.micro_batches`` documents the flavours; a plain loop uses this too."""
    items = list(items)
    last = len(items) - 1
    ddp = module if isinstance(module, DistributedDataParallel) else None
    fsdp = module if fsdp_modules(module) else None
    if fsdp is not None:
        yield from _fsdp_synced(items, fsdp, grad_sync)
        return
    for i, item in enumerate(items):
        if ddp is not None and i < last and grad_sync == "last":
            with ddp.no_sync():
                yield item
        else:
            yield item


def _fsdp_synced(items: list[T], fsdp: nn.Module, grad_sync: str) -> Iterator[T]:
    """FSDP2's flags for each micro-batch, set only where they change (each call walks every
    FSDP module, inside the window); an abandoned window leaves FSDP2 syncing, as it found it."""
    last = len(items) - 1
    state: tuple[bool | None, bool | None] = (None, None)  # (gradient sync, all-reduce): unknown
    try:
        for i, item in enumerate(items):
            deferred = i < last
            wanted = (
                not (deferred and grad_sync == "last"),
                not (deferred and grad_sync == "scatter"),
            )
            if wanted[0] != state[0]:
                fsdp.set_requires_gradient_sync(wanted[0])  # also sets all-reduce, as it goes
                state = (wanted[0], wanted[0])
            if wanted[1] != state[1]:
                fsdp.set_requires_all_reduce(wanted[1])
                state = (state[0], wanted[1])
            yield item
    finally:
        if state != (True, True):
            fsdp.set_requires_gradient_sync(True)


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
        grad_sync: str = "last",
    ) -> None:
        self.module = target if isinstance(target, nn.Module) else None
        #: the DistributedDataParallel wrapper when the target is one: micro_batches() skips its
        #: all-reduce on all but the last micro-batch of a window (no_sync)
        self.ddp = target if isinstance(target, DistributedDataParallel) else None
        #: the FSDP2 modules (root first) when the target was wrapped with ``fully_shard``: its
        #: parameters and ``.grad`` are DTensor shards, reduce-scattered by FSDP2 outside autograd
        self.fsdp = fsdp_modules(target)
        named = [(n, p) for n, p in _named_leaves(target) if p.requires_grad]
        if not named:
            raise ValueError(
                "target has no parameter requiring grad; nothing to collect "
                "(set requires_grad=True on at least one tensor)"
            )
        modes = _resolve_modes(grad_req, [n for n, _ in named])
        if self.fsdp and any(m != "add" for m in modes.values()):
            odd = sorted({m for m in modes.values() if m != "add"})
            raise ValueError(
                f"grad_req {odd[0]!r} cannot run under FSDP2 (fully_shard): FSDP2 writes the "
                "sharded .grad itself, outside autograd; valid under FSDP2: add"
            )
        self._in_window = False
        self.grad_sync = grad_sync
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

    @property
    def grad_sync(self) -> str:
        """When gradients are reduced across ranks (see ``GRAD_SYNCS``); settable between
        windows, so that two flavours can alternate window by window on one model."""
        return self._grad_sync

    @grad_sync.setter
    def grad_sync(self, value: str) -> None:
        if self._in_window:
            raise RuntimeError("grad_sync cannot change inside a window; set it between windows")
        check_grad_sync(value, self.fsdp[0] if self.fsdp else None)
        self._grad_sync = value

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

        How gradients are reduced across ranks follows ``grad_sync``:

        - ``last`` (default): a DistributedDataParallel target runs every micro-batch but the
          last under ``no_sync()``; an FSDP2 target under ``set_requires_gradient_sync(False)``
          (unsharded gradients accumulate locally; the last backward reduce-scatters them);
        - ``every``: every backward reduces (FSDP2: sharded gradients accumulate);
        - ``scatter`` (FSDP2 on a 2-D HSDP mesh): every backward reduce-scatters within its
          replica, the all-reduce across replicas waits for the last
          (``set_requires_all_reduce(False)`` until then).

        Without DDP or FSDP2 the micro-batches pass through.
        """
        return synced(items, self.ddp or (self.fsdp[0] if self.fsdp else None), self.grad_sync)

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

        Clipping is the strategy's ``clip_grad_norm`` hook (by default ``clip_grad_norm_`` over
        ``params``). Returns the total gradient norm before clipping when ``clip_norm`` is given.
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
            norm = self.strategy.clip_grad_norm(self, clip_norm)
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
