"""The sweep: ``python -m benches run``. Every case in a fresh process; rows that nothing loses.

Its arguments are checked in ``arguments``; this module plans the cases, runs each in its
own process and writes the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import signal
import sys
import uuid
from pathlib import Path

from rich.markup import escape

from benches.engine import envinfo, results
from benches.engine.spec import CaseSpec
from benches.sweep import zygote
from benches.sweep.arguments import UsageError, case_settings, resolve
from benches.sweep.budget import REPORT_S, process_started
from benches.sweep.options import build_parser
from benches.sweep.outdir import DEFAULT_RUNS
from benches.sweep.places import Local, Place
from benches.sweep.plan import cases
from benches.sweep.record import CONTROL_PROCESSES, Sweep
from benches.sweep.run import OutputError, SweepRun, output_error, write_whole
from reports.judge.rows import case_key, read
from reports.schema.records import RUN, RunFile

__all__ = ["CONTROL_PROCESSES", "build_parser", "cases", "main", "resolve"]
# python -m benches COMMAND: the sweep's own, then the micro-benchmarks (benches/__main__.py)
COMMANDS = ("run", "case", "mfu", "reset-speed", "clip-speed", "spread")


# -- the sweep ------------------------------------------------------------------------------------
def start_run(sweep: Sweep, cluster: dict | None = None) -> tuple[str, set[tuple]]:
    """Create or reopen the results directory (OutputError where it cannot be written); the
    run id and the cases already ok. ``cluster``: what run.json keeps of a cluster."""
    try:
        return open_run(sweep, cluster or {})
    except OSError as err:
        raise output_error(sweep.out, err, "before the first case") from None


def open_run(sweep: Sweep, cluster: dict) -> tuple[str, set[tuple]]:
    sweep.out.mkdir(parents=True, exist_ok=True)
    run_file = sweep.out / RUN
    done: set[tuple] = set()
    recorded = RunFile.read(sweep.out) if sweep.resume else None  # outdir.resumable checked it
    if recorded is not None:
        run_id = recorded.run_id
        done = {(case_key(r), r.round) for r in read(sweep.out) if r.ok}
    else:
        run_id = uuid.uuid4().hex[:12]
        write_whole(
            run_file,
            json.dumps(
                RunFile(
                    run_id=run_id,
                    created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    sweep={
                        k: str(v) if isinstance(v, Path) else v
                        for k, v in dataclasses.asdict(sweep).items()
                    },
                    case_settings=case_settings(sweep),
                    env={**envinfo.environment(sweep.device), **envinfo.git_state()},
                    cluster=cluster,
                ).to_json(),
                indent=1,
            ),
        )
    if sweep.out.parent.resolve() == DEFAULT_RUNS.resolve():
        latest = DEFAULT_RUNS / "latest"
        tmp = DEFAULT_RUNS / f".latest-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(sweep.out.name)
        os.replace(tmp, latest)
    return run_id, done


def sweep_main(sweep: Sweep, args: argparse.Namespace | None = None) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    started = process_started()  # the budget holds the whole command, its imports included
    console = Console(stderr=True)
    # a cluster's problems are usage errors: nothing written; its nodes decide the device,
    # the threads and the pinning (the sweep resolved again from ``args`` with them)
    place, sweep = open_place(sweep, console, args)
    try:
        run_id, done = start_run(sweep, place.record())
    except BaseException:
        place.close()
        raise

    git = envinfo.git_state()
    planned = cases(sweep, run_id, git)
    todo = [c for c in map(lambda c: missing(c, done), planned) if c is not None]
    out = escape(str(sweep.out))  # a path is data, never markup
    console.print(
        f"zerograd sweep {run_id}: {len(todo)} cases ({len(done)} already done), "
        f"preset {sweep.preset} on {sweep.device}, {sweep.threads} threads"
        f"{f', {sweep.world_size} ranks' if sweep.world_size > 1 else ''} -> {out}"
        + (f"; rounds added while verdicts are open, {sweep.budget:g} s" if sweep.budget else "")
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            run = SweepRun(sweep, run_id, git, place, progress, started)
            # the budget holds the first round too: no case starts that would end past it
            run.run_cases(todo, run.deadline(REPORT_S) if sweep.budget else None)
            if sweep.budget and not (run.interrupted or run.not_run or run.left_out):
                run.spend_budget()
    finally:
        place.close()
    wall = run.save()  # the page shows where the time went: run.json holds it first
    return finish(
        sweep,
        console,
        run.failed,
        run.interrupted,
        run.not_run,
        closing=lambda page: run.say_wall(console, wall, page),
    )


def missing(process: CaseSpec, done: set[tuple]) -> CaseSpec | None:
    """What of ``process`` a resumed sweep still runs: nothing where every case it measures has
    its row, else a process of the cases that lack one (a shared one's missing strategies, or
    the one left, alone)."""
    cases = [m for m in process.members() if (case_key(m), process.round) not in done]
    if len(cases) == len(process.members()):
        return process
    if not cases:
        return None
    if len(cases) == 1:
        return dataclasses.replace(cases[0], process_id="")
    first = cases[0]
    return dataclasses.replace(
        process, strategy=first.strategy, options=first.options, rotation=[m.label for m in cases]
    )


def open_place(
    sweep: Sweep, console, args: argparse.Namespace | None = None
) -> tuple[Place, Sweep]:
    """Where the sweep's processes run, and the sweep they run: this machine (``Local``,
    forked from the fork server) or a Ray cluster (``--cluster``: joined, the sweep resolved
    from ``args`` again with its nodes (``arguments.resolve``: the device, the preset's
    default, the threads and the pinning are theirs), its resources checked, its controls at
    least two per machine). Nothing is written yet: a cluster's problem is a UsageError."""
    if sweep.cluster is None:
        return Local(sweep.timeout, fork_server=not os.environ.get(zygote.FRESH)), sweep
    from benches.sweep.cluster.place import RayPlace

    settle = None
    if args is not None:  # the same --out (a default one is named by the time)
        again = argparse.Namespace(**{**vars(args), "out": str(sweep.out)})

        def settle(nodes: list[dict]) -> Sweep:
            return resolve(again, nodes)

    place = RayPlace(
        sweep,
        sweep.timeout,
        say=lambda text: console.print(escape(text), soft_wrap=True),
        settle=settle,
    )
    sweep = place.sweep
    if sweep.control != "none" and sweep.rounds == 1:
        sweep.controls = max(sweep.controls, 2 * place.machines())
    console.print(escape(place.describe()))
    return place, sweep


def finish(
    sweep: Sweep, console, failed: int, interrupted: bool, not_run: int = 0, closing=None
) -> int:
    """The report and the terminal's tables, then ``closing(page)`` (the wall's figures: the
    timed share and the efficiency, ``SweepRun.say_wall``); the exit code."""
    from benches.sweep import summary

    report = page = None
    try:
        from reports.page.analysis import report as analyse
        from reports.page.build import build

        page = analyse(sweep.out)  # once: the page and the terminal tables say the same
        report = build(sweep.out, page)
    except Exception as err:  # the rows are safe; say why the page is missing
        console.print(f"[red]report not written[/red]: {escape(f'{type(err).__name__}: {err}')}")
    try:
        summary.print_summary(sweep.out, report=page)
    except Exception as err:
        console.print(f"[red]summary not printed[/red]: {escape(f'{type(err).__name__}: {err}')}")
    print(f"results: {sweep.out / results.RESULTS}")
    if report is not None:
        print(f"report:  {report}")
    if closing is not None:
        closing(page)
    if interrupted:
        console.print("interrupted: the case in progress was abandoned; finished rows are kept")
        return 130
    if not_run:
        console.print(
            f"the cluster was lost: {not_run} processes did not run; finished rows are kept "
            "(--resume runs the rest)"
        )
    return 1 if failed or not_run else 0


def terminate_as_interrupt() -> None:
    """SIGTERM and SIGHUP (a `kill`, a closed terminal, a job scheduler's stop) end the sweep
    as Ctrl-C does: the case in progress and its whole tree killed, the fork server closed,
    the finished rows and the report kept, exit 130."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command not in ("run", "case"):
            raise UsageError("missing command; valid commands: " + ", ".join(COMMANDS))
        if args.command == "case":
            from benches.sweep import bycase

            return bycase.main(args)
        sweep = resolve(args)
        cases(sweep, "", {})  # every case id unique, before anything is written
    except UsageError as err:
        print(f"python -m benches: error: {err}", file=sys.stderr)
        return 2
    from reports.judge.rows import SchemaError

    terminate_as_interrupt()
    try:
        return sweep_main(sweep, args)
    except KeyboardInterrupt:  # between cases, or while the report was written
        return 130
    # --resume into older rows; --out unwritable; a cluster that cannot run the sweep
    except (SchemaError, OutputError, UsageError) as err:
        print(f"python -m benches: error: {err}", file=sys.stderr)
        return 2
