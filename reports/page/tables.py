"""The report's tables, one function each: a line per case (phases, overhead, verdicts
against native, memory, processes, gradient check), the core's overhead, flamegraphs, memory
timelines, the cost model, the grad_sync flavours, where the sweep ran. Plain data: the
templates only format it."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from msgspec import structs

from reports.judge import leaks, machines, noise, stats, summaries, targets, verdicts
from reports.judge.rows import REFERENCE, memory_note, process_of, strategy_order
from reports.page import profile
from reports.page.records import (
    CaseLine,
    CaseMemory,
    CoreOverhead,
    CostLine,
    Flamegraph,
    FlavourLine,
    MachineLine,
    MachineSpreadLine,
    ProcessLine,
    TimelineLine,
    Where,
)
from reports.schema.records import Entry, Row
from reports.schema.row_parts import Collectives, GradCheck, Summary
from reports.schema.settings import at_main
from reports.schema.verdict_records import GroupNoise, VerdictFile


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def process_line(rows: list[Row]) -> ProcessLine:
    """A case's process figures over its rounds (psutil): context switches per second of the
    timed pairs (the busiest process), whether it was pinned and to which cores, and the noise
    signal that judged it."""
    figures = [r.process for r in rows if r.process]

    involuntary = [f.involuntary_per_s for f in figures if f.involuntary_per_s is not None]
    voluntary = [f.voluntary_switches / f.seconds for f in figures if f.seconds]
    # every rank's cores where the row has them (torchrun), else the process's own
    cores = sorted(
        {tuple(cs) for f in figures for cs in (f.rank_affinity or [f.affinity]) if cs is not None}
    )
    return ProcessLine(
        involuntary_per_s=max(involuntary) if involuntary else None,
        voluntary_per_s=max(voluntary) if voluntary else None,
        pinned=any(r.pin for r in rows),
        cores=[list(c) for c in cores],
        noise_signals=sorted({noise.case_noise(r).signal or "none" for r in rows}),
    )


def case_table(entries: list[Entry], result: VerdictFile) -> list[CaseLine]:
    """One line per case: paired overhead, verdicts against native, memory, gradient check."""
    out = []
    for e in sorted(entries, key=lambda e: (e.k, e.n, strategy_order(e.strategy))):
        line = CaseLine(
            strategy=e.strategy,
            k=e.k,
            n=e.n,
            rounds=e.rounds,
            failed=len(e.failed),
            ok=bool(e.phases),
            noisy=noise.noisy_case(e),
            trace=profile.trace_of(e),
        )
        out.append(measured_line(line, e, result) if e.phases else line)
    return out


def case_memory(e: Entry) -> CaseMemory:
    """A case's memory figures, each its median over processes, and what its growth is of."""
    figures = {
        f.name: verdicts.memory_figure(e, f.name)
        for f in structs.fields(CaseMemory)
        if f.name != "growth_measure"
    }
    return CaseMemory(**figures, growth_measure=memory_note(e.rows, "growth_measure"))


def measured_line(line: CaseLine, e: Entry, result: VerdictFile) -> CaseLine:
    """What a finished case's line shows: its phases and overhead, its verdicts against
    native, memory and growth, CPU pressure, its processes, collectives, gradient check."""
    rows = e.rows
    pressure = [
        r.cpu_pressure.median for r in rows if r.cpu_pressure and r.cpu_pressure.median is not None
    ]
    calls = [r.allreduce_per_window for r in rows if r.allreduce_per_window]
    checks = [r.grad_check for r in rows if r.grad_check]
    return structs.replace(
        line,
        phases=e.phases,
        overhead=e.overhead,
        rows=rows,
        vs_native=None
        if e.strategy == REFERENCE
        else {
            metric: verdicts.lookup(result, e.strategy, REFERENCE, e.k, e.n, metric)
            for metric in verdicts.METRICS
        },
        memory=case_memory(e),
        leak=leaks.lookup(result, e),
        cpu_pressure=max(pressure) if pressure else None,
        process=process_line(rows),
        allreduce_per_window=_median(calls) if calls else None,
        grad_check=GradCheck(
            max_rel_diff=max(c.max_rel_diff for c in checks),
            max_abs_diff=max(c.max_abs_diff for c in checks),
            tolerance=max(c.tolerance for c in checks),
            windows=min(c.windows or 1 for c in checks),
            ok=all(c.ok for c in checks),
        )
        if checks
        else None,
    )


def core_overheads(entries: list[Entry]) -> list[CoreOverhead]:
    """The core's overhead per K and N: native's paired ratio to the plain loop."""
    out = []
    for e in sorted(entries, key=lambda e: (e.k, e.n)):
        if e.strategy != REFERENCE or not e.phases:
            continue
        result = e.overhead
        plain = [x for r in e.rows for x in r.samples.get("plain_window", [])]
        out.append(
            CoreOverhead(
                k=e.k,
                n=e.n,
                native=e.phases["window"],
                plain=Summary(**stats.summarize(plain)),
                overhead=result,
                ok=targets.overhead_ok(result),
            )
        )
    return out


def flamegraphs(directory: Path, entries: list[Entry]) -> list[Flamegraph]:
    """Each ok case's memray flamegraph, and whether its file is still beside the report."""
    out = []
    for e in sorted(
        entries,
        key=lambda e: (strategy_order(e.strategy), e.k, e.n),
    ):
        for row in e.rows:
            path = row.memory.memray_flamegraph
            if path:
                out.append(
                    Flamegraph(
                        strategy=e.strategy,
                        k=e.k,
                        n=e.n,
                        round=row.round,
                        path=path,
                        present=(directory / path).is_file(),
                        peak_bytes=row.memory.peak_bytes,
                    )
                )
    return out


def _first_process(entry: Entry) -> Row | None:
    """The case's first process that is not one of the control's extra ones (those measure
    noise only: no timeline, no cost model)."""
    return next((r for r in entry.rows if not r.control), None)


def timelines(entries: list[Entry], k: int, n: int) -> list[TimelineLine]:
    """One window's memory timeline per strategy at K, N (its first process), and the plain
    loop's beside them (from the first case that has one)."""
    out, plain = [], None
    for e in sorted(entries, key=lambda e: strategy_order(e.strategy)):
        row = _first_process(e)
        if (e.k, e.n) != (k, n) or row is None:
            continue
        memory = row.memory
        if memory.timeline:
            out.append(TimelineLine(e.strategy, memory.timeline))
        if plain is None and memory.plain_timeline:
            plain = TimelineLine("plain loop", memory.plain_timeline)
    return [*out, plain] if out and plain else out


def cost_table(entries: list[Entry], k: int) -> list[CostLine]:
    """The cost model's prediction against the measured reset and paired cost, per strategy and
    N at K (each case's first process: coefficients are calibrated in each process)."""
    out = []
    for e in sorted(entries, key=lambda e: (strategy_order(e.strategy), e.n)):
        row = _first_process(e)
        if e.k != k or row is None:
            continue
        model = summaries.cost_model(row)
        if not model:
            continue
        predicted = model.predicted
        reset, paired = model.measured.reset, model.measured.paired_cost
        out.append(
            CostLine(
                strategy=e.strategy,
                n=e.n,
                counts=model.counts,
                predicted=predicted,
                reset=reset,
                paired=paired,
                reset_ratio=(
                    reset.median_s / predicted["reset_s"] if predicted["reset_s"] else None
                ),
                explained=model.explained,
                flags=model.flags,
                coefficients=model.coefficients,
            )
        )
    return out


def flavour_table(
    entries: list[Entry], judged: VerdictFile, main: dict[str, Any]
) -> list[FlavourLine]:
    """Under DDP/FSDP2/HSDP, one line per case and flavour (the main value of every other swept
    loop setting: the main precision, ...): overhead, the flavour against ``every`` on one model
    (verdicts.json's ``grad_sync``), collectives, memory per rank."""
    entries = [e for e in entries if at_main(e, main, "grad_sync")]
    if not any(e.phases and e.parallel != "none" for e in entries):
        return []
    against = {
        (v.strategy, v.k, v.n, v.a, v.case.get("precision", "fp32")): v for v in judged.grad_sync
    }
    out = []
    order = {"every": 0, "scatter": 1, "last": 2}
    for e in sorted(
        (e for e in entries if e.phases),
        key=lambda e: (
            e.k,
            e.n,
            strategy_order(e.strategy),
            order.get(e.grad_sync, 3),
        ),
    ):
        out.append(
            FlavourLine(
                strategy=e.strategy,
                k=e.k,
                n=e.n,
                grad_sync=e.grad_sync,
                overhead=e.overhead,
                window=e.phases["window"],
                vs_every=against.get((e.strategy, e.k, e.n, e.grad_sync, e.precision)),
                collectives=e.rows[0].collectives_per_window or Collectives(),
                held_bytes=verdicts.memory_figure(e, "held_bytes"),
                peak_bytes=verdicts.memory_figure(e, "peak_bytes"),
            )
        )
    return out


def machine_name(row: Row) -> str:
    """A machine as a reader knows it: its host, its Ray node's short id, and on CUDA the GPU's
    name and short UUID (``machines.machine_of`` counts the GPU, else the node, else the host)."""
    p = row.placement
    if p is None:
        return "this machine (rows without placement)"
    parts = [p.host or "unknown host"]
    if p.node_id:
        parts.append(f"node {p.node_id[:8]}")
    uuids = p.rank_devices or ([p.device_uuid] if p.device_uuid else [])
    if any(uuids):  # every GPU a process with ranks holds: together they are its machine
        short = "+".join(u.removeprefix("GPU-")[:8] for u in uuids if u)
        parts.append(f"{p.device_name or 'GPU'} {short}")
    return ", ".join(parts)


def where_it_ran(rows: list[Row], judged: VerdictFile) -> Where | None:
    """Per machine its processes and their co-tenancy (other sweep processes on its node during
    their timed pairs: ``machines.co_tenancy``), and per group the spread between machines as
    verdicts.json states it; None for a sweep on one machine, node and host (no section)."""
    found = {machines.machine_of(r) for r in rows}
    nodes = {machines.node_of(r) for r in rows}
    hosts = {machines.host_of(r) for r in rows}
    if len(found) <= 1 and len(nodes) <= 1 and len(hosts) <= 1:
        return None
    sharing = machines.co_tenancy(rows)
    on_host = machines.co_tenancy(rows, machines.host_of)
    processes: dict[str, dict[str, Row]] = {m: {} for m in found}
    finished: set[str] = set()
    for r in rows:
        processes[machines.machine_of(r)].setdefault(process_of(r), r)
        if r.ok:
            finished.add(process_of(r))
    lines = []
    for machine, here in processes.items():
        counts = [c for c in (sharing.get(p) for p in here) if c is not None]
        host = [c for c in (on_host.get(p) for p in here) if c is not None]
        lines.append(
            MachineLine(
                machine=machine,
                name=machine_name(next(iter(here.values()))),
                processes=len(here),
                failed=sum(p not in finished for p in here),
                co_tenancy_median=statistics.median(counts) if counts else None,
                co_tenancy_max=max(counts) if counts else None,
                host_sharing_median=statistics.median(host) if host else None,
                host_sharing_max=max(host) if host else None,
                unstamped=len(here) - len(counts),
            )
        )
    return Where(
        machines=sorted(lines, key=lambda m: m.name),
        nodes=len(nodes),
        hosts=len(hosts),
        groups=[machine_spread(g) for g in judged.noise_floor],
    )


def machine_spread(g: GroupNoise) -> MachineSpreadLine:
    """A group's spread between machines, and in words why it was not measured."""
    need = (
        f"{machines.MIN_MACHINES} machines with {machines.MIN_PER_MACHINE} control processes each, "
        f"{g.control_machines} here"
    )
    if g.machines <= 1:
        note = "one machine: no comparison here crosses machines"
    elif g.machine_measured:
        note = ""
    else:
        note = f"not measured: needs {need}"
    return MachineSpreadLine(
        k=g.k,
        n=g.n,
        case=g.case,
        machines=g.machines,
        control=g.machine_from,
        control_machines=g.control_machines,
        sd=g.machine_sd,
        df=g.machine_df,
        measured=g.machine_measured,
        note=note,
    )
