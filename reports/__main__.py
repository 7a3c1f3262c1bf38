"""``python -m reports build DIR``: rebuild the HTML report of a results directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="write DIR/index.html from DIR/results.jsonl")
    build.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if not (args.directory / "results.jsonl").exists():
        print(
            f"python -m reports: error: {str(args.directory)!r} has no results.jsonl",
            file=sys.stderr,
        )
        return 2
    from reports.build import build as build_report

    print(build_report(args.directory))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
