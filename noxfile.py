"""nox sessions for zerograd: `nox -l` lists them."""

from __future__ import annotations

import datetime
import os

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")  # torch==2.13.0: the CPU wheel on these machines


def install_project(session: nox.Session, extras: str = "bench") -> None:
    # torch first and alone, so the resolver never weighs a newer multi-GB CUDA build
    session.install(*CONSTRAINTS, "torch==2.13.0")
    session.install(*CONSTRAINTS, "-e", f".[{extras}]")


@nox.session(python=PYTHON, reuse_venv=True)
def tests(session: nox.Session) -> None:
    """Run the whole test suite, as CI does."""
    install_project(session, "bench,dev")  # dev: asv, for tests/test_asv.py
    session.run("python", "-m", "pytest", *(session.posargs or ["-q"]))


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def bench(session: nox.Session) -> None:
    """The main job: pytest-benchmark suites, then the sweep with memray; prints the report."""
    install_project(session)
    args = list(session.posargs)
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args += ["--out", os.path.join("reports", "runs", stamp)]
    out = args[args.index("--out") + 1] if "--out" in args else args[-1].split("=", 1)[1]
    os.makedirs(out, exist_ok=True)
    session.run(
        "python",
        "-m",
        "pytest",
        "benches/test_bench_strategies.py",
        "-q",
        "--benchmark-only",
        "--benchmark-autosave",
        f"--benchmark-json={out}/pytest-benchmark.json",
        "-p",
        "no:cacheprovider",
    )
    session.run("python", "-m", "benches", "run", "--memray", *args)


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def report(session: nox.Session) -> None:
    """Rebuild the HTML report of a results directory (default: reports/runs/latest)."""
    install_project(session)
    session.run("python", "-m", "reports", "build", *(session.posargs or ["reports/runs/latest"]))


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def asv(session: nox.Session) -> None:
    """asv run over RANGE (default: the last 5 commits of main), then asv publish."""
    # asv builds its own environments (asv.conf.json, torch held by constraints.txt): this one
    # only needs asv itself
    session.install(*CONSTRAINTS, "asv==0.6.6", "virtualenv")
    commits = int(session.run("git", "rev-list", "--count", "main", silent=True, external=True))
    default = "main" if commits <= 5 else "main~5..main"  # "main" alone: every commit of main
    session.run("asv", "machine", "--yes")  # the machine's name and specs, once per user
    session.run("asv", "run", "--show-stderr", *(session.posargs or [default]))
    session.run("asv", "publish")
    index = os.path.abspath(os.path.join(".asv", "html", "index.html"))
    session.log(f"asv site: {index} (serve it with `asv preview`)")
