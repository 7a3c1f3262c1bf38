"""``flat``: gradients as views into one contiguous buffer per device and dtype, one memset.

Where it comes from: Megatron-LM keeps gradients in one contiguous buffer zeroed once per
iteration, and DeepSpeed keeps flat gradient partitions; the reset is a single ``zero_`` of the
buffer whatever the number of parameters. Cost: one kernel per (device, dtype) per window, plus a
cheap identity check that re-points any ``.grad`` someone replaced (``zero_grad`` elsewhere).
Memory: the buffer is allocated once at attach and kept between windows.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from strategies.base import Strategy


class FlatStrategy(Strategy):
    name = "flat"

    def attach(self, collector) -> None:
        if collector.fsdp:
            raise ValueError(
                "strategy 'flat' cannot run under FSDP2 (fully_shard): a sharded parameter's "
                ".grad must be a DTensor shard like the parameter, not a view into one flat "
                "local buffer; use foreach for one fused reset"
            )
        if collector.ddp is not None and collector.ddp.gradient_as_bucket_view:
            raise ValueError(
                "strategy 'flat' cannot run under DistributedDataParallel with "
                "gradient_as_bucket_view=True: both make .grad a view of their own buffer; "
                "use gradient_as_bucket_view=False"
            )
        groups: dict[tuple, list[torch.Tensor]] = defaultdict(list)
        for p in collector.params:
            groups[(p.device, p.dtype)].append(p)
        self.buffers: list[torch.Tensor] = []
        self._views: list[tuple[torch.Tensor, torch.Tensor]] = []
        for (device, dtype), params in groups.items():
            buffer = torch.zeros(sum(p.numel() for p in params), device=device, dtype=dtype)
            offset = 0
            for p in params:
                view = buffer[offset : offset + p.numel()].view_as(p)
                offset += p.numel()
                if p.grad is not None:
                    view.copy_(p.grad)
                p.grad = view
                self._views.append((p, view))
            self.buffers.append(buffer)

    def reset(self, collector) -> None:
        for buffer in self.buffers:
            buffer.zero_()
        for p, view in self._views:
            if p.grad is not view:
                p.grad = view

    def detach(self, collector) -> None:
        # the gradients stay readable: each .grad keeps its view (and so the buffer) alive
        self.buffers = []
        self._views = []
