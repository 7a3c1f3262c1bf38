"""The transformers Trainer's own loop (``transformers/trainer.py``, 5.25.0), driven window by
window (``driven``): ``Trainer.train`` runs ``_inner_training_loop``, which fetches the K
micro-batches of a step at once (``get_batch_samples``), runs micro-batches 1..K-1 inside
``accelerator.no_sync(model)`` and the K-th outside it, each through ``training_step``
(``compute_loss``, the loss divided by K as no ``num_items_in_batch`` is counted,
``accelerator.backward``), then computes the gradients' norm (``_get_grad_norm``: every step,
clipping or not), ``optimizer.step()``, the scheduler's step and ``model.zero_grad()`` (to None).

The case's loss comes in through ``compute_loss`` (the way a Trainer is given a loss),
multiplied by K so that the Trainer's division leaves the workload's gradients. Timed through
the Trainer's callbacks: the forward ends when ``compute_loss`` returns, a backward at
``on_substep_end`` (the K-th at ``on_pre_optimizer_step``), the window at ``on_step_end``.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from benches.engine.frameworks.driven import Driven, Feed


class Path(Driven):
    turned_off = (
        "logging (logging_strategy no, report_to none)",
        "progress bar",
        "checkpointing (save_strategy no)",
        "evaluation",
        "the nan/inf filter (logging_nan_inf_filter false)",
        "clipping (max_grad_norm 0)",
        "scheduler (constant: its step still runs)",
        "find_unused_parameters (false, as for a PreTrainedModel)",
    )

    def __init__(self, model: torch.nn.Module, optimizer, k: int, options: dict[str, Any]):
        self.output = tempfile.TemporaryDirectory(prefix="zerograd-trainer-")
        super().__init__(model, optimizer, k)

    def start(self) -> None:
        import torch.distributed as dist
        from transformers import Trainer, TrainerCallback, TrainingArguments

        path = self

        class Case(Trainer):
            def get_train_dataloader(self):
                return Feed(path)

            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                loss = path.loss(inputs) * path.k  # the Trainer divides by K
                path.on_forward()
                return loss

        class Marks(TrainerCallback):
            def on_substep_end(self, args, state, control, **kwargs):
                path.on_backward()

            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                path.on_backward()
                path.before_step()

            def on_step_end(self, args, state, control, **kwargs):
                path.after_reset()

        world = dist.get_world_size() if dist.is_initialized() else 1
        args = TrainingArguments(
            output_dir=self.output.name,
            per_device_train_batch_size=1,  # only logged: the workload makes the batches
            gradient_accumulation_steps=self.k,
            max_steps=2**31 - 1,  # until the case closes it
            use_cpu=not torch.cuda.is_available(),
            ddp_backend=("nccl" if torch.cuda.is_available() else "gloo") if world > 1 else None,
            ddp_find_unused_parameters=False,
            report_to="none",
            disable_tqdm=True,
            logging_strategy="no",
            save_strategy="no",
            eval_strategy="no",
            logging_nan_inf_filter=False,
            max_grad_norm=0.0,
            lr_scheduler_type="constant",
            dataloader_num_workers=0,
        )
        trainer = Case(
            model=self.model,
            args=args,
            optimizers=(self.given_optimizer, None),
            callbacks=[Marks()],
        )
        self.trainer = trainer
        trainer.train()

    def on_feed(self) -> None:
        trainer = self.trainer
        self.module, self.optimizer = trainer.model_wrapped, trainer.optimizer

    def close(self) -> None:
        super().close()
        self.output.cleanup()
