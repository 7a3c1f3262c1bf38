"""Lightning Fabric's accumulation (``lightning/fabric/fabric.py``, 2.6.6): the plain loop
through Fabric's objects. ``Fabric.setup`` wraps the model (DDP under ranks) and the optimizer;
micro-batches 1..K-1 run inside ``Fabric.no_backward_sync(model)`` (DDP's ``no_sync``), the
K-th outside it; ``Fabric.backward(loss)`` scales nothing, so the workload's loss is handed in
as it is; the step and ``zero_grad`` (to None, torch's default) after the K-th.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from benches.engine.frameworks import Stepped


def devices() -> dict[str, Any]:
    """A Lightning or Fabric accelerator over the case's ranks, as torchrun started them
    (Lightning joins the environment's ranks and process group; it launches nothing)."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_initialized() else 1
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    return {
        "accelerator": "cuda" if torch.cuda.is_available() else "cpu",
        "devices": local,
        "num_nodes": max(1, world // local),
        "strategy": "ddp" if world > 1 else "auto",
        "precision": "32-true",  # the workload applies --precision in its loss
    }


class Path(Stepped):
    turned_off = ("dataloader", "scheduler", "logging", "checkpointing", "clipping")

    def __init__(self, model: torch.nn.Module, optimizer, k: int, options: dict[str, Any]):
        from lightning.fabric import Fabric

        self.fabric = Fabric(**devices())
        self.fabric.launch()
        self.module, self.optimizer = self.fabric.setup(model, optimizer, move_to_device=False)

    def micro_batch(self, loss_of, batch, i: int, last: bool, mark) -> None:
        fabric = self.fabric
        with fabric.no_backward_sync(self.module, enabled=not last):
            loss = loss_of(batch)
            mark(f"forward {i}")
            fabric.backward(loss)
        mark(f"backward {i}")

    def counted(self, kind: str) -> tuple[torch.nn.Module, str]:
        return self.module._forward_module, kind  # the DDP inside Fabric's wrapper

    def update(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad()
