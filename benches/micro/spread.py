"""How far identical loops and strategy against strategy differ between processes:
``python -m benches spread``.

Runs ``--processes`` fresh processes one after another. Each holds the plain loop and every
strategy of ``--strategies`` on replicas of its own with the same weights
(``engine.rotation.RotatedRunner``), built in a shuffled order, and runs ``--rounds`` rounds of
one window each on the same data after ``--warmup`` rounds. A process's figure for a strategy
is its log overhead over the plain loop (the 20%-trimmed mean of its rounds' log ratios, as a
sweep's). Printed:

- per strategy, the SD between processes of that figure (for ``native``, which runs the plain
  loop's own code, the spread of identical loops: issue 22's target is below 1%);
- per pair of strategies, the SD between processes of their difference read **in one process**
  (both figures from the same process) and **across processes** (a's figure of process p against
  b's of process p + 1: what comparing single-strategy processes gives), and their ratio;
- how each replica's position in the build order relates to its figure (the mean figure per
  position, over every strategy).

Tell a twin from its original by registering it in a plugin (``--plugin tests.aa_plugin`` has
``native_twin``). ``global`` is refused: it would search the other replicas' tensors.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from typing import NoReturn

from benches.micro.options import Parser, count

DEFAULT_STRATEGIES = "native,native_twin,block,foreach,lazy"


def parser() -> Parser:
    p = Parser(prog="python -m benches spread", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="tiny", help="tiny|small|base|big (default: tiny)")
    p.add_argument("--accumulate", type=count(1), default=1, help="K (default: 1)")
    p.add_argument("--threads", type=count(1), default=1, help="threads per process (default: 1)")
    p.add_argument("--no-pin", action="store_true", help="do not pin each process to its cores")
    p.add_argument("--processes", type=count(2), default=12, help="processes (default: 12)")
    p.add_argument("--rounds", type=count(2), default=12, help="timed rounds (default: 12)")
    p.add_argument("--warmup", type=count(0), default=2, help="warm-up rounds (default: 2)")
    p.add_argument("--strategies", default=DEFAULT_STRATEGIES, help="comma-separated")
    p.add_argument("--plugin", action="append", default=["tests.aa_plugin"], help="module")
    p.add_argument("--fixed-build-order", action="store_true", help="plain first, then in order")
    p.add_argument("--seed", type=count(0), default=0, help="the weights' and data's seed")
    p.add_argument("--json", help="also write every process's figures to this file")
    return p


def child(config: dict) -> dict:
    """One process's figures: {strategy: log overhead}, and each replica's build position."""
    import importlib

    import torch

    from benches.engine import bound, process
    from benches.engine.rotation import PLAIN, RotatedRunner
    from benches.workloads import protocol
    from reports.judge import stats

    if config["pin"]:
        process.pin_cores(config["threads"])
    torch.set_num_threads(config["threads"])
    for module in config["plugins"]:
        importlib.import_module(module)
    settings = protocol.Settings(
        device="cpu",
        precision="fp32",
        seed=config["seed"],
        accumulate=config["accumulate"],
        live_tensors=0,
        threads=config["threads"],
        preset=config["preset"],
        deterministic=True,
    )
    workload = bound.build(protocol.DEFAULT, settings)
    data = [workload.batches(w) for w in range(2)]
    data = [(batches, workload.window_tokens(batches)) for batches in data]
    build_seed = None if config["fixed_build_order"] else config["index"] * 7919 + 1
    runner = RotatedRunner(workload, config["strategies"], build_seed=build_seed)
    windows: dict[str, list[float]] = {name: [] for name in runner.names}
    for i in range(config["warmup"]):
        runner.round(i, *data[i % 2])
    for i in range(config["rounds"]):
        # the data changes every two rounds, so each direction of the rotation meets both
        for name, phases in runner.round(i, *data[(i // 2) % 2]).items():
            windows[name].append(phases["window"])
    runner.close()
    return {
        "figures": {
            name: stats.process_log(windows[name], windows[PLAIN]) for name in config["strategies"]
        },
        "build_order": runner.build_order,
        "plain_window_s": statistics.median(windows[PLAIN]),
    }


def usage(message: str) -> NoReturn:
    print(f"python -m benches spread: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def strategy_labels(args) -> list[str]:
    """--strategies checked here, where it is parsed: registered names (after --plugin), two
    or more, distinct, never global."""
    import importlib

    import strategies

    for module in args.plugin:
        try:
            importlib.import_module(module)
        except ImportError as err:
            usage(f"--plugin {module!r} cannot be imported: {err}")
    labels = [s.strip() for s in args.strategies.split(",") if s.strip()]
    valid = [n for n in strategies.available() if n != "global"]
    unknown = [s for s in labels if s.partition(":")[0] not in valid]
    if unknown or len(labels) < 2 or len(set(labels)) != len(labels):
        usage(
            f"--strategies {args.strategies!r}: give two or more distinct strategies; valid: "
            f"{', '.join(valid)} (not global: its search would see the other replicas)"
        )
    return labels


def run_processes(args) -> list[dict]:
    labels = strategy_labels(args)
    results = []
    for index in range(args.processes):
        config = {
            "index": index,
            "preset": args.preset,
            "accumulate": args.accumulate,
            "threads": args.threads,
            "pin": not args.no_pin and sys.platform.startswith("linux"),
            "plugins": args.plugin,
            "strategies": labels,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "seed": args.seed,
            "fixed_build_order": args.fixed_build_order,
        }
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])
            ),
        }
        done = subprocess.run(
            [sys.executable, "-m", "benches.micro.spread", "--child", json.dumps(config)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["no output"]
            print(f"python -m benches spread: process {index} failed: {lines[-1]}", file=sys.stderr)
            raise SystemExit(1)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}/{args.processes} done", file=sys.stderr, flush=True)
    return results


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) >= 2 else math.nan


def summary(results: list[dict]) -> dict:
    """The spreads (SD of log figures between processes; x100 reads as percent)."""
    labels = list(results[0]["figures"])
    figures = {s: [r["figures"][s] for r in results] for s in labels}
    n = len(results)
    pairs = {}
    for a, b in itertools.combinations(labels, 2):
        same = [figures[a][p] - figures[b][p] for p in range(n)]
        across = [figures[a][p] - figures[b][(p + 1) % n] for p in range(n)]
        pairs[f"{a} vs {b}"] = {
            "mean": statistics.fmean(same),
            "sd_in_one_process": sd(same),
            "sd_across_processes": sd(across),
        }
    positions: dict[int, list[float]] = {}
    for r in results:
        for position, name in enumerate(r["build_order"]):
            if name in r["figures"]:
                positions.setdefault(position, []).append(r["figures"][name])
    return {
        "processes": n,
        "plain_window_s": statistics.median(r["plain_window_s"] for r in results),
        "strategies": {s: {"mean": statistics.fmean(v), "sd": sd(v)} for s, v in figures.items()},
        "pairs": pairs,
        "by_build_position": {p: statistics.fmean(v) for p, v in sorted(positions.items())},
    }


def show(s: dict, args) -> None:
    print(
        f"{s['processes']} processes, {args.preset} K={args.accumulate} threads={args.threads}"
        f"{'' if args.no_pin else ' pinned'}, {args.rounds} rounds; plain window "
        f"{s['plain_window_s'] * 1e3:.1f} ms (median)"
    )
    print("strategy over the plain loop: mean, SD between processes (log x100 = %)")
    for name, v in s["strategies"].items():
        print(f"  {name:<24} {100 * v['mean']:+7.2f} {100 * v['sd']:6.2f}")
    print("strategy against strategy: mean, SD in one process, SD across processes, ratio")
    ratios = []
    for name, v in s["pairs"].items():
        ratio = v["sd_in_one_process"] / v["sd_across_processes"]
        ratios.append(ratio)
        print(
            f"  {name:<36} {100 * v['mean']:+7.2f} {100 * v['sd_in_one_process']:6.2f} "
            f"{100 * v['sd_across_processes']:6.2f} {ratio:5.2f}"
        )
    print(f"  median ratio of SDs (one process / across): {statistics.median(ratios):.2f}")
    print("mean figure by the replica's build position (0 = built first):")
    print("  " + "  ".join(f"{p}: {100 * m:+.2f}" for p, m in s["by_build_position"].items()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(json.loads(argv[1]))))
        return 0
    args = parser().parse_args(argv)
    results = run_processes(args)
    s = summary(results)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"processes": results, "summary": s}, f, indent=1)
    show(s, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
