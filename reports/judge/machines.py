"""Where a sweep's processes ran, as the verdicts count it: the machine of a row, the spread of
an identical loop's figure between machines, and how many other sweep processes shared a node.

- ``machine_of``: what the process held: the GPU (its UUID) on CUDA, or the set of its ranks'
  GPUs, else the Ray node, else the host; a row without placement (an older run) ran on the
  sweep's one machine (``LOCAL``);
- ``control_of`` and ``between_machines``: the variance of one machine's mean figure of the
  control strategy (the identical loop that runs at every K and N) between machines, per group,
  measured only with ``MIN_MACHINES`` machines of ``MIN_PER_MACHINE`` control processes each;
- ``co_tenancy``: per process, the other sweep processes that ran on its node while its timed
  pairs ran.

``reports.judge.verdicts`` adds the machine level to a comparison whose sides ran on different
machines (the rule: docs/method.md, "The verdict rule").
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reports.judge.rows import process_of
from reports.schema.records import Entry, Row

LOCAL = "local"  # the machine of a row without placement: an older run's one machine
MIN_MACHINES = 3  # machines with MIN_PER_MACHINE control processes each, or no spread measured
MIN_PER_MACHINE = 2


def machine_of(row: Row) -> str:
    """The machine a verdict counts for the row's process, as the process occupied it: its GPU
    (``device_uuid``) on CUDA, or with ranks the set of its ranks' GPUs (``rank_devices``; the
    node where one of them has no UUID), else its Ray node (``node_id``), else its host;
    ``LOCAL`` for a row without placement."""
    p = row.placement
    if p is None:
        return LOCAL
    ranks = p.rank_devices or []
    if len(ranks) > 1:
        if all(ranks):
            return "+".join(sorted(set(ranks)))
        return p.node_id or p.host or LOCAL
    return p.device_uuid or p.node_id or p.host or LOCAL


def node_of(row: Row) -> str:
    """The node the row's process shared with others: the Ray node, else the host."""
    p = row.placement
    if p is None:
        return LOCAL
    return p.node_id or p.host or LOCAL


def process_machines(entries: Iterable[Entry]) -> dict[str, str]:
    """The machine of every process of the entries' ok rows (keyed as ``rows.process_of``)."""
    return {process_of(r): machine_of(r) for e in entries for r in e.rows}


def shared(row: Row) -> bool:
    """Whether ``row``'s process was shared with other strategies (``rows.process_of``)."""
    return process_of(row) != f"{row.run_id}/{row.case_id}"


def control_of(entries: list[Entry], control: str | None) -> Entry | None:
    """The group's case of the control strategy: the one named ``control`` (the sweep's
    ``--control``, run.json's ``sweep.control``), else the one whose extra processes (rows
    marked ``control``) ran it alone, else one with such rows (where the control shared a
    process, its extra processes are that process: every strategy of it has them, each as
    good a measure of the machines); None without either."""
    named = [e for e in entries if control and e.strategy == control]
    marked = [e for e in entries if any(r.control for r in e.rows)]
    alone = [e for e in marked if any(r.control and not shared(r) for r in e.rows)]
    return next(iter(named or alone or marked), None)


@dataclass(frozen=True, slots=True)
class Spread:
    """The spread of an identical loop's figure between machines (``between_machines``)."""

    machines: int  # machines with MIN_PER_MACHINE or more of the figures
    variance: float | None  # of one machine's mean figure between machines (None: unmeasured)
    df: int  # machines - 1 (0: unmeasured)

    @property
    def measured(self) -> bool:
        return self.variance is not None


def between_machines(figures: Mapping[str, float], where: Mapping[str, str]) -> Spread:
    """The variance between machines of each machine's mean figure (``figures``: per process,
    log; ``where``: each process's machine), over the machines with ``MIN_PER_MACHINE`` or more
    processes, with df = those machines - 1; unmeasured (None, 0) below ``MIN_MACHINES`` such
    machines. Used as it is: it holds the processes' own noise over their count besides the
    machines', and nothing is subtracted, nothing truncated, never zero by assumption."""
    by_machine: dict[str, list[float]] = defaultdict(list)
    for process, figure in figures.items():
        by_machine[where.get(process, LOCAL)].append(figure)
    means = [statistics.fmean(xs) for xs in by_machine.values() if len(xs) >= MIN_PER_MACHINE]
    if len(means) < MIN_MACHINES:
        return Spread(len(means), None, 0)
    return Spread(len(means), statistics.variance(means), len(means) - 1)


def shares(processes: Iterable[str], where: Mapping[str, str]) -> list[float]:
    """Each machine's share of ``processes`` (the weights of the machine level)."""
    counts: dict[str, int] = defaultdict(int)
    for process in processes:
        counts[where.get(process, LOCAL)] += 1
    total = sum(counts.values())
    return [c / total for c in counts.values()] if total else []


def host_of(row: Row) -> str:
    """The host a process ran on (several Ray nodes may share one)."""
    return (row.placement.host if row.placement else None) or LOCAL


def co_tenancy(rows: Iterable[Row], where=None) -> dict[str, int | None]:
    """Per process (``rows.process_of``: the rows of a rotated process are one), how many other
    sweep processes ran on its node (``node_of``; ``where``: another key, e.g. ``host_of``)
    while its timed pairs ran: the distinct other processes whose [started, ended] overlaps its
    [pairs_start, pairs_end]. None for a process without its pairs' stamps; a process without
    its own start and end counts for no other."""
    node_of_row = where or node_of
    spans: dict[str, tuple[str, float, float]] = {}  # process -> node, started, ended
    pairs: dict[str, tuple[str, float, float] | None] = {}
    for r in rows:
        process, p = process_of(r), r.placement
        if p is not None and p.started is not None and p.ended is not None:
            spans[process] = (node_of_row(r), p.started, p.ended)
        if p is not None and p.pairs_start is not None and p.pairs_end is not None:
            pairs[process] = (node_of_row(r), p.pairs_start, p.pairs_end)
        else:
            pairs.setdefault(process, None)
    out: dict[str, int | None] = {}
    for process, mine in pairs.items():
        if mine is None:
            out[process] = None
            continue
        node, start, end = mine
        out[process] = sum(
            1
            for other, (where, started, ended) in spans.items()
            if other != process and where == node and started < end and ended > start
        )
    return out
