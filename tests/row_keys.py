"""The keys of the rows the engine writes, kind by kind: what ``tests/test_row_keys.py`` holds
them to (``tests/row_keys.json``, today's keys, committed).

A row's keys are its own and those of the objects inside it, as dotted paths, down to three
levels (``memory.timeline.points``, ``cost_model.measured.reset.median_s``); ``env`` (the
machine's facts) and the operator tables under ``profile.windows`` stay out: their keys are data.

``python tests/row_keys.py OUT --write`` runs every kind of case for real (each as the sweep
runs it: ``launch.run_one``, then ``results.append``), the ranked kinds, and the real sweep of
``tests/conftest.py`` (its first round: the ``ok``, ``shared`` and ``control`` kinds), each
under OUT, and stores every kind's keys; without ``--write`` it prints how many each has. One
part alone: ``--kinds``, ``--ranks``, or ``--swept`` (OUT is then a sweep's ``--out``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = Path(__file__).with_name("row_keys.json")
QUICK = [
    *("--preset", "tiny", "--device", "cpu", "--accumulate", "1", "--live-tensors", "0"),
    *("--repeat", "2", "--warmup", "0", "--threads", "1", "--control", "none", "--budget", "0"),
    *("--plugin", "tests.fault_plugin"),
]
DEPTH = 3


def paths(row: dict[str, Any]) -> list[str]:
    """The row's keys and those of the objects inside it, as sorted dotted paths."""
    out: list[str] = []

    def walk(value: dict[str, Any], prefix: str, depth: int) -> None:
        for key, inner in value.items():
            path = f"{prefix}{key}"
            out.append(path)
            data = path == "env" or path.startswith("profile.windows.")  # keys that are data
            if isinstance(inner, dict) and depth < DEPTH and not data:
                walk(inner, f"{path}.", depth + 1)

    walk(row, "", 1)
    return sorted(out)


def specs(out: Path, strategy: str, *extra: str):
    """The sweep's own case specs for ``strategy`` with the flags ``extra``."""
    from benches.engine import envinfo
    from benches.sweep import cli

    argv = ["run", *QUICK, "--strategies", strategy, *extra, "--out", str(out)]
    return cli.cases(cli.resolve(cli.build_parser().parse_args(argv)), "keys", envinfo.git_state())


def run(out: Path, ranks: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Every kind of row, written as a sweep writes it and read back as JSON: kind -> rows."""
    from benches.engine import envinfo, results
    from benches.sweep import launch, zygote

    kinds: dict[str, list] = {}
    if ranks:
        (spec,) = specs(out / "ranks", "block", "--world-size", "2", "--parallel", "ddp")
        plan = {
            "ranks": spec,
            "ranks-time-only": dataclasses.replace(spec, time_only=True, round=1),
        }
    else:
        (spec,) = specs(out / "flags", "block", "--profile", "--memray", "--keep-captures")
        (native,) = specs(out / "time", "native")
        (rotated,) = specs(out / "rotated", "native")
        (profiled,) = specs(out / "blocked", "block", "--profile")
        (faulty,) = specs(out / "failed", "faulty:fault=raise")
        (grown,) = specs(out / "grown", "native", "--plugin", "tests.guard_plugin")
        plan = {
            "profiled": spec,
            "time-only": dataclasses.replace(native, time_only=True, round=1, plain_timeline=False),
            "rotated": dataclasses.replace(
                rotated, time_only=True, round=1, rotation=["native", "block"]
            ),
            "profile-failed": profiled,  # its traces folder is a file: the profiler fails
            "failed": faulty,
            # a checked shared process that grows (leaky keeps 4 MiB a window): each loop's
            # windows alone (growth_scope "alone"); the real sweep's keep nothing ("round")
            "shared-alone": dataclasses.replace(grown, rotation=["native", "leaky"]),
        }
        Path(profiled.out_dir).mkdir(parents=True, exist_ok=True)
        (Path(profiled.out_dir) / "traces").write_text("a file where the folder would be")
    server = None if ranks else zygote.Zygote(launch.case_env(), envinfo.ROOT)
    try:
        for kind, case in plan.items():
            Path(case.out_dir).mkdir(parents=True, exist_ok=True)
            for row in launch.run_one(case, 600, server):
                results.append(case.out_dir, row)
            if not ranks and kind == "failed":  # a case that wrote no row: the sweep's own
                for row in launch._failed(case, "timed out", time.monotonic(), time.time()):
                    results.append(case.out_dir, row)
    finally:
        if server is not None:
            server.close()
    for kind, case in plan.items():
        lines = (Path(case.out_dir) / results.RESULTS).read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        if kind == "failed":
            kinds["failed"], kinds["failed-launch"] = rows[:1], rows[1:]
        elif kind == "shared-alone":
            kinds[kind] = [r for r in rows if r["strategy"] == "native"]
        else:
            kinds[kind] = [r for r in rows if r["time_only"] == case.time_only]
    return kinds


def swept(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """A sweep's first-round rows (``conftest.real_sweep``): its cases' in a process of their
    own (``ok``: global's), those its group's strategies share (``shared``: its growth read
    around the rounds; a shared process that grew has the ``shared-alone`` kind's keys,
    ``kind_of``) and the control's."""
    rows = [json.loads(line) for line in (directory / "results.jsonl").read_text().splitlines()]
    cases = [r for r in rows if not r["control"]]
    return {
        "ok": [r for r in cases if r["process_id"] == r["case_id"]],
        "shared": [r for r in cases if r["process_id"] != r["case_id"]],
        "control": [r for r in rows if r["control"]],
    }


def kind_of(kind: str, row: dict[str, Any]) -> str:
    """The kind whose keys ``row`` of a sweep's ``kind`` must have: a shared process's row whose
    loops ran alone (it grew: ``growth_scope`` "alone") those of ``shared-alone``; a control's
    extra process that the control's group shares (``plan.extra``) those of ``rotated``."""
    alone = (row.get("memory") or {}).get("growth_scope") == "alone"
    if kind == "control" and row["process_id"] != row["case_id"]:
        return "rotated"
    return "shared-alone" if kind == "shared" and alone else kind


def keys_of(kinds: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Each kind's key paths: every path of its rows (an object that is null in one row, say
    the plain loop's timeline, is an object in another), each row under its own kind
    (``kind_of``)."""
    found: dict[str, set[str]] = {}
    for kind, rows in kinds.items():
        for r in rows:
            found.setdefault(kind_of(kind, r), set()).update(paths(r))
    return {kind: sorted(keys) for kind, keys in found.items()}


def mismatches(row: dict[str, Any], expected: list[str]) -> list[str]:
    """Where the row's keys are not the expected ones: the keys of every object it holds (down
    to ``DEPTH``), the row's own included, against the expected paths under that object."""
    found = paths(row)
    out = []
    for parent in ["", *(f"{p}." for p in found)]:
        if parent and parent[:-1] not in found:
            continue
        mine = {p for p in found if p.startswith(parent) and "." not in p[len(parent) :]}
        if parent and not mine and not isinstance(_at(row, parent[:-1]), dict):
            continue  # a value, or null where another row has an object
        want = {p for p in expected if p.startswith(parent) and "." not in p[len(parent) :]}
        out += [f"missing {p}" for p in sorted(want - mine)]
        out += [f"unexpected {p}" for p in sorted(mine - want)]
    return out


def _at(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for key in path.split("."):
        value = value[key]
    return value


def every_kind(out: Path) -> dict[str, list[str]]:
    """Every kind's keys: one process of each kind, the ranked kinds, the real sweep's."""
    from conftest import run_real_sweep

    found = {**keys_of(run(out / "kinds")), **keys_of(run(out / "ranks", ranks=True))}
    done = run_real_sweep(out / "sweep")
    if done.returncode != 0:
        raise SystemExit(f"the real sweep failed: {done.stderr[-2000:]}")
    return {**found, **keys_of(swept(out / "sweep"))}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    directory = Path(sys.argv[1])
    if "--swept" in sys.argv:  # DIR is a sweep's --out
        found = keys_of(swept(directory))
    elif "--kinds" in sys.argv or "--ranks" in sys.argv:
        found = keys_of(run(directory, ranks="--ranks" in sys.argv))
    else:
        found = every_kind(directory)
    if "--write" in sys.argv:
        stored = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
        EXPECTED.write_text(json.dumps({**stored, **found}, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: len(v) for k, v in found.items()}))
