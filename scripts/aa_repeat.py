"""The A/A test repeated: N real sweeps of exact twins and a planted slowdown, verdicts tallied.

    python scripts/aa_repeat.py [--sweeps 10] [--budget 150] [--out DIR]

Each sweep is the one ``tests/test_aa.py`` runs (tiny, K=1, N=0, one pinned thread, the
``tests.aa_plugin`` strategies: block, native, lazy, their exact twins), with ``busy`` in
place of its ``sleepy``: native plus a busy-wait of 5% of its own last window in every
reset. A twin against its original must never be ``lower`` or ``higher``; ``busy`` against
native and native's twin should be ``higher``. Prints the count of every word per comparison
over the sweeps, and exits 1 if any twin was called lower or higher.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TWINS = {"block_twin": "block", "native_twin": "native", "lazy_twin": "lazy"}
STRATEGIES = [*TWINS.values(), *TWINS, "busy"]
WATCHED = [*TWINS.items(), ("busy", "native"), ("busy", "native_twin")]


def sweep(out: Path, budget: float) -> dict:
    argv = ["--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--threads", "1"]
    argv += ["--budget", str(budget), "--strategies", ",".join(STRATEGIES)]
    argv += ["--plugin", "tests.aa_plugin", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "benches", "run", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"sweep {out} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads((out / "verdicts.json").read_text())


def word(result: dict, a: str, b: str) -> str:
    for c in result["comparisons"]:
        if c["metric"] != "window":
            continue
        if (c["a"], c["b"]) == (a, b):
            return c["verdict"]
        if (c["a"], c["b"]) == (b, a):
            return {"lower": "higher", "higher": "lower"}.get(c["verdict"], c["verdict"])
    return "missing"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweeps", type=int, default=10)
    p.add_argument("--budget", type=float, default=150)
    p.add_argument("--out", help="keep the sweeps here (default: a temporary folder)")
    args = p.parse_args()
    base = Path(args.out or tempfile.mkdtemp(prefix="aa-"))
    tally: dict[tuple[str, str], Counter] = defaultdict(Counter)
    print(f"sweeps in {base}", flush=True)
    for i in range(args.sweeps):
        started = time.monotonic()
        result = sweep(base / f"sweep{i}", args.budget)
        for a, b in WATCHED:
            tally[(a, b)][word(result, a, b)] += 1
        print(f"sweep {i + 1}/{args.sweeps}: {time.monotonic() - started:.0f} s", flush=True)
    words = ("lower", "higher", "same", "unclear")
    print(f"{'comparison':<28}" + "".join(f"{w:>9}" for w in words))
    for (a, b), counts in tally.items():
        line = "".join(f"{counts[w]:>9}" for w in words)
        print(f"{a + ' vs ' + b:<28}{line}")
    false = sum(tally[(t, o)][w] for t, o in TWINS.items() for w in ("lower", "higher"))
    print(f"twins called lower or higher: {false} of {len(TWINS) * args.sweeps}")
    return 1 if false else 0


if __name__ == "__main__":
    raise SystemExit(main())
