"""The committed sample reports, re-measured on today's engine, and the docs' measured figures
made from their files (docs/development.md, "The samples and the docs' figures").

    python scripts/samples.py measure [NAME ...]   # re-run each sample's sweep, replace its files
    python scripts/samples.py docs [--check]       # rewrite (or check) the docs' generated blocks

``measure`` runs each sample's sweep with the flags its run.json recorded (``env.argv``), into a
scratch folder, and only then replaces the sample's files: a failed sweep leaves the committed
sample as it was. A CUDA sample is kept unless this machine has a GPU. It also writes the
sample's ``sample.json``: the command and its wall time, which no other file holds.

``docs`` rewrites every block between ``<!-- samples: NAME -->`` and ``<!-- /samples -->`` in
README.md, docs/method.md and docs/sweep.md from the committed samples; ``--check`` changes
nothing and exits 1 naming each block that differs (tests/test_samples.py does the same).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sample_docs import (  # scripts/ is not a package: this one's folder is on the path
    ROOT,
    SAMPLE,
    SAMPLES,
    UsageError,
    clock,
    field,
    load,
    readable,
    stale_blocks,
)

#: the files a sample keeps: the sweep's (its folder's run.json, rows, verdicts and page) and ours
KEPT = ("run.json", "results.jsonl", "verdicts.json", "index.html")
#: a short form for the tests: the same sweep with two pairs per process and no added rounds
SMOKE = ("--budget", "0", "--repeat", "2")


# -- measuring ------------------------------------------------------------------------------------


def recorded_argv(directory: Path) -> list[str]:
    """The sweep's arguments as the sample's run.json recorded them, without ``run`` and
    ``--out``: what ``python -m benches run`` is given again."""
    argv = field(load(directory / "run.json"), directory / "run.json", "env", "argv")[1:]
    if argv[:1] == ["run"]:
        argv = argv[1:]
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            out.append(arg)
    return out


def needs_gpu(argv: list[str]) -> bool:
    return "cuda" in argv[argv.index("--device") + 1 :][:1] if "--device" in argv else False


def last_wall(directory: Path) -> float | None:
    """The wall time of the sample's last measurement (its sample.json), if recorded."""
    try:
        return float(json.loads((directory / SAMPLE).read_text())["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def plan(
    names: list[str], has_gpu: bool, flags: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """(the samples to measure, the ones kept and why); a name that is not a sample is a usage
    error unless ``flags`` make it a new one."""
    known = sorted(p.name for p in SAMPLES.iterdir() if (p / "run.json").exists())
    if flags is not None and len(names) != 1:
        raise UsageError(f"--flags sets one sample's sweep; name one sample, not {len(names)}")
    for name in names:
        if name not in known and flags is None:
            raise UsageError(
                f"unknown sample {name!r}; valid: {', '.join(known)} (a new one needs --flags)"
            )
    todo, kept = [], []
    for name in names or known:
        argv = flags if flags is not None else recorded_argv(SAMPLES / name)
        if needs_gpu(argv) and not has_gpu:
            kept.append(f"{name} kept (its sweep runs on CUDA; this machine has no GPU)")
        else:
            todo.append(name)
    return todo, kept


def estimate(todo: list[str]) -> str:
    """How long the measurement will take, from each sample's last wall time."""
    walls = {name: last_wall(SAMPLES / name) for name in todo}  # a new sample: None
    known = [w for w in walls.values() if w is not None]
    parts = [
        f"{n} ({clock(w)} last time)" if w else f"{n} (not timed before)" for n, w in walls.items()
    ]
    total = f"about {clock(sum(known))}" if known else "unknown"
    if known and len(known) < len(walls):
        total += " and more"
    return f"re-measuring {', '.join(parts)}: {total}; keep the machine quiet meanwhile"


def measure(name: str, scratch: Path, smoke: bool = False, flags: list[str] | None = None) -> float:
    """Run sample ``name``'s sweep again (or with ``flags``) into ``scratch``, its files and its
    ``sample.json`` there; the wall time in seconds. A failed sweep raises."""
    argv = flags if flags is not None else recorded_argv(SAMPLES / name)
    argv = argv + (list(SMOKE) if smoke else [])
    command = [sys.executable, "-m", "benches", "run", *argv, "--out", str(scratch)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT)  # its lines (an error's too) pass through
    if done.returncode != 0:
        raise SweepFailed(name, done.returncode)
    wall = time.perf_counter() - started
    missing = [f for f in KEPT if not (scratch / f).exists()]
    if missing:
        raise RuntimeError(f"sample {name}: the sweep wrote no {', '.join(missing)}")
    shown = " ".join(shlex.quote(a) for a in ["python", "-m", "benches", "run", *argv])
    (scratch / SAMPLE).write_text(json.dumps({"command": shown, "wall_s": round(wall, 1)}) + "\n")
    return wall


def keep(scratch: Path, into: Path) -> None:
    """A measured sample's files in its folder (replacing the old ones)."""
    into.mkdir(parents=True, exist_ok=True)
    for f in (*KEPT, SAMPLE):
        shutil.copyfile(scratch / f, into / f)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block, exit 2
        raise UsageError(message)


class SweepFailed(Exception):
    """A sample's sweep exited non-zero: its own lines were printed; ``code`` is its exit."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"sample {name}: its sweep exited {code}")
        self.code = code


def main(argv: list[str] | None = None) -> int:
    """The command line: a usage error, a sample whose files cannot be read or a document
    whose markers do not pair up is one line and exit 2, with nothing written; a sweep that
    fails has printed its own line, and its exit code is passed on."""
    try:
        return run(argv)
    except UsageError as err:
        print(f"python scripts/samples.py: error: {err}", file=sys.stderr)
        return 2
    except SweepFailed as err:
        print(f"python scripts/samples.py: {err}; the committed sample is unchanged",
              file=sys.stderr)  # fmt: skip
        return err.code


def run(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python scripts/samples.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    m = sub.add_parser("measure", help="re-run the samples' sweeps and replace their files")
    m.add_argument(
        "names", nargs="*", help="samples to measure (default: every one this machine can)"
    )
    m.add_argument("--smoke", action="store_true", help=f"add {' '.join(SMOKE)} (a quick check)")
    m.add_argument("--into", type=Path, help="write into DIR/NAME instead of reports/samples/NAME")
    m.add_argument(
        "--flags",
        help="the sweep's flags for one sample, new or changed (quoted); else its run.json's",
    )
    d = sub.add_parser("docs", help="rewrite the docs' blocks made from the samples")
    d.add_argument("--check", action="store_true", help="change nothing; exit 1 if any is stale")
    args = parser.parse_args(argv)
    if args.command == "docs":
        stale = readable(lambda: stale_blocks(write=not args.check))
        for line in stale:
            print(("stale: " if args.check else "rewrote: ") + line)
        return 1 if stale and args.check else 0
    try:
        flags = shlex.split(args.flags) if args.flags is not None else None
    except ValueError as err:
        raise UsageError(f"--flags {args.flags!r} cannot be split into arguments: {err}") from None
    import torch

    todo, kept = readable(lambda: plan(args.names, torch.cuda.is_available(), flags))
    for line in kept:
        print(line)
    print(estimate(todo), flush=True)
    # every sweep runs before any sample's files change: a sample written into the checkout
    # would make the next sweep's commit dirty; a failed one keeps those measured before it
    measured: list[str] = []
    with tempfile.TemporaryDirectory(prefix="samples-") as scratch:
        try:
            for name in todo:
                wall = measure(name, Path(scratch) / name, smoke=args.smoke, flags=flags)
                print(f"{name}: {clock(wall)}", flush=True)
                measured.append(name)
        finally:
            for name in measured:
                into = (args.into / name) if args.into else SAMPLES / name
                keep(Path(scratch) / name, into)
                print(f"{name} -> {into}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
