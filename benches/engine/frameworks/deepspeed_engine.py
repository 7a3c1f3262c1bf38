"""DeepSpeed's engine (``deepspeed/runtime/engine.py``, 0.19.8): ``engine.backward(loss)`` and
``engine.step()`` on every micro-batch, the optimizer acting at the boundary, every K-th
(``gradient_accumulation_steps``). ``deepspeed:zero=0`` (the default) keeps ``.grad`` and
all-reduces after the boundary backward; ``zero=1`` partitions the optimizer state and reduces
at the boundary; ``zero=2`` partitions the gradients too and reduces every micro-batch into
its partition (``contiguous_gradients``). The optimizer is the recipe's torch optimizer
(``zero_allow_untested_optimizer``); ``engine.backward`` divides the loss by K, so the loss is
handed in multiplied by K. On a CPU DeepSpeed runs with ``DS_ACCELERATOR=cpu`` (set here,
before its import) over the case's gloo group; the first use on a machine compiles its CPU
communication op (about 30 s, cached in ``~/.cache/torch_extensions``).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from benches.engine.frameworks import Stepped

#: where ZeRO-1/2 keep gradients besides ``.grad`` (``runtime/zero/stage_1_and_2.py``)
GRADIENT_BUFFERS = ("averaged_gradients", "grads_in_partition")


def _distributed() -> None:
    """DeepSpeed runs over a process group: the case's under ranks, else one of its own (one
    rank, in memory: no sockets), for the process's life (DeepSpeed keeps its groups)."""
    import torch.distributed as dist

    os.environ.setdefault("LOCAL_RANK", "0")  # deepspeed.initialize asserts it is set
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


class Path(Stepped):
    turned_off = (
        "dataloader",
        "scheduler",
        "logging (steps_per_print)",
        "checkpointing",
        "clipping (gradient_clipping 0; DeepSpeed's default clips at 1.0)",
    )

    def __init__(self, model: torch.nn.Module, optimizer, k: int, options: dict[str, Any]):
        if not torch.cuda.is_available():
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        _distributed()
        import deepspeed

        self.stage = int(options.get("zero", 0))
        config = {
            "train_micro_batch_size_per_gpu": 1,  # only logged: the workload makes the batches
            "gradient_accumulation_steps": k,
            "zero_optimization": {"stage": self.stage},
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": 0.0,  # DeepSpeed 0.19 clips at 1.0 unless told
            "steps_per_print": 2**62,
            "wall_clock_breakdown": False,
        }
        engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, optimizer=optimizer, config=config, dist_init_required=False
        )
        self.module = self.engine = engine
        self.k = k

    def micro_batch(self, loss_of, batch, i: int, last: bool, mark) -> None:
        engine = self.engine
        loss = loss_of(batch)
        mark(f"forward {i}")
        engine.backward(loss * self.k)  # the engine divides by K: the workload's gradients
        if not last:  # the step of micro-batches 1..K-1: DeepSpeed counts them, nothing more
            engine.step()
        mark(f"backward {i}")

    def update(self) -> None:
        """The boundary's step: the reduction ZeRO-0/1 left for it, the optimizer, the reset."""
        self.engine.step()

    def grads(self, model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
        """Where DeepSpeed keeps them: ``.grad`` (ZeRO-0), its partitions (ZeRO-1/2), gathered
        by ``safe_get_full_grad`` (every rank calls it)."""
        from deepspeed.utils import safe_get_full_grad

        return {n: safe_get_full_grad(p) for n, p in model.named_parameters()}

    def held(self, model: torch.nn.Module) -> list[torch.Tensor]:
        from benches.engine.memory import tensors_of

        buffers = [getattr(self.optimizer, name, None) for name in GRADIENT_BUFFERS]
        # each backward's bucket (``reduce_bucket_size`` elements: the peak), freed at its end
        buckets = getattr(self.optimizer, "ipg_buckets", {}).values()
        buffers += [bucket.buffer for bucket in buckets]
        return super().held(model) + list(tensors_of(buffers))

    def counted(self, kind: str) -> tuple[torch.nn.Module, str]:
        return self.module, "deepspeed"  # its collectives go through its own backend

    def close(self) -> None:
        self.engine.destroy()
