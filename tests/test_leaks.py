"""Leaks are a verdict (issue 23, item 6): the rule on planted figures, then a real tiny sweep with
a strategy that keeps 4 MiB per reset (``tests/guard_plugin.py``) beside native, block and lazy,
and one whose reset calls ``sys.exit(3)``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reports.judge import leaks
from reports.schema.records import Entry
from tests.conftest import ROOT, run_reports
from tests.synthetic import entry as entry_of
from tests.synthetic import make_row, rows_of

KIB = 2**10


def entry(*processes: tuple[float | None, float | None, int, int]) -> Entry:
    """A pooled case of native whose processes grew (per pair, plain alone, pairs, plain
    windows) as given."""
    rows = []
    for i, (growth, plain, windows, plain_windows) in enumerate(processes):
        row = make_row("native", round=i)
        row["memory"].update(
            growth_bytes_per_window=growth,
            plain_growth_bytes_per_window=plain,
            growth_windows=windows,
            plain_growth_windows=plain_windows,
        )
        rows.append(row)
    return entry_of("native", rows)


@pytest.mark.parametrize(
    "processes, word",
    [
        ([(65 * KIB, 0.0, 8, 4)], "leaks"),
        ([(63 * KIB, 0.0, 8, 4)], "steady"),
        ([(65 * KIB, -30 * KIB, 4, 4)], "leaks"),  # a plain loop that shrinks lends nothing
        ([(300 * KIB, 150 * KIB, 8, 4)], "steady"),  # both windows of the pair grow alike
        ([(360 * KIB, 150 * KIB, 8, 4)], "steady"),  # the strategy's 210: 60 KiB beyond 150
        ([(370 * KIB, 150 * KIB, 8, 4)], "leaks"),  # 220: 70 KiB beyond
        ([(4 * 2**20, 0.0, 3, 4)], "unmeasured"),  # fewer than 4 pairs
        ([(4 * 2**20, 0.0, 8, 2)], "unmeasured"),  # the plain loop alone for fewer than 4
        ([(4 * 2**20, None, 8, 0)], "unmeasured"),  # a time-only process, an older row
        ([(4 * 2**20, 0.0, 8, 4), (4 * 2**20, 0.0, 8, 4), (0.0, 0.0, 8, 4)], "leaks"),  # median
        ([(4 * 2**20, 0.0, 8, 4), (0.0, 0.0, 8, 4), (0.0, 0.0, 8, 4)], "steady"),
    ],
)
def test_the_leak_rule(processes, word):
    judged = leaks.judge(entry(*processes))
    assert judged.verdict == word
    if word != "unmeasured":
        growth = sorted(p[0] for p in processes)[len(processes) // 2]
        plain = max(sorted(p[1] for p in processes)[len(processes) // 2], 0)
        assert judged.growth_bytes_per_window == growth
        assert judged.excess_bytes_per_window == growth - 2 * plain
        assert judged.processes == len(processes)


def test_a_shared_process_read_around_its_rounds_bounds_each_strategy_by_its_round():
    """A shared process whose rounds kept little (``growth_scope`` "round", no loop alone):
    its growth per round is each strategy's, a bound; steady under 64 KiB, judged over its
    rounds, unmeasured over fewer than 4; and with a process read alone beside it, the plain
    loop's figure is that process's."""
    from benches.engine.growth import QUIET_ROUND_BYTES, quiet

    def rounds_entry(*grown: tuple[float, int, str]) -> Entry:
        rows = []
        for i, (growth, windows, scope) in enumerate(grown):
            row = make_row("native", round=i)
            row["memory"].update(
                growth_bytes_per_window=growth, growth_windows=windows, growth_scope=scope
            )
            if scope == "alone":
                row["memory"].update(plain_growth_bytes_per_window=1.0, plain_growth_windows=4)
            rows.append(row)
        return entry_of("native", rows)

    judged = leaks.judge(rounds_entry((12 * KIB, 12, "round")))
    assert judged.verdict == "steady" and judged.plain_growth_bytes_per_window is None
    assert judged.excess_bytes_per_window == 12 * KIB and judged.plain_windows is None
    assert leaks.judge(rounds_entry((12 * KIB, 3, "round"))).verdict == "unmeasured"
    both = leaks.judge(rounds_entry((12 * KIB, 12, "round"), (2 * KIB, 4, "alone")))
    assert both.processes == 2 and both.plain_growth_bytes_per_window == 1.0
    # the engine's side: a process is quiet only over 4 rounds at least, under the bound
    assert quiet([0, 1, 2, 3, 4]) and not quiet([0, 1, 2, 3])
    assert not quiet([0, *(i * (QUIET_ROUND_BYTES + 1) for i in range(1, 6))])


# -- a real sweep ---------------------------------------------------------------------------------
STRATEGIES = ("native", "block", "lazy", "leaky", "exits")


@pytest.fixture(scope="module")
def leaky_sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("leaky") / "run"
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny", "--accumulate", "1"]
    command += ["--live-tensors", "0", "--threads", "1", "--budget", "0", "--rounds", "1"]
    command += ["--control", "none", "--plugin", "tests.guard_plugin"]
    command += ["--strategies", ",".join(STRATEGIES), "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    return out, done


@pytest.mark.slow  # the real sweep of five strategies (the suite's 5 minutes)
def test_a_strategy_that_exits_is_one_failed_row(leaky_sweep):
    out, done = leaky_sweep
    assert done.returncode == 1, done.stderr[-2000:]  # a failed case, not the plugin's 3
    assert "Traceback" not in done.stderr
    rows = {r["strategy"]: r for r in rows_of(out)}
    assert sorted(rows) == sorted(STRATEGIES)
    assert rows["exits"]["status"] == "failed"
    assert rows["exits"]["error"] == (
        "SystemExit: sys.exit(3) called inside the case (its strategy or workload)"
    )
    assert all(rows[s]["status"] == "ok" for s in STRATEGIES if s != "exits")
    assert (out / "index.html").exists()


@pytest.mark.slow  # the real sweep of five strategies (the suite's 5 minutes)
def test_a_leaking_strategy_is_leaks_and_the_others_steady(leaky_sweep):
    out, _ = leaky_sweep
    judged = json.loads((out / "verdicts.json").read_text())
    words = {c["strategy"]: c for c in judged["memory_growth"]}
    assert {s: c["verdict"] for s, c in words.items()} == {
        "native": "steady",
        "block": "steady",
        "lazy": "steady",
        "leaky": "leaks",
    }
    assert [c["strategy"] for c in judged["leaks"]] == ["leaky"]
    leaky = words["leaky"]
    # 4 MiB kept per reset: the process grows by that, within the pages around it
    assert 3.9 * 2**20 < leaky["growth_bytes_per_window"] < 4.5 * 2**20
    assert leaky["windows"] == 8 and leaky["plain_windows"] == 4
    for name in ("native", "block", "lazy"):
        assert abs(words[name]["growth_bytes_per_window"]) < leaks.LEAK_BYTES
        plain = words[name]["plain_growth_bytes_per_window"]
        # their shared process read around its rounds (no plain loop alone), or alone
        assert plain is None or abs(plain) < leaks.LEAK_BYTES


@pytest.mark.slow  # the real sweep of five strategies (the suite's 5 minutes)
def test_the_report_says_leaks_in_the_answer_and_the_table(leaky_sweep):
    out, _ = leaky_sweep
    html = (out / "index.html").read_text()
    answer = html[html.index('id="answer"') : html.index('id="strategies"')]
    assert "Left out of the answer, <b>leaks</b>: <code>leaky</code>" in answer
    assert "<code>leaky</code> leaks memory" in answer  # the advice says it too
    table = html[html.index('id="strategies"') : html.index('id="verdicts"')]
    row = table[table.index("<code>leaky</code>") :]
    row = row[: row.index("</tr>")]
    assert '<span class="bad">leaks</span>' in row
    for name in ("native", "block", "lazy"):
        other = table[table.index(f"<code>{name}</code>") :]
        assert '<span class="bad">leaks</span>' not in other[: other.index("</tr>")]


@pytest.mark.slow  # the real sweep of five strategies (the suite's 5 minutes)
def test_the_gate_fails_on_a_leak(leaky_sweep, tmp_path):
    out, _ = leaky_sweep
    verdicts = str(out / "verdicts.json")
    done = run_reports("gate", verdicts, "--pair", "native,leaky")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("leaks: leaky K=1 N=0 grows ")
    done = run_reports("gate", verdicts, "--pair", "native,block")
    assert done.returncode == 0, done.stdout + done.stderr
    # compare: the run before had no leaky strategy; the gate on compare.json fails on B's leak
    before = tmp_path / "before"
    before.mkdir()
    lines = (out / "results.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["strategy"] != "leaky"]
    (before / "results.jsonl").write_text("\n".join(kept) + "\n")
    page = tmp_path / "compare.html"
    done = run_reports("compare", str(before), str(out), "--out", str(page))
    assert done.returncode == 0, done.stderr
    compared = json.loads((tmp_path / "compare.json").read_text())
    assert [c["strategy"] for c in compared["leaks"]] == ["leaky"]
    assert "<b>leaks</b> in B: <code>leaky</code>" in page.read_text()
    done = run_reports("gate", str(tmp_path / "compare.json"))
    assert done.returncode == 1 and "leaks: leaky" in done.stdout, done.stdout + done.stderr
