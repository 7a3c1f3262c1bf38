"""The training loop's settings, and the one place each of them is applied.

A case runs the loop people run today: a precision (``fp32``; ``bf16-autocast``: fp32 weights
and gradients, the forward under ``torch.autocast``; ``bf16``: bf16 weights, so ``.grad`` is bf16
and the window's sum lives in bf16 unless the strategy keeps its own), optionally a compiled
model, an optimizer and gradient clipping. Every loop of a case (the strategy's, the plain one,
the memory pass's) gets them from here, so both sides of a pair run the same loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Any

import torch

from reports.schema.settings import FIELDS, check_value

PRECISIONS = FIELDS["precision"].metadata["choices"]  # declared with the setting
OPTIMIZERS = FIELDS["optimizer"].metadata["choices"]
#: settings ``--compare-settings`` can alternate with the case's own in one process
COMPARABLE = ("precision", "compile", "optimizer", "clip_norm")
LR = 1e-4
#: the unit roundoff of a gradient's dtype (half the distance from 1 to the next number)
UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float64: 2.0**-53}
#: bf16 dense peak FLOP/s (tensor cores, fp32 accumulate, no sparsity) for MFU, from NVIDIA's
#: data sheets, by the words of the name ``torch.cuda.get_device_name`` gives ("NVIDIA H100 80GB
#: HBM3": split at spaces and hyphens, case ignored). Most sheets give the figure with 2:4
#: sparsity (marked *): dense is half. Not here, so no MFU: V100 and T4 (no bf16 tensor cores),
#: A10G (no NVIDIA data sheet), and any GPU not named below.
PEAK_BF16_FLOPS = {
    ("H100", "80GB", "HBM3"): 1979e12 / 2,  # H100 SXM5, H100 data sheet: 1,979* TFLOPS
    ("H100", "PCIe"): 1513e12 / 2,  # H100 PCIe, H100 data sheet (2022): 1,513*
    ("H100", "NVL"): 1671e12 / 2,  # H100 NVL, H100 data sheet: 1,671*
    ("H200",): 1979e12 / 2,  # H200 SXM ("NVIDIA H200"), H200 data sheet: 1,979*
    ("H200", "NVL"): 1671e12 / 2,  # H200 NVL, H200 data sheet: 1,671*
    ("GH200",): 1979e12 / 2,  # GH200 Grace Hopper's GPU, GH200 data sheet: 1,979*
    ("B200",): 36e15 / 8 / 2,  # HGX B200 data sheet: 36* PFLOPS for its 8 GPUs
    ("A100",): 312e12,  # A100 SXM4 and PCIe, 40 and 80 GB alike, A100 data sheet: 312 (624*)
    ("L40S",): 362.05e12,  # L40S data sheet: 362.05 (733*)
    ("L40",): 181.05e12,  # L40 data sheet: 181.05 (362.1*)
    ("L4",): 242e12 / 2,  # L4 data sheet: 242*
    ("A10",): 125e12,  # A10 data sheet: 125 (250*)
}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a loop trains: what the case's row records, and its identity."""

    precision: str = "fp32"
    compile: bool = False
    optimizer: str = "adamw"
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        check(self)

    def replace(self, setting: str, value: Any) -> Recipe:
        return dataclasses.replace(self, **{setting: value})


def check(loop: Recipe) -> None:
    """A ValueError naming the bad value and the valid ones: each field against its setting's
    declaration (``settings.check_value``), then what a declaration cannot say."""
    for f in dataclasses.fields(loop):
        check_value(f.name, getattr(loop, f.name))
    if loop.clip_norm is not None and not (
        isinstance(loop.clip_norm, int | float) and loop.clip_norm > 0
    ):
        raise ValueError(f"invalid clip norm {loop.clip_norm!r}; valid: a number > 0, or none")
    if not isinstance(loop.compile, bool):
        raise ValueError(f"invalid compile {loop.compile!r}; valid: true, false")


def parse_setting(text: str) -> tuple[str, Any]:
    """``SETTING=VALUE`` of ``--compare-settings`` -> (setting, value), checked; a ValueError
    names the bad part and the valid ones."""
    setting, sep, value = str(text).partition("=")
    setting, value = setting.strip().replace("-", "_"), value.strip()
    if not sep or setting not in COMPARABLE:
        raise ValueError(
            f"--compare-settings {text!r} is not SETTING=VALUE with SETTING one of "
            f"{', '.join(COMPARABLE)} (e.g. compile=false, precision=fp32)"
        )
    if setting == "compile":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"--compare-settings {text!r}: valid values: true, false")
        return setting, value.lower() == "true"
    if setting == "clip_norm":
        if value.lower() == "none":
            return setting, None
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not number > 0:
            raise ValueError(f"--compare-settings {text!r}: valid values: a number > 0, none")
        return setting, number
    valid = PRECISIONS if setting == "precision" else OPTIMIZERS
    if value not in valid:
        raise ValueError(f"--compare-settings {text!r}: valid values: {', '.join(valid)}")
    return setting, value


def parameter_dtype(precision: str) -> torch.dtype:
    """The dtype of the weights (and so of ``.grad``) at a precision."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def to_precision(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """The model's floating-point weights and buffers in the precision's dtype, in place."""
    dtype = parameter_dtype(precision)
    if any(p.is_floating_point() and p.dtype != dtype for p in model.parameters()):
        model.to(dtype)
    return model


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The forward's context: autocast to bf16 for ``bf16-autocast``, nothing otherwise."""
    if precision == "bf16-autocast":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def optimizer(recipe: Recipe, params) -> torch.optim.Optimizer:
    """The recipe's optimizer over ``params`` (lr 1e-4; AdamW's other defaults are torch's)."""
    params, name = list(params), recipe.optimizer
    if name == "sgd":
        return torch.optim.SGD(params, lr=LR)
    if name == "adamw-fused":
        return torch.optim.AdamW(params, lr=LR, fused=True)
    if name == "adamw-foreach":
        return torch.optim.AdamW(params, lr=LR, foreach=True)
    return torch.optim.AdamW(params, lr=LR)  # torch picks: foreach on CUDA, a loop on CPU


def compiled(module: torch.nn.Module) -> torch.nn.Module:
    """``torch.compile(module)``; compiling happens at its first call (see ``warm``)."""
    return torch.compile(module)


def no_recompile(compiled: bool) -> contextlib.AbstractContextManager:
    """Around timed windows of a compiled model: a recompile raises (the case fails saying so)
    instead of compiling inside a window's clock."""
    if not compiled:
        return contextlib.nullcontext()
    return torch.compiler.set_stance("fail_on_recompile")


def warm(loss_of, batch, params) -> float:
    """Seconds of one forward and backward that compiles a module (the graphs of forward and
    backward), outside any window: ``torch.autograd.grad`` leaves ``.grad`` untouched."""
    start = time.perf_counter()
    loss = loss_of(batch)
    torch.autograd.grad(loss, [p for p in params if p.requires_grad], allow_unused=True)
    return time.perf_counter() - start


#: the gradient check's tolerance against the window's sum in the gradient's own dtype, added in
#: autograd's order: where a strategy makes the same additions it is equal (compiled kernels and
#: reordered sums move it by a few fp32 ulps)
SAME_ORDER_TOLERANCE = 1e-5


def grad_tolerance(precision: str, accumulate: int, world: int = 1) -> float:
    """The gradient check's largest allowed max relative difference from the float64 sum of the
    window's micro-batch gradients.

    One process: a sum kept in fp32 or wider and rounded once to the gradient's dtype (2 u, u its
    unit roundoff) plus the rounding of K - 1 fp32 additions (8 K 2^-24), at least 1e-5. A sum
    kept in bf16 (``.grad`` itself) is checked against the same additions in bf16 instead
    (``SAME_ORDER_TOLERANCE``), so it shows in ``accumulation_error``, not as a failure, while
    a window that lost a micro-batch (about 1/K) or kept the last window's (about 1) fails both.

    Across ranks (``world`` > 1) the reduction adds in its own order and dtype: 8 K world u, at
    most 0.25, still far below a reset that does nothing.
    """
    u = UNIT_ROUNDOFF[parameter_dtype(precision)]
    if world > 1:
        return min(0.25, max(1e-5, 8 * accumulate * world * u))
    return max(1e-5, 2 * u + 8 * accumulate * UNIT_ROUNDOFF[torch.float32])


def peak_flops(device: torch.device, precision: str) -> float | None:
    """The GPU's bf16 dense peak (None on CPU, for fp32, or for a GPU not in the table)."""
    if device.type != "cuda" or precision == "fp32":
        return None
    return bf16_peak(torch.cuda.get_device_name(device))


def bf16_peak(name: str) -> float | None:
    """``PEAK_BF16_FLOPS`` for a GPU's name: the entry with the most words, all of them in the
    name (so "NVIDIA H100 PCIe" is not the SXM, nor "NVIDIA L40" the L4, nor "NVIDIA RTX A1000"
    an A100); None where none fits, or for a MIG slice (a fraction of the GPU's SMs)."""
    words = set(re.split(r"[\s-]+", name.casefold()))
    if "mig" in words:
        return None
    fits = [key for key in PEAK_BF16_FLOPS if {w.casefold() for w in key} <= words]
    return PEAK_BF16_FLOPS[max(fits, key=len)] if fits else None
