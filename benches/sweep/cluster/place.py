"""``RayPlace``: the sweep's processes on a Ray cluster, several at once (``places.Place``).

What depends on the machine (the device for ``auto``, the threads, the pinning) is decided from
the nodes that run the processes, never the driver (``device_of``, ``threads_of``,
``pinning_of``; ``arguments.resolve`` calls them once the sweep has joined). The driver chooses
each process's node (a hard ``NodeAffinitySchedulingStrategy``): at most ``--per-node``
processes at once on a node (default one on CPU, its GPUs over the ranks on CUDA;
``--exclusive``: one), each asking Ray for exactly what it uses (``num_cpus`` = its threads,
``--threads`` being the process's total; ``num_gpus`` = ranks on CUDA), so that a process is
submitted only into a free slot and never waits in Ray's queue. Among the nodes with a free
slot it takes the one where the process's strategy ran least, ties broken by a generator
seeded with ``--seed``: a balanced, seeded shuffle, so that no strategy sits on one machine.
A process the cluster lost (its worker crashed, its node died, its result was lost) is retried
once on another live node, then is a failed row naming both causes; a case's own failure is
never retried.
"""

from __future__ import annotations

import base64
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from benches.engine import envinfo
from benches.engine.spec import CaseSpec
from benches.sweep import launch
from benches.sweep.cluster import task
from benches.sweep.cluster.resources import check_pinning, demand, slots
from benches.sweep.outdir import UsageError
from benches.sweep.places import ClusterLost
from benches.sweep.record import Sweep
from reports.schema.row_parts import Placement

Rows = list[dict[str, Any]]
READY_S = 300.0  # Ray started (--cluster local) or joined, at most
# a connection that lost the head ends itself after this many seconds (Ray's default: 60)
RECONNECT_S = "20"


@dataclass
class Flight:
    """A process submitted to the cluster: its spec, attempt, node and cores' slot on its host."""

    spec: CaseSpec
    attempt: int = 1
    node: str | None = None
    slot: int | None = None
    causes: list[str] = field(default_factory=list)  # what lost its earlier attempt
    avoid: set[str] = field(default_factory=set)  # the nodes that lost it


class RayPlace:
    """The sweep's processes on a Ray cluster: the connection lives in a child process
    (``benches.sweep.cluster.client``); this side chooses nodes, retries lost processes and
    writes back the files of processes that ran without a shared filesystem."""

    def __init__(self, sweep: Sweep, timeout: float, say=print, settle=None) -> None:
        """Join the cluster; ``settle(nodes)``: the sweep decided from the nodes that will run
        its processes (``arguments.resolve`` with them), which this place then runs."""
        self.sweep, self.timeout, self.say = sweep, timeout, say
        self.flights: dict[str, Flight] = {}  # key -> a process on the cluster
        self.waiting: list[Flight] = []  # submitted, or lost once, and not yet placed
        self.keys = 0
        # the client's own output, copied into --out/logs/ when the sweep closes the place
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (open for the place's life)
            prefix="zerograd-ray-", suffix=".log", delete=False
        )
        env = {**launch.case_env(), "RAY_gcs_rpc_server_reconnect_timeout_s": RECONNECT_S}
        env.update({k: v for k, v in os.environ.items() if k.startswith("RAY_")})
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benches.sweep.cluster.client",
                sweep.cluster,
                str(envinfo.ROOT),
            ],
            cwd=envinfo.ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the sweep, which closes the connection
        )
        try:
            try:
                ready = self._read(time.monotonic() + READY_S)
            except ClusterLost:
                ready = {"error": f"its connection ended: {self._log_tail()}"}
            if ready is None or ready.get("op") != "ready":
                why = (ready or {}).get("error") or f"no answer in {READY_S:g} s"
                raise UsageError(f"--cluster {sweep.cluster}: Ray could not start or join: {why}")
            self.ray = ready["ray"]
            self.nodes = {n["node_id"]: n for n in ready["nodes"]}
            if settle is not None:
                self.sweep = sweep = settle(ready["nodes"])
                self.timeout = sweep.timeout
            self.ask = demand(sweep)
            self.slots = slots(ready["nodes"], sweep, self.ask)
            check_pinning(ready["nodes"], self.slots, sweep)
        except BaseException:
            self.close()
            raise
        # the code the workers must run; torch's version is compared between the workers
        # (the first that answers sets it), the driver's only recorded: it runs no case
        self.expected = {"code": task.code_hash(envinfo.ROOT)}
        self.torch: dict[str, str] = {"driver": task.torch_version()}
        self.rng = random.Random(sweep.seed)
        self.ran: Counter = Counter()  # (strategy, node) -> processes placed there

    # -- the cluster's shape ------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Processes in flight at most: the slots of the live nodes."""
        return sum(self.slots.values())

    def machines(self) -> int:
        """The machines a verdict counts that this cluster offers, as a process occupies them
        (``reports.judge.machines.machine_of``): on CUDA each process at once holds GPUs of
        its own (one, or a rank's each: the set is its machine), so a node offers its slots;
        on CPU a node is one machine however many processes share it."""
        live = [n for n, s in self.slots.items() if s]
        if self.sweep.device == "cuda":
            return sum(self.slots[n] for n in live)
        return len(live)

    def record(self) -> dict[str, Any]:
        """What run.json keeps of the cluster as the sweep joined it."""
        return {
            "address": self.sweep.cluster,
            "ray": self.ray,
            "driver_torch": self.torch["driver"],
            "capacity": self.capacity,
            "nodes": [
                {
                    "node_id": n,
                    "host": self.nodes[n]["host"],
                    "cpus": self.nodes[n]["resources"].get("CPU", 0),
                    "gpus": self.nodes[n]["resources"].get("GPU", 0),
                    "slots": slots,
                }
                for n, slots in self.slots.items()
            ],
        }

    def describe(self) -> str:
        hosts = len({self.nodes[n]["host"] for n in self.slots})
        return (
            f"Ray {self.ray}: {len(self.slots)} nodes on {hosts} hosts, {self.capacity} processes "
            f"at once ({self.ask['num_cpus']:g} CPUs, {self.ask['num_gpus']:g} GPUs each)"
        )

    # -- Place -------------------------------------------------------------------------------
    def submit(self, spec: CaseSpec) -> None:
        self.waiting.append(Flight(spec))
        self._dispatch()

    def as_completed(self) -> Iterator[tuple[CaseSpec, Rows]]:
        while self.flights or self.waiting:
            self._dispatch()
            reply = self._read(None)
            flight = self.flights.pop(reply["key"])
            rows = self._finished(flight, reply)
            if rows is not None:
                yield flight.spec, rows

    def drop_waiting(self) -> int:
        """Processes not yet placed (a retry waiting for a slot): dropped unrun; how many."""
        dropped, self.waiting = len(self.waiting), []
        return dropped

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the client cancels every task and leaves
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        out = self.sweep.out / "logs"
        if out.is_dir():
            shutil.copyfile(self.log.name, out / "ray-client.log")
        Path(self.log.name).unlink(missing_ok=True)

    def _log_tail(self) -> str:
        self.log.flush()
        lines = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else "(no output)"

    # -- inside -------------------------------------------------------------------------------
    def _free(self, node: str) -> int:
        return self.slots.get(node, 0) - sum(f.node == node for f in self.flights.values())

    def _choose(self, flight: Flight) -> str | None:
        """The node of a process: a free slot, where its strategy ran least (seeded ties); a
        retry avoids the nodes that lost it while another has a slot. The control strategy's
        processes (the spread between machines is estimated from them) wait for the node
        where it ran least, so that every machine gets its share."""
        free = [n for n in self.slots if self._free(n) > 0]
        mine = balanced_as(flight.spec, self.sweep.control)
        if mine == self.sweep.control and not flight.avoid:
            fewest = min(self.ran[mine, n] for n in self.slots if self.slots[n])
            free = [n for n in free if self.ran[mine, n] == fewest]
        others = [n for n in free if n not in flight.avoid]
        if flight.avoid and not others and any(n not in flight.avoid for n in self.slots):
            return None  # wait for a slot on another node
        candidates = others or free
        if not candidates:
            return None
        return min(candidates, key=lambda n: (self.ran[mine, n], -self._free(n), self.rng.random()))

    def _slot(self, node: str) -> int:
        """The lowest cores' slot free on the node's host (``task.PIN_SLOT``)."""
        host = self.nodes[node]["host"]
        taken = {f.slot for f in self.flights.values() if self.nodes[f.node]["host"] == host}
        return next(i for i in range(len(taken) + 1) if i not in taken)

    def _dispatch(self) -> None:
        for flight in list(self.waiting):
            node = self._choose(flight)
            if node is None:
                continue
            self.waiting.remove(flight)
            flight.node, flight.slot = node, self._slot(node)
            self.keys += 1
            key = f"{self.keys}"
            self.flights[key] = flight
            self.ran[balanced_as(flight.spec, self.sweep.control), node] += 1
            self._send(
                {
                    "op": "submit",
                    "key": key,
                    "spec": asdict(flight.spec),
                    "attempt": flight.attempt,
                    "node": node,
                    "slot": flight.slot if self.sweep.pin else None,
                    "timeout": self.timeout,
                    # the code, and torch's release once a worker has answered
                    "expected": {**self.expected, **self._torch()},
                    "submitted": time.time(),
                    **self.ask,
                }
            )

    def _finished(self, flight: Flight, reply: dict[str, Any]) -> Rows | None:
        """A finished task's rows (its files written under --out); None where a lost process
        is retried."""
        if reply["op"] == "done":
            result = reply["result"]
            for name, data in result.get("files", {}).items():
                path = self.sweep.out / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(base64.b64decode(data))
            wrong = self._other_torch(flight, result.get("torch"))
            if wrong:
                return self._failed_rows(flight, wrong)
            return result["rows"]
        if reply["op"] == "lost":
            live = {n["node_id"] for n in reply.get("nodes", [])}
            for node in [n for n in self.slots if n not in live]:
                del self.slots[node]  # a dead node offers no slot
            flight.causes.append(reply["cause"])
            if flight.attempt == 1 and self.slots:
                where = self.nodes.get(flight.node or "", {}).get("host")
                self.say(
                    f"lost {flight.spec.case_id} on {where} (node {(flight.node or '')[:8]}): "
                    f"{reply['cause']}; running it again on another node"
                )
                self.waiting.append(
                    Flight(flight.spec, 2, causes=flight.causes, avoid={flight.node})
                )
                return None
            error = f"lost to the cluster: {'; then '.join(flight.causes)}"
        else:
            error = f"Ray ended the task: {reply['cause']}"
        return self._failed_rows(flight, error)

    def _torch(self) -> dict[str, str]:
        """The workers' torch, once the first has answered (a worker checks it at its start)."""
        return {"torch": self.torch["workers"]} if "workers" in self.torch else {}

    def _other_torch(self, flight: Flight, version: str | None) -> str | None:
        """The workers must run one torch (its version without the local label: ``2.13.0+cpu``
        and ``2.13.0+cu128`` are one release): the first worker that answers sets it, a
        later one with another fails its process, with a line naming both (one submitted
        before the first answered: here; later ones check at their start, ``task.differs``)."""
        if not version:
            return None
        first = self.torch.setdefault("workers", version)
        if task.public(first) == task.public(version):
            return None
        host = self.nodes.get(flight.node or "", {}).get("host")
        return (
            f"worker {host} runs another torch than the sweep's other workers: {version} "
            f"here, {first} there (the driver has {self.torch['driver']})"
        )

    def _failed_rows(self, flight: Flight, error: str) -> list[dict[str, Any]]:
        """The rows of a process the cluster took (one per case it measures): its node and
        attempt, nothing of this machine's (the driver's own host, CPU and cores are not where
        it ran)."""
        node = self.nodes.get(flight.node or "", {})
        where = Placement(host=node.get("host"), node_id=flight.node, attempt=flight.attempt)
        rows = launch._failed(flight.spec, error, time.monotonic(), time.time())
        for row in rows:
            row["placement"] = msgspec.to_builtins(where)
            row["wall_s"] = {"total": 0.0}
        return rows

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError:  # the client is gone: as_completed says so
            pass

    def _read(self, deadline: float | None) -> dict[str, Any] | None:
        """The client's next line (None at the deadline); ClusterLost when it ended."""
        while True:
            wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], wait)
            if not ready:
                if deadline is not None:
                    return None
                continue
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise ClusterLost(
                    len(self.flights) + len(self.waiting),
                    f"the connection to the cluster ended (exit {self.proc.returncode}; "
                    f"log: {self.sweep.out / 'logs' / 'ray-client.log'})",
                )
            try:
                message = json.loads(line)
            except ValueError:  # not the protocol's: kept in the client's log
                self.log.write(line.encode(errors="replace"))
                continue
            if message.get("op") == "fatal" and deadline is None:
                raise ClusterLost(len(self.flights) + len(self.waiting), message["error"])
            return message


def strategy_of(spec: CaseSpec) -> str:
    """What the balance counts: a process's strategies (a rotated process: all of them)."""
    return ",".join(spec.rotation) if spec.rotation else spec.label


def balanced_as(spec: CaseSpec, control: str | None) -> str:
    """What the balance counts ``spec`` as: the control's extra process as the control,
    whether it runs the control alone or the process the control shares (``plan.extra``);
    another process as its strategies (``strategy_of``)."""
    if control and (spec.control or (not spec.rotation and spec.label == control)):
        return control
    return strategy_of(spec)
