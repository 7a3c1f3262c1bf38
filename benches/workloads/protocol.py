"""Bring your own workload: what the engine hands a workload factory, and what it needs back.

``--workload package.module:factory`` names a callable. The engine calls it once per process as
``factory(settings)`` with the settings it owns (``Settings``: device, precision, seed, K,
live tensors, threads, preset, deterministic) and gets back an object with

- ``model``: an ``nn.Module`` on ``settings.device``, never wrapped: the engine wraps replicas of
  it itself (DDP, FSDP2) and hands the wrapper to ``loss``;
- ``batches(window) -> list``: the K micro-batches of window ``window`` (anything ``loss``
  understands), the same for the same window every time, different for different windows;
- ``normaliser(batches) -> float``: the window's divisor (tokens, samples), > 0; the engine sums
  it over ranks before a distributed window;
- ``loss(batch, normaliser, module) -> Tensor``: one micro-batch's loss computed through
  ``module`` (the model, or the engine's wrapper of a replica), already divided by the window's
  normaliser, so that the window's gradient is the sum over its micro-batches;

and optionally ``tokens_per_window()``, ``flops_per_window()`` and ``ballast`` (otherwise the
engine makes ``live_tensors`` unrelated leaf tensors itself).

The factory declares the settings it applies beyond the engine's own (``honours``, as an asv
benchmark declares its ``params``): ``workload.honours = ("preset",)`` says it builds its sizes
from ``settings.preset``. A sweep given such a setting (``reports.schema.settings.WORKLOAD``) on
its command line, for a workload that does not honour it, is refused before anything runs: its
rows would name a setting their model never ran. With ``settings.deterministic`` the forward
must draw no random numbers (no dropout): gradient checks compare windows.

The reference transformer (``benches.workloads.transformer:workload``) is the first implementation.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

DEFAULT = "benches.workloads.transformer:workload"
REQUIRED = ("model", "batches", "normaliser", "loss")
# modules that moved: the old name still loads (the reference lived in benches/workload.py)
MOVED = {"benches.workload": "benches.workloads.transformer"}
BALLAST_SIZE = 64  # float32 elements per engine-made ballast tensor, as the reference's


@dataclasses.dataclass(frozen=True)
class Settings:
    """The settings the engine owns; a workload builds its model and data from them."""

    device: str  # "cpu" or "cuda:N": the rank's own device
    # fp32 | bf16-autocast | bf16 (benches/engine/training.py); the engine applies it: bf16 weights
    # (the model is cast after the factory returns), autocast around every ``loss`` call
    precision: str = "fp32"
    seed: int = 0
    accumulate: int = 1  # K micro-batches per window
    live_tensors: int = 0  # unrelated leaf tensors with a .grad, kept alive
    threads: int = 1
    preset: str = "tiny"  # a size name; a workload may map it to its own sizes or ignore it
    deterministic: bool = True  # no dropout: the gradient check compares windows
    # activation checkpointing, "off" or "on": a workload that declares it (``honours``)
    # recomputes its layers' forward in the backward instead of keeping their activations
    checkpointing: str = "off"


class WorkloadError(ValueError):
    """A bad --workload: one line naming what is missing."""


def canonical(spec: str) -> str:
    """``spec`` with a moved module's new name (the spelling rows and resume compare)."""
    module_name, sep, attribute = str(spec).partition(":")
    return f"{MOVED.get(module_name, module_name)}{sep}{attribute}"


def honoured(factory: Callable[[Settings], Any], spec: str) -> tuple[str, ...]:
    """The settings ``factory`` declares it applies (its ``honours``: none where it declares
    none); a declaration that is not names of settings is a ``WorkloadError``."""
    value = getattr(factory, "honours", ())
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise WorkloadError(
            f"--workload {spec!r}: honours = {value!r}; valid: a tuple of setting names, "
            "e.g. ('preset',)"
        )
    return tuple(value)


def load(spec: str) -> Callable[[Settings], Any]:
    """The factory that ``package.module:attribute`` names."""
    module_name, sep, attribute = canonical(spec).partition(":")
    if not sep or not module_name or not attribute:
        raise WorkloadError(
            f"--workload {spec!r} is not MODULE:FACTORY; valid: e.g. {DEFAULT} or "
            "examples.workloads.convnet:workload"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # not found, or the module itself fails to import
        raise WorkloadError(
            f"--workload {spec!r}: cannot import {module_name!r} ({type(err).__name__}: "
            + str(err).replace("\n", " ")
            + ")"
        ) from None
    factory = getattr(module, attribute, None)
    if factory is None:
        raise WorkloadError(f"--workload {spec!r}: module {module_name!r} has no {attribute!r}")
    if not callable(factory):
        raise WorkloadError(f"--workload {spec!r}: {attribute!r} is not callable")
    return factory
