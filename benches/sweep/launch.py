"""One case in a process of its own: forked from the sweep's fork server (``zygote``) or a
fresh interpreter (under torchrun with ranks); its row, or a failed row for a crash, an OOM kill
or a timeout (the error line from its log)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benches.engine import envinfo
from benches.engine.spec import CaseSpec
from benches.sweep import tree, zygote
from benches.sweep.arguments import EXCEPTION_LINE


def case_env() -> dict[str, str]:
    """The environment of a case's process: the checkout first on PYTHONPATH, and Python's
    fault handler on (a rank that dies by a signal prints its stack into the case's log)."""
    return dict(
        os.environ,
        PYTHONFAULTHANDLER="1",
        PYTHONPATH=os.pathsep.join(
            [str(envinfo.ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    )


def run_one(
    spec: CaseSpec,
    timeout: float,
    server: zygote.Zygote | None = None,
    attempt: int | None = None,
) -> list[dict[str, Any]]:
    """The case in a process of its own (forked from ``server``, or a fresh interpreter): its
    row (a rotated process: one per strategy); a crash, an OOM kill or a timeout becomes a
    failed row. ``attempt`` (a cluster's task): the attempt's own spec, row and log paths, and
    a fresh interpreter that dies with the task's worker (``PR_SET_PDEATHSIG``)."""
    work = Path(spec.out_dir) / "cases"
    work.mkdir(parents=True, exist_ok=True)
    stem = spec.case_id + (f".a{attempt}" if attempt else "")
    spec_path, out_path = work / f"{stem}.json", work / f"{stem}.row.json"
    log_path = Path(spec.out_dir) / "logs" / f"{stem}.log"
    log_path.parent.mkdir(exist_ok=True)
    out_path.unlink(missing_ok=True)
    # a shared process runs each of its strategies' windows (and a checked one their checks):
    # the case's timeout for each
    timeout *= max(1, len(spec.rotation))
    spec_path.write_text(json.dumps(dataclasses.asdict(spec)))
    code: int | None = None
    forked = False
    started, stamp = time.monotonic(), time.time()
    if server is not None and spec.parallel == "none":  # torchrun's ranks start their own
        try:
            code, forked = server.run([str(spec_path), str(out_path)], log_path, timeout), True
        except (EOFError, OSError):  # the server is gone: this case and the rest spawn
            server = None
    if not forked:
        code = spawn(spec, spec_path, out_path, log_path, timeout, bound=attempt is not None)
    if code is None:
        return _failed(spec, f"timed out after {timeout:g} s", started, stamp)
    if out_path.exists():
        written = json.loads(out_path.read_text())
        rows = written if isinstance(written, list) else [written]  # a rotated process: several
        total = (time.monotonic() - started) / len(rows)  # its strategies share its wall time
        for row in rows:
            wall = row.get("wall_s") or {}
            # the process's start: the fork (or the fresh interpreter's imports), the spec read
            row["wall_s"] = {**wall, "process_start": max(0.0, total - sum(wall.values()))}
            row["wall_s"]["total"] = total
            stamped(row, stamp)
        if rows[0]["status"] != "ok" and spec.parallel != "none":
            # rank 0 often sees only that a peer hung up: every rank's exception, first first
            lines = _log_lines(log_path)
            raised = _root_cause(lines, signals_only=True) + _exception_lines(lines)
            if raised:
                rows[0]["error"] = "; ".join(raised)[:1000]
        return rows
    if code < 0:
        name = signal.Signals(-code).name
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        error = f"process killed by {name}{hint}"
    else:
        error = f"process exited with code {code}"
    lines = _log_lines(log_path)
    raised = _root_cause(lines, signals_only=True) + _exception_lines(lines)
    if raised:  # every rank's, its own cause before a peer's hang-up (``_exception_lines``)
        error = f"{error}: {'; '.join(raised)}"[:1000]
    else:
        tail = _fatal_error(lines) or _root_cause(lines) or [line for line in lines if line]
        error += f": {tail[-1]}" if tail else ""
    return _failed(spec, error, started, stamp)


def _fatal_error(lines: list[str]) -> list[str]:
    """Python's fault handler's report of a process killed by a signal, with the frame of the
    thread it killed: ``Fatal Python error: Aborted in _commit (tests/fault_plugin.py:48)``;
    [] without one."""
    fatal = next((line for line in lines if line.startswith("Fatal Python error:")), None)
    if fatal is None:
        return []
    here = next((i for i, line in enumerate(lines) if line.startswith("Current thread")), None)
    frames = [line for line in lines[here + 1 :] if line.startswith("File ")] if here else []
    frame = re.match(r'File "(.+)", line (\d+) in (.+)', frames[0]) if frames else None
    if frame is None:
        return [fatal]
    path = frame[1].removeprefix(f"{envinfo.ROOT}{os.sep}")
    return [f"{fatal} in {frame[3]} ({path}:{frame[2]})"]


def _root_cause(lines: list[str], signals_only: bool = False) -> list[str]:
    """torchrun's first failed rank: ``rank 1 died by SIGSEGV (its stack: the case's log)``,
    or one that exited without a Python exception (``signals_only``: only a signal's); []
    without one. A rank killed by a signal prints no exception, and its peers only see it hang
    up, so this is the line that names the cause."""
    marker = "Root Cause (first observed failure):"
    if marker not in lines:
        return []
    block = lines[lines.index(marker) :]
    facts = dict(line.split(":", 1) for line in block if ":" in line and not line.startswith("["))
    facts = {key.strip(): value.strip() for key, value in facts.items()}
    rank = facts.get("rank", "?").split(" ")[0]
    code = facts.get("exitcode", "?").split(" ")[0]
    signal_name = re.search(r"\((SIG\w+)\)", facts.get("traceback", ""))
    if signal_name:
        stack = " (its stack: the case's log)" if _fatal_error(lines) else ""
        return [f"rank {rank} died by {signal_name.group(1)}{stack}"]
    return [] if signals_only else [f"rank {rank} exited with code {code}"]


def _failed(spec: CaseSpec, error: str, started: float, stamp: float) -> list[dict[str, Any]]:
    """The rows of a process that wrote none, one per case it measures (``spec.members``): its
    error, and how long it held the sweep (shared among them, as a process's rows share it)."""
    from benches.engine.case import failed_measure, row_for

    cases = spec.members()
    rows = []
    for case in cases:
        row = row_for(case, failed_measure(error)).to_json()
        row["wall_s"] = {"total": (time.monotonic() - started) / len(cases)}
        rows.append(stamped(row, stamp))
    return rows


def stamped(row: dict[str, Any], started: float) -> dict[str, Any]:
    """``row`` with its process's wall-clock start and end in its ``placement``."""
    placement = row.get("placement")
    if isinstance(placement, dict):
        row["placement"] = {**placement, "started": started, "ended": time.time()}
    return row


# a fresh interpreter that dies with the process that started it, then becomes the case (the
# death signal survives exec): a cluster's case ends with its task's worker
BOUND = (
    "import os, sys; from benches.engine.process import die_with_parent; die_with_parent(); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def spawn(
    spec: CaseSpec,
    spec_path: Path,
    out_path: Path,
    log_path: Path,
    timeout: float,
    bound: bool = False,
):
    """The case in a fresh interpreter (under torchrun with ranks): its exit code, or None when
    it timed out (its process group killed). ``bound``: it dies with this process too."""
    with open(log_path, "w") as log:
        launcher = [sys.executable, *(["-c", BOUND] if bound else [])]
        if spec.parallel != "none":  # N local ranks: gloo on CPU, NCCL on CUDA
            launcher += [
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nnodes",
                "1",
                f"--nproc-per-node={spec.world_size}",
            ]
        proc = subprocess.Popen(
            [*launcher, "-m", "benches.engine.case", str(spec_path), str(out_path)],
            cwd=envinfo.ROOT,
            env={**case_env(), **({"ZEROGRAD_BOUND": "1"} if bound else {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the sweep, which ends the case itself
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return None
        except BaseException:  # Ctrl-C: no rank outlives its case
            _kill(proc)
            raise


def _log_lines(log_path: Path) -> list[str]:
    """A case's log, line by line, stripped."""
    return [line.strip() for line in log_path.read_text(errors="replace").splitlines()]


def _exception_lines(lines: list[str]) -> list[str]:
    """The distinct exception lines a case's processes printed, in the order they came, but a
    peer's hang-up (gloo's "Connection closed by peer", NCCL's remote error) after every other:
    when one rank raises, the others see only that it left, and either may print first."""
    raised = dict.fromkeys(
        line
        for line in lines
        if EXCEPTION_LINE.match(line) and "ChildFailedError" not in line  # torchrun's own
    )
    return sorted(raised, key=lambda line: bool(PEER_GONE.search(line)))  # stable: order kept


#: what a rank raises when a peer left (gloo: tcp/pair.cc; NCCL: its remote-error wording)
PEER_GONE = re.compile(
    r"Connection closed by peer|Connection reset by peer|remote worker crashing|"
    r"remote process exited|NCCL communicator was aborted"
)


def _kill(proc: subprocess.Popen) -> None:
    """The case's whole tree (torchrun's ranks are in sessions of their own), then reap it."""
    tree.kill_tree(proc.pid)
    proc.wait()
