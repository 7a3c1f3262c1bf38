"""The profiled pair: one window of the strategy's loop and one of the plain loop beside it,
under ``torch.profiler``, after the timed pairs and off their clock (``--profile``).

Each phase of a profiled window runs inside a named range (``zerograd/reset``,
``zerograd/forward``, ``zerograd/backward``, ``zerograd/update``), and each window inside
``zerograd/window:strategy`` or ``zerograd/window:plain``. The ranges come from the stamps hook
of ``Loop.window`` (``Ranges``), so the timed windows run exactly the code they run without
``--profile``: no range, no profiler, no check.

What the row gets (``profile``): per loop and phase, every operator with its calls and self time
(``EventList.key_averages``, the profiler's own aggregation), the phase's host time that no
operator's self time covers ("Python and dispatch between operators"), and on CUDA the kernel
launches (the runtime's launch calls). The report (``reports/page/profile.py``) draws the difference
against the plain loop from these. The trace, Chrome-trace JSON gzip'd, goes to
``DIR/traces/CASE.json.gz``; one over ``TRACE_LIMIT_BYTES`` keeps the strategy's window only.
A profiler that fails is a warning in the row: the case goes on.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch.autograd.profiler_util import EventList
from torch.profiler import ProfilerActivity, profile, record_function

from reports.schema.row_parts import Profile, made

PREFIX = "zerograd/"
PHASES = ("reset", "forward", "backward", "update")
ROLES = ("strategy", "plain")
PAIRS = 3  # profiled pairs: the first is the trace, the figures are medians over all three
MANY_EVENTS = 50_000  # a first pair with more is the only one profiled (tiny's has ~11,000)
TRACE_LIMIT_BYTES = 20 * 2**20  # uncompressed, per case
# the CUDA runtime and driver calls that launch a kernel (each is one launch)
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
    }
)
HOW_TO_OPEN = (
    "open it in https://ui.perfetto.dev (Open trace file; .gz is read as is) or in "
    "chrome://tracing (gunzip first)"
)


def phase_after(label: str, micro_batches: int) -> str | None:
    """The phase that starts at ``Loop.window``'s mark ``label``: the window's start and its
    last backward open the reset (the strategy's reset and its finish), ``reset`` and an earlier
    backward open a forward, a forward its backward, ``update`` the update; ``end`` nothing."""
    if label == "start":
        return "reset"
    if label == "reset":
        return "forward"
    if label == "update":
        return "update"
    kind, _, index = label.partition(" ")
    if kind == "forward":
        return "backward"
    if kind == "backward":
        return "forward" if int(index) < micro_batches else "reset"
    return None


class Ranges:
    """``Loop.window(stamps=Ranges(K))``: each phase inside a ``zerograd/PHASE`` range."""

    def __init__(self, micro_batches: int) -> None:
        self.micro_batches = micro_batches
        self._open: record_function | None = None

    def mark(self, label: str) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None
        phase = phase_after(label, self.micro_batches)
        if phase is not None:
            self._open = record_function(PREFIX + phase)
            self._open.__enter__()


def activities(device: torch.device) -> list[ProfilerActivity]:
    if device.type == "cuda":
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return [ProfilerActivity.CPU]


def run_pair(runner, batches, tokens: float, order=ROLES, profiler=None) -> None:
    """One window of each loop in ``order``, each in its ``zerograd/window:ROLE`` range, under
    ``profiler`` if given (rank 0). A profiler that fails to start or stop raises only after
    both windows ran: every rank runs the same windows, so their collectives still match."""
    loops = {"strategy": runner.strategy, "plain": runner.plain}
    error: Exception | None = None
    started = False
    if profiler is not None:
        try:
            profiler.__enter__()
            started = True
        except Exception as err:
            error = err
    for role in order:
        with record_function(f"{PREFIX}window:{role}"):
            loops[role].window(batches, tokens, stamps=Ranges(len(batches)))
    if started:
        try:
            profiler.__exit__(None, None, None)
        except Exception as err:
            error = err
    if error is not None:
        raise error


def pair_orders(pairs: int = PAIRS) -> list[tuple[str, ...]]:
    """The strategy's window first, then the plain loop's first, and so on (S P, P S, S P)."""
    return [ROLES if i % 2 == 0 else ROLES[::-1] for i in range(pairs)]


def profiled_pair(
    runner, batches, tokens: float, trace: Path, rank: int, world: int, pairs: int = PAIRS
) -> Profile | None:
    """The profiled pairs, each its own profiler session, and their figures for the row (rank
    0's; the other ranks run the same windows unprofiled and get None). The first pair is the
    trace; the row's figures are medians over every profiled pair (``pairs``: one when the
    first had over ``MANY_EVENTS``). A profiler that fails is the row's ``warning``, and the
    remaining pairs still run (unprofiled)."""
    device = runner.workload.device
    orders = pair_orders(pairs)
    if rank != 0:
        for order in orders:
            run_pair(runner, batches, tokens, order)
        return None
    out = made(
        Profile,
        activities=[a.name.lower() for a in activities(device)],
        pairs=len(orders),
        rank=0,
        ranks_note=f"rank 0 of {world} profiled; the other ranks ran the same windows"
        if world > 1
        else None,
        how_to_open=HOW_TO_OPEN,
        warning=None,
        windows=None,
    )  # the trace's fields only once it is written
    sessions, events = [], []
    for i, order in enumerate(orders):
        # a first pair of many events (global's zero_ over 100,000 ballast tensors) is the only
        # one profiled: parsing is the profiler's cost; the other pairs still run
        more = i == 0 or len(events[0]) <= MANY_EVENTS
        session = profile(activities=activities(device)) if more and not out.warning else None
        try:
            run_pair(runner, batches, tokens, order, session)
            if session is not None:
                events.append(session.events())  # each session's events on its own clock
                sessions.append(session)
        except Exception as err:  # an old torch, no CUPTI: the case still runs
            out.warning = _failure(err)
    if out.warning:
        return out
    out.pairs = len(sessions)
    try:
        out.windows = {role: median_window(events, role, device) for role in ROLES}
        traced = write_trace(sessions[0], trace)
    except Exception as err:
        out.warning = _failure(err)
        return out
    for field, value in traced.items():
        setattr(out, field, value)  # a field Profile does not have: AttributeError here
    return out


def _failure(err: Exception) -> str:
    return f"profiler failed: {type(err).__name__}: {err}".replace("\n", " ")


def _inside(event, span) -> bool:
    start = event.time_range.start
    return span.time_range.start <= start < span.time_range.end


def median_window(sessions: list, role: str, device: torch.device) -> dict[str, Any]:
    """The ``role`` loop's windows of every profiler session (each session's events on its
    own clock), each summarised (``window_summary``), as one: per phase the median of each
    figure, and per operator the median of its calls and self times (an operator missing from
    a window counts 0 there)."""
    summaries = [s for events in sessions for s in session_windows(events, role, device)]
    out: dict[str, Any] = {
        "seconds": statistics.median(s["seconds"] for s in summaries),
        "windows": len(summaries),
    }
    for phase in PHASES:
        out[phase] = median_phase([s[phase] for s in summaries])
    return out


def session_windows(events, role: str, device: torch.device) -> list[dict[str, Any]]:
    """The summaries of the ``role`` loop's windows in one profiler session."""
    name = f"{PREFIX}window:{role}"
    windows = [e for e in events if e.is_user_annotation and e.name == name]
    ranges = [e for e in events if e.is_user_annotation and e.name.startswith(PREFIX)]
    # host operators (CUDA runtime calls included); kernels are counted in their op's device time
    host = [
        e
        for e in events
        if not e.is_user_annotation and e.device_type == torch.autograd.DeviceType.CPU
    ]
    return [window_summary(w, ranges, host, device) for w in windows]


def median_phase(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase over several windows: the median of each figure, and the least too for the
    times (a stall of the machine only ever adds time: the report's difference rule reads
    the least, and the most: a difference is named only where the two loops' windows do not
    overlap); operators as [name, calls, self s, device s, least self s, most self s]."""
    out: dict[str, Any] = {
        key: statistics.median(p[key] for p in phases)
        for key in ("seconds", "ranges", "operator_s", "outside_s")
    }
    out["least_outside_s"] = min(p["outside_s"] for p in phases)
    out["most_outside_s"] = max(p["outside_s"] for p in phases)
    launches = [p["launches"] for p in phases]
    out["launches"] = None if None in launches else statistics.median(launches)
    table: dict[str, list] = {}
    for i, p in enumerate(phases):
        for name, calls, self_s, device_s in p["operators"]:
            table.setdefault(name, [[0, 0.0, 0.0] for _ in phases])[i] = [calls, self_s, device_s]
    cuda = launches[0] is not None
    rows = [
        [
            name,
            statistics.median(v[0] for v in values),
            round(statistics.median(v[1] for v in values), 9),
            round(statistics.median(v[2] or 0.0 for v in values), 9) if cuda else None,
            round(min(v[1] for v in values), 9),
            round(max(v[1] for v in values), 9),
        ]
        for name, values in table.items()
    ]
    out["operators"] = sorted(rows, key=lambda r: -r[2])
    return out


def window_summary(window, ranges: list, host: list, device: torch.device) -> dict[str, Any]:
    """Per phase of one window: its host seconds, the seconds no operator's self time covers,
    its kernel launches (CUDA) and every operator's calls and self times."""
    out: dict[str, Any] = {"seconds": window.time_range.elapsed_us() / 1e6}
    mine = [e for e in host if _inside(e, window)]
    for phase in PHASES:
        spans = [r for r in ranges if r.name == PREFIX + phase and _inside(r, window)]
        ops = subset([e for e in mine if any(_inside(e, s) for s in spans)])
        out[phase] = phase_summary(spans, ops, device)
    return out


def subset(events: list) -> EventList:
    """An ``EventList`` of events from the profiler's own list, for ``key_averages``: their
    tree (parents, children, self times) was built there, and building it again would append
    every child twice, so the list says it is built (its documented ``_tree_built``)."""
    out = EventList(events)
    out._tree_built = True
    return out


def phase_summary(spans: list, ops: EventList, device: torch.device) -> dict[str, Any]:
    """One phase: its ranges' seconds, the operators (``key_averages``: name, calls, self CPU
    seconds, self device seconds), largest self time first, and what no operator covers."""
    averages = sorted(ops.key_averages(), key=lambda a: -a.self_cpu_time_total)
    seconds = sum(s.time_range.elapsed_us() for s in spans) / 1e6
    in_ops = sum(a.self_cpu_time_total for a in averages) / 1e6
    cuda = device.type == "cuda"
    return {
        "seconds": seconds,
        "ranges": len(spans),
        "operator_s": in_ops,
        "outside_s": max(0.0, seconds - in_ops),
        "launches": sum(a.count for a in averages if a.key in LAUNCH_CALLS) if cuda else None,
        "operators": [
            [
                a.key,
                a.count,
                round(a.self_cpu_time_total / 1e6, 9),
                round(getattr(a, "self_device_time_total", 0.0) / 1e6, 9) if cuda else None,
            ]
            for a in averages
        ],
    }


def write_trace(prof, path: Path, limit: int = TRACE_LIMIT_BYTES) -> dict[str, Any]:
    """The Chrome trace, gzip'd, at ``path``; over ``limit`` bytes (uncompressed) only the
    strategy's window's events are kept, and the row says so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        raw = Path(scratch) / "trace.json"
        prof.export_chrome_trace(str(raw))
        return bounded_trace(raw, path, limit)


def bounded_trace(raw: Path, path: Path, limit: int) -> dict[str, Any]:
    """Gzip ``raw`` to ``path``; when it is over ``limit`` bytes, without the plain window."""
    size = raw.stat().st_size
    out = {"trace": path.name, "trace_bytes": size, "trace_trimmed": False, "trace_note": None}
    if size > limit:
        trace = json.loads(raw.read_text())
        trace["traceEvents"] = without_window(trace.get("traceEvents", []), "plain")
        raw.write_text(json.dumps(trace))
        out.update(trace_bytes=raw.stat().st_size, trace_trimmed=True)
        out["trace_note"] = (
            f"the trace was {size / 2**20:.1f} MB, over the {limit / 2**20:.0f} MB limit: "
            "it keeps the strategy's window only (the tables have both)"
        )
    tmp = path.with_suffix(".tmp")
    with raw.open("rb") as fin, gzip.open(tmp, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout, 2**20)
    os.replace(tmp, path)
    return out


def without_window(events: list[dict], role: str) -> list[dict]:
    """The trace's events less those that start inside the ``role`` window (any thread, any
    device: a kernel launched from it starts after it began); metadata events stay."""
    name = f"{PREFIX}window:{role}"
    spans = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("name") == name]
    if not spans:
        return events
    start, end = spans[0]
    return [e for e in events if "ts" not in e or e.get("ph") == "M" or not start <= e["ts"] < end]
