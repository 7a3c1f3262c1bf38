"""Two runs compared (``python -m reports compare``), from rows made here: a planted
slowdown is found, a machine twice as slow is not a slowdown."""

from __future__ import annotations

import json

import pytest
from synthetic import (
    OVERHEADS,
    WORDS,
    by_id,
    make_row,
    rescale,
    standard_rows,
    write_run,
)

from reports.__main__ import main as reports_main
from reports.judge import noise, stats, verdicts
from reports.regressions import compare
from reports.schema import verdict_records


# -- content: two runs compared -------------------------------------------------------------------
def windows_of(result: dict, strategy: str) -> dict:
    chosen = (c for c in result["comparisons"] if c["strategy"] == strategy)
    return {(c["k"], c["n"]): c for c in chosen if c["metric"] == "window"}


def test_compare_finds_a_planted_slowdown(tmp_path):
    rows = standard_rows()
    a = write_run(tmp_path / "a", rows)
    slower = [rescale(r, window=2.0) if r["strategy"] == "lazy" else r for r in rows]
    b = write_run(tmp_path / "b", [*slower, make_row("foreach")])
    assert reports_main(["compare", str(a), str(b)]) == 0
    assert (b / "compare.html").is_file()
    result = json.loads(
        (b / verdict_records.COMPARE).read_text()
    )  # beside the page, in B's directory
    assert result["schema_version"] == verdict_records.VERDICTS_SCHEMA_VERSION
    assert (
        verdict_records.CompareFile.from_json(result).to_json() == result
    )  # its one reader and writer
    assert result["min_effect"] == verdicts.DEFAULT_MIN_EFFECT
    assert all(f["resolution"] is not None for f in result["resolution"])
    assert {c["verdict"] for c in result["comparisons"]} <= set(WORDS)
    lazy = windows_of(result, "lazy")
    assert len(lazy) == 4
    for c in lazy.values():
        assert (c["a"], c["b"]) == ("B:lazy", "A:lazy")
        assert c["ratio"] == pytest.approx(2.0, rel=1e-9)  # B's windows doubled, plain alone
        assert c["verdict"] == "higher", c
    for strategy in ("native", "block", "global"):
        for c in windows_of(result, strategy).values():
            assert c["ratio"] == pytest.approx(1.0, rel=1e-9)
            assert c["verdict"] not in ("lower", "higher"), c
    memory = [c for c in result["comparisons"] if c["metric"] != "window"]
    assert {c["verdict"] for c in memory} == {"same"}

    report = compare.comparison(a, b)
    assert report.counts == {"lower": 0, "higher": 4, "same": 16, "unclear": 0}
    assert report.only_b == [("foreach", 1, 0, "last")] and report.only_a == []
    html = (b / "compare.html").read_text()
    assert 'data-chart="compare-window"' in html
    assert "(slower) in 4" in by_id(html, "verdict")
    lines = by_id(html, "phases").split("<tr>")
    lazy_line = next(line for line in lines if line.startswith('<td class="text"><code>lazy<'))
    assert '<span class="verdict verdict-higher">higher</span>' in lazy_line
    assert "<code>foreach</code> K=1 N=0: only in B" in html
    # the other way round, B's planted slowdown is A's speedup: lower, as often as higher
    back = compare.comparison(b, a)
    back_lazy = [line.window for line in back.lines if line.strategy == "lazy"]
    assert [w.verdict for w in back_lazy] == ["lower"] * 4, back_lazy
    assert back.only_a == [("foreach", 1, 0, "last")]


@pytest.mark.parametrize("how", ["the same samples", "a fresh run"])
def test_compare_ignores_a_machine_twice_as_slow(tmp_path, how):
    """Raw windows of B twice A's, strategy and plain loop alike: the paired overheads are as
    they were, so no case is lower or higher, though every absolute median doubled."""
    rows = standard_rows()
    a = write_run(tmp_path / "a", rows)
    if how == "the same samples":
        slower = [rescale(r, window=2.0, plain=2.0) for r in rows]
    else:  # other noise, other processes: the same code on a machine half as fast
        slower = standard_rows(seed=1, plain=0.020)
    b = write_run(tmp_path / "b", slower)
    result = compare.comparison(a, b)
    assert len(result.lines) == 4 * len(OVERHEADS)
    for line in result.lines:
        window = line.window
        assert window.verdict not in ("lower", "higher"), (line.label, window)
        assert window.ratio == pytest.approx(1.0, abs=0.02)
        medians = {p.phase: (p.a.median_s, p.b.median_s) for p in line.phases}
        assert medians["window"][1] / medians["window"][0] == pytest.approx(2.0, rel=0.03)
    if how == "the same samples":  # identical paired ratios: exactly no change, and same
        assert {line.window.verdict for line in result.lines} == {"same"}
    assert result.counts["lower"] == result.counts["higher"] == 0


def test_compare_does_not_call_a_machine_that_drifted_between_runs(tmp_path):
    """Between two runs every case's overhead moved a few percent, each its own way (the
    machine's state is not shared between runs as it is between a run's rounds): no case is
    lower or higher, though each one's interval from its own processes alone excludes 1;
    lazy, doubled, is still higher. A change of one case is told from the run's drift."""
    rows = standard_rows()
    a = write_run(tmp_path / "a", rows)
    drifts = iter([1.03, 0.97, 1.025, 0.975, 1.035, 0.965] * 20)
    moved = {}
    for r in rows:
        key = (r["strategy"], r["accumulate"], r["live_tensors"])
        moved.setdefault(key, 2.0 if r["strategy"] == "lazy" else next(drifts))
    b = write_run(
        tmp_path / "b",
        [
            rescale(r, window=moved[(r["strategy"], r["accumulate"], r["live_tensors"])])
            for r in rows
        ],
    )
    result = compare.comparison(a, b)
    drift = result.between_runs
    assert drift.cases == 4 * len(OVERHEADS) and 0.02 < drift.sd < 0.06, drift
    for line in result.lines:
        window = line.window
        if line.strategy == "lazy":
            assert window.verdict == "higher", window
        else:
            assert window.verdict not in ("lower", "higher"), (line.label, window)
    side_a, side_b = compare.side(a), compare.side(b)
    case_a, case_b = (side.cases[("block", 1, 0, "last")] for side in (side_a, side_b))
    spread = noise.noise(list(side_b.cases.values()), 0.02)[noise.group_key(case_b)]
    alone = stats.contrast(
        list(noise.process_figures(case_b).values()),
        list(noise.process_figures(case_a).values()),
        spread.variance,
        spread.df,
    )
    assert alone["ci_low"] > 1 or alone["ci_high"] < 1, alone  # its own processes: "different"


# -- one case in common: no variance between runs, and the gate says what it could not judge ------
def one_case_run(directory, overhead: float = 1.0, seed: int = 0):
    """``block_twin`` in three processes, the sweep's whole content (issue 64's two sweeps)."""
    rows = [make_row("block_twin", overhead=overhead, round=r, seed=seed) for r in range(3)]
    return write_run(directory, rows)


def test_a_gate_fails_apart_on_a_change_it_could_not_judge_and_passes_an_a_a(tmp_path, capsys):
    a = one_case_run(tmp_path / "a")
    b = one_case_run(tmp_path / "b", overhead=2.2)
    assert reports_main(["compare", str(a), str(b)]) == 0
    result = json.loads((b / verdict_records.COMPARE).read_text())
    drift = result["between_runs"]
    assert (drift["variance"], drift["cases"], drift["needs"]) == (None, 1, 2)
    assert "from 1 case in common (it needs 2 or more)" in drift["why"]
    (window,) = windows_of(result, "block_twin").values()
    assert window["verdict"] == "unclear" and window["ci_low"] is None
    assert window["unjudged"] == drift["why"]
    assert 1.02 < window["processes_low"] < 2.2 < window["processes_high"]
    html = (b / "compare.html").read_text()
    assert "not measured here: the variance between runs could not be measured" in html
    assert "no interval; its processes alone" in html
    capsys.readouterr()

    gated = str(b / verdict_records.COMPARE)
    assert reports_main(["gate", gated]) == 3
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("unjudged: block_twin K=1 N=0 window ratio 2.200")
    assert "--base" in line and "--accept-unjudged" in line
    assert reports_main(["gate", gated, "--accept-unjudged"]) == 0
    assert "1 unjudged, accepted" in capsys.readouterr().out
    assert reports_main(["gate", gated, "--fail-on", "lower"]) == 0  # beyond, but the other way
    capsys.readouterr()

    # A/A: the same rows, then other noise in other processes: nothing beyond the margin
    for seed, name in ((0, "same"), (1, "fresh")):
        again = one_case_run(tmp_path / name, seed=seed)
        assert reports_main(["compare", str(a), str(again)]) == 0
        assert reports_main(["gate", str(again / verdict_records.COMPARE)]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1].startswith("gate passed: 1 ")
