"""The strategy interface: the hooks the collector calls around its windows and its update."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from strategies.collector import GradientCollector


class Strategy:
    """How a collector resets and collects gradients.

    The collector calls each hook with itself; ``collector.params`` lists the tensors whose
    gradients it collects (grad_req ``add`` or ``write``) and ``collector.named_params`` the same
    as ``(name, tensor)`` pairs. A strategy instance is adopted by one collector at a time.
    """

    #: the name it is registered under (set by the registry for built-in strategies)
    name: str = ""
    #: how ranks may share the model where it runs (none, ddp, fsdp2, hsdp): a hint, so that a
    #: sweep of ``all`` strategies leaves out the ones that would refuse; ``attach`` decides
    runs_under: tuple[str, ...] = ("none", "ddp", "fsdp2", "hsdp")

    def attach(self, collector: GradientCollector) -> None:
        """Once, when a collector adopts this strategy: allocate buffers, register hooks."""

    def reset(self, collector: GradientCollector) -> None:
        """At the start of every window: make the next backward start from zero."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset(collector)")

    def finish(self, collector: GradientCollector) -> None:
        """At the end of every window (default: nothing)."""

    def detach(self, collector: GradientCollector) -> None:
        """When the collector is closed: remove hooks, let buffers go."""

    def clip_grad_norm(self, collector: GradientCollector, max_norm: float) -> torch.Tensor:
        """At ``collector.step(clip_norm=...)``, after any GradScaler unscale: return the total
        2-norm of the window's gradient (what ``.grad`` holds) before clipping, and scale the
        gradients in place by ``min(1, max_norm / (norm + 1e-6))``, as
        ``torch.nn.utils.clip_grad_norm_`` does (default: that call over ``collector.params``,
        which also handles FSDP2's DTensor shards)."""
        return torch.nn.utils.clip_grad_norm_(collector.params, max_norm)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
