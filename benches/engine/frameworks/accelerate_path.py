"""Hugging Face Accelerate's own accumulation (``accelerate/accelerator.py``, 1.16.0).

- ``accelerate``: every micro-batch inside ``Accelerator.accumulate(model)``, which runs it
  under DDP's ``no_sync`` unless it is the K-th (or ``sync_each_batch=true``);
  ``Accelerator.backward`` divides the loss by K; the ``AcceleratedOptimizer``'s
  ``step``/``zero_grad`` (to None) are called every micro-batch and act only on the K-th.
- ``accelerate:no_sync=backward``: the pitfall of Accelerate's docs ("no_sync around the
  backward only"): the forward outside ``no_sync``, so DDP has already decided to reduce and
  every micro-batch all-reduces; the step and zero_grad once, after the K-th.

The loss is handed to ``Accelerator.backward`` multiplied by K, so its gradients are the
workload's; the workload applies its precision in its loss, so ``mixed_precision`` is ``no``.
"""

from __future__ import annotations

from typing import Any

import torch

from benches.engine.frameworks import Stepped


class Path(Stepped):
    """One Accelerator and its prepared model and optimizer: ``module`` (wrapped in DDP by
    Accelerate under ranks) is what forward runs through."""

    turned_off = ("dataloader (its end-of-dataloader sync)", "scheduler", "logging", "clipping")

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
