"""The strategy interface: the hooks the collector calls around its windows and its update,
and what a strategy may read of the collector (``Collected``), so that reading ``Strategy``
never means reading the collector or the registry (neither is imported here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn


class Collected(Protocol):
    """What a strategy reads of the collector that adopted it (``GradientCollector`` is one).

    The contract: a strategy reads these and nothing else of the collector, and writes only
    to the ``.grad`` of ``params`` (and to buffers and hooks of its own)."""

    #: the tensors whose gradients are collected (grad_req ``add`` or ``write``), in order
    params: list[torch.Tensor]
    #: the same as ``(name, tensor)`` pairs: ``named_parameters()`` names, or "0", "1", ...
    named_params: list[tuple[str, torch.Tensor]]
    #: parameters under grad_req ``null``: no gradient is computed for them while attached
    null_params: list[torch.Tensor]
    #: every parameter's mode by name: "add", "write" or "null"
    grad_req: Mapping[str, str]
    #: the target when it is a module (else None: a list of leaf tensors, "the block")
    module: nn.Module | None
    #: the target when it is wrapped in DistributedDataParallel, else None
    ddp: Any
    #: the target's FSDP2 (``fully_shard``) modules, root first; empty without FSDP2
    fsdp: Sequence[nn.Module]


class Strategy:
    """How a collector resets and collects gradients.

    The collector calls each hook with itself, read through ``Collected`` (``collector.params``,
    ``collector.named_params``, ...). A strategy instance is adopted by one collector at a time.
    """

    #: the name it is registered under (set by the registry for built-in strategies)
    name: str = ""
    #: how ranks may share the model where it runs (none, ddp, fsdp2, hsdp): a hint, so that a
    #: sweep of ``all`` strategies leaves out the ones that would refuse; ``attach`` decides
    runs_under: tuple[str, ...] = ("none", "ddp", "fsdp2", "hsdp")

    def attach(self, collector: Collected) -> None:
        """Once, when a collector adopts this strategy: allocate buffers, register hooks."""

    def reset(self, collector: Collected) -> None:
        """At the start of every window: make the next backward start from zero."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset(collector)")

    def finish(self, collector: Collected) -> None:
        """At the end of every window (default: nothing)."""

    def detach(self, collector: Collected) -> None:
        """When the collector is closed: remove hooks, let buffers go."""

    def clip_grad_norm(self, collector: Collected, max_norm: float) -> torch.Tensor:
        """At ``collector.step(clip_norm=...)``, after any GradScaler unscale: return the total
        2-norm of the window's gradient (what ``.grad`` holds) before clipping, and scale the
        gradients in place by ``min(1, max_norm / (norm + 1e-6))``, as
        ``torch.nn.utils.clip_grad_norm_`` does (default: that call over ``collector.params``,
        which also handles FSDP2's DTensor shards)."""
        return torch.nn.utils.clip_grad_norm_(collector.params, max_norm)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
