"""The reference gradients, the check that every case's strategy yields them, and how precise
the window's gradient is.

The reference is computed without any strategy: ``torch.autograd.grad`` of each micro-batch's
loss at the case's precision, summed in float64, at the weights the window starts from (it never
touches ``.grad``). The check runs ``CHECK_WINDOWS`` consecutive windows with an optimizer step
and different data in between, so a reset that does nothing (the second window would hold two
windows' gradients) fails; its tolerance comes from the precision and K
(``training.grad_tolerance``), so that a bf16 sum shows in the error figures, not as a failure.

The first window's gradient also gives the row's error figures, each ``max_rel`` (max |diff| /
max |ref| per parameter, the worst parameter, as the check) and ``norm_rel`` (||diff|| / ||ref||
over all parameters concatenated):

- ``accumulation_error``: against that float64 sum of the same micro-batch gradients: it
  isolates where the window's sum lives (bf16 ``.grad``, an fp32 buffer, ...);
- ``total_error``: against a float64 copy of the model on the same data: precision as a whole.
"""

from __future__ import annotations

from typing import Any

import torch

from reports.schema.row_parts import ErrorFigures, GradCheck, given, made

CHECK_WINDOWS = 3


class GradientCheckError(RuntimeError):
    """A strategy's window gradient differs from the reference beyond the tolerance."""


def reference_sums(
    workload,
    batches,
    tokens: float,
    model: torch.nn.Module | None = None,
    module: torch.nn.Module | None = None,
    precision: str | None = None,
    sum_dtypes: tuple[torch.dtype | None, ...] = (torch.float64,),
) -> list[dict[str, torch.Tensor]]:
    """The window's gradient without any strategy, one pass: autograd.grad per micro-batch
    (through ``module``, default the model, at the precision, default the case's), summed in
    each of ``sum_dtypes`` (None: in the gradients' own dtype, the additions autograd makes)."""
    model = model if model is not None else workload.model
    module = module if module is not None else model
    names, params = zip(*model.named_parameters(), strict=True)
    totals: list[list[torch.Tensor | None]] = [[None] * len(params) for _ in sum_dtypes]
    extra = () if precision is None else (precision,)  # a bare workload (tests) has none
    for batch in batches:
        loss = workload.loss(batch, tokens, module, *extra)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        for total, dtype in zip(totals, sum_dtypes, strict=True):
            for i, g in enumerate(grads):
                if g is not None:
                    g = g if dtype is None else g.to(dtype)
                    total[i] = g if total[i] is None else total[i] + g
    return [{n: t for n, t in zip(names, total, strict=True) if t is not None} for total in totals]


def reference_grads(
    workload,
    batches,
    tokens: float,
    model: torch.nn.Module | None = None,
    module: torch.nn.Module | None = None,
    precision: str | None = None,
    sum_dtype: torch.dtype | None = torch.float64,
) -> dict[str, torch.Tensor]:
    """``reference_sums`` in one dtype: float64 unless ``sum_dtype`` says otherwise."""
    return reference_sums(workload, batches, tokens, model, module, precision, (sum_dtype,))[0]


def float64_grads(workload, batches, tokens: float, model: torch.nn.Module) -> dict:
    """The window's gradient of a float64 copy of ``model`` on the same data (no autocast)."""
    from benches.engine.replicas import replica

    return reference_grads(
        workload, batches, tokens, replica(model).to(torch.float64), precision="fp32"
    )


def _compare(got: dict[str, torch.Tensor | None], expected: dict[str, torch.Tensor]) -> dict:
    """A window's gradient against a reference, in float64: the largest absolute difference,
    the largest relative to each parameter's largest reference value (and which parameter), and
    ||diff|| / ||ref|| over all parameters concatenated. A missing gradient counts as zeros."""
    max_abs = max_rel = diff_sq = ref_sq = 0.0
    worst = None
    for name, ref in expected.items():
        g = got.get(name)
        ref = ref.double()
        diff = (ref if g is None else g.double() - ref).abs()
        largest, scale = diff.max().item(), ref.abs().max().item()
        rel = largest / scale if scale > 0 else (0.0 if largest == 0 else float("inf"))
        max_abs = max(max_abs, largest)
        if rel > max_rel:
            max_rel, worst = rel, name
        diff_sq += diff.square().sum().item()
        ref_sq += ref.square().sum().item()
    norm_rel = (diff_sq**0.5) / (ref_sq**0.5) if ref_sq > 0 else 0.0
    return {"max_abs": max_abs, "max_rel": max_rel, "worst": worst, "norm_rel": norm_rel}


def errors(got: dict[str, torch.Tensor | None], expected: dict[str, torch.Tensor]) -> ErrorFigures:
    """``max_rel`` and ``norm_rel`` of a window's gradient against a float64 reference."""
    found = _compare(got, expected)
    return made(ErrorFigures, max_rel=found["max_rel"], norm_rel=found["norm_rel"])


def grad_check(got: dict[str, torch.Tensor | None], expected, tolerance: float) -> dict[str, Any]:
    """Largest absolute and relative (to the reference's largest value) difference; ok or not."""
    found = _compare(got, expected)
    return {
        "max_abs_diff": found["max_abs"],
        "max_rel_diff": found["max_rel"],
        "tolerance": tolerance,
        "ok": found["max_rel"] <= tolerance,
        "worst_parameter": found["worst"],
    }


def accepted(
    got: dict[str, torch.Tensor | None],
    expected: dict[str, torch.Tensor],
    same_order: dict[str, torch.Tensor] | None,
    tolerance: float,
) -> GradCheck:
    """The window's check: within ``tolerance`` of the float64 sum, or (``same_order`` given)
    within ``training.SAME_ORDER_TOLERANCE`` of the sum in the gradient's dtype in autograd's
    order. The result names the reference that accepted it (or the float64 one's failure)."""
    from benches.engine.training import SAME_ORDER_TOLERANCE

    found = grad_check(got, expected, tolerance)
    result = made(GradCheck, **found, accepted_by="float64 sum" if found["ok"] else None)
    if same_order is not None:
        order = grad_check(got, same_order, SAME_ORDER_TOLERANCE)
        result.same_order_max_rel_diff = order["max_rel_diff"]
        result.same_order_tolerance = SAME_ORDER_TOLERANCE
        if order["ok"] and not result.ok:
            result.ok, result.accepted_by = True, "same-order sum"
    return result


def check_windows(
    loop, workload, windows, references, tolerance: float, parallel=None
) -> tuple[GradCheck, dict[str, ErrorFigures]]:
    """Check the strategy's gradients over consecutive windows, stepping in between: the worst
    window's check, and the first window's error figures (``accumulation_error``,
    ``total_error``, by the row's field names).

    ``windows``: (batches, tokens) of this rank per window; ``references``: (batches, tokens)
    whose reference gradient the window must equal (the global batch under DDP or FSDP2). A
    sharded model's reference runs on an unsharded copy of its weights, and its window's
    gradients are gathered whole before they are compared. Without ranks the micro-batch
    gradients of the reference go through the loop's own (compiled) module, and a window may
    also match their sum in the gradient's dtype (``accepted``).
    """
    worst: GradCheck | None = None
    figures: dict[str, ErrorFigures] = {}
    ranks = parallel is not None and parallel.kind != "none"
    for w, ((batches, tokens), (every, every_tokens)) in enumerate(
        zip(windows, references, strict=True)
    ):
        sharded = parallel is not None and parallel.sharded
        model = parallel.unsharded(loop.model) if sharded else loop.model
        module = None if ranks else loop.forward
        # one pass: the float64 sum, and (one process) the sum in the gradients' own dtype
        dtypes = (torch.float64,) if ranks else (torch.float64, None)
        expected, *rest = reference_sums(
            workload, every, every_tokens, model, module, sum_dtypes=dtypes
        )
        same_order = rest[0] if rest else None
        total = float64_grads(workload, every, every_tokens, model) if w == 0 else None
        del model
        loop.window(batches, tokens, update=False)
        got = loop.grads()
        result = accepted(got, expected, same_order, tolerance)
        if w == 0:
            figures = {
                "accumulation_error": errors(got, expected),
                "total_error": errors(got, total),
            }
        del expected, same_order, total, got
        result.window = w + 1
        # the worst window: a failed one first, then the largest difference
        if worst is None or (not result.ok, result.max_rel_diff) > (
            not worst.ok,
            worst.max_rel_diff,
        ):
            worst = result
        loop.update()
    assert worst is not None
    worst.windows = len(windows)
    return worst, figures


def failure(record: GradCheck) -> str:
    check = given(record)
    order = (
        f" and from their sum in the gradient's dtype by {check['same_order_max_rel_diff']:.3g}"
        f" > {check['same_order_tolerance']:g}"
        if "same_order_max_rel_diff" in check
        else ""
    )
    return (
        f"gradient check failed: window {check['window']} of {check['windows']} differs from "
        f"the float64 sum of its micro-batch gradients by {check['max_rel_diff']:.3g} (max "
        f"relative difference, parameter {check.get('worst_parameter')!r}) > tolerance "
        f"{check['tolerance']:g}{order}"
    )
