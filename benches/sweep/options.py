"""The sweep's options: ``python -m benches run``'s and ``case``'s parser, one set of option
definitions for both (a case by hand takes the sweep's flags with one value each). The values
are checked in ``arguments``; a parse error is a one-line ``UsageError`` (exit 2)."""

from __future__ import annotations

import argparse

from benches.engine import training
from benches.sweep.outdir import UsageError
from benches.workloads import protocol
from reports.judge.verdicts import DEFAULT_MIN_EFFECT

DEFAULT_REPEAT = 8  # pairs: with the control processes, the default sweep fits 15 min on 2 cores
DEFAULT_BUDGET = 900.0  # seconds: the default sweep on a 2-core CPU within 15 min
DEFAULT_ACCUMULATE = "1,4"
DEFAULT_LIVE_TENSORS = "0,100000"
# --quick: defaults only (a flag given explicitly wins): the answer's K and N, every strategy,
# a budget that gives a first answer, sweep and report, in about 3 minutes on a 2-core CPU
QUICK = {"accumulate": "1", "live_tensors": "0", "budget": "150"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block, exit 2
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """``run`` (a sweep) and ``case`` (one case by hand): one set of option definitions."""
    parser = _Parser(
        prog="python -m benches",
        description="zerograd: time and memory-profile gradient-collection strategies on the "
        "reference workload (run: a sweep; case: one case by hand)",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser("run", help="run a sweep of strategies on the reference workload")
    sweep_options(run)
    run.add_argument(
        "--quick",
        action="store_true",
        help="a first answer in minutes: defaults of --accumulate "
        f"{QUICK['accumulate']}, --live-tensors {QUICK['live_tensors']} and --budget "
        f"{QUICK['budget']} (every strategy); a flag given explicitly wins, --rounds R included",
    )
    case = commands.add_parser(
        "case",
        help="one case in this process (e.g. a rank of torchrun across machines): the sweep's "
        "flags with one value each; rank 0 appends its row to --out",
    )
    sweep_options(case)
    case.add_argument("--strategy", dest="strategies", help="the case's strategy: NAME[:K=V]")
    case.add_argument("--round", default="0", help="the process's round (0, 1, ...)")
    # a case by hand: a small CPU case unless told (a sweep's defaults are a sweep's)
    case.set_defaults(
        strategies=None, preset="tiny", device="cpu", accumulate="4", live_tensors="0",
        repeat="10", warmup="2", threads="1", grad_sync="last", control="none",
    )  # fmt: skip
    return parser


def sweep_options(run: argparse.ArgumentParser) -> None:
    """The options of a sweep (``run``); ``case`` takes the same."""
    run.add_argument(
        "--strategies",
        default="all",
        help="all, or NAME[,NAME...]; a strategy with options is NAME:KEY=VALUE[:KEY=VALUE], "
        "e.g. native:set_to_none=false (default: all)",
    )
    run.add_argument("--preset", help="tiny|small|base|big (default: tiny on CPU, base on CUDA)")
    run.add_argument("--device", default="auto", help="auto|cpu|cuda (default: auto)")
    run.add_argument(
        "--accumulate",
        help=f"K[,K...] micro-batches per window (default {DEFAULT_ACCUMULATE}; --quick: "
        f"{QUICK['accumulate']})",
    )
    run.add_argument(
        "--live-tensors",
        help=f"N[,N...] unrelated live tensors (default {DEFAULT_LIVE_TENSORS}; --quick: "
        f"{QUICK['live_tensors']})",
    )
    run.add_argument(
        "--precision",
        default="fp32",
        help="PRECISION[,PRECISION...] swept: fp32; bf16-autocast (fp32 weights and gradients, "
        "the forward under autocast); bf16 (bf16 weights, so bf16 .grad) (default: fp32)",
    )
    run.add_argument(
        "--optimizer",
        default="adamw",
        help=f"{'|'.join(training.OPTIMIZERS)}: the update's optimizer (default: adamw)",
    )
    run.add_argument(
        "--clip-norm",
        default="none",
        help="clip each window's gradient to this total norm in the update (default: none)",
    )
    run.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model once per case (compile time recorded, never in a window)",
    )
    run.add_argument(
        "--compare-settings",
        default="none",
        metavar="SETTING=VALUE",
        help="also run each case's strategy with SETTING=VALUE (one of "
        f"{', '.join(training.COMPARABLE)}) on a replica in the same process, window by "
        "window (ABBA): a paired ratio and verdict, e.g. compile=false with --compile",
    )
    run.add_argument(
        "--repeat",
        default=str(DEFAULT_REPEAT),
        help=f"measured pairs (strategy window + plain-loop window) per case "
        f"(default {DEFAULT_REPEAT})",
    )
    run.add_argument("--warmup", default="1", help="unmeasured pairs first (default 1)")
    run.add_argument(
        "--rounds",
        help="run every case in exactly R processes (default: 1, then rounds added while a "
        "verdict is open and --budget lasts)",
    )
    run.add_argument(
        "--budget",
        help=f"seconds the sweep may take in all: after the first round it adds time-only "
        f"processes, round by round in shuffled order, to the groups whose strategy "
        f"comparisons are still unclear (default {DEFAULT_BUDGET:g}; --quick: "
        f"{QUICK['budget']}; 0: no rounds added)",
    )
    run.add_argument(
        "--no-rotate",
        action="store_true",
        help="the added time-only rounds run each strategy in a process of its own (default: "
        "the strategies of a group share one process, each on its own replica, rotated with "
        "the plain loop; global always has a process of its own)",
    )
    run.add_argument(
        "--control",
        help="strategy run in extra processes to measure the noise between processes "
        "(default: native if swept, else the first; 'none': no extra processes, so no "
        "lower/higher verdict on time unless --rounds >= 2)",
    )
    run.add_argument(
        "--min-effect",
        default=str(DEFAULT_MIN_EFFECT),
        help=f"smallest difference that matters, a fraction (default {DEFAULT_MIN_EFFECT}): "
        "inside it is "
        "'same', beyond it and the noise floor 'lower'/'higher'",
    )
    run.add_argument(
        "--threads", help="torch threads (default: 1 on CPU, pinned; the machine's cores on CUDA)"
    )
    run.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        help="pin each case process (each rank) to cores of its own with psutil's cpu_affinity "
        "(default: on with --threads 1 on Linux; --no-pin: off)",
    )
    run.add_argument("--timeout", help="seconds per case (default: scaled with the preset)")
    run.add_argument(
        "--memray", action="store_true", help="memray's flamegraph of each case's memory pass"
    )
    run.add_argument(
        "--profile",
        action="store_true",
        help="torch.profiler: one window of each case's strategy and of the plain loop, after "
        "the timed pairs (off their clock): a trace per case in DIR/traces/ and the operators "
        "behind each phase, against the plain loop's, in the report",
    )
    run.add_argument(
        "--keep-captures",
        action="store_true",
        help="keep memray's capture files (by default only flamegraphs are kept)",
    )
    run.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (it registers strategies); repeatable",
    )
    run.add_argument("--resume", action="store_true", help="skip cases already ok in --out")
    run.add_argument("--out", help="results directory (default: reports/runs/<timestamp>)")
    run.add_argument("--seed", default="0", help="seed of weights and data (default 0)")
    run.add_argument(
        "--workload",
        default=protocol.DEFAULT,
        help="MODULE:FACTORY, the workload every case runs (default: the reference "
        f"transformer, {protocol.DEFAULT}; the protocol: benches/workloads/protocol.py)",
    )
    run.add_argument(
        "--world-size",
        default="1",
        help="run each case as N local ranks through torch.distributed.run",
    )
    run.add_argument(
        "--parallel",
        help="none|ddp|fsdp2|hsdp: how ranks share the model (default: ddp with --world-size "
        "> 1, else none); ddp with --world-size 1 wraps one rank in DDP",
    )
    run.add_argument(
        "--mesh", help="hsdp's mesh, RxS replicas x shards (default: 2 x world-size/2)"
    )
    run.add_argument(
        "--grad-sync",
        help="FLAVOUR[,FLAVOUR...] swept: when gradients are reduced across ranks, every "
        "micro-batch (every), the last only (last), or reduce-scattered every micro-batch and "
        "all-reduced at the last (scatter, hsdp) (default: last for none and ddp (ddp also "
        "runs every); fsdp2: every,last; hsdp: every,scatter,last)",
    )
