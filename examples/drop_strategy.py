"""An example plugin: ``drop``, set_to_none without ``Module.zero_grad``.

Load it into a sweep with ``python -m benches run --plugin examples.drop_strategy``, or run the
shared correctness suite against it with
``ZEROGRAD_PLUGINS=examples.drop_strategy python -m pytest tests/test_strategies.py``.

What it teaches: ``native`` calls ``Module.zero_grad``, which walks every submodule to find the
parameters each window; ``drop`` does the same work over the collector's flat list.
"""

from __future__ import annotations

import strategies


class DropStrategy(strategies.Strategy):
    """Drop every gradient of the target: the next backward assigns instead of adding."""

    def reset(self, collector) -> None:
        for p in collector.params:
            p.grad = None


strategies.register("drop", DropStrategy)
