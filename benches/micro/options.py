"""The micro-benchmarks' parser: a bad flag or value is one line naming it, and exit 2, as in
``python -m benches run`` (argparse's own error prints its usage block first)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage block
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def count(minimum: int):
    """An argparse type: an integer >= ``minimum``, or a message naming the valid range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"{value} is out of range; valid: an integer >= {minimum}"
            )
        return value

    parse.__name__ = "count"
    return parse


def sizes(text: str) -> list[int]:
    """An argparse type: element counts, comma-separated, each >= 1 (``1e6`` spells 1000000)."""
    values = []
    for item in (s.strip() for s in text.split(",")):
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"item {item!r} is not a number (in {text!r}); valid: element counts like "
                "1000000,6e7"
            ) from None
        if not 1 <= value < float("inf") or value != int(value):
            raise argparse.ArgumentTypeError(
                f"item {item!r} is out of range (in {text!r}); valid: whole numbers >= 1"
            )
        values.append(int(value))
    return values
