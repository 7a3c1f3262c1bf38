"""A case's row: what its timed pairs measured (``samples``, one figure per pair and phase),
pressure, MFU, collectives, the cost model's prediction, the case's identity and environment.

The engine records; the reports summarise: the phases' summaries, the paired overhead and its
interval, a loop's ratio to another and the cost model against what was measured are derived
from the samples when the row is read (in the reports: ARCHITECTURE.md), so nothing here
computes a statistic. ``case`` (one strategy paired with the plain loop) and ``rotation`` (several
strategies in one process) build their rows here, so a row has one shape whichever process
measured it.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from benches.engine import costmodel, distributed, envinfo, training
from benches.engine.spec import CaseSpec
from reports.schema.records import LOOP_SAMPLES, Row
from reports.schema.row_parts import (
    Collectives,
    CostModel,
    CpuPressure,
    GradCheck,
    LoopRatio,
    Memory,
    Mfu,
    made,
)


def measured_part(
    spec, workload, samples, check: GradCheck | None, memory_row: Memory, collectives
) -> dict[str, Any]:
    """The measured part of the row, by the row's field names: the samples, pressure, memory,
    check (``row_for`` makes the ``Row``)."""
    world = spec.world_size
    pressure = [p for p in samples["cpu_pressure"] if p is not None]
    tokens = workload.tokens_per_window()
    tokens_per_window = tokens * world if tokens is not None else None
    flops = workload.flops_per_window()
    window_median = statistics.median(samples["window"])  # the rates' window
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
        "samples": samples,
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
    """Which loops the case's ``--compare-settings`` samples pair (None: none measured); their
    ratio is the reports' (``summaries.loop_ratio``)."""
    if not samples.get(LOOP_SAMPLES["settings"][0]):
        return None
    setting, value = training.parse_setting(spec.compare_settings)
    return made(LoopRatio, setting=setting, mine=getattr(spec.recipe, setting), other=value)


def cost_figures(costs: dict[str, Any], samples: dict[str, list]) -> CostModel:
    """The cost model's prediction for this case (its judgement against what its timed
    pairs measured: ``summaries.cost_model``)."""
    # the window's fixed cost, in place: the plain loop's reset phase holds the same clock marks
    # and the same loop around them, and no strategy work
    coefficients = {
        **costs["coefficients"],
        "per_window_s": statistics.median(samples["plain_reset"]),
    }
    return made(
        CostModel,
        coefficients=coefficients,
        counts=costs["counts"],
        predicted=costmodel.predict(costs["counts"], coefficients),
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
    """Which loops the case's flavour samples pair, its flavour and ``every`` on one model
    (None: not measured); their ratio is the reports' (``summaries.loop_ratio``)."""
    if not samples.get(LOOP_SAMPLES["grad_sync"][0]):
        return None
    return made(LoopRatio, grad_sync=spec.grad_sync, against=distributed.REFERENCE_SYNC)


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
        "samples": {},
        "memory": made(Memory),
        "grad_check": None,
        "params": None,
        "tokens_per_window": None,
    }
