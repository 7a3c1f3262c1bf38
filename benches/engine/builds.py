"""The base build beside the working tree (``--base REF``): ``strategies/`` as commit REF has it,
loaded in a case's process under a package name of its own (``PACKAGE``), so that a strategy's
loop at the base and at the working tree run side by side on replicas of one model.

A strategy label names its build: ``block`` runs the working tree's ``strategies``, ``block@base``
(``settings.BASE``) the base's, its collector included (the shared core is part of the build).
``benches.sweep.base`` writes the base package into the sweep's folder before any case runs;
``activate`` puts it on this process's path. ``benches/`` and ``reports/`` stay the working tree's:
the yardstick is fixed, as under asv.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

from reports.schema.settings import head_of, is_base

PACKAGE = "zerograd_base"
#: the folder under a sweep's --out that holds the base package of commit SHA: DIR/base/SHA12
FOLDER = "base"

# the base's own absolute imports of ``strategies``, made to name its package
_FROM = re.compile(r"^(\s*)from strategies(\.| import)", re.M)
_IMPORT = re.compile(r"^(\s*)import strategies\b(?! as)", re.M)


def folder(out_dir: str | Path, sha: str) -> Path:
    """Where the base package of commit ``sha`` lies in a sweep's folder."""
    return Path(out_dir) / FOLDER / sha[:12]


def renamed(source: str) -> str:
    """A module of the base's ``strategies/`` with its imports of ``strategies`` made to name
    ``PACKAGE``; relative imports and everything else as they are."""
    source = _FROM.sub(rf"\1from {PACKAGE}\2", source)
    return _IMPORT.sub(rf"\1import {PACKAGE} as strategies", source)


def activate(out_dir: str | Path, sha: str) -> None:
    """Make the base package of ``sha`` importable in this process (a case's, before its loops)."""
    where = str(folder(out_dir, sha))
    if not (Path(where) / PACKAGE).is_dir():
        raise RuntimeError(
            f"the base build {sha[:12]} is not in {where} (the sweep writes it there before its "
            "first case; run the case from the sweep, or with the same --out)"
        )
    if where not in sys.path:
        sys.path.insert(0, where)


def package_of(label: str) -> ModuleType:
    """The ``strategies`` package a label's loop runs: the base's or the working tree's."""
    if is_base(label):
        return importlib.import_module(PACKAGE)
    import strategies

    return strategies


def strategy_name(label: str) -> str:
    """The strategy's name in its own build: ``block`` for ``block@base:k=v``."""
    return head_of(label).partition(":")[0]
