"""A process that several strategies share (``spec.rotation``): each strategy's checks in turn,
then every strategy's windows timed together, rotated with the plain loop's
(``engine.rotation``); a row per strategy, all with this process's ``process_id``.

A checked process (the first round's, ``spec.time_only`` off) runs what a case's process runs
for each of its strategies, once: first the memory pass (each strategy on a fresh replica of its
own, the plain loop's once), then, on the replicas it times, the gradient check (the references
of a window computed once for every strategy whose replica holds the same weights there,
``gradients.References``) and the cost model's counts (its coefficients calibrated once), the
plain loop's windows beside them: those windows are the rounds' first warm-up
(``engine.warmup``); after the timed rounds, the growth per window (each loop's windows alone,
the plain loop's once). A strategy that fails its check fails its own row and leaves the
rounds; the others go on. What the process pays once (start, setup, the plain loop's passes,
warm-up) it pays once for all of them: that is what sharing buys (docs/method.md, "Rounds and
the budget").
"""

from __future__ import annotations

import dataclasses
import gc
import traceback
from functools import partial
from typing import Any

from benches.engine import costmodel, gradients, rotation
from benches.engine.figures import cost_figures, failed_measure, measured_part, row_for
from benches.engine.growth import footprint, growth_measure, per_window, quiet
from benches.engine.spec import CaseSpec
from benches.engine.steps import (
    Wall,
    case_data,
    check_gradients,
    cost_counts,
    error_line,
    plain_memory,
    setup,
    strategy_memory,
)
from reports.schema.records import Row
from reports.schema.row_parts import ErrorFigures, GradCheck, Memory, given, made


@dataclasses.dataclass
class Checked:
    """One strategy's checks in a shared process, or the line its failure ends with."""

    check: GradCheck | None = None
    errors: dict[str, ErrorFigures] = dataclasses.field(default_factory=dict)
    costs: dict[str, Any] | None = None
    memory: Memory | None = None
    error: str | None = None


def memory_each(spec: CaseSpec, workload, data, wall: Wall) -> dict[str, Checked]:
    """Each strategy's memory pass, one after another on a fresh replica of its own (the
    plain loop's once, before the first), before any replica the process times exists; a
    failure is that strategy's alone."""
    plain = plain_memory(workload, spec, data, None, 0)
    out: dict[str, Checked] = {}
    for i, case in enumerate(spec.members()):
        try:
            # the plain loop's timeline once, in the first strategy's row (as a sweep's group)
            mine = plain if i == 0 else {**plain, "timeline": None}
            out[case.label] = Checked(memory=strategy_memory(workload, case, data, None, 0, mine))
        except Exception as err:  # this strategy's row fails; the others go on
            traceback.print_exc()
            out[case.label] = Checked(error=error_line(err))
    wall.lap("memory_pass")
    return out


def check_each(
    spec: CaseSpec, runner: rotation.RotatedRunner, workload, data, references, checked, wall
) -> list[float]:
    """Each strategy's gradient check and cost counts on the loop the process times, the
    plain loop's windows beside them: these windows are the process's first warm-up rounds
    (returned: per check window, every loop's seconds together, ``engine.warmup``). A strategy
    that fails leaves the runner and fails its own row (``checked``); the others go on."""
    coefficients = costmodel.calibrate(workload.device)
    wall.lap("cost_model")
    cache = gradients.References()
    rounds = [0.0] * gradients.CHECK_WINDOWS
    for case in spec.members():
        mine = checked[case.label]
        if mine.error is not None:
            continue
        try:
            loop = runner.loops[case.label]
            windows: list[float] = []
            mine.check, mine.errors = check_gradients(
                case, loop, workload, data, references, None, cache, windows
            )
            wall.lap("gradient_check")
            mine.costs = cost_counts(case, loop, workload, data[:2], coefficients)
            wall.lap("cost_model")
            for w, seconds in enumerate(windows):
                rounds[w] += seconds
        except Exception as err:  # this strategy's row fails; the others go on
            traceback.print_exc()
            checked[case.label] = Checked(error=error_line(err))
            runner.drop(case.label)
    plain = runner.loops[rotation.PLAIN]
    for w, (batches, tokens) in enumerate(data):
        rounds[w] += plain.window(batches, tokens)["window"]
    wall.lap("warmup")
    gc.collect()
    return rounds


def growth(
    runner: rotation.RotatedRunner, rounds: list[int], timed, device
) -> dict[str, list[int]] | None:
    """Each loop's memory around ``GROWTH_WINDOWS`` windows of its own, off the clock, after the
    rounds (memory read around a window among others cannot say whose a byte is:
    ``growth.plain_footprint``); None where the process's footprint around its timed rounds
    (``rounds``) shows it kept nothing worth a look (``growth.quiet``): no loop leaks."""
    if quiet(rounds):
        return None
    return {name: footprint(loop, device, timed) for name, loop in runner.loops.items()}


def round_figures(rounds: list[int], device) -> Memory:
    """Every strategy's growth in a shared process whose timed rounds kept nothing worth a look
    (``growth.quiet``): the process's own per round, every loop's window in it, a bound on each
    strategy's pair (``growth_scope`` "round": the leak judge reads it so)."""
    return made(
        Memory,
        growth_bytes_per_window=per_window(rounds),
        growth_windows=len(rounds) - 1,
        growth_readings=rounds,
        growth_measure=growth_measure(device),
        growth_scope="round",
    )


def growth_figures(mine: list[int], plain: list[int], device) -> Memory:
    """A strategy's growth in a shared process as a case's row holds it: ``growth_bytes_per_
    window`` a pair's (its window's own growth and the plain loop's), its readings its windows'
    alone, the plain loop's own beside it."""
    own, plain_own = per_window(mine), per_window(plain)
    return made(
        Memory,
        growth_bytes_per_window=(own or 0.0) + max(plain_own or 0.0, 0.0),
        growth_windows=len(mine) - 1,
        growth_readings=mine,
        plain_growth_bytes_per_window=plain_own,
        plain_growth_windows=len(plain) - 1,
        plain_growth_readings=plain,
        growth_measure=growth_measure(device),
        growth_scope="alone",
    )


def run_shared(spec: CaseSpec) -> list[Row]:
    """The process's rows, one per strategy of ``spec.rotation`` (``spec.members``); the wall
    time shared out among them. A checked process measures memory first (fresh replicas), then
    checks each strategy on the replica it times: the checks' windows are its warm-up."""
    wall = Wall()
    workload = setup(spec)
    data, references = case_data(workload, 0, 1)
    timed = data[:2]
    cases = spec.members()
    checked = (
        {c.label: Checked() for c in cases}
        if spec.time_only
        else memory_each(spec, workload, data, wall)
    )
    measured: dict[str, Any] = {"samples": {}, "after": None}
    passed = [c.label for c in cases if checked[c.label].error is None]
    if passed:
        seed = spec.seed + spec.round  # the replicas' build order: another per process
        runner = rotation.RotatedRunner(workload, passed, build_seed=seed)
        try:
            wall.lap("setup")
            before = (
                []
                if spec.time_only
                else check_each(spec, runner, workload, data, references, checked, wall)
            )
            del references
            passed = [c.label for c in cases if checked[c.label].error is None]
            timing = dataclasses.replace(spec, rotation=passed)
            after = None if spec.time_only else partial(growth, timed=timed, device=workload.device)
            if passed:
                measured = rotation.rotated_rounds(
                    timing, runner, workload, timed, wall.lap, after, before
                )
                wall.lap("plain_growth")
        finally:
            runner.close()
    share = {step: seconds / len(cases) for step, seconds in wall.seconds.items()}
    rounds, readings = measured.get("footprints"), measured["after"]  # ``growth``'s
    rows = []
    for case in cases:
        mine = checked[case.label]
        if mine.error is not None:
            rows.append(row_for(case, {**failed_measure(mine.error), "wall_s": share}))
            continue
        samples = measured["samples"][case.label]
        memory_row = made(Memory)
        if mine.memory is not None:
            grown = (
                round_figures(rounds, workload.device)
                if readings is None
                else growth_figures(readings[case.label], readings[rotation.PLAIN], workload.device)
            )
            memory_row = made(Memory, **given(mine.memory), **given(grown), **measured["rss"])
        part = measured_part(case, workload, samples, mine.check, memory_row, [])
        extra = {
            **mine.errors,
            "process": measured["process"],
            "build_order": measured["build_order"],
            "pairs_stamps": measured["pairs_stamps"],
            "cost_model": cost_figures(mine.costs, samples) if mine.costs else None,
            "profile": None,  # --profile: each strategy in a process of its own (budget.shares)
        }
        rows.append(row_for(case, {**part, **extra, "wall_s": share, "compile_s": None}))
    return rows


def measure_shared(spec: CaseSpec) -> tuple[list[Row], int]:
    """A shared process's rows and the exit code (1 where any strategy failed); a failure of
    the process is a failed row for each of its strategies."""
    try:
        rows = run_shared(spec)
    except (Exception, SystemExit) as err:  # the sweep records it and goes on
        traceback.print_exc()
        line = error_line(err)
        return [row_for(case, failed_measure(line)) for case in spec.members()], 1
    return rows, int(any(r.status != "ok" for r in rows))
