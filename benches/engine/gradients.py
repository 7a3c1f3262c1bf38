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
  It runs each micro-batch in chunks of its samples (``REFERENCE_CHUNKS``: a float64 copy of a
  whole micro-batch needs twice the memory of the case's own window), and where the model has
  an operator without a float64 kernel (``torch._grouped_mm``), an fp32 copy stands in
  (``model_reference``); ``grad_check.total_reference`` names which ran, and why.

The check's own reference runs at the case's precision, as the window does, so it runs wherever
the window runs; only ``total_error`` needs a float64 model.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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
    each of ``sum_dtypes`` (None: in the gradients' own dtype, the additions autograd makes);
    the trainable parameters' only."""
    model = model if model is not None else workload.model
    module = module if module is not None else model
    # a frozen parameter (requires_grad False: a fine-tune's base) has no gradient to compare
    names, params = zip(
        *(np for np in model.named_parameters() if np[1].requires_grad), strict=True
    )
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


#: a float64 reference runs each micro-batch in at most this many chunks of its samples, and
#: adds their gradients (the loss of a chunk is its samples' share of the window's loss, already
#: divided by the window's normaliser, so the chunks' gradients add up to the micro-batch's).
#: Why 4, in bytes, for N parameters and A, the activations one fp32 micro-batch keeps for its
#: backward: the case's fp32 window holds its weights, its gradient and A, 8N + A (its
#: optimizer's state left out, so the bound is conservative); the float64 copy holds 8N of
#: weights, 8N of gradient (the running sum, in its own ``.grad``) and a chunk's activations,
#: twice as wide, 2A/4: 16N + A/2, no more than 8N + A wherever A >= 16N, activations at least
#: four times the fp32 weights. That holds wherever memory is tight at all (``--preset big``:
#: A = 29 GiB, 16N = 3.1 GiB; ``python scripts/reference_memory.py --preset big`` estimates the
#: peaks, 21.6 GiB against the window's 37.7); where the weights dominate no chunking helps, a
#: float64 copy of them alone is twice the case's. More chunks would save little more and run a
#: GPU on smaller shapes. A case with bf16 weights has a window half as wide again, so its
#: reference runs in twice as many chunks (``reference_chunks``: 8; big: 17.3 GiB against 18.8,
#: the peak then the whole micro-batch's forward without autograd that the chunks are held to).
REFERENCE_CHUNKS = 4
#: the reference of ``total_error`` when a float64 copy of the model runs
FLOAT64_REFERENCE = "float64 model"


def reference_chunks(model: torch.nn.Module) -> int:
    """Chunks per micro-batch for a float64 copy of ``model``: ``REFERENCE_CHUNKS`` for fp32
    weights, as many more as float64 is wider than fp32 for narrower ones (8 for bf16)."""
    width = min((p.element_size() for p in model.parameters() if p.is_floating_point()), default=4)
    return REFERENCE_CHUNKS * max(1, 4 // width)


def samples(batch: Any) -> int | None:
    """How many samples a micro-batch holds: the first dimension its tensors share (a tensor,
    or tuples, lists, dicts and dataclasses of tensors, with numbers and strings beside them,
    kept whole); None where they share none, or it holds anything else."""
    sizes: set[int] = set()

    def walk(value: Any) -> bool:
        if isinstance(value, torch.Tensor):
            if value.dim() > 0:
                sizes.add(value.shape[0])
            return True
        if value is None or isinstance(value, bool | int | float | str):
            return True
        if isinstance(value, Mapping):
            return all(walk(v) for v in value.values())
        if isinstance(value, tuple | list):
            return all(walk(v) for v in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return all(walk(getattr(value, f.name)) for f in dataclasses.fields(value))
        return False

    return next(iter(sizes)) if walk(batch) and len(sizes) == 1 else None


def _rows(value: Any, rows: slice) -> Any:
    """``value`` with every tensor that has a first dimension cut to ``rows`` (``samples``'
    kinds of value: anything else is an error)."""
    if isinstance(value, torch.Tensor):
        return value[rows] if value.dim() > 0 else value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        out = copy.copy(value)  # the same kind of mapping (a dict, a BatchEncoding)
        for key, inner in value.items():
            out[key] = _rows(inner, rows)
        return out
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_rows(v, rows) for v in value))
    if isinstance(value, tuple | list):
        return type(value)(_rows(v, rows) for v in value)
    out = copy.copy(value)  # a dataclass, frozen or not, without calling its __init__
    for f in dataclasses.fields(value):
        object.__setattr__(out, f.name, _rows(getattr(value, f.name), rows))
    return out


def split(batch: Any, chunks: int) -> list | None:
    """A micro-batch as at most ``chunks`` consecutive chunks of its samples (``samples``), or
    None where it cannot be cut or holds one sample. Numbers beside the tensors (the reference
    transformer's ``n_tokens``) are kept as they are: ``loss`` divides by the normaliser it is
    given, never by a batch's own count (protocol.py)."""
    n = samples(batch)
    if n is None or n < 2 or chunks < 2:
        return None
    step = -(-n // chunks)
    try:
        return [_rows(batch, slice(start, start + step)) for start in range(0, n, step)]
    except Exception:  # a mapping or dataclass that cannot be copied: the whole micro-batch
        return None


def _loss(workload, batch, tokens: float, module: torch.nn.Module) -> torch.Tensor:
    """One (part of a) micro-batch's loss through ``module`` as it is: no autocast."""
    return workload.loss(batch, tokens, module, "fp32")


def whole_loss(workload, batch, tokens: float, model: torch.nn.Module) -> torch.Tensor:
    """The loss of a whole micro-batch without autograd (no activations kept: it peaks below a
    chunk's pass), in float64, to hold its chunks' losses to."""
    with torch.no_grad():
        return _loss(workload, batch, tokens, model).double()


def _adds_up(whole: float, pieces: float, dtype: torch.dtype) -> str | None:
    """None where the chunks' losses add up to the whole micro-batch's within ``sqrt(u)``
    relative (u the unit roundoff of the model's dtype: 1.5e-8 in float64, 2.4e-4 in fp32), else
    why not. The chunks add the same terms in another order, which moves a sum of n terms by at
    most n u relative (n, the tokens and widths added, well below 1e5: 1e-11 in float64), while
    a term that couples samples (a batch statistic, an auxiliary loss over the batch, a capacity
    limit that drops tokens) moves it far more: then the reference runs whole micro-batches."""
    from benches.engine.training import UNIT_ROUNDOFF

    if abs(pieces - whole) <= UNIT_ROUNDOFF[dtype] ** 0.5 * abs(whole):
        return None
    return f"its chunks' losses add up to {pieces:.9g}, the whole micro-batch's is {whole:.9g}"


def _passes(
    workload, parts: list, tokens: float, model: torch.nn.Module, totals: dict, values: bool
) -> float:
    """Forward and backward of each part through ``model``, adding its gradient into the
    model's ``.grad`` (a float64 model: the sum stays in float64 without a second copy of the
    gradient) or into the float64 ``totals`` (another dtype). With ``values``, the sum of the
    parts' losses (else 0)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    float64 = all(p.dtype == torch.float64 for _, p in named)
    summed = 0.0
    for part in parts:
        loss = _loss(workload, part, tokens, model)
        if values:
            summed += loss.detach().double().item()
        if float64:
            loss.backward()
        else:
            grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
            for (name, _), g in zip(named, grads, strict=True):
                if g is None:
                    continue
                if name in totals:
                    totals[name].add_(g)
                else:
                    totals[name] = g.to(torch.float64, copy=True)
            del grads
        del loss
    return summed


def reference_in_chunks(
    workload,
    batches,
    tokens: float,
    model: torch.nn.Module,
    chunks: int = REFERENCE_CHUNKS,
    check_split: bool = True,
) -> tuple[dict[str, torch.Tensor], str | None]:
    """The window's gradient of ``model``, a private copy (its ``.grad`` is used and left
    None), each micro-batch in ``chunks`` of its samples (``split``, ``reference_chunks``), summed
    in float64. The first micro-batch's chunks are held to its whole loss (``_adds_up``: one
    forward without autograd) unless ``check_split`` is False (a memory estimate on
    FakeTensors, which hold no values); where they do not add up, or a chunk raises and the
    whole micro-batch does not, the window runs in whole micro-batches. The second value says
    why whole micro-batches ran (None: they were cut, or hold one sample each)."""
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    totals: dict[str, torch.Tensor] = {}
    first, n = split(batches[0], chunks), samples(batches[0])
    why = None
    if first is None and n is None:
        why = "its micro-batch does not split into samples"
    elif first is None and n > 1 and chunks > 1:
        why = "its micro-batch could not be copied in parts"
    cut = first is not None
    for i, batch in enumerate(batches):
        parts = (first if i == 0 else split(batch, chunks)) if cut else None
        if parts is None:
            _passes(workload, [batch], tokens, model, totals, values=False)
        elif i > 0 or not check_split:
            _passes(workload, parts, tokens, model, totals, values=False)
        else:
            failed = None
            try:
                pieces = _passes(workload, parts, tokens, model, totals, values=True)
            except Exception as err:  # the chunks' fault only if the whole runs (below)
                failed, pieces = _one_line(err), 0.0
            whole = whole_loss(workload, batch, tokens, model).item()  # raises: the model's
            why = f"a chunk of its samples raised {failed}" if failed else None
            why = why or _adds_up(whole, pieces, dtype)
            if why is not None:  # again, whole
                model.zero_grad(set_to_none=True)
                totals.clear()
                cut = False
                _passes(workload, [batch], tokens, model, totals, values=False)
    if all(p.dtype == torch.float64 for p in model.parameters() if p.requires_grad):
        totals = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
    return totals, why


class _FailingOp(TorchDispatchMode):
    """Remembers the first operator that raised under it (the one without a float64 kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.op: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.op is None:
                self.op = func.name().replace("::", ".")
            raise


def _failing_op(workload, batch, tokens: float, model: torch.nn.Module, chunks: int) -> str | None:
    """The operator that raised in a float64 forward and backward of (a chunk of) ``batch``:
    run once more under a dispatch mode that names it (None if it runs now)."""
    part = (split(batch, chunks) or [batch])[0]
    spy = _FailingOp()
    try:
        with spy:
            loss = _loss(workload, part, tokens, model)
            params = [p for p in model.parameters() if p.requires_grad]
            torch.autograd.grad(loss, params, allow_unused=True)
    except Exception:
        pass
    return spy.op


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip()


def model_reference(
    workload, batches, tokens: float, model: torch.nn.Module
) -> tuple[dict[str, torch.Tensor], str]:
    """``total_error``'s reference and its name: the window's gradient of a float64 copy of
    ``model`` on the same data (no autocast), in chunks of each micro-batch's samples
    (``reference_in_chunks``). Where the float64 copy raises (an operator without a float64
    kernel: ``torch._grouped_mm``, the default experts of transformers' mixture-of-experts
    models), the same computation by an fp32 copy, the plain loop's arithmetic with no strategy
    and no autocast, summed in float64; the name says which and why. If that raises too, a
    ``GradientCheckError`` of one line says the reference failed and why."""
    from benches.engine.replicas import replica

    chunks = reference_chunks(model)
    try:
        grads, why = reference_in_chunks(
            workload, batches, tokens, replica(model).to(torch.float64), chunks
        )
        return grads, FLOAT64_REFERENCE + (f" (whole micro-batches: {why})" if why else "")
    except RuntimeError as err:
        failed = _one_line(err)
    op = _failing_op(workload, batches[0], tokens, replica(model).to(torch.float64), chunks)
    if op is not None and any(word in failed for word in ("Double", "double", "float64")):
        reason = f"no float64 kernel: {op}"
    else:
        reason = f"the float64 copy failed{f' in {op}' if op else ''}: {failed}"
    try:
        grads, why = reference_in_chunks(
            workload, batches, tokens, replica(model).to(torch.float32), chunks
        )
    except RuntimeError as err:
        raise GradientCheckError(
            "the gradient check's reference failed: a float64 copy of the model without any "
            f"strategy raised ({reason}), and so did an fp32 copy ({_one_line(err)})"
        ) from None
    return grads, f"fp32 model ({reason}{f'; whole micro-batches: {why}' if why else ''})"


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


class References:
    """The references of each window that the strategies of one process share (``shared``):
    computed for the first strategy checked, reused by another whose replica holds bitwise the
    same weights and buffers at that window; the first window's always (every replica starts
    from the workload's weights), a later one's where the updates before it were bitwise the
    same. A reference depends on nothing else (the data and the arithmetic are the process's)."""

    def __init__(self) -> None:
        self.windows: dict[int, tuple[list[torch.Tensor], tuple]] = {}
        self.reused = 0

    def get(self, window: int, model: torch.nn.Module) -> tuple | None:
        found = self.windows.get(window)
        if found is None:
            return None
        state, value = found
        now = list(model.state_dict().values())
        if len(now) != len(state) or not all(
            a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
            for a, b in zip(state, now, strict=True)
        ):
            return None
        self.reused += 1
        return value

    def put(self, window: int, model: torch.nn.Module, value: tuple) -> None:
        state = [t.detach().clone() for t in model.state_dict().values()]
        self.windows[window] = (state, value)


def window_reference(workload, every, every_tokens, model, module, dtypes, first: bool) -> tuple:
    """A window's references: the float64 sum of its micro-batch gradients, their sum in the
    gradients' own dtype (one process), and on the first window ``total_error``'s whole-window
    reference and its name (``model_reference``)."""
    try:
        expected, *rest = reference_sums(
            workload, every, every_tokens, model, module, sum_dtypes=dtypes
        )
    except RuntimeError as err:
        raise GradientCheckError(
            "the gradient check's reference failed: the micro-batch gradients without any "
            f"strategy raised {_one_line(err)}"
        ) from err
    same_order = rest[0] if rest else None
    total, reference = (
        model_reference(workload, every, every_tokens, model) if first else (None, None)
    )
    return expected, same_order, total, reference


def check_windows(
    loop, workload, windows, references, tolerance: float, parallel=None, cache=None, seconds=None
) -> tuple[GradCheck, dict[str, ErrorFigures]]:
    """Check the strategy's gradients over consecutive windows, stepping in between: the worst
    window's check (its ``total_reference`` names the reference of ``total_error``), and the
    first window's error figures (``accumulation_error``, ``total_error``, by the row's field
    names). A reference that raises is a ``GradientCheckError`` of one line saying so.

    ``windows``: (batches, tokens) of this rank per window; ``references``: (batches, tokens)
    whose reference gradient the window must equal (the global batch under DDP or FSDP2). A
    sharded model's reference runs on an unsharded copy of its weights, and its window's
    gradients are gathered whole before they are compared. Without ranks the micro-batch
    gradients of the reference go through the loop's own (compiled) module, and a window may
    also match their sum in the gradient's dtype (``accepted``). ``cache`` (one process, no
    ranks): the references its strategies share (``References``); ``seconds``: a list that
    gets each window's seconds (its update included: a warm-up pair's part, ``engine.warmup``).
    """
    worst: GradCheck | None = None
    figures: dict[str, ErrorFigures] = {}
    reference: str | None = None  # total_error's, named in the row (``model_reference``)
    ranks = parallel is not None and parallel.kind != "none"
    for w, ((batches, tokens), (every, every_tokens)) in enumerate(
        zip(windows, references, strict=True)
    ):
        sharded = parallel is not None and parallel.sharded
        model = parallel.unsharded(loop.model) if sharded else loop.model
        # a framework's module is its engine (DeepSpeed's counts and hooks every forward): the
        # reference runs the model itself
        module = None if ranks or loop.path is not None else loop.forward
        # one pass: the float64 sum, and (one process) the sum in the gradients' own dtype
        dtypes = (torch.float64,) if ranks else (torch.float64, None)
        shared = cache if cache is not None and not ranks else None
        found = shared.get(w, model) if shared is not None else None
        if found is None:
            found = window_reference(workload, every, every_tokens, model, module, dtypes, w == 0)
            if shared is not None:
                shared.put(w, model, found)
        expected, same_order, total, name = found
        reference = name if w == 0 else reference
        del model, found
        timing = loop.window(batches, tokens, update=False)
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
        began = time.perf_counter()
        loop.update()
        if seconds is not None:  # the window and its update, as a timed window has them
            seconds.append(timing["window"] + time.perf_counter() - began)
    assert worst is not None
    worst.windows = len(windows)
    worst.total_reference = reference
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
