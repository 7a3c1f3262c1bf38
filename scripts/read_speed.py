"""How fast the rows are read: ``reports.judge.rows.read`` of 5,000 rows against ``json.loads``
of the same lines alone (the target: at most half). The rows are the committed ``tiny-cpu``
sample's, repeated, twice over: as they were written (with the summaries the engine stored
before 2026-12-07) and as the engine writes them now (samples only; the summaries derived when
asked, ``reports.judge.summaries``).

    python scripts/read_speed.py [--rows 5000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reports.judge.rows import read  # noqa: E402

SAMPLE = ROOT / "reports" / "samples" / "tiny-cpu" / "results.jsonl"
STORED = ("phases", "overhead")
JUDGED = ("measured", "explained", "flags")


def as_written_now(line: str) -> str:
    """A row without the summaries the engine no longer writes."""
    row = {k: v for k, v in json.loads(line).items() if k not in STORED}
    if row.get("cost_model"):
        row["cost_model"] = {k: v for k, v in row["cost_model"].items() if k not in JUDGED}
    return json.dumps(row)


def best_of(repeats: int, run) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


class Parser(argparse.ArgumentParser):
    """A usage error is one line and exit 2, as every command of the project answers one."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.rows < 1 or args.repeats < 1:
        parser.error(f"--rows {args.rows} / --repeats {args.repeats}: each must be at least 1")
    lines = [line for line in SAMPLE.read_text().splitlines() if line]
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind in (
            ("as stored", lines),
            ("as written now", list(map(as_written_now, lines))),
        ):
            chosen = (kind * (args.rows // len(kind) + 1))[: args.rows]
            text = "\n".join(chosen) + "\n"
            folder = Path(tmp) / name.replace(" ", "-")
            folder.mkdir()
            (folder / "results.jsonl").write_text(text)
            reading = best_of(args.repeats, lambda folder=folder: read(folder))
            parsing = best_of(
                args.repeats, lambda text=text: [json.loads(s) for s in text.splitlines()]
            )
            worst = max(worst, reading / parsing)
            print(
                f"{name}: {args.rows} rows, {len(text) / 1e6:.1f} MB: rows.read "
                f"{reading * 1e3:.0f} ms, json.loads alone {parsing * 1e3:.0f} ms, "
                f"ratio {reading / parsing:.2f} (target <= 0.5)"
            )
    return 0 if worst <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
