"""``python -m reports``: build a sweep's report, compare two runs, gate, or draw asv's history.

    python -m reports build DIR                        # writes DIR/index.html, DIR/verdicts.json
    python -m reports compare DIR_A DIR_B [--out FILE] # writes FILE (default DIR_B/compare.html)
                                                       # and compare.json beside it
    python -m reports gate FILE [--fail-on higher] [--metric window]... [--pair A,B]
                               [--accept-unjudged]     # exit 1 when a comparison has that verdict,
                                                       # 3 when one it could not judge would
    python -m reports history [ASV_DIR] [--min-effect F]
                                                       # writes ASV_DIR/history.html (default .asv)

A usage error is one line on stderr naming the bad value, and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from reports.judge.rows import RESULTS
from reports.judge.verdicts import DEFAULT_MIN_EFFECT
from reports.schema.records import RUN
from reports.schema.verdict_records import VERDICTS, Verdict

PROG = "python -m reports"
COMMANDS = ("build", "compare", "gate", "history")


class UsageError(Exception):
    """A bad argument: one line naming the bad value; exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    build = commands.add_parser("build", help="write DIR/index.html from DIR/results.jsonl")
    build.add_argument("directory", type=Path)
    compare = commands.add_parser("compare", help="one page comparing two runs")
    compare.add_argument("dir_a", type=Path, metavar="DIR_A")
    compare.add_argument("dir_b", type=Path, metavar="DIR_B")
    compare.add_argument("--out", type=Path, help="the page to write (default DIR_B/compare.html)")
    gate = commands.add_parser(
        "gate", help="exit 1 when a comparison of compare.json or verdicts.json has a verdict"
    )
    gate.add_argument("file", type=Path, metavar="FILE", help="compare.json or verdicts.json")
    gate.add_argument("--fail-on", default="higher", help="the verdict that fails (default higher)")
    gate.add_argument(
        "--metric",
        action="append",
        help="window, peak_memory or held_memory; repeatable (default window)",
    )
    gate.add_argument("--pair", help="A,B: the comparison of a verdicts.json to gate")
    gate.add_argument(
        "--accept-unjudged",
        action="store_true",
        help="pass a compare.json's comparison left without an interval (exit 3 otherwise, "
        "where its processes put it beyond the margin)",
    )
    history = commands.add_parser(
        "history", help="ASV_DIR/history.html: asv's results over commits, with verdicts"
    )
    history.add_argument(
        "asv_dir",
        type=Path,
        nargs="?",
        default=Path(".asv"),
        metavar="ASV_DIR",
        help="the directory holding asv's results/ (default .asv)",
    )
    history.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT,
        help=f"the smallest change that matters, a fraction (default {DEFAULT_MIN_EFFECT})",
    )
    return parser


def results_dir(directory: Path) -> Path:
    """A directory with a results file, or a UsageError naming it."""

    if not directory.is_dir():
        raise UsageError(f"{str(directory)!r} is not a directory")
    if not (directory / RESULTS).is_file():
        raise UsageError(f"{str(directory)!r} has no {RESULTS}")
    return directory


# what a sweep's directory holds that no other command may write over (its own report is
# rewritten only by ``build``); compare's page and compare.json are the only outputs beside them
RUN_FILES = (RESULTS, RUN, VERDICTS, "index.html", "pytest-benchmark.json")
RUN_FOLDERS = ("cases", "logs", "memray")


def protected(directories: list[Path]) -> dict[Path, str]:
    """Every input or output of the runs a command reads: its resolved path -> what it is."""
    out = {}
    for directory in directories:
        for name in RUN_FILES:
            out[(directory / name).resolve()] = f"{name} of run {str(directory)!r}"
    return out


def compare_out(dir_a: Path, dir_b: Path, given: Path | None) -> Path:
    """--out checked: a writable page that overwrites none of either run's files."""
    from reports.schema.verdict_records import COMPARE

    out = given if given is not None else dir_b / "compare.html"
    if out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a directory; give a file name")
    if not out.parent.is_dir():
        raise UsageError(f"--out {str(out)!r}: folder {str(out.parent)!r} does not exist")
    page, data = out.resolve(), (out.parent / COMPARE).resolve()
    if page == data:
        raise UsageError(f"--out {str(out)!r} is where {COMPARE} goes; give an .html name")
    runs = protected([dir_a, dir_b])
    for path in (page, data):
        if path in runs:
            raise UsageError(
                f"--out {str(out)!r} would overwrite {runs[path]}; give a path outside the runs' "
                f"files (default {str(dir_b / 'compare.html')!r})"
            )
    for directory in (dir_a, dir_b):
        for name in RUN_FOLDERS:
            if page.parent.is_relative_to((directory / name).resolve()):
                raise UsageError(
                    f"--out {str(out)!r} is inside {name}/ of run {str(directory)!r}; "
                    "give a path outside it"
                )
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"--out {str(out)!r}: folder {str(out.parent)!r} is not writable")
    return out


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command not in COMMANDS:
            raise UsageError(f"missing command; valid commands: {', '.join(COMMANDS)}")
        if args.command == "gate":
            return run_gate(args)
        if args.command == "history":
            return run_history(args)
        if args.command == "build":
            return run_build(results_dir(args.directory))
        dir_a, dir_b = results_dir(args.dir_a), results_dir(args.dir_b)
        return run_compare(dir_a, dir_b, compare_out(dir_a, dir_b, args.out))
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2


def run_build(directory: Path) -> int:
    from reports.page.build import build

    with bad_input(directory):
        print(build(directory))
    return 0


def run_compare(dir_a: Path, dir_b: Path, out: Path) -> int:
    from reports.regressions.compare import compare

    with bad_input(dir_a, dir_b):
        print(compare(dir_a, dir_b, out))
    return 0


@contextlib.contextmanager
def bad_input(*directories: Path) -> Iterator[None]:
    """What the reader refuses (SchemaError: file, line, field), a comparison with nothing to
    compare, or a file that cannot be written: one line (a UsageError), never a traceback. Any
    other error in reading a run's rows is one line too, naming the directories and the error."""
    from reports.judge.rows import SchemaError
    from reports.regressions.compare import CompareError

    try:
        yield
    except (SchemaError, CompareError) as err:
        raise UsageError(str(err)) from None
    except OSError as err:
        where = f" {str(err.filename)!r}" if err.filename else ""
        raise UsageError(f"cannot write{where}: {err.strerror or err}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        runs = " and ".join(repr(str(d)) for d in directories)
        raise UsageError(
            f"{runs}: a row or run.json the report cannot read "
            f"({type(err).__name__}: {str(err)[:200]})".replace("\n", " ")
        ) from None


def run_gate(args: argparse.Namespace) -> int:
    from reports.regressions.gate import GateError, gate, parse_pair

    try:
        code, lines = gate(
            args.file, args.fail_on, args.metric, parse_pair(args.pair), args.accept_unjudged
        )
    except GateError as err:
        raise UsageError(str(err)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        # exit 1 means a regression to a CI job: a file the gate cannot read is never one
        raise UsageError(
            f"{str(args.file)!r}: a file the gate cannot read "
            f"({type(err).__name__}: {str(err)[:200]})".replace("\n", " ")
        ) from None
    for line in lines:
        print(line)
    return code


def run_history(args: argparse.Namespace) -> int:
    if not 0 <= args.min_effect < 1:
        raise UsageError(f"invalid --min-effect {args.min_effect!r}; valid: a fraction in [0, 1)")
    from reports.regressions.history import HistoryError, write

    try:
        page, shown = write(args.asv_dir, args.min_effect)
    except HistoryError as err:
        raise UsageError(str(err)) from None
    except OSError as err:
        where = f" {str(err.filename)!r}" if err.filename else ""
        raise UsageError(f"cannot write{where}: {err.strerror or err}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise UsageError(
            f"{str(args.asv_dir)!r}: an asv results file the history cannot read "
            f"({type(err).__name__}: {str(err)[:200]})".replace("\n", " ")
        ) from None
    counts = shown["counts"]
    print(
        f"{len(shown['steps'])} steps over {len(shown['commits'])} commits: "
        + ", ".join(
            f"{counts[w]} {w}"
            for w in (Verdict.HIGHER, Verdict.LOWER, Verdict.SAME, Verdict.UNCLEAR)
        )
    )
    print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
