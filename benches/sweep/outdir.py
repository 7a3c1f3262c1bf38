"""The sweep's --out: a folder this process can write, that holds no other run unless resumed,
and a run.json that --resume can read. Checked where --out is parsed (one-line UsageError)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from benches.engine import envinfo, results
from reports.schema.records import RUN, RecordError, RunFile

DEFAULT_RUNS = envinfo.ROOT / "reports" / "runs"


class UsageError(Exception):
    """A bad argument: one line naming the bad value and the valid choices; exit 2."""


def output_dir(args) -> Path:
    """--out, or reports/runs/latest with --resume, or a new reports/runs/<timestamp>: a folder
    this process can write, that holds no other run unless resumed."""
    if args.resume and not args.out and not (DEFAULT_RUNS / "latest").exists():
        raise UsageError("--resume needs --out DIR (no reports/runs/latest to resume)")
    if args.out:
        out = Path(args.out)
    elif args.resume:
        out = (DEFAULT_RUNS / "latest").resolve()
    else:
        out = DEFAULT_RUNS / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    writable_folder(out)
    if args.resume:
        resumable(out)
    elif getattr(args, "command", "run") == "run" and holds_rows(out / results.RESULTS):
        raise UsageError(
            f"--out {str(out)!r} already holds a run's {results.RESULTS}; continue it with "
            "--resume, or give a new --out"
        )
    return out


def holds_rows(path: Path) -> bool:
    """A file of rows with something in it: a run that a new sweep would mix with (an empty
    file, or one that is not a regular file, such as a test's /dev/full, holds none)."""
    return path.is_file() and path.stat().st_size > 0


def writable_folder(out: Path) -> None:
    """--out is a folder, or can be made as one, in a place this process may write."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file; give a folder")
    existing = out
    while not existing.exists():  # the nearest folder that exists: mkdir makes the rest
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"--out {str(out)!r}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--out {str(out)!r}: folder {str(existing)!r} is not writable")


def resumable(out: Path) -> None:
    """--resume into a folder that holds a run: its rows, and a readable run.json if any."""
    if not (out / results.RESULTS).exists():
        raise UsageError(f"--resume: {str(out)!r} holds no {results.RESULTS} to resume")
    advice = "restore it, or delete it to resume under a new run id"
    try:
        run = RunFile.read(out)
    except RecordError as err:
        raise UsageError(f"--resume: {err}; {advice}") from None
    if run is not None and not (isinstance(run.run_id, str) and run.run_id):
        raise UsageError(f"--resume: {str(out / RUN)!r} has no 'run_id'; {advice}")
