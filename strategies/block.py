"""``block``: zero only the target's gradients, in place, one tensor at a time.

Where it comes from: the collector scoped to one block that djl #2232 proposed after the global
search of djl #2101 made training slow down linearly with unrelated live arrays (djl #2210).
Cost: one ``zero_`` kernel launch per parameter per window (a Python loop over the target);
memory stays allocated between windows. ``zero_`` fills, so NaN/Inf are cleared (``g - g``
would not be, djl #2792).
"""

from __future__ import annotations

from strategies.base import Strategy


class BlockStrategy(Strategy):
    name = "block"

    def reset(self, collector) -> None:
        for p in collector.params:
            if (grad := p.grad) is not None:
                grad.zero_()
