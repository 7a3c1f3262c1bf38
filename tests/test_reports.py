"""The HTML reports: their content from rows made here, and a real tiny sweep's pages in Chromium.

The browser tests drive Debian's ``chromium`` through ``chromedriver`` (Selenium), both from the
system: ``.ci/run`` installs them. They skip, with the reason, only where neither can be found.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import analysis, build, compare, stats
from reports.__main__ import main as reports_main
from reports.rows import read

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (  # index.html's sections, in the order
    "run",
    "answer",
    "strategies",
    "overhead",
    "charts",
    "flamegraphs",
    "failed",
    "pytest-benchmark",
    "environment",
    "raw",
)
COMPARE_SECTIONS = ("runs", "verdict", "chart", "phases", "environment")


# -- rows made here -------------------------------------------------------------------------------
def samples(median: float, spread: float = 0.01, n: int = 8) -> list[float]:
    """n samples evenly spread around median (+-spread, relative): the median is exact."""
    return [median * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)]


def make_row(
    strategy: str,
    k: int = 1,
    n: int = 0,
    window: float = 0.010,
    reset: float = 1e-4,
    memray_peak: int = 4 * 2**20,
    spread: float = 0.01,
    status: str = "ok",
    error: str | None = None,
) -> dict:
    case_id = f"{strategy}-k{k}-n{n}-tiny-cpu-r0"
    row = {
        "schema_version": 1,
        "run_id": "testrun",
        "case_id": case_id,
        "strategy": strategy,
        "preset": "tiny",
        "device": "cpu",
        "dtype": "float32",
        "accumulate": k,
        "live_tensors": n,
        "world_size": 1,
        "round": 0,
        "repeat": 8,
        "warmup": 1,
        "threads": 2,
        "status": status,
        "error": error,
        "params": 297472,
        "tokens_per_window": 72 * k,
        "env": {"torch": "2.13.0+cpu", "device": "cpu", "threads": 2, "git_commit": "abc" * 10},
    }
    if status != "ok":
        return {**row, "phases": {}, "samples": {}, "overhead": None, "memory": {}}
    forward = backward = update = (window - reset) / 3
    row["samples"] = {
        "reset": samples(reset, spread),
        "forward": samples(forward, spread),
        "backward": samples(backward, spread),
        "update": samples(update, spread),
        "window": samples(window, spread),
    }
    if strategy == "native":
        row["samples"]["baseline_window"] = samples(window * 0.99, spread)
    row["phases"] = {p: stats.summarize(v) for p, v in row["samples"].items()}
    row["overhead"] = None
    row["memory"] = {
        "rss_after_setup_bytes": 300 * 2**20,
        "peak_rss_bytes": 302 * 2**20,
        "growth_bytes_per_window": 0.0,
        "growth_measure": "rss",
        "cuda_peak_allocated_bytes": None,
        "cuda_peak_reserved_bytes": None,
        "memray_peak_bytes": memray_peak,
        "memray_allocations": 78000,
        "memray_flamegraph": f"memray/{case_id}.html",
    }
    row["grad_check"] = {"max_abs_diff": 0.0, "max_rel_diff": 0.0, "tolerance": 1e-5, "ok": True}
    return row


def write_run(directory: Path, rows: list[dict], accumulate: list[int] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "results.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    ks = accumulate or sorted({r["accumulate"] for r in rows})
    run = {
        "run_id": "testrun",
        "created": "2026-01-01T00:00:00+00:00",
        "sweep": {"accumulate": ks, "repeat": 8, "warmup": 1, "rounds": 1},
        "env": {"torch": "2.13.0+cpu", "device": "cpu"},
    }
    (directory / "run.json").write_text(json.dumps(run))
    return directory


def standard_rows() -> list[dict]:
    """baseline fastest (must not win), lazy fastest of the rest, native leanest, global slow."""
    rows = []
    for k in (1, 4):
        for n in (0, 10_000):
            extra = 0.01 * n / 10_000  # global's reset: 1 ms + 10 ms per 10,000 live tensors
            rows += [
                make_row("baseline", k, n, window=0.005 * k, memray_peak=1 * 2**20),
                make_row("native", k, n, window=0.010 * k, memray_peak=3 * 2**20),
                make_row("lazy", k, n, window=0.008 * k, reset=1e-5, memray_peak=5 * 2**20),
                make_row("global", k, n, window=0.030 * k + extra, reset=0.001 + extra),
            ]
    return rows


def by_id(html: str, section: str) -> str:
    start = html.index(f'<section id="{section}">')
    return html[start : html.index("</section>", start)]


# -- content --------------------------------------------------------------------------------------
def test_answer_names_fastest_and_leanest_without_baseline(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    report = analysis.report(directory)
    assert report["default"] == (1, 0)
    answer = report["answer"]
    assert answer["fastest"]["strategy"] == "lazy"
    assert answer["fastest"]["median_s"] == pytest.approx(0.008)
    assert answer["fastest"]["runner_up"]["strategy"] == "native"
    assert answer["fastest"]["lead"]["ratio"] == pytest.approx(1.25)
    assert answer["fastest"]["lead"]["significant"] is True
    assert answer["leanest"]["strategy"] == "native"
    assert answer["leanest"]["bytes"] == 3 * 2**20
    assert answer["memory_metric"] == "memray_peak_bytes"
    assert answer["advice"] == (
        "Use `lazy` for speed: `native`, the next fastest, takes 1.25x as long per window, "
        "a significant lead; "
        "`native` needs the least memory; avoid `global` where many tensors are alive: its reset "
        "grows by 10.0 ms per 10,000 live tensors."
    )
    html = build.build(directory).read_text()
    section = by_id(html, "answer")
    assert "Fastest: <code>lazy</code>" in section
    assert "Leanest: <code>native</code>" in section
    assert "a significant lead" in section
    assert "bootstrap" in section  # the test is stated


def test_lead_is_not_significant_when_samples_overlap(tmp_path):
    rows = [
        make_row("native", window=0.0100, spread=0.3),
        make_row("lazy", window=0.0099, spread=0.3),
    ]
    answer = analysis.report(write_run(tmp_path / "run", rows))["answer"]
    lead = answer["fastest"]["lead"]
    assert lead["ci_low"] < 1 < lead["ci_high"]
    assert lead["significant"] is False
    assert answer["advice"].startswith(
        "`lazy` and `native` are not significantly different in speed here"
    )


def test_default_case_is_the_sweeps_first_k_and_no_ballast(tmp_path):
    rows = [make_row(s, k, n) for s in ("native", "lazy") for k in (1, 4) for n in (0, 500)]
    report = analysis.report(write_run(tmp_path / "run", rows, accumulate=[4, 1]))
    assert report["default"] == (4, 0)
    assert {(c["k"], c["n"]) for c in report["default_cases"]} == {(4, 0)}


def test_strategy_table_has_ratios_to_baseline_and_native(tmp_path):
    report = analysis.report(write_run(tmp_path / "run", standard_rows()))
    lazy = next(c for c in report["default_cases"] if c["strategy"] == "lazy")
    assert lazy["vs_baseline"]["ratio"] == pytest.approx(1.6)
    assert lazy["vs_native"]["ratio"] == pytest.approx(0.8)
    assert lazy["vs_baseline"]["significant"] and lazy["vs_native"]["significant"]
    native = next(c for c in report["default_cases"] if c["strategy"] == "native")
    assert "vs_native" not in native
    html = build.build(tmp_path / "run").read_text()
    table = by_id(html, "strategies")
    assert "1.600*" in table and "0.800*" in table


def test_overhead_and_reset_slopes(tmp_path):
    report = analysis.report(write_run(tmp_path / "run", standard_rows()))
    overhead = report["overheads"][0]
    assert (overhead["k"], overhead["n"]) == (1, 0)
    assert overhead["ratio"] == pytest.approx(1 / 0.99)
    assert overhead["test"] == "paired bootstrap"
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
    assert re.findall(r'data-chart="([^"]+)"', html) == [
        "phases",
        "memory",
        "reset-vs-live",
        "window-vs-k",
    ]
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "an id repeats: inline SVGs would share clip paths"
    for title in ("Where a window's time goes", "Memory per strategy", "Reset time against"):
        assert title in by_id(html, "charts")
    assert "(ms" in html and "(MiB)" in html  # axis labels carry units
    assert "memray/lazy-k1-n0-tiny-cpu-r0.html (not kept beside this copy)" in html
    assert '<a href="results.jsonl">' in html
    assert "No <code>pytest-benchmark.json</code>" in html


def test_corrupt_lines_are_skipped_and_failures_shown(tmp_path):
    rows = [
        make_row("native"),
        make_row("lazy", window=0.008),
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


def test_pytest_benchmark_results_are_shown(tmp_path):
    directory = write_run(tmp_path / "run", standard_rows())
    bench = {
        "machine_info": {"cpu": {"brand_raw": "Test CPU"}},
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


def test_compare_ratio_ci_and_significance(tmp_path):
    a = write_run(tmp_path / "a", [make_row("native"), make_row("lazy", window=0.008)])
    b_rows = [
        make_row("native", window=0.015),
        make_row("lazy", window=0.008),
        make_row("flat"),
    ]
    b = write_run(tmp_path / "b", b_rows)
    result = compare.comparison(a, b)
    window = {line["strategy"]: line["window"] for line in result["lines"]}
    assert window["native"]["ratio"] == pytest.approx(1.5)
    assert window["native"]["significant"] and window["native"]["direction"] == "B slower"
    assert window["lazy"]["ratio"] == pytest.approx(1.0)
    assert not window["lazy"]["significant"]
    assert (result["slower"], result["faster"], result["same"]) == (1, 0, 1)
    assert result["only_b"] == [("flat", 1, 0)]
    assert reports_main(["compare", str(a), str(b), "--out", str(tmp_path / "c.html")]) == 0
    html = (tmp_path / "c.html").read_text()
    assert compare.TEST in html
    assert "yes: B slower" in html
    assert 'data-chart="compare-window"' in html


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "{a}", "{tmp}/nowhere"], "'{tmp}/nowhere' is not a directory"),
        (["compare", "{a}", "{tmp}"], "'{tmp}' has no results.jsonl"),
        (["compare", "{a}"], "the following arguments are required: DIR_B"),
        (["compare", "{a}", "{a}", "--out", "{tmp}/no/c.html"], "folder '{tmp}/no' does not"),
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


# -- a real sweep in a real browser ---------------------------------------------------------------
BENCH_TEST = """
def test_sum(benchmark):
    benchmark.extra_info["what"] = "sum of 1000 ints"
    benchmark(sum, range(1000))
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """One real tiny sweep (every case a fresh process), with real pytest-benchmark output."""
    out = tmp_path_factory.mktemp("sweep")
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny"]
    command += ["--strategies", "native,global", "--accumulate", "1,2"]
    command += ["--live-tensors", "0,2000", "--repeat", "3", "--warmup", "1", "--threads", "1"]
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
    done = subprocess.run(
        [sys.executable, "-m", "reports", "build", str(out)], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return out


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
    import numpy as np
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


def test_report_renders_in_chromium(sweep, browser, tmp_path):
    page = sweep / "index.html"
    assert page.stat().st_size < build.MAX_BYTES
    open_page(browser, page)
    assert console_errors(browser) == []
    tops = browser.execute_script(
        "return arguments[0].map(id => { const e = document.getElementById(id);"
        " return e ? e.getBoundingClientRect().top + window.scrollY : null; });",
        list(SECTIONS),
    )
    assert None not in tops, dict(zip(SECTIONS, tops, strict=True))
    assert tops == sorted(tops), "sections out of the issue's order"
    boxes = chart_boxes(browser)
    assert [b["name"] for b in boxes] == ["phases", "memory", "reset-vs-live", "window-vs-k"]
    for box in boxes:
        assert box["width"] > 300 and box["height"] > 150, box
        assert box["texts"] > 5, box  # title, labels, ticks, legend are text
    answer = browser.find_element("id", "answer").text
    assert "Fastest:" in answer and "Leanest:" in answer and "significant" in answer
    assert "test_sum" in browser.find_element("id", "pytest-benchmark").text
    png = full_screenshot(browser, tmp_path / "report.png")
    assert_not_blank(png)


def test_compare_page_renders_in_chromium(sweep, browser, tmp_path):
    slower = tmp_path / "slower"
    slower.mkdir()
    with open(sweep / "results.jsonl") as f, open(slower / "results.jsonl", "w") as out:
        for line in f:  # the same run with native 50% slower in every phase
            row = json.loads(line)
            if row["strategy"] == "native" and row["status"] == "ok":
                row["samples"] = {p: [x * 1.5 for x in v] for p, v in row["samples"].items()}
            out.write(json.dumps(row) + "\n")
    page = tmp_path / "compare.html"
    done = subprocess.run(
        [sys.executable, "-m", "reports", "compare", str(sweep), str(slower), "--out", str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    open_page(browser, page)
    assert console_errors(browser) == []
    for section in COMPARE_SECTIONS:
        assert browser.find_element("id", section).is_displayed()
    (box,) = chart_boxes(browser)
    assert box["width"] > 300 and box["height"] > 100, box
    phases = browser.find_element("id", "phases").text
    assert "yes: B slower" in phases and "bootstrap" in browser.find_element("id", "verdict").text
    assert_not_blank(full_screenshot(browser, tmp_path / "compare.png"))
