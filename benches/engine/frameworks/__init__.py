"""A framework's own accumulation path, run as a case's loop beside the strategies: the
framework's objects do the windows (never a copy of their logic), paired against the plain
loop like any strategy (``runner.Loop`` holds one in place of a collector).

A path is a case label, ``NAME`` or ``NAME:KEY=VALUE`` (``accelerate:sync_each_batch=true``,
``deepspeed:zero=2``). Each framework is one module of this package; what each runs per
micro-batch, what is turned off and how its loss is scaled is written in docs/frameworks.md.

A path has ``module`` (what forward runs through: the framework's wrapper of the model),
``optimizer`` (the framework's), ``turned_off`` (what of the framework is not measured), and:

- ``window(loss_of, batches, mark, update)``: one window's micro-batches as the framework runs
  them, calling ``mark("forward i")``/``mark("backward i")`` after each, ``mark("update")``
  after the K-th backward, and with ``update`` the framework's own step and reset, then
  ``mark("end")``;
- ``update()``: the step and reset of a window run with ``update=False`` (the gradient check
  reads the gradients in between);
- ``grads(model)``: the window's gradients by parameter name, where the framework keeps them;
- ``held(model)``: the tensors holding gradients between windows (the memory pass's held
  bytes);
- ``counted(kind)``: the module and the kind of ``distributed.CollectiveCounter`` that count
  its collectives under ranks (the DDP module the framework made; DeepSpeed's own backend);
- ``close()``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import Any

import torch

from reports.schema.row_parts import Framework, made

#: each framework: its package, its module here, its options with their values (the first the
#: default); ``EXTRA`` installs them all
PATHS: dict[str, dict[str, Any]] = {
    "accelerate": {
        "package": "accelerate",
        "module": "accelerate_path",
        "options": {"sync_each_batch": (False, True), "no_sync": ("accumulate", "backward")},
    },
    "fabric": {"package": "lightning", "module": "fabric", "options": {}},
    "hf-trainer": {"package": "transformers", "module": "hf_trainer", "options": {}},
    "lightning": {"package": "lightning", "module": "lightning_trainer", "options": {}},
    "deepspeed": {
        "package": "deepspeed",
        "module": "deepspeed_engine",
        "options": {"zero": (0, 1, 2)},
    },
}
EXTRA = "pip install -e '.[frameworks]', or nox -s bench -- --frameworks ..."


def name_of(label: str | None) -> str | None:
    """The path a case label names (``accelerate`` of ``accelerate:no_sync=backward``), else
    None (a strategy, or the plain loop)."""
    name = (label or "").partition(":")[0]
    return name if name in PATHS else None


def installed(name: str) -> bool:
    return importlib.util.find_spec(PATHS[name]["package"]) is not None


def check(name: str, options: dict[str, Any]) -> None:
    """A ValueError naming a bad option or value and the valid ones."""
    valid = PATHS[name]["options"]
    for key, value in options.items():
        if key not in valid:
            choices = ", ".join(valid) or "none"
            raise ValueError(f"unknown option {key!r} of {name}; valid: {choices}")
        if value not in valid[key] or type(value) is not type(valid[key][0]):
            words = ", ".join(str(v).lower() for v in valid[key])
            raise ValueError(f"{name}:{key}={value!r} is not one of {words}")
    if options.get("sync_each_batch") and options.get("no_sync") == "backward":
        raise ValueError(f"{name}: sync_each_batch=true and no_sync=backward are two paths")


def k_of(workload) -> int:
    """The micro-batches of a window, K: a ``Bound`` workload's settings, or a bare reference
    workload's config (tests)."""
    settings = getattr(workload, "settings", None) or getattr(workload, "config", None)
    return int(getattr(settings, "accumulate", 1))


def make(label: str, model: torch.nn.Module, optimizer, k: int):
    """The path a case label names, on ``model`` and ``optimizer``."""
    from benches.engine.spec import parse_options

    name = name_of(label)
    assert name is not None, label
    options = parse_options(label.partition(":")[2])
    check(name, options)
    module = importlib.import_module(f"{__name__}.{PATHS[name]['module']}")
    return module.Path(model, optimizer, k, options)


def figure(label: str, path) -> Framework | None:
    """A path's row part: its framework's package and version, what of it is turned off;
    None for a strategy's case."""
    name = name_of(label)
    if name is None or path is None:
        return None
    package = PATHS[name]["package"]
    return made(
        Framework,
        package=package,
        version=importlib.metadata.version(package),
        turned_off=list(path.turned_off),
    )


class Base:
    """What every path has: the gradients in ``.grad``, DDP's collectives counted on its
    module, nothing to close (a framework that differs says so)."""

    module: torch.nn.Module
    optimizer: Any
    turned_off: tuple[str, ...] = ()

    def grads(self, model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
        return {n: p.grad for n, p in model.named_parameters()}

    def held(self, model: torch.nn.Module) -> list[torch.Tensor]:
        return [p.grad for p in model.parameters() if p.grad is not None]

    def counted(self, kind: str) -> tuple[torch.nn.Module, str]:
        return self.module, kind

    def close(self) -> None:
        pass


class Stepped(Base):
    """A path whose loop is ours and whose per-micro-batch calls are the framework's
    (Accelerate, Fabric, DeepSpeed): ``micro_batch`` runs one, ``update`` the step and reset
    after the K-th."""

    def micro_batch(self, loss_of, batch, i: int, last: bool, mark) -> None:
        raise NotImplementedError

    def update(self) -> None:
        raise NotImplementedError

    def window(self, loss_of, batches, mark, update: bool) -> None:
        for i, batch in enumerate(batches, 1):
            self.micro_batch(loss_of, batch, i, i == len(batches), mark)
        mark("update")
        if update:
            self.update()
        mark("end")
