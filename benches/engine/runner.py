"""How a case's windows run and are timed: the strategy's loop paired with the plain loop.

Two replicas of the workload's model with the same weights live in the case's process:

- the **strategy's** replica, adopted by a ``GradientCollector`` with the case's strategy;
- the **plain** replica, which no strategy ever sees: the loop people write without us,
  ``loss.backward()`` per micro-batch, ``optimizer.step()``, ``optimizer.zero_grad()``
  (set_to_none). Its gradients are dropped at the end of its window, inside its clock, so a
  process-wide search (``global``) finds nothing of it while the strategy's windows run.

Under ranks both replicas are wrapped alike and carry the same instrumentation: each its own
``distributed.CollectiveCounter`` (the same communication hook under DDP, the same counted
reduce-scatter under FSDP2 and HSDP), so the counting costs both sides of a pair the same.

Both replicas see the same micro-batches and step the same optimizer on the same schedule, so
their weights stay the same. Pairs alternate their order in blocks of four (S P, S P, P S, P S)
while the data alternates window by window, so slow drift of the machine hits both sides alike,
each order meets each data window equally often, and each strategy window has its plain-loop
partner.

Clocks: on CPU ``perf_counter``; on CUDA events recorded on the current stream and one
synchronisation at the end of each window, so the window runs as a real training loop does.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

import torch

from benches.engine import builds, frameworks, training
from benches.engine.distributed import CollectiveCounter
from benches.engine.envinfo import psi_cpu
from benches.engine.replicas import fresh_replica, full
from strategies.collector import synced

PHASES = ("reset", "forward", "backward", "update", "window")


class Clock:
    """Marks on the device's timeline: ``perf_counter`` on CPU, CUDA events on the stream."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def settle(self, last: Any) -> None:
        """The window's one synchronisation: wait until the last mark has happened."""
        if self.cuda:
            last.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


def make_strategy(label: str):
    """A strategy instance from its case label, ``name`` or ``name:k=v:k2=v2`` (its options), of
    the build the label names (``name@base``: the base build's, ``engine.builds``)."""
    from benches.engine.spec import parse_options

    options = label.partition(":")[2]
    return builds.package_of(label).get(builds.strategy_name(label), **parse_options(options))


class Loop:
    """One replica's windows: with a strategy's collector, or the plain PyTorch loop.

    ``strategy`` is a case's label (``name`` or ``name:k=v``), or None for the plain loop;
    ``recipe`` how it trains (precision, compile, optimizer, clipping: the workload's unless
    given, so that a loop with another recipe can alternate with the case's own).
    """

    def __init__(
        self,
        workload,
        model: torch.nn.Module,
        strategy: str | None,
        parallel=None,
        grad_sync: str = "last",
        module: torch.nn.Module | None = None,
        recipe: training.Recipe | None = None,
    ) -> None:
        self.workload, self.model = workload, model
        # a Bound workload has the case's recipe; a bare one (tests) trains the default way
        own = getattr(workload, "recipe", None) or training.Recipe()
        self.recipe = recipe = recipe or own
        self._own_precision = recipe.precision == own.precision
        training.to_precision(model, recipe.precision)
        # what forward runs through: the model, its DDP wrapper, or the model sharded in place
        # (``module``: already wrapped by the caller); compiled on top when the recipe says so
        # a framework's path (engine.frameworks) wraps the model and optimizer itself
        self.path = None
        if frameworks.name_of(strategy):
            optimizer = training.optimizer(recipe, model.parameters())
            self.path = frameworks.make(strategy, model, optimizer, frameworks.k_of(workload))
            module = self.path.module
        elif module is None:
            module = parallel.wrap(model) if parallel is not None else model
        self.module = module
        self.distributed = parallel is not None and parallel.kind != "none"
        # the same instrumentation on every loop's replica, the plain loop's too, before its
        # first backward: its collectives counted into a tally of its own (``counter``)
        kind = parallel.kind if self.distributed else "none"
        # a framework's path: what the framework communicates by (its DDP, DeepSpeed's backend)
        counted = self.path.counted(kind) if self.path is not None else (module, kind)
        self.counter = CollectiveCounter(*counted)
        self.forward = training.compiled(module) if recipe.compile else module
        self.clock = Clock(workload.device)
        # after the wrapping: fully_shard makes the parameters DTensor shards
        self.optimizer = (
            self.path.optimizer
            if self.path is not None
            else training.optimizer(recipe, model.parameters())
        )
        # the collector of the strategy's build: the base build's core for ``name@base``
        self.collector = (
            builds.package_of(strategy).GradientCollector(
                self.module, strategy=make_strategy(strategy), grad_sync=grad_sync
            )
            if strategy and self.path is None
            else None
        )
        self.grad_sync = grad_sync

    def loss(self, batch, tokens: float) -> torch.Tensor:
        """One micro-batch's loss through this loop's (compiled) module at its precision."""
        if self._own_precision:  # the workload applies its own precision
            return self.workload.loss(batch, tokens, self.forward)
        return self.workload.loss(batch, tokens, self.forward, self.recipe.precision)

    def warm(self, windows) -> float:
        """Run forward and backward of every micro-batch of ``windows`` ((batches, tokens)
        pairs) once, outside any window and leaving ``.grad`` alone: a compiled module compiles
        here (each new shape too), not inside a timed window. Seconds it took."""
        params = list(self.model.parameters())
        return sum(
            training.warm(lambda b, t=tokens: self.loss(b, t), batch, params)
            for batches, tokens in windows
            for batch in batches
        )

    def update(self) -> None:
        """The update phase: clip (the strategy's norm, or ``clip_grad_norm_``), step, and for
        the plain loop drop the gradients (``zero_grad(set_to_none=True)``)."""
        clip = self.recipe.clip_norm
        if self.path is not None:
            self.path.update()
            return
        if self.collector is not None:
            self.collector.step(self.optimizer, clip_norm=clip)
            return
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    @property
    def grad_sync(self) -> str:
        """When this loop reduces gradients across ranks; set between windows (the collector's
        follows)."""
        return self._grad_sync

    @grad_sync.setter
    def grad_sync(self, value: str) -> None:
        if self.collector is not None:
            self.collector.grad_sync = value
        self._grad_sync = value

    def window(
        self, batches, tokens: float, update: bool = True, on_reset=None, stamps=None
    ) -> dict[str, float]:
        """One timed window; ``update=False`` leaves its gradients without stepping;
        ``on_reset()`` runs right after the reset (the memory pass reads held bytes there);
        ``stamps`` (a ``timeline.Stamps``) gets the host time of each phase boundary."""
        clock, collector, loss_of = self.clock, self.collector, self.loss
        marks: list = []

        def mark(label: str) -> None:
            marks.append(clock.mark())
            if stamps is not None:
                stamps.mark(label)

        mark("start")
        if self.path is not None:  # the framework's own window (engine.frameworks)
            return self._path_window(batches, tokens, update, on_reset, marks, mark)
        if collector is None:  # its gradients were dropped at the end of its last window
            micro_batches = synced(batches, self.module, self.grad_sync)
        else:
            collector.__enter__()
            micro_batches = collector.micro_batches(batches)
        if on_reset is not None:
            on_reset()
        mark("reset")
        for i, batch in enumerate(micro_batches, 1):
            loss = loss_of(batch, tokens)
            mark(f"forward {i}")
            if collector is None:
                loss.backward()
            else:
                collector.backward(loss)
            mark(f"backward {i}")
        if collector is not None:
            collector.__exit__(None, None, None)
        mark("update")
        if update:
            self.update()
        mark("end")
        return self._timing(marks)

    def _path_window(self, batches, tokens, update, on_reset, marks, mark) -> dict[str, float]:
        """A framework path's window (``engine.frameworks``): its own micro-batches, its own
        step and reset in the update phase; the reset phase is empty (the framework's reset is
        its ``zero_grad`` at the end of the last window)."""
        if on_reset is not None:
            on_reset()
        mark("reset")

        def loss_of(batch):
            return self.loss(batch, tokens)

        self.path.window(loss_of, batches, mark, update)
        return self._timing(marks)

    def _timing(self, marks: list) -> dict[str, float]:
        """A window's phases from its marks: start, reset, (forward i, backward i)..., update,
        end."""
        clock = self.clock
        clock.settle(marks[-1])
        seconds = [clock.seconds(a, b) for a, b in itertools.pairwise(marks)]
        micro = seconds[1:-2]  # forward, backward, forward, backward, ...
        backwards = micro[1::2]
        timing = {
            "reset": seconds[0] + seconds[-2],
            "forward": sum(micro[0::2]),
            "backward": sum(backwards),
            "update": seconds[-1],
            "window": clock.seconds(marks[0], marks[-1]),
        }
        if self.distributed and len(backwards) > 1:
            # under "last" only the last backward communicates: what communication added
            timing["sync"] = backwards[-1] - statistics.median(backwards[:-1])
        return timing

    def grads(self) -> dict[str, torch.Tensor | None]:
        """The window's gradients, whole (sharded ones gathered: every rank calls this); a
        framework's path's from where the framework keeps them."""
        got = (
            self.path.grads(self.model)
            if self.path is not None
            else {n: p.grad for n, p in self.model.named_parameters()}
        )
        return {n: None if g is None else full(g) for n, g in got.items()}

    def close(self) -> None:
        if self.collector is not None:
            self.collector.close()
        if self.path is not None:
            self.path.close()


def mine_first(index: int) -> bool:
    """The order of pair ``index``'s two windows: A B, A B, B A, B A, ... Pairs take the two
    data windows in turn (``index % 2``), so each order meets each data window equally often
    and the positions of a 4-pair block balance a linear drift (A at 0, 2, 5, 7; B at 1, 3, 4,
    6)."""
    return (index // 2) % 2 == 0


class PairedRunner:
    """The strategy's loop and the plain loop side by side, in ABBA order."""

    def __init__(self, workload, strategy: str, parallel=None, grad_sync: str = "last") -> None:
        self.workload, self.parallel, self.grad_sync = workload, parallel, grad_sync
        self.strategy = Loop(workload, workload.model, strategy, parallel, grad_sync)
        self.label = strategy
        self.plain: Loop | None = None
        self.other: Loop | None = None

    def add_plain(self) -> None:
        """The plain loop's replica, with the strategy replica's weights as they are now (after
        the gradient check's steps); no hooks, views or buffers of the strategy."""
        model = fresh_replica(self.workload.model, self.parallel)
        self.plain = Loop(self.workload, model, None, self.parallel, self.grad_sync)

    def add_other(self, recipe: training.Recipe) -> None:
        """The same strategy's loop with another recipe (``--compare-settings``), on a replica
        with the strategy replica's weights as they are now (cast to its precision)."""
        model = fresh_replica(self.workload.model, self.parallel)
        self.other = Loop(
            self.workload, model, self.label, self.parallel, self.grad_sync, recipe=recipe
        )

    def setting_pair(self, index: int, batches, tokens: float) -> tuple[float, float]:
        """Pair ``index`` of the case's loop and the other recipe's, ABBA: (its window, the
        other's) in seconds."""
        assert self.other is not None, "add_other() first"
        loops = [("mine", self.strategy), ("other", self.other)]
        seconds = {}
        for role, loop in loops if mine_first(index) else loops[::-1]:
            seconds[role] = loop.window(batches, tokens)["window"]
        return seconds["mine"], seconds["other"]

    def pair(self, index: int, batches, tokens: float) -> tuple[dict[str, float], dict, float]:
        """Pair ``index``: both windows, in ``mine_first`` order; and the CPU pressure, sampled
        per window (the larger of the two)."""
        assert self.plain is not None, "add_plain() first"
        order = [("mine", self.strategy), ("plain", self.plain)]
        timings, pressures = {}, []
        for role, loop in order if mine_first(index) else order[::-1]:
            stall, start = psi_cpu("total"), time.perf_counter()  # total: stalled microseconds
            timings[role] = loop.window(batches, tokens)
            wall, after = time.perf_counter() - start, psi_cpu("total")
            if stall is not None and after is not None and wall > 0:
                pressures.append((after - stall) / 1e6 / wall)
        return timings["mine"], timings["plain"], max(pressures) if pressures else None

    def flavour_pair(self, index: int, batches, tokens: float, other: str) -> tuple[float, float]:
        """Pair ``index`` of the strategy's own windows: its ``grad_sync`` and ``other`` on the
        same model and data, in ABBA order; (its window, the other's) in seconds."""
        loop = self.strategy
        mine = loop.grad_sync
        order = [mine, other] if mine_first(index) else [other, mine]
        seconds = {}
        try:
            for flavour in order:
                loop.grad_sync = flavour
                seconds[flavour] = loop.window(batches, tokens)["window"]
        finally:
            loop.grad_sync = mine
        return seconds[mine], seconds[other]

    def close(self) -> None:
        for loop in (self.strategy, self.plain, self.other):
            if loop is not None:
                loop.close()
