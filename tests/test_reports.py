"""The HTML reports: their content from rows made here, and a real tiny sweep's pages in Chromium.

Rows made here are schema-2 rows shaped like ``benches.engine.case.row_for``'s: paired samples (each
strategy window beside a plain-loop window of the same process), the row's paired ``overhead``
computed as the engine's ``case.measured_part`` computes it, exact memory figures and CPU pressure.
Their figures are planted, not measured: they check the arithmetic of what a report says.

The browser tests drive Debian's ``chromium`` through ``chromedriver`` (Selenium), both from the
system: ``.ci/run`` installs them. They skip, with the reason, only where neither can be found.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from conftest import run_reports

from benches.engine.spec import CaseSpec
from reports import analysis, build, charts, compare, stats, verdicts
from reports.__main__ import main as reports_main
from reports.rows import SCHEMA_VERSION, read

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (  # index.html's sections, in the page's order
    "run",
    "answer",
    "strategies",
    "verdicts",
    "overhead",
    "charts",
    "accumulation-error",
    "timeline",
    "cost-model",
    "flamegraphs",
    "failed",
    "pytest-benchmark",
    "environment",
    "raw",
)
CHARTS = ["phases", "memory", "reset-vs-live", "window-vs-k", "accumulation-error", "timeline"]
COMPARE_SECTIONS = ("runs", "verdict", "chart", "phases", "environment")
WORDS = ("lower", "higher", "same", "unclear")
MIB = 2**20


# -- rows made here -------------------------------------------------------------------------------
def spread(median: float, width: float = 0.01, n: int = 10) -> list[float]:
    """n samples evenly spread around median (+-width, relative): the median is exact."""
    return [median * (1 + width * (2 * i / (n - 1) - 1)) for i in range(n)]


def measured(row: dict) -> dict:
    """The row's figures from its samples, as the engine's ``case.measured_part`` computes them."""
    samples = row["samples"]
    row["phases"] = {
        p: stats.summarize(v)
        for p, v in samples.items()
        if p in ("reset", "forward", "backward", "update", "window")
    }
    plain = samples["plain_window"]
    pairs = stats.log_ratios(samples["window"], plain)
    overhead = stats.public(stats.paired([pairs], seed=row["round"]))
    overhead["plain"] = stats.summarize(plain)
    overhead["split_half"] = stats.split_half(plain)
    row["overhead"] = overhead
    pressure = samples["cpu_pressure"]
    row["cpu_pressure"] = {
        "median": float(np.median(pressure)),
        "max": max(pressure),
        "measure": "share of each pair's wall time in which some task waited for a CPU",
    }
    return row


def make_row(
    strategy: str,
    k: int = 1,
    n: int = 0,
    overhead: float = 1.0,
    plain: float = 0.010,
    reset: float = 1e-4,
    peak: int = 9 * MIB,
    held: int = MIB,
    pressure: float = 0.0,
    noise: float = 0.01,
    repeat: int = 10,
    round: int = 0,  # the row's field: its process
    control: bool = False,
    seed: int = 0,
    status: str = "ok",
    error: str | None = None,
    flamegraph: bool = False,
) -> dict:
    """A schema-2 row: ``repeat`` pairs, the strategy's window ``overhead`` times the plain
    loop's beside it, each side with its own +-``noise`` jitter (seeded by the case)."""
    # the case's identity as the engine writes it (benches.engine.case.row_for)
    spec = CaseSpec(
        strategy=strategy,
        preset="tiny",
        device="cpu",
        accumulate=k,
        live_tensors=n,
        repeat=repeat,
        warmup=1,
        threads=1,
        round=round,
        run_id="testrun",
    )
    case_id = spec.case_id
    row = {
        "schema_version": SCHEMA_VERSION,
        "run_id": spec.run_id,
        "case_id": case_id,
        **spec.identity(),
        "round": round,
        "status": status,
        "error": error,
        "control": control,
        "params": 297472,
        "tokens_per_window": 72 * k,
        "env": {"torch": "2.13.0+cpu", "device": "cpu", "threads": 1, "git_commit": "abc" * 10},
    }
    if status != "ok":
        return {**row, "phases": {}, "overhead": None, "memory": {}, "grad_check": None}
    rng = np.random.default_rng(zlib.crc32(repr((strategy, k, n, round, seed)).encode()))
    plain_w = plain * (1 + noise * rng.uniform(-1, 1, repeat))
    window = plain_w * overhead * (1 + noise * rng.uniform(-1, 1, repeat))
    resets = np.asarray(spread(reset, n=repeat))
    rest = (window - resets) / 3
    row["samples"] = {
        "reset": resets.tolist(),
        "forward": rest.tolist(),
        "backward": rest.tolist(),
        "update": rest.tolist(),
        "window": window.tolist(),
        "plain_window": plain_w.tolist(),
        "cpu_pressure": [pressure] * repeat,
    }
    row["memory"] = {
        "held_bytes": held,
        "peak_bytes": peak,
        "peak_method": "memray peak heap since before attach (aggregated capture)",
        "plain_held_bytes": 0,
        "plain_peak_bytes": 8 * MIB,
        "param_bytes": MIB,
        "memory_windows": 2,
        "memray_flamegraph": f"memray/{case_id}.html" if flamegraph else None,
        "rss_after_setup_bytes": 300 * MIB,
        "peak_rss_bytes": 302 * MIB,
        "peak_rss_is_since_setup": True,
        "growth_bytes_per_window": 0.0,
        "growth_measure": "rss",
        "timeline": {  # a window's allocated bytes: gradients freed (or not) at the reset
            "method": "fabricated",
            "start_bytes": peak // 2,
            "window_ms": plain * 1e3,
            "points": [[0.0, peak // 2], [plain * 100, peak // 2 - held], [plain * 900, peak]],
            "phases": [["start", 0.0], ["reset", plain * 50], ["end", plain * 1e3]],
        },
    }
    row["grad_check"] = {
        "max_abs_diff": 0.0,
        "max_rel_diff": 0.0,
        "tolerance": 1e-5,
        "ok": True,
        "worst_parameter": None,
        "window": 1,
        "windows": 3,
    }
    row["allreduce_per_window"] = None
    # the first window's error figures: one micro-batch adds nothing, so K=1 sums exactly
    row["accumulation_error"] = {"max_rel": 1e-7 * (k - 1), "norm_rel": 4e-8 * (k - 1)}
    row["total_error"] = {"max_rel": 8e-7 * k**0.5, "norm_rel": 5e-7 * k**0.5}
    return measured(row)


def rescale(row: dict, window: float = 1.0, plain: float = 1.0) -> dict:
    """A copy of the row with its strategy's times times ``window`` and its plain loop's times
    ``plain``; the figures recomputed from the samples, as the case would have."""
    row = copy.deepcopy(row)
    if row.get("status") != "ok":
        return row
    samples = row["samples"]
    for phase in ("reset", "forward", "backward", "update", "window"):
        samples[phase] = [x * window for x in samples[phase]]
    samples["plain_window"] = [x * plain for x in samples["plain_window"]]
    return measured(row)


def write_run(
    directory: Path, rows: list[dict], accumulate: list[int] | None = None, **sweep
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "results.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    ks = accumulate or sorted({r["accumulate"] for r in rows})
    run = {
        "run_id": directory.name,
        "created": "2026-01-01T00:00:00+00:00",
        "sweep": {"accumulate": ks, "repeat": 10, "warmup": 1, "rounds": 1, **sweep},
        "env": {"torch": "2.13.0+cpu", "device": "cpu"},
    }
    (directory / "run.json").write_text(json.dumps(run))
    return directory


OVERHEADS = {"native": 1.0, "lazy": 0.7, "block": 1.1, "global": 1.3, "flat": 0.5}
PEAKS = {"native": 9.5, "lazy": 10.0, "block": 9.0, "global": 9.5, "flat": 10.5}  # MiB


def standard_rows(seed: int = 0, plain: float = 0.010, ks=(1, 2), ns=(0, 10_000)) -> list[dict]:
    """lazy fastest (planted 0.7 of native), block leanest, global's reset grows with N; flat
    would be fastest but ran under CPU pressure; native in three processes (two controls), so
    the noise floor is measured at every K and N."""
    rows = []
    for k in ks:
        for n in ns:
            extra = 0.01 * n / 10_000  # global's reset: 1 ms + 10 ms per 10,000 live tensors
            for name, ratio in OVERHEADS.items():
                rows.append(
                    make_row(
                        name,
                        k,
                        n,
                        overhead=ratio,
                        plain=plain * k,
                        reset=0.001 + extra if name == "global" else 1e-4,
                        peak=int(PEAKS[name] * MIB),
                        pressure=0.3 if name == "flat" else 0.01,
                        seed=seed,
                        flamegraph=name == "lazy",
                    )
                )
            for r in (1, 2):  # the control's two extra processes
                peak = int(PEAKS["native"] * MIB)
                rows.append(
                    make_row(
                        "native", k, n, plain=plain * k, peak=peak, round=r, control=True, seed=seed
                    )
                )
    return rows


def by_id(html: str, section: str) -> str:
    start = html.index(f'<section id="{section}">')
    return html[start : html.index("</section>", start)]


def verdict_rows(html: str) -> list[tuple[str, str, str, str, str]]:
    """(a, b, metric, ratio, verdict) of each line of the verdicts section's first table."""
    table = by_id(html, "verdicts").split("</table>")[0]
    return re.findall(
        r'<code>([^<]+)</code></td><td class="text"><code>([^<]+)</code></td>\s*'
        r'<td class="text">(\w+)</td><td>([^<]+)</td>.*?verdict-(\w+)">',
        table,
        flags=re.S,
    )


# -- content: the answer ---------------------------------------------------------------------------
def test_answer_names_fastest_by_overhead_and_leanest_by_peak(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    report = analysis.report(directory)
    assert report["default"] == (1, 0)
    answer = report["answer"]
    assert answer["excluded_noisy"] == ["flat"]  # fastest, but measured under pressure
    assert answer["candidates"] == 4
    fastest = answer["fastest"]
    assert fastest["strategy"] == "lazy"
    assert fastest["overhead"]["ratio"] == pytest.approx(0.7, rel=0.01)
    assert fastest["overhead"]["confidence"] == 0.95 and fastest["overhead"]["pairs"] == 10
    assert fastest["runner_up"]["strategy"] == "native"
    assert fastest["runner_up"]["overhead"]["processes"] == 3
    lead = fastest["lead"]
    assert (lead["a"], lead["b"], lead["metric"]) == ("lazy", "native", "window")
    assert lead["ratio"] == pytest.approx(0.7, rel=0.01)
    assert lead["ci_high"] < 1 - max(answer["min_effect"], answer["noise_floor"])
    assert lead["verdict"] == "lower"
    assert answer["noise_floor"] is not None and 0 < answer["noise_floor"] < 0.05
    assert answer["min_effect"] == verdicts.DEFAULT_MIN_EFFECT
    leanest = answer["leanest"]
    assert (leanest["strategy"], leanest["peak_bytes"], leanest["held_bytes"]) == (
        "block",
        9 * MIB,
        MIB,
    )
    assert leanest["runner_up"]["peak_bytes"] == int(9.5 * MIB)
    assert leanest["lead"]["verdict"] == "lower" and leanest["lead"]["metric"] == "peak_memory"
    advice = answer["advice"]
    assert advice.startswith("Use `lazy` for speed: it is lower than `native`, the next fastest")
    assert f"beyond the {max(0.02, answer['noise_floor']):.1%} that this sweep" in advice
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
    assert "Left out of the answer: <code>flat</code>" in section
    assert "3 processes" not in section  # lazy ran in one process ...
    assert "10 pairs in 1 process)" in section  # ... and says so


def test_advice_is_a_tie_when_strategies_are_near_identical(tmp_path):
    rows = [make_row("native", round=r, control=r > 0) for r in (0, 1, 2)]
    rows += [make_row("lazy", overhead=1.001), make_row("block", overhead=1.3, peak=8 * MIB)]
    answer = analysis.report(write_run(tmp_path / "run", rows))["answer"]
    assert answer["noise_floor"] is not None
    lead = answer["fastest"]["lead"]
    assert {lead["a"], lead["b"]} == {"lazy", "native"}
    assert lead["verdict"] == "same"
    assert 1 - 0.02 <= lead["ci_low"] <= lead["ci_high"] <= 1 + 0.02
    assert not answer["advice"].startswith("Use")
    assert f"`{lead['a']}` and `{lead['b']}` tie on speed here" in answer["advice"]
    because = ": same, because their whole CI lies within +-2%), so choose on memory"
    assert because in answer["advice"]
    assert "; `block` needs the least memory at peak" in answer["advice"]


def test_no_lower_verdict_without_a_measured_noise_floor(tmp_path):
    """One process per strategy: the between-process noise is unknown, so even a planted
    30% lead is no more than unclear, and the advice does not pick a winner."""
    rows = [make_row("native"), make_row("lazy", overhead=0.7)]
    directory = write_run(tmp_path / "run", rows)
    answer = analysis.report(directory)["answer"]
    assert answer["noise_floor"] is None
    lead = answer["fastest"]["lead"]
    assert lead["ratio"] == pytest.approx(0.7, rel=0.01) and lead["ci_high"] < 0.9
    assert lead["verdict"] == "unclear"
    assert answer["advice"].startswith("`lazy` and `native` tie on speed here")
    section = by_id(build.build(directory).read_text(), "answer")
    assert "not measured: only <i>same</i> or <i>unclear</i> can be said" in section


def test_noisy_cases_are_left_out_of_the_answer(tmp_path):
    rows = [make_row("native", round=r, control=r > 0) for r in (0, 1, 2)]
    rows += [
        make_row("lazy", overhead=0.5, peak=4 * MIB, pressure=verdicts.NOISY_PRESSURE + 0.05),
        make_row("block", overhead=0.9, peak=8 * MIB, pressure=verdicts.NOISY_PRESSURE - 0.05),
    ]
    report = analysis.report(write_run(tmp_path / "run", rows))
    answer = report["answer"]
    assert answer["excluded_noisy"] == ["lazy"]
    assert answer["fastest"]["strategy"] == "block"
    # memory is exact, so CPU pressure does not disqualify it: the noisy case is still leanest
    assert answer["leanest"]["strategy"] == "lazy"
    assert "Use `lazy`" not in answer["advice"]
    assert report["noisy"] == ["lazy-k1-n0-tiny-cpu-r0"]
    lazy = next(c for c in report["cases"] if c["strategy"] == "lazy")
    assert lazy["noisy"] and lazy["cpu_pressure"] == pytest.approx(0.15)
    # its comparisons are still stated, marked noisy
    window = verdicts.lookup(report["verdicts"], "lazy", "native", 1, 0, "window")
    assert window["noisy"] is True

    only_noisy = [make_row("lazy", pressure=0.5), make_row("native", pressure=0.5)]
    answer = analysis.report(write_run(tmp_path / "noisy", only_noisy))["answer"]
    assert answer["excluded_noisy"] == ["lazy", "native"] and "fastest" not in answer
    assert answer["advice"] == "No strategy finished without CPU pressure at K=1, N=0."


def test_default_case_is_the_sweeps_first_k_and_no_ballast(tmp_path):
    rows = [make_row(s, k, n) for s in ("native", "lazy") for k in (1, 4) for n in (0, 500)]
    report = analysis.report(write_run(tmp_path / "run", rows, accumulate=[4, 1]))
    assert report["default"] == (4, 0)
    assert {(c["k"], c["n"]) for c in report["default_cases"]} == {(4, 0)}
    assert (report["answer"]["k"], report["answer"]["n"]) == (4, 0)


# -- content: verdicts.json and the tables --------------------------------------------------------
def test_verdicts_json_is_written_and_the_page_shows_what_it_says(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    html = build.build(directory).read_text()
    judged = json.loads((directory / verdicts.VERDICTS).read_text())
    assert judged["schema_version"] == verdicts.VERDICTS_SCHEMA_VERSION
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
    for floor in judged["noise_floor"]:
        assert floor["measured"] and floor["df"] == 2, floor
        parts = ("in_process", "between_processes_observed", "between_processes_bound")
        assert floor["floor"] == max(floor[part] for part in parts)
        assert f"<b>{floor['floor'] * 100:.1f}%</b>" in by_id(html, "answer")
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
    lead = report["answer"]["fastest"]["lead"]
    stored = verdicts.lookup(judged, "lazy", "native", 1, 0, "window")
    assert lead["verdict"] == stored["verdict"]
    assert lead["ci_low"] == pytest.approx(stored["ci_low"])
    assert "verdicts.json" in by_id(html, "raw")


def test_case_table_overheads_and_reset_slopes(tmp_path):
    report = analysis.report(write_run(tmp_path / "run", standard_rows()))
    cases = {c["strategy"]: c for c in report["default_cases"]}
    native, lazy = cases["native"], cases["lazy"]
    assert native["rounds"] == 3 and "vs_native" not in native
    assert native["overhead"]["processes"] == 3 and native["overhead"]["pairs"] == 30
    assert native["overhead"]["method"].startswith("hierarchical percentile bootstrap")
    assert lazy["overhead"]["ratio"] == pytest.approx(0.7, rel=0.01)
    assert lazy["vs_native"]["window"]["verdict"] == "lower"
    assert lazy["vs_native"]["peak_memory"]["verdict"] == "higher"  # 10 MiB against 9.5
    assert lazy["vs_native"]["held_memory"]["verdict"] == "same"
    assert (lazy["memory"]["peak_bytes"], lazy["memory"]["plain_peak_bytes"]) == (10 * MIB, 8 * MIB)
    assert lazy["grad_check"] == {
        "max_rel_diff": 0.0,
        "max_abs_diff": 0.0,
        "tolerance": 1e-5,
        "windows": 3,
        "ok": True,
    }
    assert cases["flat"]["noisy"] and not lazy["noisy"]
    core = {(o["k"], o["n"]): o for o in report["overheads"]}
    assert sorted(core) == [(1, 0), (1, 10_000), (2, 0), (2, 10_000)]
    assert core[(1, 0)]["ratio"] == pytest.approx(1.0, abs=0.01)
    assert core[(1, 0)]["plain"]["n"] == 30 and core[(1, 0)]["processes"] == 3
    slopes = {s["strategy"]: s for s in report["slopes"]}
    assert slopes["global"]["slope_s"] == pytest.approx(1e-6)  # 10 ms per 10,000 tensors
    assert slopes["native"]["slope_s"] == pytest.approx(0, abs=1e-15)
    assert [p["live"] for p in slopes["global"]["points"]] == [0, 10_000]


def test_page_is_self_contained_with_every_section_and_chart(tmp_path):
    html = build.build(write_run(tmp_path / "run", standard_rows())).read_text()
    assert len(html.encode()) < build.MAX_BYTES
    positions = [html.index(f'<section id="{s}">') for s in SECTIONS]
    assert positions == sorted(positions)
    for pattern in (r"<script", r"<img", r"\ssrc=", r'rel="stylesheet"', r"@import", r"url\(http"):
        assert not re.search(pattern, html), pattern
    assert re.findall(r'data-chart="([^"]+)"', html) == CHARTS
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
    assert report["precision"] == "fp32" and report["precisions"] == ["fp32", "bf16"]
    lines = report["errors"]
    assert len(lines) == len(OVERHEADS) * 2 * 2  # strategies x precisions x K
    assert [(e["strategy"], e["precision"], e["k"]) for e in lines[:4]] == [
        ("native", "fp32", 1),
        ("native", "fp32", 2),
        ("native", "bf16", 1),
        ("native", "bf16", 2),
    ]
    bf16 = next(e for e in lines if (e["strategy"], e["precision"], e["k"]) == ("lazy", "bf16", 2))
    assert bf16["accumulation"] == {
        "max_rel": pytest.approx(1e-2),
        "norm_rel": pytest.approx(4e-3),
    }
    assert bf16["total"]["norm_rel"] == pytest.approx(5e-2 * 2**0.5)
    assert (bf16["tolerance"], bf16["check_ok"], bf16["windows"]) == (0.0625, True, 3)
    checks = {g["precision"]: g for g in report["grad_checks"]}
    assert list(checks) == ["fp32", "bf16"]
    assert checks["bf16"]["cases"] == checks["bf16"]["passed"] == 2 * len(OVERHEADS)
    assert (checks["bf16"]["tolerance_min"], checks["bf16"]["tolerance_max"]) == (0.03125, 0.0625)
    # the same figures in every strategy: one line per precision, naming them all
    series = charts._error_series(lines)
    names = sorted(OVERHEADS, key=analysis.strategy_order)  # the tables' order
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
    assert "swept: <b>fp32, bf16</b>; the tables show <b>fp32</b>" in run
    assert "verdicts.json</a> holds every precision" in run


def test_rows_without_error_figures_have_no_accumulation_section(tmp_path):
    rows = standard_rows(ks=(1,), ns=(0,))
    for row in rows:
        del row["accumulation_error"], row["total_error"]
    html = build.build(write_run(tmp_path / "run", rows)).read_text()
    assert analysis.report(tmp_path / "run")["errors"] == []
    assert 'id="accumulation-error"' not in html and "#accumulation-error" not in html
    assert 'data-chart="accumulation-error"' not in html
    assert "Settings compared" not in html  # nor without --compare-settings
    run = by_id(html, "run")
    for fact in ("<dt>optimizer</dt><dd><code>adamw</code>", "<dt>clip norm</dt><dd>none"):
        assert fact in run
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
        assert "schema_version 1 rows cannot be read" in done.stderr
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
    result = json.loads((b / compare.COMPARE).read_text())  # beside the page, in B's directory
    assert result["schema_version"] == verdicts.VERDICTS_SCHEMA_VERSION
    assert result["min_effect"] == verdicts.DEFAULT_MIN_EFFECT
    assert all(f["floor"] is not None for f in result["noise_floor"])
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
    assert report["counts"] == {"lower": 0, "higher": 4, "same": 16, "unclear": 0}
    assert report["only_b"] == [("foreach", 1, 0, "last")] and report["only_a"] == []
    html = (b / "compare.html").read_text()
    assert 'data-chart="compare-window"' in html
    assert "(slower) in 4" in by_id(html, "verdict")
    lines = by_id(html, "phases").split("<tr>")
    lazy_line = next(line for line in lines if line.startswith('<td class="text"><code>lazy<'))
    assert '<span class="verdict verdict-higher">higher</span>' in lazy_line
    assert "<code>foreach</code> K=1 N=0: only in B" in html
    # the other way round, B's planted slowdown is A's speedup: lower, as often as higher
    back = compare.comparison(b, a)
    back_lazy = [line["window"] for line in back["lines"] if line["strategy"] == "lazy"]
    assert [w["verdict"] for w in back_lazy] == ["lower"] * 4, back_lazy
    assert back["only_a"] == [("foreach", 1, 0, "last")]


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
    assert len(result["lines"]) == 4 * len(OVERHEADS)
    for line in result["lines"]:
        window = line["window"]
        assert window["verdict"] not in ("lower", "higher"), (line["label"], window)
        assert window["ratio"] == pytest.approx(1.0, abs=0.02)
        medians = {p["phase"]: (p["a"]["median_s"], p["b"]["median_s"]) for p in line["phases"]}
        assert medians["window"][1] / medians["window"][0] == pytest.approx(2.0, rel=0.03)
    if how == "the same samples":  # identical paired ratios: exactly no change, and same
        assert {line["window"]["verdict"] for line in result["lines"]} == {"same"}
    assert result["counts"]["lower"] == result["counts"]["higher"] == 0


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
        "import sys, reports.build, reports.compare, reports.__main__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('benches', 'strategies')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# -- a real sweep ---------------------------------------------------------------------------------
STRATEGIES = ("native", "lazy", "global")  # three: every process costs ~4 s of the suite
PAIRS = len(STRATEGIES) * (len(STRATEGIES) - 1) // 2
BENCH_TEST = """
def test_sum(benchmark):
    benchmark.extra_info["what"] = "sum of 1000 ints"
    benchmark(sum, range(1000))
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """One real tiny sweep (every case a fresh process, native in two more processes at every
    K and N as the control), with real pytest-benchmark output beside it."""
    out = tmp_path_factory.mktemp("sweep")
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny"]
    command += ["--accumulate", "1,2", "--live-tensors", "0", "--repeat", "6"]
    command += ["--warmup", "1", "--threads", "1", "--strategies", ",".join(STRATEGIES)]
    done = subprocess.run(
        [*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "index.html").exists()  # the sweep renders its report itself
    bench_dir = tmp_path_factory.mktemp("bench")
    (bench_dir / "test_sum.py").write_text(BENCH_TEST)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(bench_dir)),
            *("--benchmark-max-time=0.05", f"--benchmark-json={out / 'pytest-benchmark.json'}"),
        ],
        cwd=bench_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    done = run_reports("build", str(out))
    assert done.returncode == 0, done.stderr
    return out


def planted_factor(sweep: Path) -> float:
    """A slowdown well beyond the sweep's measured noise floor: 2x, or more on a machine so
    busy that its floor hides 2x (the floor is what a verdict promises to see past)."""
    judged = json.loads((sweep / verdicts.VERDICTS).read_text())
    return max(2.0, 2 * (1 + max(f["floor"] for f in judged["noise_floor"])))


@pytest.fixture(scope="module")
def slower(sweep, tmp_path_factory) -> Path:
    """The sweep's rows with lazy's strategy windows slowed down (``planted_factor``), its
    plain windows left alone."""
    directory = tmp_path_factory.mktemp("slower")
    factor = planted_factor(sweep)
    with open(sweep / "results.jsonl") as f, open(directory / "results.jsonl", "w") as out:
        for line in f:
            row = json.loads(line)
            if row["strategy"] == "lazy" and row["status"] == "ok":
                row["samples"]["window"] = [x * factor for x in row["samples"]["window"]]
            out.write(json.dumps(row) + "\n")
    shutil.copy(sweep / "run.json", directory / "run.json")
    return directory


def test_real_sweep_rows_and_verdicts(sweep):
    rows = read(sweep)
    assert {r["schema_version"] for r in rows} == {SCHEMA_VERSION}
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows if r["error"]]
    assert len(rows) == 2 * (len(STRATEGIES) + 2)
    controls = [r for r in rows if r["control"]]
    assert len(controls) == 2 * 2 and {r["strategy"] for r in controls} == {"native"}
    for row in rows:
        assert len(row["samples"]["window"]) == len(row["samples"]["plain_window"]) == 6
        assert row["memory"]["held_bytes"] >= 0 and row["memory"]["peak_bytes"] > 0
        assert row["grad_check"]["ok"] and row["grad_check"]["windows"] >= 2
    judged = json.loads((sweep / verdicts.VERDICTS).read_text())
    assert len(judged["noise_floor"]) == 2
    assert all(f["measured"] and f["floor"] is not None for f in judged["noise_floor"])
    assert len(judged["comparisons"]) == 2 * PAIRS * len(verdicts.METRICS)
    assert {c["verdict"] for c in judged["comparisons"]} <= set(WORDS)
    report = analysis.report(sweep)
    assert judged == verdicts.finite(report["verdicts"])  # rebuilt: the same, to the bit
    # every strategy, the control's first process too, has its timeline and its cost model
    assert {t["label"] for t in report["timelines"]} == {*STRATEGIES, "plain loop"}
    assert {c["strategy"] for c in report["costs"]} == set(STRATEGIES)
    # the answer at the default K and N follows the verdicts, whatever this machine measured
    answer = report["answer"]
    k, n = report["default"]
    assert (answer["k"], answer["n"]) == (k, n) == (1, 0)
    here = [r for r in rows if (r["accumulate"], r["live_tensors"]) == (k, n)]
    noisy = {r["strategy"] for r in here if r["cpu_pressure"]["median"] > verdicts.NOISY_PRESSURE}
    assert answer["excluded_noisy"] == sorted(noisy)
    assert answer["candidates"] == len(STRATEGIES) - len(noisy)
    floor = next(f["floor"] for f in judged["noise_floor"] if (f["k"], f["n"]) == (k, n))
    assert answer["noise_floor"] == floor
    if answer["candidates"] >= 2:
        lead = answer["fastest"]["lead"]
        assert lead == verdicts.lookup(report["verdicts"], lead["a"], lead["b"], k, n, "window")
        assert answer["advice"].startswith("Use") == (lead["verdict"] == "lower")
        assert ("tie on speed" in answer["advice"]) == (lead["verdict"] != "lower")
        overheads = {
            o["strategy"]: o["ratio"]
            for o in judged["overheads"]
            if (o["k"], o["n"]) == (k, n) and o["strategy"] not in noisy
        }
        assert answer["fastest"]["strategy"] == min(overheads, key=overheads.get)


def test_real_sweep_compared_with_itself_on_a_slower_machine(sweep, tmp_path):
    """Every time of the real sweep doubled, strategy and plain loop alike: no verdict moves."""
    b = tmp_path / "b"
    b.mkdir()
    with open(sweep / "results.jsonl") as f, open(b / "results.jsonl", "w") as out:
        for line in f:
            row = json.loads(line)
            row["samples"] = {
                p: v if p == "cpu_pressure" else [x * 2 for x in v]
                for p, v in row["samples"].items()
            }
            out.write(json.dumps(row) + "\n")
    result = compare.comparison(sweep, b)
    assert len(result["lines"]) == 2 * len(STRATEGIES)
    for line in result["lines"]:
        assert line["window"]["ratio"] == pytest.approx(1.0, rel=1e-9)
        assert line["window"]["verdict"] not in ("lower", "higher"), line["window"]


# -- in a real browser ----------------------------------------------------------------------------
def _find(name: str, fallback: str) -> str | None:
    return shutil.which(name) or (fallback if os.path.exists(fallback) else None)


@pytest.fixture(scope="module")
def browser():
    chromium = _find("chromium", "/usr/bin/chromium")
    driver_path = _find("chromedriver", "/usr/bin/chromedriver")
    if not chromium or not driver_path:
        pytest.skip(
            "BROWSER TEST SKIPPED: Debian's chromium and chromium-driver are not installed "
            f"(chromium: {chromium}, chromedriver: {driver_path}); "
            "apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def open_page(driver, path: Path) -> None:
    driver.get_log("browser")  # what an earlier page logged does not count
    driver.get(path.resolve().as_uri())


def open_offline(driver, path: Path) -> None:
    """Open a page and check it is self-contained: no console error, no request leaves the
    file, no script."""
    open_page(driver, path)
    assert console_errors(driver) == []
    assert external_requests(driver) == []
    assert driver.execute_script("return document.scripts.length") == 0


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def full_screenshot(driver, save_as: Path) -> bytes:
    """The whole page, beyond the window's height, as PNG bytes (also written to save_as)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    png = base64.b64decode(shot["data"])
    save_as.write_bytes(png)
    if os.environ.get("ZEROGRAD_SCREENSHOTS"):  # to look at it yourself
        Path(os.environ["ZEROGRAD_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(save_as, Path(os.environ["ZEROGRAD_SCREENSHOTS"]) / save_as.name)
    return png


def assert_not_blank(png: bytes) -> None:
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    assert pixels.shape[0] > 1000, pixels.shape
    assert pixels.std() > 20, f"screenshot looks blank: grey std {pixels.std():.1f}"
    assert (pixels < 128).mean() > 0.01, "screenshot has almost no dark pixels: no text?"


def chart_boxes(driver) -> list[dict]:
    return driver.execute_script(
        "return [...document.querySelectorAll('svg.chart')].map(s => {"
        " const b = s.getBoundingClientRect();"
        " return {name: s.dataset.chart, width: b.width, height: b.height,"
        " texts: s.querySelectorAll('text').length}; });"
    )


def external_requests(driver) -> list[str]:
    """Every resource the page loaded that is not the page itself or inline data."""
    names = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name);"
    )
    return [n for n in names if not n.startswith(("data:", "about:"))]


def table_words(driver, section: str) -> list[str]:
    """The verdict words of the section's first table, in order."""
    table = driver.find_element("css selector", f"#{section} table")
    assert table.is_displayed()
    return [e.text for e in table.find_elements("css selector", ".verdict")]


def test_report_renders_in_chromium(sweep, browser, tmp_path):
    page = sweep / "index.html"
    assert page.stat().st_size < build.MAX_BYTES
    html = page.read_text()
    assert "<script" not in html
    open_offline(browser, page)
    tops = browser.execute_script(
        "return arguments[0].map(id => { const e = document.getElementById(id);"
        " return e ? e.getBoundingClientRect().top + window.scrollY : null; });",
        list(SECTIONS),
    )
    assert None not in tops, dict(zip(SECTIONS, tops, strict=True))
    assert tops == sorted(tops), "sections out of the page's order"
    boxes = chart_boxes(browser)
    # one N in this sweep: no reset-against-N chart (the planted rows' page test has it)
    assert [b["name"] for b in boxes] == [c for c in CHARTS if c != "reset-vs-live"]
    for box in boxes:
        assert box["width"] > 300 and box["height"] > 150, box
        assert box["texts"] > 5, box  # title, labels, ticks, legend are text
    answer = browser.find_element("id", "answer").text
    assert "Fastest:" in answer and "Leanest:" in answer and "noise floor" in answer
    # the verdicts section shows, visibly, the word verdicts.json gives each comparison here
    judged = json.loads((sweep / verdicts.VERDICTS).read_text())
    k, n = analysis.report(sweep)["default"]
    here = [c for c in judged["comparisons"] if (c["k"], c["n"]) == (k, n)]
    assert len(here) == PAIRS * len(verdicts.METRICS)
    words = table_words(browser, "verdicts")
    assert words == [c["verdict"] for m in verdicts.METRICS for c in here if c["metric"] == m]
    verdicts_text = browser.find_element("id", "verdicts").text
    assert all(word in verdicts_text for word in set(words))
    for floor in judged["noise_floor"]:
        assert f"{floor['floor'] * 100:.1f}%" in answer
    assert "test_sum" in browser.find_element("id", "pytest-benchmark").text
    png = full_screenshot(browser, tmp_path / "report.png")
    assert_not_blank(png)


@pytest.fixture(scope="module")
def recipe_sweep(tmp_path_factory) -> tuple[Path, str]:
    """A real tiny sweep in two precisions, each case's loop paired with a bf16-autocast one
    (--compare-settings): native at K=1 and 4, four processes; its directory and its output."""
    out = tmp_path_factory.mktemp("recipe")
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny", "--strategies"]
    command += ["native", "--accumulate", "1,4", "--live-tensors", "0", "--repeat", "2"]
    command += ["--warmup", "0", "--threads", "1", "--control", "none", "--precision"]
    command += ["fp32,bf16", "--compare-settings", "precision=bf16-autocast"]
    done = subprocess.run(
        [*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out, done.stdout


def test_recipe_sweep_shows_every_precision_and_the_settings_compared(recipe_sweep):
    out, stdout = recipe_sweep
    rows = read(out)
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows if r["error"]]
    report = analysis.report(out)
    assert (report["precision"], report["precisions"]) == ("fp32", ["fp32", "bf16"])
    errors = {(e["precision"], e["k"]): e for e in report["errors"]}
    assert sorted(errors) == [("bf16", 1), ("bf16", 4), ("fp32", 1), ("fp32", 4)]
    for precision in ("fp32", "bf16"):  # one micro-batch: nothing added, nothing rounded
        assert errors[(precision, 1)]["accumulation"] == {"max_rel": 0.0, "norm_rel": 0.0}
    # a bf16 .grad rounds each addition at 2**-8, an fp32 one at 2**-24
    assert (
        errors[("bf16", 4)]["accumulation"]["norm_rel"]
        > 100 * errors[("fp32", 4)]["accumulation"]["norm_rel"]
    )
    for e in errors.values():
        assert e["check_ok"] and e["tolerance"] >= e["accumulation"]["max_rel"], e
    judged = json.loads((out / verdicts.VERDICTS).read_text())
    settings = judged["settings"]
    assert {(c["case"]["precision"], c["k"], c["a"], c["b"]) for c in settings} == {
        (p, k, f"precision={p}", "precision=bf16-autocast")
        for p in ("fp32", "bf16")
        for k in (1, 4)
    }
    html = (out / "index.html").read_text()  # the sweep's own page
    section = by_id(html, "settings")
    assert section.count("<tr>") == 1 + len(settings)
    assert section.count('class="verdict verdict-') == len(settings) + 1  # + the legend's word
    assert "<code>precision=bf16</code> vs <code>precision=bf16-autocast</code>" in section
    assert 'href="#settings"' in html and 'href="#accumulation-error"' in html
    assert by_id(html, "accumulation-error").count('data-chart="accumulation-error"') == 1
    run = by_id(html, "run")
    assert "swept: <b>fp32, bf16</b>; the tables show <b>fp32</b>" in run
    assert "<dt>optimizer</dt><dd><code>adamw</code>" in run
    assert "<dt>clip norm</dt><dd>none</dd>" in run and "<dt>torch.compile</dt><dd>off" in run
    assert "<dt>--compare-settings</dt><dd><code>precision=bf16-autocast</code>" in run
    # the terminal summary's table of the same comparisons
    assert "settings compared (--compare-settings precision=bf16-autocast" in stdout
    assert stdout.count("bf16 vs bf16-autocast") == stdout.count("fp32 vs bf16-autocast") == 2


def test_recipe_sweep_page_in_chromium(recipe_sweep, browser):
    from PIL import Image

    out, _ = recipe_sweep
    open_offline(browser, out / "index.html")
    for section in ("run", "settings", "accumulation-error"):
        assert browser.find_element("id", section).is_displayed()
    (box,) = [b for b in chart_boxes(browser) if b["name"] == "accumulation-error"]
    assert box["width"] > 300 and box["height"] > 150 and box["texts"] > 10, box
    chart = browser.find_element("css selector", 'svg[data-chart="accumulation-error"]')
    png = chart.screenshot_as_png
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
    assert pixels.mean(axis=2).std() > 20, "the chart looks blank"
    for colour in charts.COLOURS[:2]:  # each precision's line: fp32 in the first, bf16 the second
        near = np.abs(pixels - np.array(colour) * 255).max(axis=2) < 40
        assert near.sum() > 50, f"no line in {colour}"
    text = browser.find_element("id", "run").text
    assert "precision=bf16-autocast" in text and "the tables show fp32" in text


def test_compare_page_renders_in_chromium(sweep, slower, browser, tmp_path):
    done = run_reports("compare", str(sweep), str(slower))
    assert done.returncode == 0, done.stderr
    page = slower / "compare.html"
    assert done.stdout.strip() == str(page)
    result = json.loads((slower / compare.COMPARE).read_text())
    windows = [c for c in result["comparisons"] if c["metric"] == "window"]
    lazy = [c for c in windows if c["strategy"] == "lazy"]
    assert len(lazy) == 2
    assert {c["verdict"] for c in lazy} == {"higher"}, lazy
    others = [c for c in windows if c["strategy"] != "lazy"]
    assert all(c["verdict"] not in ("lower", "higher") for c in others), others
    open_offline(browser, page)
    for section in COMPARE_SECTIONS:
        assert browser.find_element("id", section).is_displayed()
    (box,) = chart_boxes(browser)
    assert box["name"] == "compare-window"
    assert box["width"] > 300 and box["height"] > 100, box
    assert "(slower) in 2" in browser.find_element("id", "verdict").text
    rows = browser.find_elements("css selector", "#phases table tbody tr")
    lazy_rows = [r for r in rows if r.text.startswith("lazy")]
    assert len(lazy_rows) >= 2
    for row in lazy_rows[:2]:  # the first table: per case, with verdicts
        assert row.find_elements("css selector", ".verdict")[0].text == "higher", row.text
    assert_not_blank(full_screenshot(browser, tmp_path / "compare.png"))
