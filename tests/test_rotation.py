"""Several strategies in one process (benches/engine/rotation.py): the rotation's balance, which
strategies share a process, a real rotated process's rows, and the paired verdicts they give."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from synthetic import as_row, make_row

from benches.engine.growth import QUIET_ROUND_BYTES
from benches.engine.rotation import PLAIN, fitting_rounds, rotation, timed_rounds
from benches.engine.spec import CaseSpec
from benches.sweep.budget import round_specs
from reports.judge import summaries, verdicts
from reports.judge.rows import pooled
from reports.schema.records import Row

ROOT = Path(__file__).resolve().parent.parent


def test_over_two_turns_every_loop_takes_every_place_twice_once_each_way():
    names = [PLAIN, "native", "block", "lazy"]
    places = Counter()
    for i in range(2 * len(names)):
        order = rotation(names, i)
        assert sorted(order) == sorted(names)
        places.update((name, order.index(name)) for name in names)
    assert set(places.values()) == {2}
    assert rotation(names, 0) == names and rotation(names, 1) == names[::-1]
    assert rotation(names, 2) == ["native", "block", "lazy", PLAIN]


def test_a_rotated_process_runs_whole_turns_of_its_rotation():
    # two turns at the least (every loop in every place twice each way), and --repeat at least
    assert [timed_rounds(8, loops) for loops in (3, 4, 7)] == [12, 16, 28]
    assert timed_rounds(40, 7) == 42 and timed_rounds(30, 3) == 30


def test_a_process_told_its_deadline_runs_the_whole_turns_it_holds_two_rounds_at_the_least():
    # three loops: a turn is 6 rounds; at 1 s a round, 20 s hold 3 turns of the planned 4
    assert fitting_rounds(24, 3, 1.0, 20.0) == 18
    assert fitting_rounds(24, 3, 1.0, 5.0) == 4  # less than a turn: pairs of rounds
    assert fitting_rounds(24, 3, 1.0, 0.5) == 2  # a process that started measures both ways
    assert fitting_rounds(24, 3, 1.0, 1e6) == 24  # never more than planned
    assert fitting_rounds(24, 3, 0.0, 5.0) == 24  # nothing measured to go by


def _spec(strategy: str, **settings) -> CaseSpec:
    return CaseSpec(strategy=strategy, preset="tiny", device="cpu", accumulate=1,
                    live_tensors=0, **settings)  # fmt: skip


def test_a_groups_strategies_share_one_added_process_and_global_keeps_its_own():
    group = [_spec(name) for name in ("native", "block", "lazy", "global")]
    specs = round_specs(group, 3, rotate=True)
    assert [(s.strategy, s.rotation, s.round, s.time_only) for s in specs] == [
        ("native", ["native", "block", "lazy"], 3, True),
        ("global", [], 3, True),
    ]
    assert specs[0].case_id.startswith("rot3-native-")
    # --no-rotate, compile and ranks: a process per strategy
    assert [s.rotation for s in round_specs(group, 3, rotate=False)] == [[]] * 4
    compiled = [dataclasses.replace(s, compile=True) for s in group]
    assert [s.rotation for s in round_specs(compiled, 3, rotate=True)] == [[]] * 4
    ranks = [dataclasses.replace(s, parallel="ddp", world_size=2) for s in group]
    assert [s.rotation for s in round_specs(ranks, 3, rotate=True)] == [[]] * 4
    other_k = [_spec("native"), dataclasses.replace(_spec("block"), accumulate=4)]
    assert [s.rotation for s in round_specs(other_k, 3, rotate=True)] == [[], []]


def _process(spec: CaseSpec, tmp_path: Path) -> tuple[subprocess.CompletedProcess, list]:
    """``spec``'s process, run as the sweep runs it: its exit and its rows."""
    spec_path, out = tmp_path / "spec.json", tmp_path / "rows.json"
    spec_path.write_text(json.dumps(dataclasses.asdict(spec)))
    done = subprocess.run(
        [sys.executable, "-m", "benches.engine.case", str(spec_path), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done, json.loads(out.read_text()) if out.exists() else []


def test_a_rotated_process_writes_a_time_only_row_per_strategy_sharing_its_process(tmp_path):
    """A real rotated process of the engine (tiny, one thread): native and block each get a
    time-only row with its paired samples, one process_id, and the process's wall time
    shared out."""
    spec = dataclasses.replace(
        _spec("native", repeat=4, warmup=1, threads=1, time_only=True, round=1),
        rotation=["native", "block"],
        out_dir=str(tmp_path),
    )
    done, rows = _process(spec, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [r["strategy"] for r in rows] == ["native", "block"]
    for r in rows:
        assert r["status"] == "ok" and r["time_only"] and r["round"] == 1
        assert r["process_id"] == spec.case_id
        # two whole turns of three loops (the plain one, native, block): 12 rounds
        assert len(r["samples"]["window"]) == len(r["samples"]["plain_window"]) == 12
        assert summaries.overhead(Row.from_json(r)).ratio > 0 and r["grad_check"] is None
        assert sorted(r["build_order"]) == sorted([PLAIN, "native", "block"])
    # both rows hold the same plain-loop windows: the rounds' own
    assert rows[0]["samples"]["plain_window"] == rows[1]["samples"]["plain_window"]


def test_a_first_round_process_checks_each_strategy_and_a_failed_one_fails_alone(tmp_path):
    """A real checked process of native, a strategy whose every reset raises and block (tiny,
    one thread): the failing one's row is failed with its line; native and block each have
    their gradient check, memory pass, cost model and growth (read around the rounds, or their
    windows alone with the plain loop's beside them), their rotated rounds without the failed
    one, and one process_id."""
    spec = dataclasses.replace(
        _spec("native", repeat=4, warmup=1, threads=1, plugins=["tests.fault_plugin"]),
        rotation=["native", "faulty:fault=raise", "block"],
        out_dir=str(tmp_path),
    )
    done, rows = _process(spec, tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]  # one of its cases failed
    assert [(r["strategy"], r["status"]) for r in rows] == [
        ("native", "ok"),
        ("faulty", "failed"),
        ("block", "ok"),
    ]
    assert "RuntimeError: rank 0 failed in reset" in rows[1]["error"]
    for r in (rows[0], rows[2]):
        assert not r["time_only"] and r["process_id"] == spec.case_id
        assert r["grad_check"]["ok"] and r["grad_check"]["windows"] == 3
        memory = r["memory"]
        assert memory["held_bytes"] >= 0 and memory["peak_bytes"] > 0
        # growth read around the 12 timed rounds; each loop's windows alone only where the
        # process kept more than growth.QUIET_ROUND_BYTES a round
        if memory["growth_scope"] == "round":
            assert memory["growth_windows"] == 12 and "plain_growth_windows" not in memory
            assert memory["growth_bytes_per_window"] <= QUIET_ROUND_BYTES
        else:
            assert memory["growth_scope"] == "alone"
            assert memory["growth_windows"] == memory["plain_growth_windows"] == 4
        assert r["cost_model"] is not None
        # two whole turns of the three loops left (the plain one, native, block): 12 rounds
        assert len(r["samples"]["window"]) == 12
        assert sorted(r["build_order"]) == sorted([PLAIN, "native", "block"])
    # the plain loop's timeline once, in the first strategy's row
    assert rows[0]["memory"]["plain_timeline"] and not rows[2]["memory"].get("plain_timeline")


def _shared_rows(truth: dict[str, float], processes: int, seed: int, common=0.03, own=0.01):
    """Rows of ``processes`` rotated processes: each strategy's log overhead is its truth, plus
    the process's offset shared by all of its replicas (SD ``common``), plus its replica's own
    (SD ``own``), plus each round's noise (SD 1%)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(processes):
        shared = rng.normal(0, common)
        plain = 0.01 * np.exp(rng.normal(0, 0.01, 8))
        for name, log_true in truth.items():
            row = make_row(name, round=p + 1, seed=seed)
            offset = log_true + shared + rng.normal(0, own)
            row["samples"]["window"] = (plain * np.exp(offset + rng.normal(0, 0.01, 8))).tolist()
            row["samples"]["plain_window"] = plain.tolist()
            row["process_id"] = f"rot-{seed}-{p}"
            rows.append(row)
    return rows


def test_strategies_that_shared_processes_are_compared_process_by_process():
    """A large offset that every replica of a process shares drops out of the paired
    comparison: its interval is far narrower than the unpaired one of the same figures."""
    truth = {"native": 0.0, "block": math.log(1.03)}
    rows = _shared_rows(truth, 8, seed=1, common=0.05)
    paired = verdicts.verdicts(list(pooled(map(as_row, rows)).values()), 0.02).to_json()
    (c,) = [c for c in paired["comparisons"] if c["metric"] == "window"]
    assert c["paired"] is True and c["processes"] == [8, 8] and c["df"] == 7
    for r in rows:
        r["process_id"] = f"{r['process_id']}-{r['strategy']}"  # as if in processes of their own
    unpaired = verdicts.verdicts(list(pooled(map(as_row, rows)).values()), 0.02).to_json()
    (u,) = [c for c in unpaired["comparisons"] if c["metric"] == "window"]
    assert "paired" not in u
    assert math.log(c["ci_high"] / c["ci_low"]) < 0.5 * math.log(u["ci_high"] / u["ci_low"])
    (floor,) = paired["noise_floor"]
    assert floor["resolution_from"] == "1 paired comparisons"


@pytest.mark.slow  # 1,000 simulated sweeps
def test_the_paired_interval_called_95_percent_covers_the_truth_95_percent_of_the_time():
    """1,000 simulated sweeps of 6 rotated processes of three strategies (3% SD shared by a
    process's replicas, 1% each replica's own, 1% per round), through the project's own
    functions: the paired 95% intervals cover the true ratio in 93-97% of them."""
    truth = {"native": 0.0, "lazy": math.log(1.03), "block": math.log(0.98)}
    covered = total = 0
    for seed in range(1000):
        entries = list(pooled(map(as_row, _shared_rows(truth, 6, seed))).values())
        for c in verdicts.verdicts(entries, 0.02).to_json()["comparisons"]:
            if c["metric"] != "window":
                continue
            assert c["paired"]
            true = math.exp(truth[c["a"]] - truth[c["b"]])
            covered += c["ci_low"] <= true <= c["ci_high"]
            total += 1
    assert 0.93 <= covered / total <= 0.97, f"coverage {covered / total:.3f}"


def test_a_process_is_expected_to_take_as_long_as_its_kind_took_so_far():
    """The budget's deadline judges a process by its own kind: a rotated K=4 process by the
    rotated K=4 ones before it, never by global's short ones alone; a time-only process of a
    kind not run yet by its group's parts, never by the checked process's whole wall."""
    from benches.sweep.budget import Spent, wall_kind

    rotated = dataclasses.replace(_spec("native"), accumulate=4, rotation=["native", "block"])
    alone = dataclasses.replace(_spec("global"), accumulate=4)
    spent = Spent()
    assert spent.expected(rotated) == 0.0
    spent.walls[wall_kind(alone)] = [2.0, 3.0, 7.0]
    assert spent.expected(alone) == 3.0
    # no process of its kind yet: the longest per strategy, times its strategies
    assert spent.expected(rotated) == 14.0
    spent.walls[wall_kind(rotated)] = [25.0, 30.0, 49.0]
    assert spent.expected(rotated) == 30.0
    # a kind of one strategy, after a shared one of two only: the shared one's per strategy
    other = dataclasses.replace(alone, live_tensors=10)
    del spent.walls[wall_kind(alone)]
    assert spent.expected(other) == 24.5
    # a time-only process after a checked one of its group (rows share its steps out):
    # its strategies' overhead and pairs, not the checked process's 100 s
    checked = dataclasses.replace(rotated, live_tensors=7)
    wall = {"total": 50.0, "gradient_check": 30.0, "warmup": 3.0, "setup": 1.0, "timed_pairs": 8.0}
    row = {"status": "ok", "wall_s": wall, "samples": {"window": [0.1] * 4}}
    spent.add(checked, [row, row])
    timed = dataclasses.replace(checked, time_only=True, round=1, pairs=10)
    assert spent.expected(timed) == 2 * (4.0 + 10 * 2.0)
    assert spent.expected(checked) == 100.0
    # it keeps to its deadline once started: it starts where its least fits
    from benches.engine.rotation import LEAST_ROUNDS

    assert spent.least(timed) == 2 * (4.0 + LEAST_ROUNDS * 2.0)
    assert spent.least(checked) == 100.0
