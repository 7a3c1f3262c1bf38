"""A case's row: the figures its timed pairs give (phases, the paired overhead, pressure, MFU,
collectives, the cost model against what was measured), the case's identity and environment.

``case`` (one strategy paired with the plain loop) and ``rotation`` (several strategies in one
process) build their rows here, so a row has one shape whichever process measured it.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from benches.engine import costmodel, distributed, envinfo, training
from benches.engine.runner import PHASES
from benches.engine.spec import CaseSpec
from reports.judge import stats
from reports.judge.rows import LOOP_SAMPLES
from reports.schema.records import Row
from reports.schema.row_parts import (
    Collectives,
    CostMeasured,
    CostModel,
    CpuPressure,
    GradCheck,
    LoopRatio,
    Memory,
    Mfu,
    Summary,
    made,
)


def summary(values) -> Summary:
    """A series of seconds summarised (``stats.summarize``), as a record."""
    return made(Summary, **stats.summarize(values))


def measured_part(
    spec, workload, samples, check: GradCheck | None, memory_row: Memory, collectives
) -> dict[str, Any]:
    """The measured part of the row, by the row's field names: phases, the paired overhead,
    pressure, memory, check (``row_for`` makes the ``Row``)."""
    world = spec.world_size
    phases = {p: summary(v) for p, v in samples.items() if v and p in (*PHASES, "sync")}
    plain = samples["plain_window"]
    pairs = stats.log_ratios(samples["window"], plain)
    overhead = made(
        LoopRatio,
        **stats.public(stats.paired([pairs], seed=spec.round)),
        plain=summary(plain),
        split_half=stats.split_half(plain),
    )
    pressure = [p for p in samples["cpu_pressure"] if p is not None]
    tokens = workload.tokens_per_window()
    tokens_per_window = tokens * world if tokens is not None else None
    flops = workload.flops_per_window()
    window_median = phases["window"].median_s
    return {
        "status": "ok",
        "error": None,
        "control": spec.control,
        "params": workload.num_params(),
        "trainable_params": workload.num_trainable_params(),
        "tokens_per_window": tokens_per_window,
        "tokens_per_second": (
            tokens_per_window / window_median if window_median and tokens_per_window else None
        ),
        "flops_per_window": flops * world if flops is not None else None,
        "mfu": mfu(workload, spec, flops, window_median),
        "phases": phases,
        "samples": samples,
        "overhead": overhead,
        "cpu_pressure": made(
            CpuPressure,
            median=statistics.median(pressure) if pressure else None,
            max=max(pressure) if pressure else None,
            measure="per pair, the larger of its two windows' share of wall time in which "
            "some task waited for a CPU (/proc/pressure/cpu total, read around each window)",
        ),
        "allreduce_per_window": (
            statistics.median(c["allreduce"] for c in collectives)
            if spec.parallel != "none"
            else None
        ),
        "collectives_per_window": collectives_figure(collectives, spec.parallel),
        "grad_sync_vs_every": grad_sync_ratio(samples, spec),
        "settings_vs": setting_ratio(samples, spec),
        "memory": memory_row,
        "grad_check": check,
    }


def mfu(workload, spec: CaseSpec, flops: int | None, window_s: float | None) -> Mfu | None:
    """Model FLOPs utilisation of the strategy's median window against the GPU's bf16 peak (per
    rank: each rank's FLOPs on its own GPU); None on CPU, in fp32, or for an unknown GPU."""
    peak = training.peak_flops(workload.device, spec.precision)
    if peak is None or not flops or not window_s:
        return None
    return made(
        Mfu,
        value=flops / window_s / peak,
        peak_flops=peak,
        measure="6 N tokens per window (attention not counted) / median window / bf16 peak",
    )


def setting_ratio(samples: dict[str, list], spec: CaseSpec) -> LoopRatio | None:
    """The paired ratio of the case's loop over the ``--compare-settings`` one (None: none)."""
    mine, other = LOOP_SAMPLES["settings"]
    if not samples.get(mine):
        return None
    setting, value = training.parse_setting(spec.compare_settings)
    pairs = stats.log_ratios(samples[mine], samples[other])
    paired = stats.public(stats.paired([pairs], seed=spec.round))
    return made(
        LoopRatio,
        **{
            **paired,
            "estimate": "the case's window / the same strategy's window with the other setting",
        },
        setting=setting,
        mine=getattr(spec.recipe, setting),
        other=value,
    )


def cost_figures(costs: dict[str, Any], samples: dict[str, list]) -> CostModel:
    """The cost model's prediction for this case against what its timed pairs measured."""
    # the window's fixed cost, in place: the plain loop's reset phase holds the same clock marks
    # and the same loop around them, and no strategy work
    coefficients = {
        **costs["coefficients"],
        "per_window_s": statistics.median(samples["plain_reset"]),
    }
    predicted = costmodel.predict(costs["counts"], coefficients)
    reset = stats.summarize(samples["reset"])
    paired = stats.summarize(
        [a - b for a, b in zip(samples["window"], samples["plain_window"], strict=True)]
    )
    judged = costmodel.judge(predicted, reset, paired, costs["counts"])
    return made(
        CostModel,
        coefficients=coefficients,
        counts=costs["counts"],
        predicted=predicted,
        measured=made(
            CostMeasured, reset=made(Summary, **reset), paired_cost=made(Summary, **paired)
        ),
        explained=judged["explained"],
        flags=judged["flags"],
    )


def collectives_figure(collectives: list[dict[str, Any]], parallel: str) -> Collectives | None:
    """The strategy window's gradient collectives (median over pairs); None without ranks."""
    if parallel == "none" or not collectives:
        return None
    groups = sorted({g for c in collectives for g in c["reduce_scatter_per_group"]})
    return made(
        Collectives,
        allreduce=statistics.median(c["allreduce"] for c in collectives),
        reduce_scatter=statistics.median(c["reduce_scatter"] for c in collectives),
        reduce_scatter_per_group=groups,  # every count a group had in some window
        reduce_scatter_seconds=statistics.median(c["collective_seconds"] for c in collectives),
        seconds_measure="host time inside reduce-scatter calls (gloo: the collective; "
        "NCCL: the launch only)",
    )


def grad_sync_ratio(samples: dict[str, list], spec: CaseSpec) -> LoopRatio | None:
    """The paired ratio of the case's flavour over ``every`` on one model (None: not measured)."""
    mine, reference = LOOP_SAMPLES["grad_sync"]
    if not samples.get(mine):
        return None
    pairs = stats.log_ratios(samples[mine], samples[reference])
    return made(
        LoopRatio,
        **stats.public(stats.paired([pairs], seed=spec.round)),
        grad_sync=spec.grad_sync,
        against=distributed.REFERENCE_SYNC,
    )


def row_for(spec: CaseSpec, measured: dict[str, Any]) -> Row:
    """A results row: the case's identity, what was measured (``measured``: the row's fields
    by name, each part a ``row_parts`` record), the environment. A field it is not given is
    left out of its JSON (``row_parts.made``); the writer adds ``schema_version``.
    ``measured["pairs_stamps"]``: the timed pairs' wall-clock start and end, for ``placement``."""
    measured = dict(measured)
    stamps = measured.pop("pairs_stamps", None) or (None, None)
    return made(
        Row,
        run_id=spec.run_id,
        case_id=spec.case_id,
        **spec.identity(),
        round=spec.round,
        time_only=spec.time_only,  # a repeat process a sweep added: timed pairs only
        # strategies measured in one process share it: verdicts pair their figures by it
        process_id=spec.process_id or spec.case_id,
        **measured,
        env={
            **envinfo.environment(spec.device),
            **spec.git,
            # forked from the sweep's fork server (benches/sweep/zygote.py) or spawned fresh
            "process_start": os.environ.get("ZEROGRAD_PROCESS_START", "spawned"),
        },
        placement=envinfo.placement(spec.device, *stamps),
    )


def failed_measure(error: str) -> dict[str, Any]:
    """A failed process's row fields: its error, and nothing measured."""
    return {
        "status": "failed",
        "error": error,
        "phases": {},
        "overhead": None,
        "memory": made(Memory),
        "grad_check": None,
        "params": None,
        "tokens_per_window": None,
    }
