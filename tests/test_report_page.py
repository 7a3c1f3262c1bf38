"""The report page (``python -m reports build``) and verdicts.json, from rows made here
(tests/synthetic.py): the answer, the verdicts, the tables, the charts, bad input."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from itertools import combinations

import pytest
from conftest import run_reports
from msgspec import structs
from synthetic import (
    CHARTS,
    MIB,
    OVERHEADS,
    ROOT,
    SECTIONS,
    WORDS,
    by_id,
    make_row,
    standard_rows,
    verdict_rows,
    write_run,
)

from reports.__main__ import main as reports_main
from reports.judge import noise, stats, verdicts
from reports.judge.rows import SCHEMA_VERSION, read, strategy_order
from reports.page import analysis, build, charts
from reports.schema import verdict_records
from reports.schema.row_parts import ErrorFigures, GradCheck


# -- content: the answer ---------------------------------------------------------------------------
def test_answer_names_fastest_by_overhead_and_leanest_by_peak(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    report = analysis.report(directory)
    assert report.default == (1, 0)
    answer = report.answer
    assert answer.under_pressure == ["flat"]  # measured under pressure: stated, kept
    assert answer.candidates == 5
    fastest = answer.fastest
    assert fastest.strategy == "lazy"
    assert fastest.overhead.ratio == pytest.approx(0.7, rel=0.01)
    assert fastest.overhead.confidence == 0.95 and fastest.overhead.pairs == 10
    assert fastest.runner_up.strategy == "native"
    assert fastest.runner_up.overhead.processes == 3
    lead = fastest.lead
    assert (lead.a, lead.b, lead.metric) == ("lazy", "native", "window")
    assert lead.ratio == pytest.approx(0.7, rel=0.01)
    assert lead.ci_high < 1 and lead.q < 0.05  # significant over the sweep
    assert lead.verdict == "lower"
    # the group's: the half-width at the level direction is decided (3 processes of native)
    (floor,) = [f for f in report.verdicts.noise_floor if (f.k, f.n) == (1, 0)]
    margin = math.log1p(verdicts.DEFAULT_MIN_EFFECT)
    expected = stats.resolution(floor.variance, floor.df, floor.processes_per_strategy, margin)
    assert answer.resolution == pytest.approx(expected) and 0 < answer.resolution < 0.1
    assert answer.min_effect == verdicts.DEFAULT_MIN_EFFECT
    leanest = answer.leanest
    assert (leanest.strategy, leanest.peak_bytes, leanest.held_bytes) == (
        "block",
        9 * MIB,
        MIB,
    )
    assert leanest.runner_up.peak_bytes == int(9.5 * MIB)
    assert leanest.lead.verdict == "lower" and leanest.lead.metric == "peak_memory"
    advice = answer.advice
    assert advice.startswith("Use `lazy` for speed: it is lower than `native`, the next fastest")
    assert "significant over the sweep and beyond min-effect 2%" in advice
    assert "; `block` needs the least memory at peak" in advice
    assert advice.endswith(
        "; avoid `global` where many tensors are alive: its reset grows by 10.0 ms per 10,000 "
        "live tensors."
    )
    assert "flat" not in advice

    html = build.build(directory).read_text()
    section = by_id(html, "answer")
    assert "Use <code>lazy</code> for speed" in section
    assert "Fastest: <code>lazy</code>" in section and "Leanest: <code>block</code>" in section
    assert '<span class="verdict verdict-lower">lower</span>' in section
    assert "Measured under CPU pressure: <code>flat</code>" in section
    assert "3 processes" not in section  # lazy ran in one process ...
    assert "10 pairs in 1 process)" in section  # ... and says so


def test_advice_is_a_tie_when_strategies_are_near_identical(tmp_path):
    rows = [make_row("native", round=r, control=r > 0) for r in (0, 1, 2)]
    rows += [make_row("lazy", overhead=1.001), make_row("block", overhead=1.3, peak=8 * MIB)]
    answer = analysis.report(write_run(tmp_path / "run", rows)).answer
    assert answer.resolution is not None
    lead = answer.fastest.lead
    assert {lead.a, lead.b} == {"lazy", "native"}
    assert lead.verdict == "same"
    assert 1 / 1.02 <= lead.ci90_low <= lead.ci90_high <= 1.02  # two one-sided tests
    assert not answer.advice.startswith("Use")
    assert f"`{lead.a}` and `{lead.b}` tie on speed here" in answer.advice
    because = ": same, because their 90% interval lies within +-2%), so choose on memory"
    assert because in answer.advice
    assert "; `block` needs the least memory at peak" in answer.advice


def test_no_lower_verdict_without_a_measured_noise_floor(tmp_path):
    """One process per strategy: the between-process noise is unknown, so even a planted
    30% lead is no more than unclear, and the advice does not pick a winner."""
    rows = [make_row("native"), make_row("lazy", overhead=0.7)]
    directory = write_run(tmp_path / "run", rows)
    answer = analysis.report(directory).answer
    assert answer.resolution is None
    lead = answer.fastest.lead
    assert lead.ratio == pytest.approx(0.7, rel=0.01)
    assert lead.ci_low is None and lead.verdict == "unclear"  # no interval is honest
    assert answer.advice.startswith("`lazy` and `native` tie on speed here")
    section = by_id(build.build(directory).read_text(), "answer")
    assert "not measured: no variance between processes, so only <i>unclear</i>" in section


def test_noisy_cases_stay_in_the_answer_with_the_pressure_stated(tmp_path):
    """CPU pressure is inside the paired windows and the intervals: it widens them and is
    stated beside the answer, never withholds one (issue 49)."""
    rows = [make_row("native", round=r, control=r > 0) for r in (0, 1, 2)]
    rows += [
        make_row("lazy", overhead=0.5, peak=4 * MIB, pressure=noise.NOISY_PRESSURE + 0.05),
        make_row("block", overhead=0.9, peak=8 * MIB, pressure=noise.NOISY_PRESSURE - 0.05),
    ]
    report = analysis.report(write_run(tmp_path / "run", rows))
    answer = report.answer
    assert answer.under_pressure == ["lazy"]
    assert answer.fastest.strategy == "lazy"
    assert answer.leanest.strategy == "lazy"
    assert report.noisy == ["lazy-k1-n0-tiny-cpu-r0"]
    lazy = next(c for c in report.cases if c.strategy == "lazy")
    assert lazy.noisy and lazy.cpu_pressure == pytest.approx(0.15)
    # its comparisons are stated, marked noisy
    window = verdicts.lookup(report.verdicts, "lazy", "native", 1, 0, "window")
    assert window.noisy is True

    only_noisy = [make_row("lazy", pressure=0.5), make_row("native", pressure=0.5)]
    answer = analysis.report(write_run(tmp_path / "noisy", only_noisy)).answer
    assert answer.under_pressure == ["lazy", "native"] and answer.fastest is not None


def test_default_case_is_the_sweeps_first_k_and_no_ballast(tmp_path):
    rows = [make_row(s, k, n) for s in ("native", "lazy") for k in (1, 4) for n in (0, 500)]
    report = analysis.report(write_run(tmp_path / "run", rows, accumulate=[4, 1]))
    assert report.default == (4, 0)
    assert {(c.k, c.n) for c in report.default_cases} == {(4, 0)}
    assert (report.answer.k, report.answer.n) == (4, 0)


# -- content: verdicts.json and the tables --------------------------------------------------------
def test_verdicts_json_is_written_and_the_page_shows_what_it_says(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    html = build.build(directory).read_text()
    judged = json.loads((directory / verdict_records.VERDICTS).read_text())
    assert judged["schema_version"] == verdict_records.VERDICTS_SCHEMA_VERSION
    assert judged["min_effect"] == verdicts.DEFAULT_MIN_EFFECT
    pairs = len(list(combinations(OVERHEADS, 2)))
    assert len(judged["comparisons"]) == 4 * pairs * len(verdicts.METRICS)  # 4 (K, N), 3 metrics
    assert {c["verdict"] for c in judged["comparisons"]} <= set(WORDS)
    # a noise floor at every (K, N), measured from native's three processes
    assert [(f["k"], f["n"]) for f in judged["noise_floor"]] == [
        (1, 0),
        (1, 10_000),
        (2, 0),
        (2, 10_000),
    ]
    for floor in judged["noise_floor"]:  # the control's 3 processes: df 2 in every group
        assert floor["measured"] and floor["df"] == 2 and floor["pooled_from"] == [], floor
        assert floor["resolution"] >= judged["min_effect"]
    at = next(f for f in judged["noise_floor"] if (f["k"], f["n"]) == (1, 0))
    assert f"<b>{at['resolution'] * 100:.1f}%</b>" in by_id(html, "answer")
    # the page's verdict table: every comparison at the default K and N, word for word
    shown = verdict_rows(html)
    here = [c for c in judged["comparisons"] if (c["k"], c["n"]) == (1, 0)]
    assert len(shown) == len(here) == pairs * len(verdicts.METRICS)
    expected = {(c["a"], c["b"], c["metric"]): (f"{c['ratio']:.3f}", c["verdict"]) for c in here}
    assert {(a, b, m): (ratio, word) for a, b, m, ratio, word in shown} == expected
    # the planted effects, as verdicts.json states them
    assert expected[("lazy", "native", "window")][1] == "lower"
    assert expected[("global", "native", "window")][1] == "higher"
    assert expected[("block", "native", "peak_memory")][1] == "lower"
    assert expected[("global", "native", "held_memory")][1] == "same"
    # the answer's lead is verdicts.json's comparison
    report = analysis.report(directory)
    lead = report.answer.fastest.lead
    stored = verdicts.lookup(
        verdict_records.VerdictFile.from_json(judged), "lazy", "native", 1, 0, "window"
    )
    assert lead.verdict == stored.verdict
    assert lead.ci_low == pytest.approx(stored.ci_low)
    assert "verdicts.json" in by_id(html, "raw")


def test_case_table_overheads_and_reset_slopes(tmp_path):
    report = analysis.report(write_run(tmp_path / "run", standard_rows()))
    cases = {c.strategy: c for c in report.default_cases}
    native, lazy = cases["native"], cases["lazy"]
    assert native.rounds == 3 and native.vs_native is None
    assert native.overhead.processes == 3 and native.overhead.pairs == 30
    assert native.overhead.method.startswith("hierarchical percentile bootstrap")
    assert lazy.overhead.ratio == pytest.approx(0.7, rel=0.01)
    assert lazy.vs_native["window"].verdict == "lower"
    assert lazy.vs_native["peak_memory"].verdict == "higher"  # 10 MiB against 9.5
    assert lazy.vs_native["held_memory"].verdict == "same"
    assert (lazy.memory.peak_bytes, lazy.memory.plain_peak_bytes) == (10 * MIB, 8 * MIB)
    assert lazy.grad_check == GradCheck(
        max_rel_diff=0.0, max_abs_diff=0.0, tolerance=1e-5, windows=3, ok=True
    )
    assert cases["flat"].noisy and not lazy.noisy
    core = {(o.k, o.n): o for o in report.overheads}
    assert sorted(core) == [(1, 0), (1, 10_000), (2, 0), (2, 10_000)]
    assert core[(1, 0)].overhead.ratio == pytest.approx(1.0, abs=0.01)
    assert core[(1, 0)].plain.n == 30 and core[(1, 0)].overhead.processes == 3
    slopes = {s.strategy: s for s in report.slopes}
    assert slopes["global"].slope_s == pytest.approx(1e-6)  # 10 ms per 10,000 tensors
    assert slopes["native"].slope_s == pytest.approx(0, abs=1e-15)
    assert [p.live for p in slopes["global"].points] == [0, 10_000]


def test_page_is_self_contained_with_every_section_and_chart(tmp_path):
    html = build.build(write_run(tmp_path / "run", standard_rows())).read_text()
    assert len(html.encode()) < build.MAX_BYTES
    positions = [html.index(f'<section id="{s}">') for s in SECTIONS]
    assert positions == sorted(positions)
    for pattern in (r"<script", r"<img", r"\ssrc=", r'rel="stylesheet"', r"@import", r"url\(http"):
        assert not re.search(pattern, html), pattern
    drawn = re.findall(r'data-chart="([^"]+)"', html)
    # the answer's chart at every other K and N, right after its own (the picker's)
    groups = [f"answer-k{k}-n{n}" for k in (1, 2) for n in (0, 10_000)][1:]
    assert drawn == [CHARTS[0], *groups, *CHARTS[1:]]
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "an id repeats: inline SVGs would share clip paths"
    for title in ("Where a window's time goes", "Memory per strategy", "Reset time against"):
        assert title in by_id(html, "charts")
    assert "(ms" in html and "(MiB)" in html  # axis labels carry units
    assert "memray/lazy-k1-n0-tiny-cpu-r0.html (not kept beside this copy)" in html
    assert '<a href="results.jsonl">' in html and '<a href="verdicts.json">' in html
    assert f"schema version {SCHEMA_VERSION}" in by_id(html, "raw")
    assert "No <code>pytest-benchmark.json</code>" in html


def in_precision(row: dict, precision: str, scale: float, tolerance: float) -> dict:
    """The row as its case would have run in another precision: errors ``scale`` times."""
    row = {**copy.deepcopy(row), "precision": precision}
    row["case_id"] = row["case_id"].replace("-tiny", f"-{precision}-tiny")
    for key in ("accumulation_error", "total_error"):
        row[key] = {k: v * scale for k, v in row[key].items()}
    row["grad_check"] = {**row["grad_check"], "tolerance": tolerance}
    return row


def test_accumulation_error_of_every_precision(tmp_path):
    """One line per strategy, precision and K (the first process's figures; the control's equal
    them), every precision though the tables show fp32; identical strategies share a chart line."""
    rows = standard_rows(ns=(0,))
    rows += [
        in_precision(r, "bf16", 1e5, 0.03125 * r["accumulate"]) for r in standard_rows(ns=(0,))
    ]
    directory = write_run(tmp_path / "run", rows)
    report = analysis.report(directory)
    assert report.precision == "fp32" and report.precisions == ["fp32", "bf16"]
    lines = report.errors
    assert len(lines) == len(OVERHEADS) * 2 * 2  # strategies x precisions x K
    assert [(e.strategy, e.precision, e.k) for e in lines[:4]] == [
        ("native", "fp32", 1),
        ("native", "fp32", 2),
        ("native", "bf16", 1),
        ("native", "bf16", 2),
    ]
    bf16 = next(e for e in lines if (e.strategy, e.precision, e.k) == ("lazy", "bf16", 2))
    assert bf16.accumulation == ErrorFigures(
        max_rel=pytest.approx(1e-2), norm_rel=pytest.approx(4e-3)
    )
    assert bf16.total.norm_rel == pytest.approx(5e-2 * 2**0.5)
    assert (bf16.tolerance, bf16.check_ok, bf16.windows) == (0.0625, True, 3)
    checks = {g.precision: g for g in report.grad_checks}
    assert list(checks) == ["fp32", "bf16"]
    assert checks["bf16"].cases == checks["bf16"].passed == 2 * len(OVERHEADS)
    assert (checks["bf16"].tolerance_min, checks["bf16"].tolerance_max) == (0.03125, 0.0625)
    # the same figures in every strategy: one line per precision, naming them all
    series = charts._error_series(lines)
    names = sorted(OVERHEADS, key=strategy_order)  # the tables' order
    assert [(s["precision"], s["names"]) for s in series] == [("fp32", names), ("bf16", names)]
    html = build.build(directory).read_text()
    section = by_id(html, "accumulation-error")
    assert 'href="#accumulation-error"' in html
    assert section.count('data-chart="accumulation-error"') == 1
    assert "fp32: native, block, flat, global, lazy" in section  # the legend
    assert "0 (exact) at K=1: not drawn" in section
    assert "relative error" in section and "log scale" in section
    assert section.count("<tr>") == 2 + len(lines)  # two header rows
    assert "1.0e-02</td><td>4.0e-03</td>" in section  # lazy, bf16, K=2: max rel, norm rel
    assert 'bf16: <span class="ok">10 of 10 cases passed</span>' in section
    assert "tolerance 0.03125–0.0625" in section
    run = by_id(html, "run")
    assert "swept: <code>fp32</code>, <code>bf16</code>; the tables show <code>fp32</code>" in run
    assert "verdicts.json</a> holds every precision" in run


def test_rows_without_error_figures_have_no_accumulation_section(tmp_path):
    rows = standard_rows(ks=(1,), ns=(0,))
    for row in rows:
        del row["accumulation_error"], row["total_error"]
    html = build.build(write_run(tmp_path / "run", rows)).read_text()
    assert analysis.report(tmp_path / "run").errors == []
    assert 'id="accumulation-error"' not in html and "#accumulation-error" not in html
    assert 'data-chart="accumulation-error"' not in html
    assert "Settings compared" not in html  # nor without --compare-settings
    run = by_id(html, "run")
    assert "<dt>optimizer</dt><dd><code>adamw</code>" in run
    assert "<dt>clip norm</dt><dd><code>none</code>" in run
    assert "<dt>torch.compile</dt><dd>off" in run and "<dt>--compare-settings</dt><dd>none" in run


def test_corrupt_lines_are_skipped_and_failures_shown(tmp_path):
    rows = [
        make_row("native"),
        make_row("lazy", overhead=0.8),
        make_row("global", status="failed", error="process killed by SIGKILL <oom?>"),
    ]
    directory = write_run(tmp_path / "run", rows)
    with open(directory / "results.jsonl", "a") as f:
        f.write('{"truncated": \n[1, 2]\nnot json at all\n')
    with pytest.warns(UserWarning, match="skipped a corrupt line"):
        assert len(read(directory)) == 3
    with pytest.warns(UserWarning, match="skipped a corrupt line"):
        html = build.build(directory).read_text()
    failed = by_id(html, "failed")
    assert "global-k1-n0-tiny-cpu-r0" in failed
    assert "process killed by SIGKILL &lt;oom?&gt;" in failed
    assert "Fastest: <code>lazy</code>" in html


def test_old_schema_rows_are_refused_in_one_line(tmp_path):
    old = make_row("native")
    del old["schema_version"]  # schema 1 rows had none, or 1
    older = {**make_row("lazy"), "schema_version": 1}
    for name, rows in (("none", [old]), ("one", [make_row("block"), older])):
        directory = write_run(tmp_path / name, rows)
        done = run_reports("build", str(directory))
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("python -m reports: error: ")
        assert "rows of schema_version 1 cannot be read" in done.stderr
        assert f"results.jsonl:{len(rows)}:" in done.stderr  # the line
        assert "Traceback" not in done.stderr
        assert not (directory / "index.html").exists()
    fine = write_run(tmp_path / "fine", [make_row("native")])
    assert reports_main(["compare", str(tmp_path / "none"), str(fine)]) == 2
    assert not (fine / "compare.html").exists()


def test_pytest_benchmark_results_are_shown(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows(ks=(1,), ns=(0,)))
    bench = {
        "machine_info": {
            "cpu": {"brand_raw": "Test CPU"},
            "zerograd_order": {"seed": 4242, "order": ["test_reset[lazy]", "test_reset[native]"]},
        },
        "commit_info": {"id": "0123456789abcdef"},
        "datetime": "2026-01-01T00:00:00",
        "version": "5.1.0",
        "benchmarks": [
            {
                "group": "reset",
                "name": "test_reset[lazy]",
                "fullname": "benches/test_bench.py::test_reset[lazy]",
                "extra_info": {"strategy": "lazy", "device": "cpu"},
                "stats": {
                    "min": 1e-5,
                    "max": 3e-5,
                    "mean": 1.5e-5,
                    "stddev": 1e-6,
                    "rounds": 100,
                    "median": 1.4e-5,
                    "iqr": 2e-6,
                    "ops": 66666.7,
                },
            }
        ],
    }
    (directory / "pytest-benchmark.json").write_text(json.dumps(bench))
    section = by_id(build.build(directory).read_text(), "pytest-benchmark")
    assert "test_reset[lazy]" in section
    assert "0.0140" in section  # the median, in ms
    assert "strategy=lazy, device=cpu" in section
    assert "Test CPU" in section and "0123456789ab" in section
    assert "this session's seed was <b>4242</b>" in section
    assert "ZEROGRAD_BENCH_SEED=4242" in section
    assert "verdict" not in section.replace("no verdicts are drawn", "")

    (directory / "pytest-benchmark.json").write_text("{not json")
    section = by_id(build.build(directory).read_text(), "pytest-benchmark")
    assert "pytest-benchmark.json is not valid JSON" in section


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "{a}", "{tmp}/nowhere"], "'{tmp}/nowhere' is not a directory"),
        (["compare", "{a}", "{tmp}"], "'{tmp}' has no results.jsonl"),
        (["compare", "{a}"], "the following arguments are required: DIR_B"),
        (["compare", "{a}", "{a}", "--out", "{tmp}/no/c.html"], "folder '{tmp}/no' does not"),
        (["compare", "{a}", "{a}", "--out", "{tmp}"], "--out '{tmp}' is a directory"),
        (["build", "{tmp}"], "'{tmp}' has no results.jsonl"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "missing command; valid commands: build, compare"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    a = write_run(tmp_path / "a", [make_row("native")])
    fill = {"a": str(a), "tmp": str(tmp_path)}
    assert reports_main([x.format(**fill) for x in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m reports: error: ")
    assert message.format(**fill) in err


def test_reports_imports_nothing_of_ours():
    code = (
        "import sys, reports.page.build, reports.regressions.compare, reports.__main__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('benches', 'strategies')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# -- the first screen: the answer, what it could not see, its chart --------------------------------
def test_a_sweep_at_one_k_and_n_says_what_it_could_not_see(tmp_path):
    full = analysis.report(write_run(tmp_path / "full", standard_rows()))
    assert full.answer.unseen == [] and full.answer.full_sweep is None
    quick = analysis.report(write_run(tmp_path / "quick", standard_rows(ks=(1,), ns=(0,))))
    unseen = quick.answer.unseen
    assert len(unseen) == 2
    assert "Only N=0 was run, so `global`'s search hazard" in unseen[0]
    assert "`--live-tensors 0,100000` shows it" in unseen[0]
    assert unseen[1].startswith("Only K=1 was run") and "`--accumulate 1,4`" in unseen[1]
    no_global = [r for r in standard_rows(ks=(4,), ns=(0,)) if r["strategy"] != "global"]
    said = analysis.report(write_run(tmp_path / "k4", no_global)).answer.unseen
    assert said == [
        "Only N=0 was run: how a reset grows with unrelated live tensors is not measured "
        "(`--live-tensors 0,100000`)."
    ]
    html = by_id(build.build(tmp_path / "quick").read_text(), "answer")
    assert "<code>global</code>&#39;s search hazard" in html and 'class="sure"' in html


def test_a_shorter_sweep_names_the_committed_full_sweep_and_its_resolution(tmp_path):
    """The figure comes from the committed sample's verdicts.json, never typed in."""
    sample = ROOT / "reports" / "samples" / "tiny-cpu"
    judged = json.loads((sample / "verdicts.json").read_text())
    told = next(
        g["resolution"] for g in judged["noise_floor"]
        if (g["k"], g["n"]) == (1, 0) and g["case"]["precision"] == "fp32"
    )  # fmt: skip
    rows = standard_rows(ks=(1,), ns=(0,))
    for row in rows:
        row["preset"], row["device"] = "tiny", "cpu"
    report = analysis.report(write_run(tmp_path / "quick", rows, quick=True))
    reference = report.answer.full_sweep
    assert reference is not None and reference.sample == "tiny-cpu"
    assert reference.resolution == told
    assert reference.rows == len((sample / "results.jsonl").read_text().splitlines())
    section = by_id(build.build(tmp_path / "quick").read_text(), "answer")
    assert f"told apart {told * 100:.1f}%" in section
    for row in rows:
        row["preset"] = "small"  # no committed full sweep of that preset: nothing said
    other = analysis.report(write_run(tmp_path / "small", rows))
    assert other.answer.full_sweep is None


def test_answer_chart_has_every_strategy_and_keeps_a_far_one_on_its_edge(tmp_path):
    report = analysis.report(write_run(tmp_path / "run", standard_rows()))
    svg = build.render_charts(report)["answer"]
    assert svg is not None and 'data-chart="answer"' in svg
    for line in report.default_cases:
        assert f">{line.strategy}<" in svg or line.strategy in svg
    far = copy.deepcopy(report.default_cases)
    far[0].overhead = structs.replace(far[0].overhead, ratio=8.0, ci_low=7.5, ci_high=8.5)
    drawn = charts.answer(far, 1, 0)
    assert f"{far[0].strategy} 8.00× (off the scale)" in drawn
    assert "peak memory during a window (MiB, exact)" in drawn
    assert charts.answer([], 1, 0) is None


def test_page_puts_the_answer_first_and_the_method_collapsed_below_the_tables(tmp_path):
    html = build.build(write_run(tmp_path / "run", standard_rows())).read_text()
    order = [html.index(f'<section id="{name}">') for name in SECTIONS]
    assert order == sorted(order)
    method = by_id(html, "method")
    assert "<details>" in method and "docs/method.md" in method
    assert html.index('data-chart="answer"') < html.index('<section id="run">')


def table_widths(html: str) -> list[tuple[str, list[int]]]:
    """Each table of a page with the width of each of its lines, rowspans counted: a line a
    cell above reaches into is that much wider."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: list[tuple[str, list[int]]] = []
            self.section = ""

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "section":
                self.section = a.get("id", "")
            elif tag == "table":
                self.tables.append((self.section, []))
                self.reach: list[int] = []  # per line ahead: cells a rowspan puts there
            elif tag == "tr" and self.tables:
                carried = self.reach.pop(0) if self.reach else 0
                self.tables[-1][1].append(carried)
            elif tag in ("td", "th") and self.tables:
                span, down = int(a.get("colspan", 1)), int(a.get("rowspan", 1))
                self.tables[-1][1][-1] += span
                for i in range(down - 1):
                    self.reach.extend([0] * (i + 1 - len(self.reach)))
                    self.reach[i] += span

    parser = Tables()
    parser.feed(html)
    return parser.tables


@pytest.mark.parametrize("ranks", [False, True])
def test_the_case_table_is_its_column_list_and_a_failed_case_spans_it(ranks, tmp_path, monkeypatch):
    # a column declared in reports/page/columns.py is in the header and every line, and a
    # failed case's line spans exactly the measured columns, with the sync columns or without
    from reports.page import columns

    added = columns.Column(
        "tokens_per_second", "tokens/s", figure=columns.row_median("tokens_per_second", "{:.0f}")
    )
    monkeypatch.setattr(columns, "CASE_COLUMNS", (*columns.CASE_COLUMNS, added))
    rows = [make_row("native"), make_row("lazy", overhead=0.8)]
    for row in rows:
        row["tokens_per_second"] = 1234.4 if row["strategy"] == "lazy" else None
        if ranks:
            row["samples"]["sync"] = row["samples"]["reset"]
    rows.append(make_row("global", status="failed", error="process killed by SIGKILL"))
    html = build.build(write_run(tmp_path / "run", rows)).read_text()
    table = by_id(html, "strategies")
    assert '<th rowspan="2">tokens/s</th>' in table and "<td>1234</td>" in table
    assert ("sync<br>ms" in table) is ranks
    assert "see the failed cases" in table
    tables = table_widths(html)
    assert tables and any(section == "strategies" for section, _ in tables)
    for section, widths in tables:
        assert len(set(widths)) == 1, (section, widths)  # every line as wide as the header
