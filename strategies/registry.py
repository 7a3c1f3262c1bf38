"""Strategy registry: built-ins, run-time registrations and the ``zerograd.strategies`` group."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib import metadata
from typing import Any

from strategies.base import Strategy

ENTRY_POINT_GROUP = "zerograd.strategies"
#: the built-in strategies, the one list of them: name -> "module:Class" under strategies/, in
#: the order the docs list them. ``strategies`` registers each; asv's suites read this literal
#: from the working tree's file (benches/asv_common.py), so keep it a literal.
BUILTIN = {
    "global": "global_search:GlobalStrategy",
    "block": "block:BlockStrategy",
    "native": "native:NativeStrategy",
    "lazy": "lazy:LazyStrategy",
    "foreach": "foreach:ForeachStrategy",
    "flat": "flat:FlatStrategy",
    "main_grad": "main_grad:MainGradStrategy",
}

Factory = Callable[..., Strategy]

_factories: dict[str, Factory] = {}
_entry_points: dict[str, metadata.EntryPoint] = {}  # unloaded until their strategy is asked for
_entry_points_loaded = False


def register(name: str, factory: Factory) -> None:
    """Make ``get(name, **options)`` return ``factory(**options)``; a later call replaces it."""
    if not isinstance(name, str) or not name or name != name.strip() or "," in name:
        raise ValueError(
            f"strategy name {name!r} must be a non-empty string without commas or spaces"
        )
    if not callable(factory):
        raise ValueError(f"factory {factory!r} for strategy {name!r} is not callable")
    _factories[name] = factory


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        _entry_points.setdefault(ep.name, ep)


def available() -> list[str]:
    """Names of every registered strategy, sorted."""
    _load_entry_points()
    return sorted(set(_factories) | set(_entry_points))


def get(name: str, **options: Any) -> Strategy:
    """A new strategy instance; unknown names and options raise ValueError naming valid ones."""
    _load_entry_points()
    if isinstance(name, str) and name not in _factories and name in _entry_points:
        _factories[name] = _entry_points[name].load()  # a run-time registration wins
    try:
        factory = _factories[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown strategy {name!r}; valid strategies: {', '.join(available())}"
        ) from None

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None and not any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()
    ):
        valid = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(
                f"unknown option {unknown[0]!r} for strategy {name!r}; "
                f"valid options: {', '.join(valid) or 'none'}"
            )
    strategy = factory(**options)
    if not isinstance(strategy, Strategy):
        raise ValueError(
            f"factory of strategy {name!r} returned {type(strategy).__name__}, not a Strategy"
        )
    if not strategy.name:
        strategy.name = name
    return strategy
