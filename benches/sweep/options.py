"""The sweep's options: ``python -m benches run``'s and ``case``'s parser, one set of option
definitions for both (a case by hand takes the sweep's flags with one value each). The values
are checked in ``arguments``; a parse error is a one-line ``UsageError`` (exit 2)."""

from __future__ import annotations

import argparse

from benches.engine import frameworks, training
from benches.sweep.outdir import UsageError
from reports.judge.verdicts import DEFAULT_MIN_EFFECT
from reports.schema.settings import SETTINGS

DEFAULT_BUDGET = 600.0  # seconds: the default sweep on a 2-core CPU within 10 min, report included
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
    run = commands.add_parser(
        "run",
        help="run a sweep of strategies on the reference workload",
        description="A sweep of strategies: every case in a fresh process, verdicts and an "
        "HTML report. It ends by printing its timed share: the seconds spent in timed windows "
        "(the pairs that every figure is made of) over the sweep's wall seconds before the "
        "report, with the processes' other steps (start, setup, gradient check, warm-up, "
        "memory pass, ...). A high share is a sweep spent measuring; a low one was spent "
        "starting processes and checking (small budgets, big models, ranks). run.json's "
        "'wall' and the page's run section hold the same figures.",
    )
    sweep_options(run)
    run.add_argument(
        "--quick",
        action="store_true",
        help="a first answer in minutes: defaults of --accumulate "
        f"{QUICK['accumulate']}, --live-tensors {QUICK['live_tensors']} and --budget "
        f"{QUICK['budget']} (every strategy); a flag given explicitly wins, --rounds R included",
    )
    run.add_argument(
        "--frameworks",
        help="PATH[,PATH...]: frameworks' own accumulation paths, measured beside the "
        f"strategies (docs/frameworks.md): {', '.join(frameworks.PATHS)}, each with its "
        "options as NAME:KEY=VALUE (accelerate:sync_each_batch=true, deepspeed:zero=2; the "
        "[frameworks] extra)",
    )
    cluster_options(run)
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


# how each kind of setting is an option (reports.schema.settings.KINDS; text and int: a value)
ACTIONS = {
    "flag": {"action": "store_true"},
    "onoff": {"action": argparse.BooleanOptionalAction},
    "list": {"action": "append", "default": [], "metavar": "MODULE"},
}
# what a setting's help lists that only the engine knows
CHOICES = {
    "optimizer": "|".join(training.OPTIMIZERS),
    "compare_settings": ", ".join(training.COMPARABLE),
}
AXIS_DEFAULTS = {"accumulate": DEFAULT_ACCUMULATE, "live_tensors": DEFAULT_LIVE_TENSORS}


def setting_options(run: argparse.ArgumentParser) -> None:
    """One option per setting with a flag, from its declaration (``CaseSettings``): its flag,
    help, default and kind. A swept axis takes its values as text (``arguments`` splits it)."""
    for f in SETTINGS:
        meta = f.metadata
        if not meta["flag"]:
            continue
        shown = AXIS_DEFAULTS.get(f.name, meta["cli_default"])
        text = meta["help"].format(
            default=shown, choices=CHOICES.get(f.name, ""), quick=QUICK.get(f.name, "")
        )
        # a planned setting's option is None when not given: the sweep plans it from there
        how = ACTIONS.get(
            meta["kind"], {"default": None if meta["planned"] else meta["cli_default"]}
        )
        if meta["metavar"]:
            how = {**how, "metavar": meta["metavar"]}
        run.add_argument(meta["flag"], dest=meta["dest"] or f.name, help=text, **how)


def sweep_options(run: argparse.ArgumentParser) -> None:
    """The options of a sweep (``run``); ``case`` takes the same: the settings' own, then the
    sweep's (rounds, budget, control, resume, output)."""
    setting_options(run)
    run.add_argument(
        "--rounds",
        help="run every case in exactly R processes (default: 1, then rounds added while a "
        "verdict is open and --budget lasts)",
    )
    run.add_argument(
        "--budget",
        help=f"seconds the sweep may take in all, its first round included (a case that "
        f"would end past it is left out, and said): after the first round it adds time-only "
        f"processes, round by round in shuffled order, for the strategies whose comparisons "
        f"are still unclear (default {DEFAULT_BUDGET:g}; --quick: {QUICK['budget']}; 0: no "
        f"rounds added, nothing left out)",
    )
    run.add_argument(
        "--no-rotate",
        action="store_true",
        help="every round runs each strategy in a process of its own (default: the strategies "
        "of a group share one process, each on its own replica, rotated with the plain loop, "
        "the first round's checking each in turn; global always has a process of its own)",
    )
    run.add_argument(
        "--control",
        help="strategy run in extra processes to measure the noise between processes (where "
        "it shares a process with its group's strategies, that whole process) "
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
    run.add_argument("--timeout", help="seconds per case (default: scaled with the preset)")
    run.add_argument("--resume", action="store_true", help="skip cases already ok in --out")
    run.add_argument("--out", help="results directory (default: reports/runs/<timestamp>)")


def cluster_options(run: argparse.ArgumentParser) -> None:
    """Where the sweep's processes run (``benches.sweep.cluster``): this machine, one after
    another (the default), or a Ray cluster, several at once."""
    run.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the sweep's processes on a Ray cluster (needs the [cluster] extra): "
        "HOST:PORT of its head, 'auto' (the cluster this machine is part of), or 'local' "
        "(start Ray on this machine for the command); default: this machine, one process at "
        "a time",
    )
    run.add_argument(
        "--per-node",
        metavar="N",
        help="with --cluster: processes at once on a node at most (default: 1 on CPU; on CUDA "
        "its GPUs over --world-size)",
    )
    run.add_argument(
        "--exclusive",
        action="store_true",
        help="with --cluster: one process at a time on each node (as --per-node 1)",
    )
