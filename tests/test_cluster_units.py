"""``--cluster``'s checks and the driver's choice of nodes, without Ray (the default suite):
what is refused before anything is written, how many processes a node takes, and how the
driver spreads processes over nodes. The tests with a real Ray cluster: tests/test_cluster.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import socket
from collections import Counter
from pathlib import Path

import pytest

from benches.engine.spec import CaseSpec
from benches.sweep import arguments, cli
from benches.sweep.cluster import address, place, task
from benches.sweep.cluster.place import Flight, RayPlace
from benches.sweep.cluster.resources import check_pinning, demand, slots
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
        ({"threads": 8}, r"asks 8 CPUs \(8 threads\) and 0 GPUs.*valid: --threads 4 or fewer"),
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
    with pytest.raises(
        UsageError,
        match=r"--pin: 4 processes at once on h x 1 cores each "
        r"\(1 threads\) need 4 cores, its nodes offer 2; valid: --no-pin",
    ):
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
        self.torch = {"driver": "2.13.0+cpu"}
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


def test_the_controls_extra_processes_of_a_shared_process_are_balanced_as_the_controls():
    """Where the control shares a process, its extra processes are that process
    (``plan.extra``): they count, and wait, as the control's, whichever strategy leads them."""
    d = Dispatcher([node("a"), node("b"), node("c")], sweep_of(control="native"))
    for r in range(1, 7):
        shared = dataclasses.replace(
            spec("block", r), rotation=["block", "native", "lazy"], control=True, time_only=True
        )
        assert place.balanced_as(shared, "native") == "native"
        d.submit(shared)
        m = d.sent[-1]
        d.finish(m["key"], {"op": "done", "result": {"rows": []}})
    assert Counter(m["node"] for m in d.sent) == {"a": 2, "b": 2, "c": 2}
    assert {n: d.ran["native", n] for n in "abc"} == {"a": 2, "b": 2, "c": 2}
    checked = dataclasses.replace(spec("block"), rotation=["block", "native", "lazy"])
    assert place.balanced_as(checked, "native") == "block,native,lazy"
    led = dataclasses.replace(spec("native"), rotation=["native", "block", "lazy"])
    assert place.balanced_as(led, "native") == "native,block,lazy"  # checked, led by the control


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
    # the local label is the wheel's build, not the release: the same torch
    for other, worker in (("2.13.0+cpu", "2.13.0"), ("2.13.0+cpu", "2.13.0+cu128")):
        assert task.differs({"torch": other}, {"torch": worker}) is None
    assert task.differs({"torch": "2.13.0+cu128"}, {"torch": "2.12.0+cu128"}).endswith(
        "another torch than the sweep's other workers: 2.12.0+cu128 here, 2.13.0+cu128 there"
    )
    assert task.public("2.13.0+cu128") == "2.13.0"
    # what the sweep sends: the code only (the driver's torch is recorded, never required)
    assert task.differs({"code": mine["code"]}, {**mine, "torch": "9.9.9"}) is None


def test_the_code_hash_is_the_packages_not_a_base_build_in_a_results_folder(tmp_path):
    """CI's ``--base HEAD --out reports/runs/base`` leaves a base build's Python files in the
    checkout, git-ignored and so never shipped to a worker: the driver must not hash them."""
    for top in task.CODE:
        shutil.copytree(task.ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("runs"))
    before = task.code_hash(tmp_path)
    base = tmp_path / "reports" / "runs" / "base" / "abc" / "zerograd_base"
    base.mkdir(parents=True)
    (base / "__init__.py").write_text("x = 1\n")
    assert task.code_hash(tmp_path) == before
    (tmp_path / "strategies" / "__init__.py").write_text("# changed\n", encoding="utf-8")
    assert task.code_hash(tmp_path) != before


def test_torch_is_compared_between_workers_not_against_a_cpu_wheel_on_the_driver():
    d = Dispatcher([node("a"), node("b"), node("c")], sweep_of(per_node=1))
    assert d.torch["driver"] == "2.13.0+cpu"
    for name in ("native", "lazy", "global"):
        d.submit(spec(name))
    ok = {"rows": [{"status": "ok"}]}
    first, second, third = (m["key"] for m in d.sent)
    assert d.finish(first, {"op": "done", "result": {**ok, "torch": "2.13.0+cu128"}}) == ok["rows"]
    assert d.finish(second, {"op": "done", "result": {**ok, "torch": "2.13.0"}}) == ok["rows"]
    (row,) = d.finish(third, {"op": "done", "result": {**ok, "torch": "2.12.1+cu126"}})
    assert row["status"] == "failed"
    assert row["error"] == (
        "worker h runs another torch than the sweep's other workers: 2.12.1+cu126 here, "
        "2.13.0+cu128 there (the driver has 2.13.0+cpu)"
    )
    # a process submitted once a worker has answered checks it where it starts
    assert [m["expected"] for m in d.sent] == [{}, {}, {}]
    d.submit(spec("block"))
    assert d.sent[-1]["expected"] == {"torch": "2.13.0+cu128"}


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


# -- resources from the nodes, not the driver (issue 37, items 1-3 and 5) -------------------------
GPU_NODES = [node("head", 0, host="login"), node("a", 64, 8, "a"), node("b", 64, 8, "b")]


def on_nodes(tmp_path, nodes: list[dict], *argv: str) -> arguments.Sweep:
    """The sweep ``python -m benches run --cluster h:1 ARGV`` resolves once joined to a
    cluster of ``nodes`` (the address is probed before the join; not here)."""
    args = cli.build_parser().parse_args(
        ["run", "--cluster", "h:1", "--strategies", "native", "--out", str(tmp_path / "o"), *argv]
    )
    return arguments.resolve(args, nodes)


@pytest.fixture(params=[64, 128])
def driver(request, monkeypatch):
    """A driver of 64 or 128 cores and no GPU (a login node): none of it may matter."""
    import torch

    from benches.engine import process

    cores = request.param
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(process, "allowed_cores", lambda: list(range(cores)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return cores


@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_nodes_of_64_cpus_and_8_gpus_run_a_process_per_gpu_whatever_the_driver(
    tmp_path, driver, device
):
    one = on_nodes(tmp_path, GPU_NODES, "--device", device)
    assert (one.device, one.preset, one.threads) == ("cuda", "base", 8)  # 64 CPUs over 8 GPUs
    assert demand(one) == {"num_cpus": 8, "num_gpus": 1}
    assert slots(GPU_NODES, one, demand(one)) == {"head": 0, "a": 8, "b": 8}
    four = on_nodes(tmp_path, GPU_NODES, "--device", device, "--world-size", "4")
    assert (four.threads, arguments.case_settings(four)["threads"]) == (32, 8)  # 8 a rank
    assert demand(four) == {"num_cpus": 32, "num_gpus": 4}
    assert slots(GPU_NODES, four, demand(four)) == {"head": 0, "a": 2, "b": 2}
    # the fake cluster of the Ray test: 16 CPUs and 8 GPUs a node
    small = [node("a", 16, 8, "a"), node("b", 16, 8, "b")]
    for ranks, threads, at_once in (("1", 2, 8), ("4", 8, 2)):
        s = on_nodes(tmp_path, small, "--device", device, "--world-size", ranks)
        assert s.threads == threads and set(slots(small, s, demand(s)).values()) == {at_once}
        assert not s.pin  # 2 threads a rank: unpinned, as on one machine


def test_a_cases_identity_is_the_same_from_any_driver(tmp_path, monkeypatch):
    """The same command typed on a 64-core and a 128-core login node: the same cases."""
    import torch

    from benches.engine import process

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    seen = []
    for cores in (64, 128, 2):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        monkeypatch.setattr(process, "allowed_cores", lambda cores=cores: list(range(cores)))
        for argv in ([], ["--device", "cpu"], ["--world-size", "2"]):
            s = on_nodes(tmp_path, GPU_NODES, *argv)
            seen.append((tuple(argv), tuple(sorted(arguments.case_settings(s).items()))))
    assert len(set(seen)) == 3  # one identity per command, whatever the driver


def test_threads_is_a_processs_total_and_a_process_asks_what_it_uses(tmp_path, driver):
    s = on_nodes(tmp_path, GPU_NODES, "--device", "cuda", "--threads", "16", "--world-size", "4")
    assert arguments.case_settings(s)["threads"] == 4  # each of 4 ranks
    assert demand(s) == {"num_cpus": 16, "num_gpus": 4}  # not 16 x 4
    assert slots(GPU_NODES, s, demand(s)) == {"head": 0, "a": 2, "b": 2}  # every GPU busy
    check_pinning(GPU_NODES, {"a": 2, "b": 2}, sweep_of(pin=True, threads=16, world_size=4,
                                                        parallel="ddp"))  # fmt: skip
    # fewer threads than ranks: a thread each, and that is what it asks
    cpu = on_nodes(tmp_path, [node("a", 8)], "--threads", "3", "--world-size", "2")
    assert (arguments.case_settings(cpu)["threads"], demand(cpu)["num_cpus"]) == (1, 2)
    # the default on CPU: a core each rank, pinned where the nodes' hosts hold them
    two = on_nodes(tmp_path, [node("a", 8)], "--world-size", "2")
    assert (two.threads, demand(two)["num_cpus"], two.pin) == (2, 2, True)


def test_a_refusal_names_the_flag_that_fixes_it(tmp_path, driver):
    with pytest.raises(UsageError, match=r"asks 128 CPUs.*valid: --threads 64 or fewer$"):
        on_nodes(tmp_path, GPU_NODES, "--device", "cuda", "--threads", "128")
    with pytest.raises(UsageError, match=r"and 16 GPUs.*valid: --world-size 8 or fewer"):
        on_nodes(tmp_path, GPU_NODES, "--device", "cuda", "--world-size", "16")
    with pytest.raises(UsageError, match=r"valid: --device cpu \(no node has a GPU\)"):
        on_nodes(tmp_path, [node("a", 8)], "--device", "cuda")


def test_auto_and_the_presets_default_are_the_nodes(tmp_path, driver):
    cpu = on_nodes(tmp_path, [node("a", 8), node("b", 8)])
    assert (cpu.device, cpu.preset, cpu.threads, cpu.pin) == ("cpu", "tiny", 1, True)
    gpu = on_nodes(tmp_path, GPU_NODES)
    assert (gpu.device, gpu.preset) == ("cuda", "base")
    one_each = on_nodes(tmp_path, [node("a", 8, 8, "a")])  # a CPU a GPU: a thread, pinned
    assert (one_each.threads, one_each.pin) == (1, True)


def test_a_workload_for_the_nodes_gpus_is_not_built_on_a_driver_without_one(tmp_path, driver):
    convnet = "examples.workloads.convnet:workload"
    s = on_nodes(tmp_path, GPU_NODES, "--device", "cuda", "--workload", convnet)
    assert s.workload == convnet
    with pytest.raises(UsageError, match=r"cannot import 'examples.nowhere'"):
        on_nodes(tmp_path, GPU_NODES, "--device", "cuda", "--workload", "examples.nowhere:w")


def test_a_machine_is_what_a_process_holds_and_the_controls_follow_from_them():
    cpu = Dispatcher([node("a", 4), node("b", 4), node("c", 4)], sweep_of(per_node=2))
    assert cpu.machines() == 3  # a node, however many processes share it
    nodes = [node("a", 64, 8), node("b", 64, 8)]
    for ranks, machines in ((1, 16), (4, 4), (8, 2)):
        s = sweep_of(device="cuda", world_size=ranks, threads=ranks,
                     parallel="ddp" if ranks > 1 else "none")  # fmt: skip
        assert Dispatcher(nodes, s).machines() == machines  # not 16 GPUs at every world size
