"""An example plugin: ``drop``, the smallest strategy: set_to_none over the collector's list.

Load it into a sweep with ``python -m benches run --plugin examples.drop_strategy``, or run the
shared correctness suite against it with
``ZEROGRAD_PLUGINS=examples.drop_strategy python -m pytest tests/test_strategies.py``.

What it teaches: a strategy is a ``reset`` hook over ``collector.params``. ``drop`` is what
``native`` does with its default ``set_to_none=True``, so a sweep of the two is an A/A test of
a plugin against a built-in: never ``lower`` or ``higher``.
"""

from __future__ import annotations

import strategies


class DropStrategy(strategies.Strategy):
    """Drop every gradient of the target: the next backward assigns instead of adding."""

    def reset(self, collector) -> None:
        for p in collector.params:
            p.grad = None


strategies.register("drop", DropStrategy)
