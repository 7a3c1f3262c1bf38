"""One case by hand, in this process: ``python -m benches case --strategy NAME --out DIR ...``.

The flags are the sweep's (``options.sweep_options``), with one value each, so that a case run
by hand (e.g. as the ranks of ``torchrun`` across machines) is spelled and identified as a
sweep's case and its row pools with a sweep's. Every rank measures; rank 0 appends the row.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import uuid
from pathlib import Path

from benches.engine import distributed, envinfo, results
from benches.engine.case import measure
from benches.sweep.arguments import UsageError, resolve
from benches.sweep.plan import cases
from benches.sweep.values import int_value
from reports.schema.settings import SETTINGS

# the sweep's axes (the swept settings, by the sweep's name for each): a case has one value of
# each, given by the same flag (``--strategy`` here for ``--strategies``)
AXES = {
    f.metadata["dest"] or f.name: "--strategy" if f.name == "strategy" else f.metadata["flag"]
    for f in SETTINGS
    if f.metadata["swept"]
}


def main(args: argparse.Namespace) -> int:
    """The case's row appended to ``--out`` (rank 0); the exit code (1: the case failed)."""
    if not args.strategies:
        raise UsageError("case needs --strategy NAME (one strategy, e.g. --strategy lazy)")
    if not args.out:
        raise UsageError("case needs --out DIR (its row is appended to DIR/results.jsonl)")
    world = distributed.ranks()[2]  # under torchrun, its world; the flag must agree
    if args.world_size == "1":
        args.world_size = str(world)
    elif int_value("--world-size", args.world_size, 1) != world:
        raise UsageError(
            f"--world-size {args.world_size} differs from torchrun's world of {world}; "
            f"valid: {world}"
        )
    round_ = int_value("--round", args.round, 0)
    args.resume, args.rounds = False, "1"
    sweep = resolve(args)
    for name, flag in AXES.items():
        values = getattr(sweep, name)
        if len(values) != 1:
            raise UsageError(
                f"{flag} {','.join(map(str, values))!r} has {len(values)} values; a case "
                "has one (a sweep over several is `python -m benches run`)"
            )
    run_id = os.environ.get("ZEROGRAD_RUN_ID", uuid.uuid4().hex[:12])
    (spec,) = cases(sweep, run_id, envinfo.git_state())
    spec = dataclasses.replace(spec, round=round_)
    try:
        Path(sweep.out).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(
            f"--out {str(sweep.out)!r}: cannot make it: {err.strerror or err}"
        ) from None
    row, code = measure(spec)
    if row is not None:
        results.append(sweep.out, row)
        print(f"{spec.case_id}: {row.status} -> {Path(sweep.out) / results.RESULTS}")
    return code
