"""The Lightning Trainer's own loop (``lightning/pytorch/loops/optimization/automatic.py``,
2.6.6), driven window by window (``driven``): ``Trainer.fit`` with ``accumulate_grad_batches``
K runs each micro-batch's closure (``training_step``, then ``zero_grad`` on the first
micro-batch of a window, then the backward of the loss divided by K); micro-batches 1..K-1
inside ``block_backward_sync`` (DDP's ``no_sync``; it acts on DDP only), the K-th inside
``optimizer.step(closure)``. So the reset of a window's gradients comes after the first
forward of the next window: the last window's gradients stay alive through it (they are what
the memory pass finds held between windows).

The case's loss comes in through ``training_step``, multiplied by K so that Lightning's
division leaves the workload's gradients. Timed through the Trainer's callbacks: the forward
ends when ``training_step`` returns, a backward at ``on_after_backward``, the update begins at
``on_before_optimizer_step``, the window ends at ``on_train_batch_end`` of the K-th.
"""

from __future__ import annotations

from typing import Any

import torch

from benches.engine.frameworks.driven import Driven, Feed
from benches.engine.frameworks.fabric import devices


class Path(Driven):
    turned_off = (
        "logging, progress bar, checkpointing, model summary (barebones)",
        "validation (limit_val_batches 0)",
        "scheduler (none configured)",
        "clipping (gradient_clip_val none)",
    )

    def __init__(self, model: torch.nn.Module, optimizer, k: int, options: dict[str, Any]):
        self.module = model  # Lightning's DDP runs training_step: the loss runs the model
        super().__init__(model, optimizer, k)

    def counted(self, kind: str) -> tuple[torch.nn.Module, str]:
        return self.wrapped, kind

    def start(self) -> None:
        import logging

        import lightning as L

        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no banners

        path = self

        class Case(L.LightningModule):
            def __init__(self, model: torch.nn.Module) -> None:
                super().__init__()
                self.model = model

            def training_step(self, batch, batch_idx):
                loss = path.loss(batch) * path.k  # Lightning divides by K
                path.on_forward()
                return loss

            def configure_optimizers(self):
                return path.given_optimizer

        class Marks(L.Callback):
            def on_train_start(self, trainer, pl_module):
                # Lightning's DDP runs training_step as its forward: the loss runs the model
                # inside it, and DDP's module is the one whose collectives are counted
                path.wrapped = trainer.strategy.model
                path.optimizer = trainer.optimizers[0]

            def on_after_backward(self, trainer, pl_module):
                path.on_backward()

            def on_before_optimizer_step(self, trainer, pl_module, optimizer):
                path.before_step()

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                if path.current.backwards == path.k:
                    path.after_reset()

        trainer = L.Trainer(
            **devices(),
            accumulate_grad_batches=self.k,
            max_epochs=1,
            max_steps=-1,
            barebones=True,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            use_distributed_sampler=False,
            callbacks=[Marks()],
        )
        trainer.fit(Case(self.model), train_dataloaders=Feed(self, lazy=True))
