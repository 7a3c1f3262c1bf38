"""Sweeps on a real Ray cluster (``nox -s cluster``): two nodes of one CPU each on this machine,
each test's cluster inside a network namespace of its own (tests/ray_cluster.py), stopped by
its handles. What a cluster must not do to a sweep: lose a row, write one twice, leave a
process behind, retry a case's own failure, or let a verdict lean on one machine.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest
from ray_cluster import in_namespace, namespace_error

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the [cluster] extra"),
    pytest.mark.skipif(namespace_error() is not None, reason=str(namespace_error())),
]


def ok_rows(result: dict) -> list[dict]:
    return [r for r in result["rows"] if r["status"] == "ok"]


def overlapped(a: dict, b: dict) -> bool:
    """Two rows' placements whose processes ran at the same time."""
    return a["started"] < b["ended"] and b["started"] < a["ended"]


def no_duplicates(rows: list[dict]) -> None:
    counts = Counter((r["case_id"], r["round"]) for r in rows if r["status"] == "ok")
    assert [k for k, n in counts.items() if n > 1] == []


def test_a_dead_address_is_one_line_and_exit_2_at_once(tmp_path):
    seen = in_namespace("dead_address", tmp_path)
    for how in ("given", "auto"):
        done = seen[how]
        assert done["exit"] == 2, done
        (line,) = done["stderr"].strip().splitlines()
        assert "nothing answers there (Connection refused)" in line
        assert "ray start --head" in line
        assert done["seconds"] < 30 and not done["written"]


def test_a_sweep_on_two_nodes_names_both_and_its_twins_are_never_lower_or_higher(tmp_path):
    seen = in_namespace("two_nodes", tmp_path)
    assert seen["exit"] == 0, seen["output"][-3000:]
    rows = seen["rows"]
    assert rows and all(r["status"] == "ok" for r in rows)
    assert {r["placement"]["node_id"] for r in rows} == set(seen["nodes"])
    for r in rows:
        p = r["placement"]
        assert p["host"] and p["attempt"] == 1 and p["queued_s"] >= 0
        assert p["started"] <= p["pairs_start"] < p["pairs_end"] <= p["ended"]
        assert r["env"]["process_start"] == "spawned on a Ray worker"
    # the control runs at least twice on every machine
    controls = Counter(r["placement"]["node_id"] for r in rows if r["strategy"] == "block")
    assert min(controls.values()) >= 2
    twins = [
        c for c in seen["verdicts"]["comparisons"]
        if {c["a"], c["b"]} == {"block", "block_twin"} and c["metric"] == "window"
    ]  # fmt: skip
    assert twins and all(c["verdict"] in ("same", "unclear") for c in twins)
    assert seen["report"]
    # requests no node can satisfy: one line each, exit 2, nothing written
    for what, says in (("threads", "asks 2 CPUs"), ("cuda", "and 1 GPUs")):
        done = seen[what]
        assert done["exit"] == 2 and not done["written"], done
        (line,) = done["stderr"].strip().splitlines()
        assert says in line and "the nodes offer" in line


@pytest.mark.parametrize("fault", ["worker_killed", "node_removed"])
def test_a_process_the_cluster_loses_runs_again_on_the_other_node(tmp_path, fault):
    seen = in_namespace(fault, tmp_path)
    assert seen["exit"] == 0, seen["output"][-3000:]
    assert seen["case_gone"]  # the killed process's case died with it
    rows = seen["rows"]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    # the lost process's rows (its strategies share it) ran again, elsewhere
    again = [r for r in rows if r["placement"]["attempt"] == 2]
    assert again and seen["killed_node"] not in {r["placement"]["node_id"] for r in again}
    assert "running it again on another node" in " ".join(seen["output"].split())
    no_duplicates(rows)


def test_a_hung_case_is_killed_with_its_tree_and_never_retried(tmp_path):
    seen = in_namespace("hung_case", tmp_path)
    timed = seen["timed_out"]
    (hung,) = [r for r in timed["rows"] if r["strategy"] == "faulty"]
    assert hung["status"] == "failed" and hung["error"] == "timed out after 15 s"
    assert hung["placement"]["attempt"] == 1
    assert timed["left"] == [] and timed["exit"] == 1 and timed["report"]
    stopped = seen["interrupted"]
    assert stopped["exit"] == 130 and stopped["case_gone"] and stopped["left"] == []
    assert stopped["seconds"] < 60


def test_a_killed_driver_resumes_with_no_row_written_twice(tmp_path):
    seen = in_namespace("driver_killed", tmp_path)
    assert seen["case_gone"]
    assert seen["exit"] == 0, seen["output"][-3000:]
    assert 1 <= seen["before"] < 6
    rows = seen["rows"]
    no_duplicates(rows)
    assert len(ok_rows(seen)) == 6  # 3 strategies x 2 rounds
    refused = seen["other_per_node"]
    assert refused["exit"] == 2 and "--resume: --per-node 2 differs" in refused["stderr"]


def test_a_cluster_gone_mid_sweep_keeps_every_row_and_writes_a_report(tmp_path):
    seen = in_namespace("cluster_lost", tmp_path)
    assert seen["exit"] == 1, seen["output"][-3000:]
    assert seen["rows"] and seen["report"]
    assert "processes did not run" in seen["output"]
    no_duplicates(seen["rows"])


def test_a_cluster_started_with_ray_start_runs_a_sweep_given_its_address(tmp_path):
    seen = in_namespace("ray_start", tmp_path)
    assert seen["exit"] == 0, seen["output"][-3000:]
    rows = seen["rows"]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert len({r["placement"]["node_id"] for r in rows}) == 1
    assert {r["placement"]["attempt"] for r in rows} == {1}
    # two at once on the node, each pinned to cores of its own
    (a, b) = (r["placement"] for r in rows)
    assert overlapped(a, b)
    assert set(a["cores"]).isdisjoint(b["cores"])
    assert seen["left"] == []  # the head, stopped by its handle, took its processes with it


def test_without_a_shared_filesystem_a_processs_files_come_back_with_its_rows(tmp_path):
    seen = in_namespace("no_shared_files", tmp_path)
    assert seen["exit"] == 0, seen["output"][-3000:]
    rows = seen["rows"]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        stem = f"{r.get('process_id') or r['case_id']}.a1"  # the files are its process's
        assert f"logs/{stem}.log" in seen["files"] and f"cases/{stem}.row.json" in seen["files"]
        flamegraph = r["memory"]["memray_flamegraph"]
        assert flamegraph and "zerograd-" not in flamegraph  # the scratch folder's name
        path = (
            Path(flamegraph) if Path(flamegraph).is_absolute() else Path(seen["out"]) / flamegraph
        )
        assert str(path.relative_to(seen["out"])) in seen["files"]


def test_two_processes_at_once_on_a_node_get_a_gpu_each(tmp_path):
    seen = in_namespace("fake_gpus", tmp_path)
    rows = seen["rows"]
    assert len(rows) == 2
    assert overlapped(*(r["placement"] for r in rows))
    assert sorted(r["placement"]["visible_devices"] for r in rows) == ["0", "1"]


def test_gpu_nodes_driven_from_a_login_node_run_a_process_per_gpu_set(tmp_path):
    """Nodes of 16 CPUs and 8 GPUs, a driver of 64 cores without a GPU and with another torch
    label: 8 processes at once per node at world size 1, 2 at world size 4, with --device cuda
    and with auto, each on GPUs of its own; no row fails on torch's version."""
    seen = in_namespace("gpu_nodes", tmp_path, timeout=900)
    nodes = set(seen["nodes"])
    for ranks, at_once in (("1", 8), ("4", 2)):
        threads = 16 // at_once  # a node's CPUs over its processes at once, not the driver's 64
        for device in ("cuda", "auto"):
            run = seen[f"{ranks}-{device}"]
            assert run["sweep"], run["output"][-3000:]
            assert run["sweep"]["device"] == "cuda" and run["sweep"]["preset"] == "base"
            assert run["sweep"]["threads"] == threads
            assert run["case_settings"]["threads"] == threads // int(ranks)
            planned = {n["node_id"]: n["slots"] for n in run["cluster"]["nodes"]}
            assert {planned[n] for n in nodes} == {at_once}, planned
            assert run["cluster"]["capacity"] == 2 * at_once
            assert f"{2 * at_once} processes at once ({threads} CPUs, {ranks} GPUs each)" in (
                " ".join(run["output"].split())
            )
            driver = run["cluster"]["driver_torch"]
            rows = run["rows"]
            assert rows and not [r["error"] for r in rows if "another torch" in r["error"]]
            assert {r["env"]["torch"] for r in rows} != {driver}  # other labels, no failure
            assert {r["placement"]["node_id"] for r in rows} == nodes
            held = [set(r["placement"]["visible_devices"].split(",")) for r in rows]
            assert all(len(gpus) == int(ranks) for gpus in held), held
            # processes at once on a node hold GPUs of their own
            together = 0
            for i, a in enumerate(rows):
                for j in range(i + 1, len(rows)):
                    pa, pb = a["placement"], rows[j]["placement"]
                    if pa["node_id"] == pb["node_id"] and overlapped(pa, pb):
                        together += 1
                        assert held[i].isdisjoint(held[j]), (held[i], held[j])
            assert together, "no two processes ran at once on a node"
