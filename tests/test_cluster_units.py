"""``--cluster``'s checks and the driver's choice of nodes, without Ray (the default suite):
what is refused before anything is written, how many processes a node takes, and how the
driver spreads processes over nodes. The tests with a real Ray cluster: tests/test_cluster.py.
"""

from __future__ import annotations

import importlib.util
import socket
from collections import Counter
from pathlib import Path

import pytest

from benches.engine.spec import CaseSpec
from benches.sweep import arguments, cli
from benches.sweep.cluster import address, task
from benches.sweep.cluster.place import Flight, RayPlace, check_pinning, demand, slots
from benches.sweep.outdir import UsageError

ROOT = Path(__file__).resolve().parent.parent


def sweep_of(**given) -> arguments.Sweep:
    base = dict(
        strategies=["native"], accumulate=[1], live_tensors=[0], rounds=1, timeout=60.0,
        resume=False, out=Path("/nonexistent"), cluster="h:1", threads=1, device="cpu",
        preset="tiny",
    )  # fmt: skip
    return arguments.Sweep(**{**base, **given})


def node(name: str, cpus: float = 1, gpus: float = 0, host: str = "h") -> dict:
    return {"node_id": name, "host": host, "resources": {"CPU": cpus, "GPU": gpus}}


def run(capsys, *args: str) -> tuple[int, str]:
    """``python -m benches run ARGS`` in this process (its refusals come before any case):
    the exit code and stderr."""
    code = cli.main(["run", *args])
    return code, capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed")
def test_cluster_without_ray_is_one_line_naming_the_extra(tmp_path, capsys):
    code, err = run(capsys, "--cluster", "local", "--out", str(tmp_path / "out"))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "--cluster local: Ray is not installed" in line and "[cluster]" in line
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("flag", [["--per-node", "2"], ["--exclusive"]])
def test_per_node_and_exclusive_need_a_cluster(flag, capsys):
    code, err = run(capsys, *flag)
    assert code == 2
    assert f"{flag[0]} needs --cluster ADDRESS" in err


@pytest.mark.parametrize("bad", ["nonsense", "host:", ":80", "h:0", "h:70000", "h:port"])
def test_an_address_that_is_none_is_refused_naming_it(bad):
    with pytest.raises(UsageError, match=rf"--cluster '{bad}' is not an address; valid: local"):
        address.host_port(bad, bad)


def test_nothing_listening_is_refused_at_once():
    with socket.socket() as s:  # a port nothing listens on: bound, then closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UsageError, match=r"nothing answers there \(Connection refused\)"):
        address.probe("127.0.0.1", port, f"127.0.0.1:{port}")


def test_auto_without_a_cluster_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(address, "CURRENT_CLUSTER", tmp_path / "none")
    with pytest.raises(UsageError, match=r"no Ray cluster found.*ray start --head"):
        address.found_head()


def test_slots_default_to_one_per_node_on_cpu_and_one_per_gpu_on_cuda():
    cpu = sweep_of()
    assert slots([node("a", 4), node("b", 2)], cpu, demand(cpu)) == {"a": 1, "b": 1}
    more = sweep_of(per_node=3)
    assert slots([node("a", 4), node("b", 2)], more, demand(more)) == {"a": 3, "b": 2}
    cuda = sweep_of(device="cuda")
    assert slots([node("a", 16, 8), node("b", 16, 2)], cuda, demand(cuda)) == {"a": 8, "b": 2}
    ranks = sweep_of(device="cuda", world_size=2, parallel="ddp")
    assert demand(ranks) == {"num_cpus": 2, "num_gpus": 2}
    assert slots([node("a", 16, 8)], ranks, demand(ranks)) == {"a": 4}


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"device": "cuda"}, r"asks 1 CPUs \(1 threads\) and 1 GPUs; the nodes offer: h: 4 "
         r"CPUs, 0 GPUs.*--device cpu"),
        ({"threads": 8}, r"asks 8 CPUs \(8 threads\) and 0 GPUs.*lower --threads"),
    ],
)  # fmt: skip
def test_a_request_no_node_can_satisfy_is_refused(given, says):
    s = sweep_of(**given)
    with pytest.raises(UsageError, match=says):
        slots([node("a", 4), node("b", 4)], s, demand(s))


def test_pinning_more_processes_than_a_hosts_cores_is_refused():
    s = sweep_of(pin=True, per_node=2)
    nodes = [node("a", 1), node("b", 1)]  # two nodes of one CPU on one host: 2 cores
    check_pinning(nodes, {"a": 1, "b": 1}, s)
    with pytest.raises(UsageError, match=r"--pin: 4 processes at once on h .* valid: --no-pin"):
        check_pinning(nodes, {"a": 2, "b": 2}, s)


class Dispatcher(RayPlace):
    """The driver's choice of nodes alone: what it would send, kept instead of sent."""

    def __init__(self, nodes: list[dict], sweep: arguments.Sweep) -> None:
        import random

        self.sweep, self.timeout, self.say = sweep, 60.0, print
        self.flights, self.waiting, self.keys = {}, [], 0
        self.nodes = {n["node_id"]: n for n in nodes}
        self.ask = demand(sweep)
        self.slots = slots(nodes, sweep, self.ask)
        self.expected = {}
        self.rng = random.Random(sweep.seed)
        self.ran = Counter()
        self.sent: list[dict] = []

    def _send(self, message: dict) -> None:
        self.sent.append(message)

    def finish(self, key: str, reply: dict) -> list | None:
        return self._finished(self.flights.pop(key), {"key": key, **reply})


def spec(name: str, r: int = 0) -> CaseSpec:
    return CaseSpec(
        strategy=name, round=r, accumulate=1, live_tensors=0, preset="tiny", device="cpu"
    )


def test_processes_spread_evenly_over_nodes_by_a_seeded_choice():
    nodes = [node(n, 2) for n in "abc"]

    def placements(seed: int) -> list[tuple[str, str]]:
        d = Dispatcher(nodes, sweep_of(per_node=1, seed=seed))
        out = []
        for r in range(6):
            for name in ("native", "lazy", "global"):
                d.submit(spec(name, r))
                (m,) = d.sent[-1:]
                out.append((name, m["node"]))
                d.finish(m["key"], {"op": "done", "result": {"rows": []}})
        return out

    first = placements(0)
    assert first == placements(0)  # seeded
    assert first != placements(1)
    per = Counter(first)
    for name in ("native", "lazy", "global"):  # 6 processes of each over 3 nodes: 2 each
        assert [per[name, n] for n in "abc"] == [2, 2, 2]


def test_a_lost_process_is_retried_once_on_another_node_then_fails_naming_both_causes():
    d = Dispatcher([node("a"), node("b")], sweep_of())
    d.submit(spec("native"))
    first = d.sent[-1]
    assert d.finish(first["key"], {"op": "lost", "cause": "WorkerCrashedError: x",
                                   "nodes": [node("a"), node("b")]}) is None  # fmt: skip
    d._dispatch()
    second = d.sent[-1]
    assert (second["attempt"], second["node"] != first["node"]) == (2, True)
    (row,) = d.finish(second["key"], {"op": "lost", "cause": "NodeDiedError: y", "nodes": []})
    assert row["status"] == "failed"
    assert row["error"] == "lost to the cluster: WorkerCrashedError: x; then NodeDiedError: y"
    assert row["placement"]["attempt"] == 2 and row["placement"]["node_id"] == second["node"]
    assert d.slots == {}  # the dead nodes offer no slot


def test_a_cases_own_failure_is_never_retried():
    d = Dispatcher([node("a"), node("b")], sweep_of())
    d.submit(spec("native"))
    key = d.sent[-1]["key"]
    (row,) = d.finish(key, {"op": "failed", "cause": "OutOfMemoryError: the node ran low"})
    assert row["error"] == "Ray ended the task: OutOfMemoryError: the node ran low"
    assert len(d.sent) == 1


def test_concurrent_pinned_processes_on_one_host_take_distinct_core_slots():
    d = Dispatcher([node("a", 2), node("b", 2)], sweep_of(pin=True, per_node=2))
    for name in ("native", "lazy", "global", "block"):
        d.submit(spec(name))
    assert sorted(m["slot"] for m in d.sent) == [0, 1, 2, 3]


def test_a_worker_running_other_code_or_torch_is_named():
    mine = task.versions()
    assert task.differs(mine, mine) is None
    assert "another code" in task.differs({**mine, "code": "0" * 16}, mine)
    assert "another torch" in task.differs({**mine, "torch": "0.0"}, mine)


def test_the_controls_wait_for_the_machine_where_they_ran_least():
    d = Dispatcher([node("a"), node("b"), node("c")], sweep_of(control="native"))
    for r in range(6):
        d.submit(spec("native", r))
        m = d.sent[-1]
        d.finish(m["key"], {"op": "done", "result": {"rows": []}})
    assert Counter(m["node"] for m in d.sent) == {"a": 2, "b": 2, "c": 2}
    d.ran["native", "a"] += 1
    d.ran["native", "b"] += 1
    d.flights["busy"] = Flight(spec("lazy"), node="c", slot=0)  # c: where it ran least
    d.submit(spec("native", 6))
    assert len(d.sent) == 6  # a and b are free, yet the control waits for c
    d.finish("busy", {"op": "done", "result": {"rows": []}})
    d._dispatch()
    assert d.sent[-1]["node"] == "c"
