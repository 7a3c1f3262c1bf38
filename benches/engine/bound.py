"""A workload as the engine uses it: ``build`` calls a ``--workload MODULE:FACTORY`` factory and
checks what it returned against the protocol (benches/workloads/protocol.py); ``Bound`` wraps
it with what the engine owns (precision, ballast, distributed normalisation, accounting).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benches.engine import training
from benches.workloads.protocol import (
    BALLAST_SIZE,
    DEFAULT,
    REQUIRED,
    Settings,
    WorkloadError,
    load,
)


def build(spec: str, settings: Settings) -> Bound:
    """Call the factory and check what it returned; every problem is one WorkloadError line."""
    factory = load(spec)
    torch.set_num_threads(settings.threads)  # the engine's setting, whatever the workload does
    try:
        made = factory(settings)
    except Exception as err:
        raise WorkloadError(
            f"--workload {spec!r}: the factory raised {type(err).__name__}: "
            + str(err).replace("\n", " ")
        ) from None
    missing = [name for name in REQUIRED if not hasattr(made, name)]
    if missing:
        raise WorkloadError(
            f"--workload {spec!r} returned a {type(made).__name__} without "
            f"{', '.join(missing)}; the protocol needs: {', '.join(REQUIRED)} "
            "(see benches/workloads/protocol.py)"
        )
    if not isinstance(made.model, nn.Module):
        raise WorkloadError(
            f"--workload {spec!r}: model is a {type(made.model).__name__}, not an nn.Module"
        )
    if not any(p.requires_grad for p in made.model.parameters()):
        raise WorkloadError(f"--workload {spec!r}: model has no parameter that requires grad")
    for name in ("batches", "normaliser", "loss"):
        if not callable(getattr(made, name)):
            raise WorkloadError(f"--workload {spec!r}: {name} is not callable")
    return Bound(made, settings, spec)


class Bound:
    """A workload as the engine uses it: the protocol's object, the ballast, distributed
    normalisation and the accounting, behind one interface."""

    def __init__(self, made: Any, settings: Settings, spec: str = DEFAULT) -> None:
        self.made, self.settings, self.spec = made, settings, spec
        self.model: nn.Module = training.to_precision(made.model, settings.precision)
        self.device = next(self.model.parameters()).device
        #: how the engine's loops train it (the case sets its own: compile, optimizer, clip)
        self.recipe = training.Recipe(precision=settings.precision)
        ballast = getattr(made, "ballast", None)
        if ballast is None:
            ballast = []
            for _ in range(settings.live_tensors):
                t = torch.zeros(BALLAST_SIZE, device=self.device, requires_grad=True)
                t.grad = torch.ones_like(t)  # non-zero, so a strategy that touches it shows
                ballast.append(t)
        self.ballast = ballast

    def batches(self, window: int = 0) -> list:
        batches = list(self.made.batches(window))
        if len(batches) != self.settings.accumulate:
            raise WorkloadError(
                f"--workload {self.spec!r}: batches({window}) gave {len(batches)} micro-batches; "
                f"valid: K = {self.settings.accumulate}"
            )
        return batches

    def window_tokens(self, batches: list) -> float:
        """The window's normaliser (the reference counts non-pad target tokens)."""
        value = self.made.normaliser(batches)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number and not (torch.is_tensor(value) and value.numel() == 1):
            raise WorkloadError(
                f"--workload {self.spec!r}: normaliser gave {value!r}; valid: a number > 0"
            )
        if not value > 0:
            raise WorkloadError(f"--workload {self.spec!r}: normaliser gave {value!r}; valid: > 0")
        return value

    def distributed_window_tokens(self, batches: list) -> float:
        """The divisor when gradients are averaged over ranks: the global normaliser / world.

        Each rank's window holds its own normaliser; dividing every rank's loss by the global
        sum (taken before the window), times the world size that DDP's and FSDP2's average
        divide by, makes the averaged gradient the whole global batch's (the transformers
        #34191 pitfall, across ranks). Without a process group it is the local normaliser.
        """
        local = self.window_tokens(batches)
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return local
        device = self.device if torch.distributed.get_backend() == "nccl" else "cpu"
        total = torch.tensor([float(local)], dtype=torch.float64, device=device)
        torch.distributed.all_reduce(total)
        return total.item() / torch.distributed.get_world_size()

    def loss(
        self,
        batch: Any,
        tokens: float,
        module: nn.Module | None = None,
        precision: str | None = None,
    ) -> torch.Tensor:
        """One micro-batch's loss through ``module``, under the precision's autocast (the
        case's unless given: a loop compared with another precision passes its own)."""
        precision = precision or self.settings.precision
        with training.autocast(precision, self.device):
            return self.made.loss(batch, tokens, module if module is not None else self.model)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())  # tied weights appear once

    def num_trainable_params(self) -> int:
        """The parameters that require grad (a fine-tune's frozen base does not)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def tokens_per_window(self) -> int | None:
        method = getattr(self.made, "tokens_per_window", None)
        return method() if callable(method) else None

    def flops_per_window(self) -> int | None:
        method = getattr(self.made, "flops_per_window", None)
        return method() if callable(method) else None
