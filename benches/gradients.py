"""The reference gradients and the check that every case's strategy yields them.

The reference is computed without any strategy: ``torch.autograd.grad`` of each micro-batch's
loss, summed, at the weights the window starts from (it never touches ``.grad``). The check runs
``CHECK_WINDOWS`` consecutive windows with an optimizer step and different data in between, so a
reset that does nothing (the second window would hold two windows' gradients) fails.
"""

from __future__ import annotations

from typing import Any

import torch

GRAD_TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2}  # max relative difference allowed
CHECK_WINDOWS = 3


class GradientCheckError(RuntimeError):
    """A strategy's window gradient differs from the reference beyond the tolerance."""


def reference_grads(
    workload, batches, tokens: float, model: torch.nn.Module | None = None
) -> dict[str, torch.Tensor]:
    """The window's gradient without any strategy: autograd.grad per micro-batch, summed."""
    model = model if model is not None else workload.model
    names, params = zip(*model.named_parameters(), strict=True)
    total: list[torch.Tensor | None] = [None] * len(params)
    for batch in batches:
        loss = workload.loss(batch, tokens, model)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        for i, g in enumerate(grads):
            if g is not None:
                total[i] = g if total[i] is None else total[i] + g
    return {n: t for n, t in zip(names, total, strict=True) if t is not None}


def grad_check(got: dict[str, torch.Tensor | None], expected, tolerance: float) -> dict[str, Any]:
    """Largest absolute and relative (to the reference's largest value) difference; ok or not."""
    max_abs = max_rel = 0.0
    worst = None
    for name, ref in expected.items():
        g = got.get(name)
        g = torch.zeros_like(ref) if g is None else g
        diff = (g.float() - ref.float()).abs().max().item()
        scale = ref.float().abs().max().item()
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
        max_abs = max(max_abs, diff)
        if rel > max_rel:
            max_rel, worst = rel, name
    return {
        "max_abs_diff": max_abs,
        "max_rel_diff": max_rel,
        "tolerance": tolerance,
        "ok": max_rel <= tolerance,
        "worst_parameter": worst,
    }


def check_windows(
    loop, workload, windows, references, tolerance: float, parallel=None
) -> dict[str, Any]:
    """Check the strategy's gradients over consecutive windows, stepping in between.

    ``windows``: (batches, tokens) of this rank per window; ``references``: (batches, tokens)
    whose reference gradient the window must equal (the global batch under DDP or FSDP2). A
    sharded model's reference runs on an unsharded copy of its weights, and its window's
    gradients are gathered whole before they are compared.
    """
    worst: dict[str, Any] | None = None
    for w, ((batches, tokens), (every, every_tokens)) in enumerate(
        zip(windows, references, strict=True)
    ):
        sharded = parallel is not None and parallel.sharded
        model = parallel.unsharded(loop.model) if sharded else loop.model
        expected = reference_grads(workload, every, every_tokens, model)
        del model
        loop.window(batches, tokens, update=False)
        result = grad_check(loop.grads(), expected, tolerance)
        del expected
        result["window"] = w + 1
        if worst is None or result["max_rel_diff"] > worst["max_rel_diff"]:
            worst = result
        loop.collector.step(loop.optimizer)
    assert worst is not None
    return {**worst, "windows": len(windows)}


def failure(check: dict[str, Any]) -> str:
    return (
        f"gradient check failed: window {check['window']} of {check['windows']} differs from "
        f"the reference by {check['max_rel_diff']:.3g} (max relative difference, parameter "
        f"{check.get('worst_parameter')!r}) > tolerance {check['tolerance']:g}"
    )
