"""nox sessions for zerograd: `nox -l` lists them."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")  # torch==2.13.0: the CPU wheel on these machines


def install_project(session: nox.Session) -> None:
    # torch first and alone, so the resolver never weighs a newer multi-GB CUDA build
    session.install(*CONSTRAINTS, "torch==2.13.0")
    session.install(*CONSTRAINTS, "-e", ".[bench]")


@nox.session(python=PYTHON, reuse_venv=True)
def tests(session: nox.Session) -> None:
    """Run the whole test suite, as CI does."""
    install_project(session)
    session.run("python", "-m", "pytest", *(session.posargs or ["-q"]))


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
