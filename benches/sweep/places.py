"""Where a sweep's processes run: one seam, so that where a process runs is one decision in one
place (DESIGN.md, "More than one machine").

A place takes a process's spec (``submit``), says how many it runs at once (``capacity``) and
hands back each finished process with its rows (``as_completed``); the sweep alone appends
the rows. ``Local`` is today's place: one process at a time on this machine, forked from the
fork server (or a fresh interpreter), the right place for timing on one machine. Another place
(a cluster: ``benches.sweep.cluster.place.RayPlace``) is one class beside it with the same
three methods and ``close``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from benches.engine import envinfo
from benches.engine.spec import CaseSpec
from benches.sweep import zygote
from benches.sweep.launch import case_env, run_one

Rows = list[dict[str, Any]]


class ClusterLost(Exception):
    """A cluster's connection ended (``as_completed`` raises it): the processes in flight did
    not run; the sweep keeps its rows, writes its report and exits 1."""

    def __init__(self, in_flight: int, why: str) -> None:
        super().__init__(why)
        self.in_flight = in_flight


class Place(Protocol):
    """Where a sweep's processes run."""

    capacity: int  # processes in flight at most; the sweep submits no more than this

    def submit(self, spec: CaseSpec) -> None:
        """Start (or queue) the process of ``spec``; its rows come from ``as_completed``."""

    def as_completed(self) -> Iterator[tuple[CaseSpec, Rows]]:
        """The processes in flight, each with its rows (a failed row for a crash, an OOM kill
        or a timeout), in the order they finish. A Ctrl-C ends the process in progress and is
        raised here."""

    def close(self) -> None:
        """Stop what the place started (its fork server, its connection)."""

    def drop_waiting(self) -> int:
        """Processes submitted but not started (at the budget's deadline): dropped unrun; how
        many."""

    def record(self) -> dict[str, Any]:
        """What run.json keeps of the place (``RunFile.cluster``): empty on this machine."""


class Local:
    """One process at a time on this machine, forked from the fork server unless
    ``fork_server`` is off (``ZEROGRAD_FRESH_PROCESSES=1``); each killed with its whole tree
    at ``timeout`` seconds. The server starts with the first process (a sweep with nothing to
    run, or refused, never pays its imports)."""

    capacity = 1

    def __init__(self, timeout: float, fork_server: bool = True) -> None:
        self.timeout = timeout
        self.fork_server = fork_server
        self.server: zygote.Zygote | None = None
        self.pending: list[CaseSpec] = []

    def submit(self, spec: CaseSpec) -> None:
        if len(self.pending) >= self.capacity:
            raise RuntimeError(f"Local runs {self.capacity} process at a time; wait for it")
        self.pending.append(spec)

    def as_completed(self) -> Iterator[tuple[CaseSpec, Rows]]:
        while self.pending:
            spec = self.pending[0]
            if self.fork_server and self.server is None:
                self.server = zygote.Zygote(case_env(), envinfo.ROOT)
            try:
                rows = run_one(spec, self.timeout, self.server)
            finally:  # run or abandoned (Ctrl-C killed its tree): no longer in flight
                self.pending.pop(0)
            yield spec, rows

    def record(self) -> dict[str, Any]:
        return {}

    def drop_waiting(self) -> int:
        return 0  # its one process starts when submitted

    def close(self) -> None:
        self.fork_server = False
        if self.server is not None:
            self.server.close()
            self.server = None
