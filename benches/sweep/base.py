"""``--base REF``: the base build's strategies beside the working tree's, in one sweep.

``prepare`` resolves REF to a commit of the repository, writes that commit's ``strategies/``
(read from git's objects: the working tree is not touched) into the sweep's folder as the package
``engine.builds.PACKAGE``, imports it once in a fresh interpreter to list its strategies, and
gives each strategy of the sweep that the base has a twin label ``NAME@base``. A strategy the
base lacks (a new one) is measured at the working tree only, and the sweep says why. Every
problem that leaves nothing to run is a one-line UsageError (exit 2).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from benches.engine.builds import PACKAGE, folder, renamed, strategy_name
from benches.sweep.outdir import UsageError
from reports.schema.settings import BASE, base_of, is_base

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "strategies"


def git(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)


def commit_of(ref: str, root: Path = ROOT) -> str:
    """REF's full commit id, or a UsageError naming it."""
    if ref.startswith("-") or not ref.strip():
        raise UsageError(f"--base {ref!r} is not a git ref; valid: a branch, tag or commit")
    try:
        done = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", root=root)
    except (OSError, subprocess.SubprocessError) as err:
        raise UsageError(f"--base {ref!r}: git cannot run here ({err})") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise UsageError(
            f"--base {ref!r} is not a commit of {root}; valid: a branch, tag or commit "
            "(e.g. HEAD~1, main)"
        )
    return done.stdout.strip()


def extract(sha: str, into: Path, root: Path = ROOT) -> Path:
    """Commit ``sha``'s ``strategies/`` as the package ``PACKAGE`` under ``into`` (its Python
    files, imports renamed); the package's folder."""
    listed = git("ls-tree", "-r", "--name-only", sha, f"{SOURCE}/", root=root)
    files = [f for f in listed.stdout.splitlines() if f.endswith(".py")]
    if listed.returncode != 0 or f"{SOURCE}/__init__.py" not in files:
        raise UsageError(f"--base {sha[:12]}: that commit has no {SOURCE}/ package to run")
    package = into / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    for name in files:
        shown = git("show", f"{sha}:{name}", root=root)
        if shown.returncode != 0:
            raise UsageError(f"--base {sha[:12]}: git cannot read {name}: {shown.stderr.strip()}")
        target = package / Path(name).relative_to(SOURCE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(renamed(shown.stdout), encoding="utf-8")
    return package


def available(into: Path, sha: str) -> list[str]:
    """The base package's strategies, imported in a fresh interpreter (the sweep's own stays
    clean), or a UsageError with the base's import error."""
    code = f"import json, {PACKAGE} as s; print(json.dumps(s.available()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=into, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"--base {sha[:12]}: its {SOURCE}/ cannot be imported: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def for_sweep(
    ref: str, out: Path, labels: list[str], cluster: str | None
) -> tuple[str, list[str], list[str]]:
    """``prepare`` for a sweep (``arguments.resolve``): on this machine only (the base build
    lies in --out), and only the working tree's strategies named (the twins are added here)."""
    if cluster:
        raise UsageError(
            "--base runs on this machine only (the base build is written into --out); "
            "valid: drop --cluster, or --base"
        )
    if any(is_base(label) for label in labels):
        raise UsageError(f"--strategies names a base twin ({BASE}); --base adds them itself")
    return prepare(ref, out, labels)


def prepare(ref: str, out: Path, labels: list[str]) -> tuple[str, list[str], list[str]]:
    """(REF's commit, the sweep's labels with each one's base twin after it, the labels the base
    lacks, each with why). A refusal leaves nothing written: what it had made under ``out``
    (``made``) is removed again."""
    sha = commit_of(ref)
    into = folder(out, sha)
    created = made(into)
    try:
        extract(sha, into)
        known = set(available(into, sha))
        with_base, missing = [], []
        for label in labels:
            with_base.append(label)
            if strategy_name(label) in known:
                with_base.append(base_of(label))
            else:
                missing.append(f"{label}: not at the base {sha[:12]} (a new strategy)")
        if len(with_base) == len(labels):
            raise UsageError(
                f"--base {ref!r}: none of the sweep's strategies is at {sha[:12]}; valid "
                f"there: {', '.join(sorted(known))}"
            )
    except BaseException:
        undo(created)
        raise
    return sha, with_base, missing


def made(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (what writing it would create),
    or None where it exists."""
    first = None
    for part in [path, *path.parents]:
        if part.exists():
            break
        first = part
    return first


def undo(created: Path | None) -> None:
    """Remove what a refused command had created (``made``'s answer, taken before)."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
