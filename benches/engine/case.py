"""One case of a sweep, run in its own fresh process: ``python -m benches.engine.case SPEC OUT``.

A case is one strategy at one K and one ballast size. This module only orchestrates; each job
lives in the module named after it:

1. ``gradients``: the strategy's gradients over consecutive windows against a reference
   computed without any strategy (a failed check fails the case);
2. ``runner``: warm-up, then ``repeat`` pairs of windows, the strategy's loop and the plain
   PyTorch loop on a replica with the same weights, in ABBA order; the row's headline is the
   paired ratio ``overhead`` = strategy window / plain-loop window;
3. ``memory``: a separate pass on fresh replicas: held and peak bytes, for the strategy and the
   plain loop (and memray's flamegraph with ``--memray``);
4. ``distributed``: under torchrun, ranks, DDP/FSDP2 wrappers, collective counts and merging
   ranks' figures; under FSDP2 also the case's ``grad_sync`` against ``every``, paired on the
   strategy's own model (``grad_sync_vs_every``).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from benches.engine import (
    distributed,
    frameworks,
    memory,
    process,
    profiling,
    training,
    warmup,
)
from benches.engine.figures import cost_figures, failed_measure, measured_part, row_for
from benches.engine.growth import (
    footprint_bytes,
    growth_measure,
    per_window,
    plain_footprint,
)
from benches.engine.runner import PHASES, PairedRunner
from benches.engine.shared import measure_shared
from benches.engine.spec import CaseSpec
from benches.engine.steps import (
    Wall,
    case_data,
    check_gradients,
    cost_counts,
    error_line,
    memory_figures,
    setup,
)
from reports.schema.records import LOOP_SAMPLES, Row
from reports.schema.row_parts import Memory, Profile, given, made

__all__ = ["CaseSpec", "failed_measure", "main", "measure", "row_for", "run_case"]

USAGE = (
    "usage: python -m benches.engine.case SPEC.json ROW.json (as the sweep runs it); "
    "one case by hand: python -m benches case --strategy NAME --out DIR [options]"
)


def run_case(spec: CaseSpec) -> dict[str, Any] | None:
    """Measure one case; under torchrun every rank measures and rank 0 returns the row's
    measured fields, by name, each part a ``row_parts`` record (``row_for`` makes the row)."""
    rank, _, world = distributed.ranks()
    wall = Wall()  # where the case's time goes, step by step (the row's ``wall_s``)
    workload = setup(spec)
    data, references = case_data(workload, rank, world)
    shape = distributed.parse_mesh(spec.mesh or None, spec.parallel, world)
    parallel = distributed.Parallel(spec.parallel, workload.device, shape)
    runner = PairedRunner(workload, spec.label, parallel, spec.grad_sync)
    # the row's collectives are the strategy's; every loop counts its own (``runner.Loop``)
    counter = runner.strategy.counter
    timed = data[:2]  # two windows alternate, so that no window's data is cached twice
    wall.lap("setup")
    # compiled: every graph (and each new shape's) is compiled here, outside every window
    compile_s = runner.strategy.warm(timed) if spec.recipe.compile else None
    wall.lap("compile")
    checked: list[float] = []  # the check's windows: the strategy's first warm-up windows
    check, errors = (
        (None, {})
        if spec.time_only
        else check_gradients(
            spec, runner.strategy, workload, data, references, parallel, seconds=checked
        )
    )
    del references
    wall.lap("gradient_check")
    samples, context, process_figures, collectives, stamps = timed_pairs(
        spec, runner, workload, timed, counter, wall, checked
    )
    if parallel.sharded:
        samples.update(flavour_pairs(spec, runner, timed))
    other_compile_s = other_settings(spec, runner, timed, samples)
    compile_s = compile_s if compile_s is not None else other_compile_s
    wall.lap("other_pairs")
    profiled = profile_pair(spec, runner, timed, rank, world)
    wall.lap("profile")
    costs = cost_counts(spec, runner.strategy, workload, timed)
    wall.lap("cost_model")
    framework = frameworks.figure(spec.label, runner.strategy.path)
    runner.close()
    del runner
    gc.collect()
    held_peak = (
        made(Memory) if spec.time_only else memory_figures(workload, spec, data, parallel, rank)
    )
    wall.lap("memory_pass")
    if spec.parallel != "none":
        samples = distributed.slowest(samples, world)
        held_peak = distributed.largest(held_peak, world)
        process_figures = distributed.busiest(process_figures, world)
        torch.distributed.destroy_process_group()
        if rank != 0:
            return None
    memory_row = made(Memory, **given(held_peak), **given(context))
    measured = measured_part(spec, workload, samples, check, memory_row, collectives)
    wall.lap("teardown")
    return {
        **measured,
        **errors,
        "process": process_figures,
        "pairs_stamps": stamps,
        "compile_s": compile_s,
        "cost_model": cost_figures(costs, samples) if costs else None,
        "profile": profiled,
        "wall_s": wall.seconds,
        **({"framework": framework} if framework else {}),
    }


def timed_pairs(
    spec, runner, workload, timed, counter, wall: Wall, checked=()
) -> tuple[dict, Memory, Any, list, tuple]:
    """The plain loop beside the strategy's, warm-up, then ``repeat`` timed pairs: the samples
    of every phase, the memory context (RSS, growth per window), psutil's figures of the
    process and the collectives per window. ``checked``: the seconds of the gradient check's
    windows, each with a plain window beside it the process's first warm-up pairs."""
    recipe = spec.recipe
    runner.add_plain()
    alike(runner.strategy, runner.plain)
    if recipe.compile:
        runner.plain.warm(timed)  # the compiled graphs are cached: this only checks shapes
    warmed = warm_pairs(spec, runner, timed, checked)
    wall.lap("warmup")
    if workload.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(workload.device)
    rss_after_setup = process.rss_bytes()
    hwm_reset = memory.reset_peak_rss()
    figures = process.TimedPairsProcess()
    samples: dict[str, list] = {phase: [] for phase in PHASES}
    samples.update(plain_window=[], plain_reset=[], cpu_pressure=[], warmup=warmed)
    if spec.parallel != "none":
        samples["sync"] = []
    # memory before the pairs and after each: a leak adds to it window after window
    footprint = [footprint_bytes(workload.device)]
    collectives: list[dict[str, Any]] = []
    figures.start()
    for i in range(len(warmed), len(warmed) + spec.pairs_planned):
        if past_deadline(spec, samples["window"], samples["plain_window"]):
            break
        before = counter.snapshot()
        with training.no_recompile(recipe.compile):  # compiling here would be timed: fail
            mine_t, plain_t, pressure = runner.pair(i, *timed[i % 2])
        collectives.append(counter.per_window(before, counter.snapshot()))
        for phase, seconds in mine_t.items():
            samples[phase].append(seconds)
        samples["plain_window"].append(plain_t["window"])
        samples["plain_reset"].append(plain_t["reset"])
        samples["cpu_pressure"].append(pressure)
        figures.sample()  # off the clock, between pairs
        footprint.append(footprint_bytes(workload.device))
    wall.lap("timed_pairs")
    process_figures = figures.figures()  # the timed pairs', before any other window runs
    peak_rss = memory.status_bytes("VmHWM") if hwm_reset else None
    plain = [] if spec.time_only else plain_footprint(runner, workload, timed)
    wall.lap("plain_growth")
    context = made(
        Memory,
        rss_after_setup_bytes=rss_after_setup,
        peak_rss_bytes=peak_rss,
        peak_rss_is_since_setup=hwm_reset,
        # the process's growth per pair (one window of the strategy, one of the plain loop),
        # and the plain loop's own over windows of its own after the pairs, in this process
        growth_bytes_per_window=per_window(footprint),
        growth_windows=len(footprint) - 1,
        growth_readings=footprint,
        plain_growth_bytes_per_window=per_window(plain) if plain else None,
        plain_growth_windows=max(0, len(plain) - 1),
        plain_growth_readings=plain,
        growth_measure=growth_measure(workload.device),
    )
    return samples, context, process_figures, collectives, figures.stamps


def warm_pairs(spec, runner, timed, checked) -> list[float]:
    """Warm-up pairs until steady (``engine.warmup``): the gradient check's windows, a plain
    window beside each, first; every pair's seconds."""
    before = [s + runner.plain.window(*timed[i % 2])["window"] for i, s in enumerate(checked)]

    def warm_pair(i: int) -> float:
        mine, plain, _ = runner.pair(i, *timed[i % 2])
        return mine["window"] + plain["window"]

    def timing(warmed: list[float]) -> int:  # the pairs it will time: what the time left holds
        if not (spec.deadline and warmed):
            return spec.pairs_planned
        left = int((spec.deadline - time.time()) / warmed[-1])
        return max(spec.repeat, min(spec.pairs_planned, left))

    ranked = spec.parallel != "none"  # every rank stops warming up at the same pair
    return warmup.warm_up(
        warm_pair,
        spec.warmup,
        distributed.every_rank if ranked else None,
        timed=timing,
        before=before,
        learned=spec.warm_pairs,
    )


def past_deadline(spec: CaseSpec, mine: list[float], plain: list[float]) -> bool:
    """Whether a time-only process's next pair would end past the sweep's deadline, once it has
    ``repeat`` pairs (a process that started measures; the sweep starts none it expects to end
    past its budget). A checked case stops the same way in the pairs its sweep planned beyond
    ``repeat`` (``SweepRun.first_pairs``: a first-round `global` of 49 planned pairs ran 266 s
    where its share of the budget was about 150 s); its steps after its pairs are not its to
    shorten."""
    planned = spec.time_only or spec.pairs > spec.repeat
    if not (spec.deadline and planned) or len(mine) < spec.repeat:
        return False
    return time.time() + mine[-1] + plain[-1] > spec.deadline


def alike(mine, other) -> None:
    """Both loops of a pair carry the same instrumentation (communication hooks, counted
    reduce-scatters), or the case fails: what is done to one side only biases every ratio. A
    framework that communicates by its own backend (DeepSpeed) is counted there: nothing to
    compare."""
    if "deepspeed" in (mine.counter.kind, other.counter.kind):
        return
    a, b = (distributed.instrumentation(loop.counter.module) for loop in (mine, other))
    if a != b:
        raise RuntimeError(f"the paired loops are instrumented differently: {a} against {b}")


def other_settings(spec: CaseSpec, runner: PairedRunner, timed, samples: dict) -> float | None:
    """``--compare-settings``: the other recipe's loop, paired with the case's (into
    ``samples``); its compile time when it compiles. Built after the headline pairs, so its
    replica never lives beside them."""
    other = compared_recipe(spec)
    if other is None:
        return None
    runner.add_other(other)
    alike(runner.strategy, runner.other)
    warm_s = runner.other.warm(timed)  # compiling, if the other recipe compiles
    samples.update(setting_pairs(spec, runner, timed))
    return warm_s if other.compile else None


def profile_pair(
    spec: CaseSpec, runner: PairedRunner, timed, rank: int, world: int
) -> Profile | None:
    """``--profile``: one window of each loop under torch.profiler, after the timed pairs and
    off their clock (``benches.engine.profiling``); None without the flag, and for the
    control's extra processes and time-only ones (they measure noise or time only)."""
    if not spec.profile or spec.control or spec.time_only:
        return None
    trace = Path(spec.out_dir) / "traces" / f"{spec.case_id}.json.gz"
    profiled = profiling.profiled_pair(runner, *timed[0], trace, rank, world)
    if profiled is not None and profiled.trace:
        profiled.trace = str(trace.relative_to(spec.out_dir))
    return profiled


def compared_recipe(spec: CaseSpec) -> training.Recipe | None:
    """The recipe ``--compare-settings SETTING=VALUE`` alternates with the case's own."""
    if not spec.compare_settings:
        return None
    setting, value = training.parse_setting(spec.compare_settings)
    return spec.recipe.replace(setting, value)


def setting_pairs(spec: CaseSpec, runner: PairedRunner, timed) -> dict[str, list[float]]:
    """The case's loop against the same strategy's loop with the other setting, on replicas
    with the same weights and data, window by window (ABBA, after ``warmup`` unmeasured pairs)."""
    mine_key, other_key = LOOP_SAMPLES["settings"]
    out: dict[str, list[float]] = {mine_key: [], other_key: []}
    warm = max(1, spec.warmup)  # the other loop's first window allocates its state
    compiled = spec.recipe.compile or runner.other.recipe.compile
    for i in range(warm + spec.repeat):
        with training.no_recompile(compiled and i >= warm):
            mine, other = runner.setting_pair(i, *timed[i % 2])
        if i >= warm:
            out[mine_key].append(mine)
            out[other_key].append(other)
    return out


def flavour_pairs(spec: CaseSpec, runner: PairedRunner, timed) -> dict[str, list[float]]:
    """The case's flavour against ``every`` on the strategy's own model, window by window (ABBA,
    after ``warmup`` unmeasured pairs): the paired cost of deferring the synchronisation."""
    if spec.grad_sync == distributed.REFERENCE_SYNC:
        return {}
    mine_key, reference_key = LOOP_SAMPLES["grad_sync"]
    out: dict[str, list[float]] = {mine_key: [], reference_key: []}
    for i in range(spec.warmup + spec.repeat):
        mine, reference = runner.flavour_pair(i, *timed[i % 2], distributed.REFERENCE_SYNC)
        if i >= spec.warmup:
            out[mine_key].append(mine)
            out[reference_key].append(reference)
    return out


BOUND = "ZEROGRAD_BOUND"  # set by a cluster's task (benches.sweep.launch.spawn)


def main(argv: list[str]) -> int:
    """``SPEC OUT``, the sweep's form (a case by hand is ``python -m benches case``, whose
    flags are the sweep's: ``benches.sweep.bycase``)."""
    if len(argv) != 2 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    if os.environ.get(BOUND) and "LOCAL_RANK" in os.environ:  # a cluster's rank: dies with
        from benches.engine.process import die_with_parent  # torchrun, dying with its task

        die_with_parent()
    try:
        spec = CaseSpec(**json.loads(Path(argv[0]).read_text()))
    except (OSError, ValueError, TypeError) as err:
        print(
            f"python -m benches.engine.case: error: cannot read spec {argv[0]!r}: {err}",
            file=sys.stderr,
        )
        return 2
    # a rotated process writes a list of rows, one per strategy; a case its row
    row, code = measure_shared(spec) if spec.rotation else measure(spec)
    if row is not None:
        out_path = Path(argv[1])
        tmp = out_path.with_suffix(".tmp")
        rows = [r.to_json() for r in row] if isinstance(row, list) else row.to_json()
        tmp.write_text(json.dumps(rows, default=str))
        os.replace(tmp, out_path)  # the parent sees a whole row or none
    return code


def measure(spec: CaseSpec) -> tuple[Row | None, int]:
    """The case's row (None on ranks other than 0) and the exit code."""
    try:
        measured = run_case(spec)
        return (None if measured is None else row_for(spec, measured)), 0
    except (Exception, SystemExit) as err:  # the sweep records it and goes on
        traceback.print_exc()
        if distributed.ranks()[0] != 0:
            return None, 1  # torchrun ends the others; the sweep reads rank 0's log
        return row_for(spec, failed_measure(error_line(err))), 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
