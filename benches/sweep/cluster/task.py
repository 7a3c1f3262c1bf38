"""One process of a sweep as a Ray task, on the worker that runs it (``run_process``).

The task runs today's case process (``benches.sweep.launch.run_one``: a fresh interpreter that
dies with this worker, its whole tree killed at the timeout or on a cancel) and returns its
rows. It never retries: a case's own failure is its row; a lost worker or node is the
driver's to retry. Without a shared filesystem (the driver's results directory not visible
here) the process writes to a scratch directory whose files come back with its rows.

This module imports neither Ray nor torch at import time: the driver's side hashes the code
with it too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the checkout: benches/sweep/cluster/task.py
CODE = ("strategies", "benches", "reports")  # what a worker must run the same of
START = "spawned on a Ray worker"  # env.process_start: a node keeps no fork server
SCRATCH = "ZEROGRAD_CLUSTER_SCRATCH"  # 1: write to scratch even where the results are visible
PIN_SLOT = "ZEROGRAD_PIN_SLOT"  # which cores of its host a pinned process takes
MAX_FILES_BYTES = 64 * 2**20  # files coming back with a process's rows, at most


def code_files(folder: Path) -> list[Path]:
    """The Python files of the package ``folder`` and of its subpackages (folders with an
    ``__init__.py``), in order. A folder that is no package is not code the sweep imports: a
    results directory inside the checkout (``--out reports/runs/X``, git-ignored, so never
    shipped to a worker) may hold a ``--base`` build's Python files."""
    if not (folder / "__init__.py").is_file():
        return []
    files = sorted(folder.glob("*.py"))
    for sub in sorted(path for path in folder.iterdir() if path.is_dir()):
        files += code_files(sub)
    return files


def code_hash(root: Path = ROOT) -> str:
    """A hash of the Python code of the packages strategies, benches and reports (paths and
    bytes)."""
    digest = hashlib.sha256()
    for top in CODE:
        for path in code_files(root / top):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def torch_version() -> str:
    """torch's version as installed (``2.13.0+cu128``), read without importing torch."""
    return importlib.metadata.version("torch")


def public(version: str) -> str:
    """A version without its local label (PEP 440: ``2.13.0+cpu`` -> ``2.13.0``): the wheel's
    build (CPU, a CUDA release) is the machine's, the release is what must agree."""
    return version.partition("+")[0]


def versions(root: Path = ROOT) -> dict[str, str]:
    """torch's version and the code's hash."""
    return {"torch": torch_version(), "code": code_hash(root)}


def differs(expected: dict[str, str], mine: dict[str, str]) -> str | None:
    """The one line of a worker that does not run the code ``expected`` names (the driver's),
    or, where it names one, the torch release of the sweep's other workers (compared without
    the local label), else None. The sweep compares torch between its workers
    (``place.RayPlace``): the driver, which runs no case, may have a CPU wheel or none."""
    if "code" in expected and expected["code"] != mine.get("code"):
        return (
            f"worker {socket.gethostname()} runs another code (strategies/, benches/, reports/) "
            f"than the driver: {mine.get('code')} here, {expected['code']} on the driver"
        )
    want, have = expected.get("torch"), mine.get("torch")
    if want and public(want) != public(have or ""):
        return (
            f"worker {socket.gethostname()} runs another torch than the sweep's other "
            f"workers: {have} here, {want} there"
        )
    return None


def run_process(
    spec: dict[str, Any],
    attempt: int,
    timeout: float,
    expected: dict[str, str],
    submitted: float,
    slot: int | None = None,
) -> dict[str, Any]:
    """The process of ``spec`` on this worker: its rows (each with its placement), and the
    files it wrote where the driver cannot see them (relative path -> bytes)."""
    import ray

    from benches.engine import envinfo
    from benches.engine.spec import CaseSpec
    from benches.sweep import launch

    started = time.time()
    node = ray.get_runtime_context().get_node_id()
    os.environ.update(
        {
            envinfo.NODE_ID: node,
            envinfo.ATTEMPT: str(attempt),
            envinfo.QUEUED: f"{max(0.0, started - submitted):.3f}",
            "ZEROGRAD_PROCESS_START": START,
        }
    )
    if slot is not None:
        os.environ[PIN_SLOT] = str(slot)
    out_dir = spec["out_dir"]
    scratch = None if visible(spec) else Path(tempfile.mkdtemp(prefix="zerograd-"))
    case = CaseSpec(**{**spec, "out_dir": str(scratch or out_dir)})
    wrong = differs(expected, versions())
    try:
        if wrong:
            rows = launch._failed(case, wrong, time.monotonic(), started)
        else:
            rows = launch.run_one(case, timeout, None, attempt)
        result: dict[str, Any] = {"rows": rows, "node_id": node, "torch": torch_version()}
        if scratch is not None:
            result["files"] = files_of(scratch)
            # paths the rows name (traces, captures) as they will be on the driver
            text = json.dumps(rows).replace(json.dumps(str(scratch))[1:-1], out_dir)
            result["rows"] = json.loads(text)
        return result
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def visible(spec: dict[str, Any]) -> bool:
    """Whether the driver's results directory is this worker's too (a shared filesystem)."""
    if os.environ.get(SCRATCH) == "1":
        return False
    try:
        run = json.loads((Path(spec["out_dir"]) / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(run, dict) and run.get("run_id") == spec.get("run_id")


def files_of(scratch: Path) -> dict[str, bytes]:
    """Every file the process wrote under ``scratch``, by relative path, up to
    ``MAX_FILES_BYTES`` in all (a larger one is left out, named in a note)."""
    out: dict[str, bytes] = {}
    total = 0
    left: list[str] = []
    for path in sorted(p for p in scratch.rglob("*") if p.is_file()):
        name = str(path.relative_to(scratch))
        size = path.stat().st_size
        if total + size > MAX_FILES_BYTES:
            left.append(f"{name} ({size} bytes)")
            continue
        out[name] = path.read_bytes()
        total += size
    if left:
        out["logs/files-left-on-worker.txt"] = (
            f"left on {socket.gethostname()} (over {MAX_FILES_BYTES} bytes in all):\n"
            + "\n".join(left)
            + "\n"
        ).encode()
    return out
