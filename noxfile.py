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
    """The test suite without the slow end-to-end tests (docs/development.md: its time)."""
    # dev: asv (tests/test_asv.py); hf: the GPT-2 example; frameworks: tests/test_frameworks.py
    install_project(session, "bench,dev,hf,frameworks")
    # a shuffled order, its seed printed first (tests/conftest.py): no test may lean on another's
    # state; again in that order with -p randomly --randomly-seed=SEED
    session.install("pytest-randomly==5.1.0")
    default = ["-q", "-m", "not slow and not cluster"]  # the cluster's: nox -s cluster
    session.run("python", "-m", "pytest", *(session.posargs or default))


@nox.session(python=False, default=False)
def slow(session: nox.Session) -> None:
    """The slow end-to-end tests (asv over commits, ranks, A/A sweeps); CI runs them too."""
    # in the tests session's environment (the same extras: no second install of torch and the
    # frameworks), in file order (docs/development.md says why); the slowest named: CI's log
    # says where its time went
    default = ["-q", "-p", "no:randomly", "-m", "slow and not cluster", "--durations=15"]
    session.notify("tests", posargs=session.posargs or default)


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def cluster(session: nox.Session) -> None:
    """The tests of sweeps on a Ray cluster (tests/test_cluster*.py): real clusters of two nodes
    started inside a network namespace each test makes itself (root, `unshare -n`)."""
    install_project(session, "bench,cluster")
    default = ["-q", "-m", "cluster", "--durations=15"]
    session.run("python", "-m", "pytest", *(session.posargs or default))


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


def _take_value(args: list[str], i: int, flag: str, what: str, meta: str) -> tuple[str, int]:
    """The value of `flag` at args[i] (`FLAG VALUE` or `FLAG=VALUE`) and the next index."""
    arg = args[i]
    if arg.startswith(flag + "="):
        value, nxt = arg.split("=", 1)[1], i + 1
    elif i + 1 < len(args) and not args[i + 1].startswith("--"):
        value, nxt = args[i + 1], i + 2
    else:
        value, nxt = "", i + 1
    if not value:
        raise ValueError(f"{flag} needs {what}: {flag} {meta}")
    return value, nxt


def bench_args(
    posargs, stamp: str, runs_dir: str = os.path.join("reports", "runs")
) -> tuple[list[str], str, str | None]:
    """`nox -s bench -- ARGS` -> (the sweep's args, its --out directory, --preset or None).

    `--out DIR` / `--out=DIR` and `--preset X` / `--preset=X` may come anywhere. Without --out,
    a fresh RUNS_DIR/STAMP, except with --resume, which resumes RUNS_DIR/latest (resolved).
    Raises ValueError with a one-line message for a missing value or nothing to resume.
    """
    args = list(posargs)
    rest: list[str] = []
    out = preset = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--out" or arg.startswith("--out="):
            out, i = _take_value(args, i, "--out", "a directory", "DIR")
            continue
        if arg == "--preset" or arg.startswith("--preset="):
            preset, i = _take_value(args, i, "--preset", "a preset name", "NAME")
            rest += ["--preset", preset]
            continue
        rest.append(arg)
        i += 1
    if out is None:
        if "--resume" in rest:
            latest = os.path.join(runs_dir, "latest")
            if not os.path.exists(latest):
                raise ValueError(f"--resume needs --out DIR (no {latest} to resume)")
            out = os.path.realpath(latest)
        else:
            out = os.path.join(runs_dir, stamp)
    return [*rest, "--out", out], out, preset


def bench_env(args: list[str], preset: str | None) -> dict[str, str]:
    """The sweep's --preset, --workload and --quick, for the pytest-benchmark suites."""
    env = {"ZEROGRAD_BENCH_PRESET": preset} if preset else {}
    if "--quick" in args:  # the answer's cases only (benches/test_bench_strategies.py)
        env["ZEROGRAD_BENCH_QUICK"] = "1"
    for i, arg in enumerate(args):
        if arg == "--workload" and i + 1 < len(args):
            env["ZEROGRAD_BENCH_WORKLOAD"] = args[i + 1]
        elif arg.startswith("--workload="):
            env["ZEROGRAD_BENCH_WORKLOAD"] = arg.split("=", 1)[1]
    return env


def cluster_asked(args: list[str]) -> bool:
    return any(a == "--cluster" or a.startswith("--cluster=") for a in args)


def extras_asked(args: list[str]) -> str:
    """The extras a sweep's flags need: --cluster Ray, --frameworks the frameworks."""
    extras = ["bench"]
    if cluster_asked(args):
        extras.append("cluster")
    if any(a == "--frameworks" or a.startswith("--frameworks=") for a in args):
        extras.append("frameworks")
    return ",".join(extras)


def sweep_setup(session: nox.Session) -> tuple[list[str], str, str | None]:
    """The sweep's arguments (with a fresh --out), installed project and output folder."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        args, out, preset = bench_args(session.posargs, stamp)
    except ValueError as err:
        session.error(str(err))
    # --cluster: Ray too, --frameworks the frameworks (the extras); without the flag the sweep
    # neither installs nor imports them
    install_project(session, extras_asked(args))
    os.makedirs(out, exist_ok=True)
    return args, out, preset


# `nox -s bench -- --smoke`: CI's short form of the main job (docs/development.md). The same
# code end to end: every pytest-benchmark case run once, untimed, with its gradient assertions;
# a sweep of every case with two measured pairs and no added rounds; the report.
SMOKE = "--smoke"
SMOKE_SUITES = ("--benchmark-disable",)
SMOKE_SWEEP = ("--budget", "0", "--repeat", "2")


def smoke_split(args: list[str]) -> tuple[list[str], bool]:
    """The arguments without `--smoke`, and whether it was given."""
    return [a for a in args if a != SMOKE], SMOKE in args


def suite_args(out: str, smoke: bool) -> list[str]:
    """pytest's arguments for the pytest-benchmark suites: timed and saved, or (smoke) each
    case run once with its assertions and nothing saved."""
    if smoke:
        timing = list(SMOKE_SUITES)
    else:
        timing = ["--benchmark-only", "--benchmark-autosave"]
        timing.append(f"--benchmark-json={out}/pytest-benchmark.json")
    return ["benches/test_bench_strategies.py", "-q", *timing, "-p", "no:cacheprovider"]


def report_missing(out: str) -> list[str]:
    """What a finished sweep's folder lacks of its report: the page and verdicts.json."""
    return [
        name
        for name in ("index.html", "verdicts.json")
        if not os.path.isfile(os.path.join(out, name))
    ]


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def bench(session: nox.Session) -> None:
    """The main job: pytest-benchmark suites, then the sweep with memray; prints the report.

    `nox -s bench -- --quick`: the suites' answer cases only, then the sweep's --quick.
    `nox -s bench -- --smoke`: CI's short form (every suite case once, a sweep with no rounds)."""
    args, out, preset = sweep_setup(session)
    args, smoke = smoke_split(args)
    session.run("python", "-m", "pytest", *suite_args(out, smoke), env=bench_env(args, preset))
    sweep = [*SMOKE_SWEEP, *args] if smoke else args  # a flag given explicitly comes last: wins
    session.run("python", "-m", "benches", "run", "--memray", *sweep)
    missing = report_missing(out)
    if missing:
        session.error(f"the sweep wrote no {' and no '.join(missing)} in {out}")


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def samples(session: nox.Session) -> None:
    """Re-measure the committed samples (reports/samples/) on today's engine, each with the flags
    its run.json recorded, then rewrite the docs' figures made from them (scripts/samples.py).
    `nox -s samples -- NAME ...` measures those only; a CUDA sample needs a GPU."""
    install_project(session, "bench")
    session.run("python", "scripts/samples.py", "measure", *session.posargs)
    session.run("python", "scripts/samples.py", "docs")


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def profile(session: nox.Session) -> None:
    """The sweep with --profile: a torch.profiler trace per case, operators per phase vs plain."""
    args, _, _ = sweep_setup(session)
    session.run("python", "-m", "benches", "run", "--profile", *args)


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def report(session: nox.Session) -> None:
    """Rebuild the HTML report of a results directory (default: reports/runs/latest)."""
    install_project(session)
    session.run("python", "-m", "reports", "build", *(session.posargs or ["reports/runs/latest"]))


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def gate(session: nox.Session) -> None:
    """compare BEFORE AFTER, then gate AFTER/compare.json (exit 1 on a `higher` window)."""
    if len(session.posargs) < 2:
        session.error("usage: nox -s gate -- BEFORE AFTER [--fail-on WORD] [--metric M]...")
    before, after, *rest = session.posargs
    install_project(session)
    session.run("python", "-m", "reports", "compare", before, after)
    session.run("python", "-m", "reports", "gate", os.path.join(after, "compare.json"), *rest)


# `nox -s asv -- --smoke`: asv's selection (a regex on `name(param, ...)`) of every benchmark at
# its smallest parameters: the first value of each (the suites list them so: 'global' or 'flat',
# 1, 0, 'fp32'); tests/test_asv.py holds this against the suites' params
ASV_SMOKE_BENCH = (
    r"^[\w.]+$",
    r"\('global'(, [01])?(, 'fp32')?\)$",
    r"ResetVsMemset\.\w+\('flat'\)$",
)


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def asv(session: nox.Session) -> None:
    """asv run over RANGE (default: the last 5 commits of main), asv publish, the history page."""
    # asv builds its own environments (asv.conf.json, torch held by constraints.txt): this one
    # needs asv itself, and what `python -m reports history` imports (no torch)
    session.install(
        *CONSTRAINTS,
        "asv==0.6.6",
        "virtualenv",
        "numpy",
        "msgspec==0.23.0",
        "scipy",
        "jinja2",
        "matplotlib",
    )
    commits = int(session.run("git", "rev-list", "--count", "main", silent=True, external=True))
    default = "main" if commits <= 5 else "main~5..main"  # "main" alone: every commit of main
    posargs, smoke = smoke_split(session.posargs)
    if smoke:  # CI's short form: HEAD only, every benchmark once at its smallest parameters
        posargs = ["--quick", *(f"--bench={b}" for b in ASV_SMOKE_BENCH), *(posargs or ["HEAD^!"])]
    session.run("asv", "machine", "--yes")  # the machine's name and specs, once per user
    # --record-samples: every process's figure goes into the results, so the history page can
    # tell a change between commits from the spread between processes of one commit
    session.run("asv", "run", "--show-stderr", "--record-samples", *(posargs or [default]))
    session.run("asv", "publish")
    # prints its verdict counts, then the page's path
    session.run("python", "-m", "reports", "history", ".asv")
    index = os.path.abspath(os.path.join(".asv", "html", "index.html"))
    history = os.path.abspath(os.path.join(".asv", "history.html"))
    session.log(f"asv site: {index} (serve it with `asv preview`; it loads scripts from CDNs)")
    session.log(f"history page: {history} (self-contained: opens offline)")
