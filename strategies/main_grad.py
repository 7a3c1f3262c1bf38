"""``main_grad``: gradients summed in an fp32 buffer; ``.grad`` gets the sum once per window.

Where it comes from: Megatron-LM's ``main_grad``: every parameter gets ``p.main_grad``, a float32
view into one contiguous buffer per device, and a hook on its AccumulateGrad node adds each
incoming (bf16, fp16, ...) gradient there, so that a window of K micro-batches is summed in fp32
instead of being rounded to the parameter dtype K times. Here the pre-hook adds (``add_`` casts
to fp32) and returns ``(None,)``, so autograd skips ``.grad``. At window end ``.grad`` gets the sum
cast once to the parameter dtype: every ``.grad`` is a view into one buffer per (device, dtype),
laid out as its slice of the fp32 buffer, so the cast is one ``copy_`` per buffer.
Mid-window ``.grad`` still holds the previous window; ``.main_grad`` is the live sum (a ``.grad``
someone replaced is re-pointed at its view at finish). grad_req ``write`` parameters stay in the
buffers: the core's write hook runs first, copies the gradient into ``.grad`` and hands on
nothing, so their hook copies ``.grad`` (the gradient, exactly: it arrives in the parameter
dtype) over ``.main_grad``; mid-window their ``.grad`` holds the last gradient. Clipping acts on
``.grad`` (one norm, one ``mul_`` per buffer, as ``flat``), not on ``.main_grad``.
Cost: reset one ``zero_`` per device; one Python hook call per parameter per backward; finish one
cast-copy per (device, dtype). Memory: the fp32 sum, 4 bytes per gradient element (8 for float64
parameters), plus the ``.grad`` buffer, both allocated once at attach and kept between windows.
Refuses DDP (its reducer reads ``.grad`` during backward) and FSDP2 (hooks never run).
"""

from __future__ import annotations

from collections import defaultdict

import torch

from strategies import _hooks
from strategies.base import Strategy
from strategies.flat import clip_buffers_, norm_chunks


def _adds(main: torch.Tensor) -> _hooks.PreHook:
    def hook(grads: tuple[torch.Tensor | None, ...]) -> tuple[None] | None:
        if grads[0] is None:
            return None
        main.add_(grads[0])  # a bf16 gradient is added in fp32, rounded once
        return (None,)

    return hook


def _writes(param: torch.Tensor, main: torch.Tensor) -> _hooks.PreHook:
    def hook(grads: tuple[torch.Tensor | None, ...]) -> tuple[None] | None:
        # None: the core's write hook has already copied the gradient into .grad
        grad = param.grad if grads[0] is None else grads[0]
        if grad is None:
            return None
        main.copy_(grad)
        return (None,)

    return hook


class MainGradStrategy(Strategy):
    name = "main_grad"
    runs_under = ("none",)  # DDP reads .grad in backward; FSDP2 never runs hooks

    def __init__(self, buffer_norm: bool = True) -> None:
        # buffer_norm=False: clip with clip_grad_norm_ over the parameters (the default hook),
        # so that a sweep can measure what one norm over the buffer saves
        if not isinstance(buffer_norm, bool):
            raise ValueError(f"buffer_norm {buffer_norm!r} is not a bool; valid: true, false")
        self.buffer_norm = buffer_norm

    def attach(self, collector) -> None:
        if collector.fsdp:
            raise ValueError(
                "strategy 'main_grad' cannot run under FSDP2 (fully_shard): FSDP2 writes the "
                "sharded .grad by reduce-scatter outside autograd, so its AccumulateGrad hooks "
                "never run; use block, foreach or native"
            )
        if collector.ddp is not None:
            raise ValueError(
                "strategy 'main_grad' cannot run under DistributedDataParallel (with or without "
                "gradient_as_bucket_view): its reducer reads .grad during backward, where "
                "main_grad's hooks leave nothing; use flat, lazy or foreach"
            )
        taken = [n for n, p in collector.named_params if hasattr(p, "main_grad")]
        if taken:
            raise ValueError(
                f"strategy 'main_grad' cannot attach: parameter {taken[0]!r} already has a "
                "main_grad (another collector's?); close that collector first"
            )
        # (device, summing dtype) -> parameter dtype -> (name, param): a .grad buffer is one
        # contiguous slice of its fp32 buffer, so that finish is one copy_ per .grad buffer
        groups: dict[tuple, dict[torch.dtype, list]] = defaultdict(lambda: defaultdict(list))
        for n, p in collector.named_params:
            groups[(p.device, torch.promote_types(p.dtype, torch.float32))][p.dtype].append((n, p))
        self.main_buffers: list[torch.Tensor] = []  # the fp32 sums, one per device
        self.buffers: list[torch.Tensor] = []  # the .grad buffers, one per (device, dtype)
        self._casts: list[tuple[torch.Tensor, torch.Tensor]] = []  # (.grad buffer, fp32 slice)
        self._views: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # p, grad, main
        self._hooks = []
        for (device, acc), by_dtype in groups.items():
            total = sum(p.numel() for params in by_dtype.values() for _, p in params)
            main = torch.zeros(total, device=device, dtype=acc)
            start = 0
            for dtype, params in by_dtype.items():
                size = sum(p.numel() for _, p in params)
                grad = torch.zeros(size, device=device, dtype=dtype)
                offset = 0
                for name, p in params:
                    view = grad[offset : offset + p.numel()].view_as(p)
                    main_view = main[start + offset : start + offset + p.numel()].view_as(p)
                    offset += p.numel()
                    if p.grad is not None:
                        view.copy_(p.grad)
                    p.grad = view
                    p.main_grad = main_view
                    self._views.append((p, view, main_view))
                    write = collector.grad_req[name] == "write"
                    hook = _writes(p, main_view) if write else _adds(main_view)
                    self._hooks.append(_hooks.register_prehook(p, hook))
                self.buffers.append(grad)
                self._casts.append((grad, main[start : start + size]))
                start += size
            self.main_buffers.append(main)
        self._chunks = norm_chunks(self.buffers)

    def reset(self, collector) -> None:
        for main in self.main_buffers:
            main.zero_()

    def finish(self, collector) -> None:
        for grad, main in self._casts:
            grad.copy_(main)  # the one cast to the parameter dtype
        for p, view, _ in self._views:
            if p.grad is not view:  # someone replaced it (zero_grad elsewhere)
                p.grad = view

    def clip_grad_norm(self, collector, max_norm: float) -> torch.Tensor:
        # the buffers are the gradient only while no .grad was replaced since finish
        replaced = any(p.grad is not view for p, view, _ in self._views)
        if not self.buffer_norm or not self._views or replaced:
            return super().clip_grad_norm(collector, max_norm)
        return clip_buffers_(self.buffers, max_norm, self._chunks)

    def detach(self, collector) -> None:
        # the gradients stay readable (each .grad keeps its view); the fp32 sums go
        for _, handle in self._hooks:
            handle.remove()
        for p, _, main_view in self._views:
            if getattr(p, "main_grad", None) is main_view:
                del p.main_grad
        self._hooks, self._views, self._casts = [], [], []
        self.main_buffers, self.buffers, self._chunks = [], [], []
