"""A framework's own accumulation path, run as a case's loop beside the strategies: the
framework's objects do the windows (never a copy of their logic), paired against the plain
loop like any strategy (``runner.Loop`` holds one in place of a collector).

A path is a case label, ``NAME`` or ``NAME:KEY=VALUE`` (``accelerate:sync_each_batch=true``):

- ``accelerate``: Hugging Face Accelerate's ``Accelerator.accumulate`` (``accelerate/
  accelerator.py``, 1.16.0): every micro-batch inside ``accumulate(model)``, which runs it under
  DDP's ``no_sync`` unless it is the K-th (or ``sync_each_batch=true``); ``Accelerator.backward``
  divides the loss by K; the ``AcceleratedOptimizer``'s ``step``/``zero_grad`` (to None) are
  called every micro-batch and act only on the K-th.
- ``accelerate:no_sync=backward``: the pitfall of Accelerate's docs ("no_sync around the
  backward only"): the forward outside ``no_sync``, so DDP has already decided to reduce and
  every micro-batch all-reduces; the step and zero_grad once, after the K-th.

What is not accumulation is off: no dataloader, scheduler, logging, checkpointing or
clipping (the recipe's clip is refused); the workload applies its precision in its loss, so
the Accelerator's ``mixed_precision`` is ``no``. The loss each path scales is multiplied by K
first, so its gradients equal the workload's (docs/frameworks.md).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

#: each path: its package and its options with their values (``EXTRA`` installs them)
PATHS: dict[str, dict[str, Any]] = {
    "accelerate": {
        "package": "accelerate",
        "options": {"sync_each_batch": (False, True), "no_sync": ("accumulate", "backward")},
    },
}
EXTRA = "pip install -e '.[frameworks]' (accelerate==1.16.0), or nox -s bench -- --frameworks ..."


def name_of(label: str | None) -> str | None:
    """The path a case label names (``accelerate`` of ``accelerate:no_sync=backward``), else
    None (a strategy, or the plain loop)."""
    name = (label or "").partition(":")[0]
    return name if name in PATHS else None


def installed(name: str) -> bool:
    return importlib.util.find_spec(PATHS[name]["package"]) is not None


def check(name: str, options: dict[str, Any]) -> None:
    """A ValueError naming a bad option or value and the valid ones."""
    valid = PATHS[name]["options"]
    for key, value in options.items():
        if key not in valid:
            raise ValueError(f"unknown option {key!r} of {name}; valid: {', '.join(valid)}")
        if value not in valid[key]:
            words = ", ".join(str(v).lower() for v in valid[key])
            raise ValueError(f"{name}:{key}={value!r} is not one of {words}")
    if options.get("sync_each_batch") and options.get("no_sync") == "backward":
        raise ValueError(f"{name}: sync_each_batch=true and no_sync=backward are two paths")


class Accelerate:
    """One Accelerator and its prepared model and optimizer: ``module`` (wrapped in DDP by
    Accelerate under ranks) is what forward runs through."""

    def __init__(self, model: torch.nn.Module, optimizer, k: int, options: dict[str, Any]):
        from accelerate import Accelerator
        from accelerate.utils import GradientAccumulationPlugin

        self.backward_only = options.get("no_sync") == "backward"
        plugin = GradientAccumulationPlugin(
            num_steps=1 if self.backward_only else k,
            sync_each_batch=bool(options.get("sync_each_batch")),
            sync_with_dataloader=False,
        )
        # cpu=True on a CPU: without it, under torchrun, Accelerate leaves each rank to train
        # alone (its MULTI_CPU state needs it); on CUDA it takes the process's device
        self.accelerator = Accelerator(
            cpu=not torch.cuda.is_available(),
            mixed_precision="no",
            gradient_accumulation_plugin=plugin,
        )
        self.module, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.k = k

    def micro_batch(self, loss_of, batch, i: int, last: bool, mark) -> None:
        """Micro-batch ``i`` (from 1) of a window: its forward and backward as the path runs
        them, ``mark("forward i")`` and ``mark("backward i")`` after each. The step and reset
        after the K-th are ``update``'s (the loop's update phase)."""
        acc, model = self.accelerator, self.module
        if self.backward_only:
            loss = loss_of(batch)
            mark(f"forward {i}")
            if last:
                acc.backward(loss)  # gradient_accumulation_steps 1: not divided
            else:
                with acc.no_sync(model):
                    acc.backward(loss)
            mark(f"backward {i}")
            return
        with acc.accumulate(model):
            loss = loss_of(batch)
            mark(f"forward {i}")
            acc.backward(loss * self.k)  # Accelerate divides by K: the workload's gradients
            if not last:  # no-ops before the K-th, called as a training loop calls them
                self.optimizer.step()
                self.optimizer.zero_grad()
            mark(f"backward {i}")

    def update(self) -> None:
        """The step and the reset (to None) after the K-th micro-batch: Accelerate's optimizer
        acts, its gradient state being at the boundary."""
        self.optimizer.step()
        self.optimizer.zero_grad()


def k_of(workload) -> int:
    """The micro-batches of a window, K: a ``Bound`` workload's settings, or a bare reference
    workload's config (tests)."""
    settings = getattr(workload, "settings", None) or getattr(workload, "config", None)
    return int(getattr(settings, "accumulate", 1))


def make(label: str, model: torch.nn.Module, optimizer, k: int) -> Accelerate:
    """The path a case label names, on ``model`` and ``optimizer``."""
    from benches.engine.spec import parse_options

    name = name_of(label)
    options = parse_options(label.partition(":")[2])
    assert name is not None, label
    check(name, options)
    return Accelerate(model, optimizer, k, options)
