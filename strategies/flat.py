"""``flat``: gradients as views into one contiguous buffer per device and dtype, one memset.

Where it comes from: Megatron-LM keeps gradients in one contiguous buffer zeroed once per
iteration, and DeepSpeed keeps flat gradient partitions; the reset is a single ``zero_`` of the
buffer whatever the number of parameters. Cost: one kernel per (device, dtype) per window, plus a
cheap identity check that re-points any ``.grad`` someone replaced (``zero_grad`` elsewhere).
Memory: the buffer is allocated once at attach and kept between windows.
Clipping: one ``_foreach_norm`` (over 64Ki-element pieces) and one ``mul_`` per buffer instead
of work per parameter (``clip_buffers_``), while every ``.grad`` is still its view.
"""

from __future__ import annotations

from collections import defaultdict
from functools import reduce

import torch

from strategies.base import Strategy

#: elements per partial norm: on the CPU one norm over a long vector drifts (measured: 4e-4
#: relative over 10M float32 elements, 2e-7 as norms of 64Ki-element pieces); a bf16 buffer is
#: cast to float32 piece by piece instead of in one full-size copy
CHUNK = 1 << 16


def norm_chunks(buffers: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Views of ``CHUNK`` elements of each buffer, made once: ``clip_buffers_`` norms them."""
    return [list(b.split(CHUNK)) for b in buffers]


def clip_buffers_(
    buffers: list[torch.Tensor], max_norm: float, chunks: list[list[torch.Tensor]] | None = None
) -> torch.Tensor:
    """``clip_grad_norm_`` over gradients that tile ``buffers`` exactly: the 2-norm of each
    buffer in float32 at least (one ``_foreach_norm`` over its ``norm_chunks``), combined as
    ``clip_grad_norm_`` combines its per-tensor norms (on the first buffer's device), then one
    in-place ``mul_`` per buffer by the clamped coefficient. Returns the norm before clipping."""
    if chunks is None:
        chunks = norm_chunks(buffers)
    norms = []
    for buffer, parts in zip(buffers, chunks, strict=True):
        dtype = torch.promote_types(buffer.dtype, torch.float32)
        norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(parts, 2, dtype))))
    device, dtype = buffers[0].device, reduce(torch.promote_types, [n.dtype for n in norms])
    total = torch.linalg.vector_norm(torch.stack([n.to(device, dtype) for n in norms]))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)  # no host sync, as clip_grad_norm_
    for buffer in buffers:
        buffer.mul_(coef.to(buffer.device))
    return total


class FlatStrategy(Strategy):
    name = "flat"
    runs_under = ("none", "ddp")  # not FSDP2; DDP without bucket views

    def __init__(self, buffer_norm: bool = True) -> None:
        # buffer_norm=False: clip with clip_grad_norm_ over the parameters (the default hook),
        # so that a sweep can measure what one norm over the buffer saves
        if not isinstance(buffer_norm, bool):
            raise ValueError(f"buffer_norm {buffer_norm!r} is not a bool; valid: true, false")
        self.buffer_norm = buffer_norm

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
        self._chunks = norm_chunks(self.buffers)

    def reset(self, collector) -> None:
        for buffer in self.buffers:
            buffer.zero_()
        for p, view in self._views:
            if p.grad is not view:
                p.grad = view

    def clip_grad_norm(self, collector, max_norm: float) -> torch.Tensor:
        # the buffers are the gradient only while no .grad was replaced (re-pointed at reset)
        replaced = any(p.grad is not view for p, view in self._views)
        if not self.buffer_norm or not self._views or replaced:
            return super().clip_grad_norm(collector, max_norm)
        return clip_buffers_(self.buffers, max_norm, self._chunks)

    def detach(self, collector) -> None:
        # the gradients stay readable: each .grad keeps its view (and so the buffer) alive
        self.buffers = []
        self._views = []
        self._chunks = []
