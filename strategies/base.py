"""The strategy interface: four hooks the collector calls around its windows."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    def attach(self, collector: GradientCollector) -> None:
        """Once, when a collector adopts this strategy: allocate buffers, register hooks."""

    def reset(self, collector: GradientCollector) -> None:
        """At the start of every window: make the next backward start from zero."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset(collector)")

    def finish(self, collector: GradientCollector) -> None:
        """At the end of every window (default: nothing)."""

    def detach(self, collector: GradientCollector) -> None:
        """When the collector is closed: remove hooks, let buffers go."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
