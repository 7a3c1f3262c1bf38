"""The pages of a real sweep in Chromium: self-contained, drawn, and showing what their JSON
says (the sweep and the browser are the session's: tests/conftest.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from browser import (
    assert_not_blank,
    chart_boxes,
    full_screenshot,
    open_offline,
    table_words,
)
from conftest import SWEEP_PAIRS, run_reports
from synthetic import (
    CHARTS,
    COMPARE_SECTIONS,
    SECTIONS,
)

from reports.judge import verdicts
from reports.page import analysis, build, charts
from reports.schema import verdict_records

# screenshots a person can look at after the suite (git-ignored, like every generated output)
ARTIFACTS = Path(__file__).resolve().parents[1] / "reports" / "runs" / "browser"
FIRST_SCREEN = (1400, 900)  # the report's first screen: the answer and its chart, whole


def visible_box(driver, selector: str) -> dict:
    """An element's box in the viewport, with the viewport's size and the page's scroll width."""
    return driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,"
        " width: r.width, height: r.height, vw: window.innerWidth, vh: window.innerHeight,"
        " scroll: document.documentElement.scrollWidth};",
        selector,
    )


def at_size(driver, width: int, height: int) -> None:
    """The viewport (not the window, which has borders) at width x height CSS px."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def test_first_screen_is_the_answer(real_sweep, browser):
    """At 1400 x 900 the answer's sentence, its resolution and its chart are on the first
    screen, and the per-strategy table fits without scrolling sideways; at 800 px wide the
    answer still comes first, its chart scaled to the width."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        at_size(browser, *FIRST_SCREEN)
        open_offline(browser, real_sweep / "index.html")
        decision = visible_box(browser, "#answer .decision")
        chart = visible_box(browser, 'svg[data-chart="answer"]')
        assert decision["top"] >= 0 and decision["bottom"] <= FIRST_SCREEN[1], decision
        assert chart["top"] >= 0 and chart["bottom"] <= FIRST_SCREEN[1], chart
        # it names the strategy to use at every K and N measured, as verdicts.json does
        said = browser.find_element("css selector", "#answer .decision").text
        judged = json.loads((real_sweep / "verdicts.json").read_text())["decisions"]
        assert judged and all(d["use"] in said for d in judged if d["use"]), (said, judged)
        # none only where every strategy ran under CPU pressure (a busy machine), and it says so
        assert all(d["use"] or d["left_out"] for d in judged), judged
        why = browser.find_element("css selector", "#answer details.why")
        assert all(d["why"] in why.get_attribute("textContent") for d in judged if not d["use"])
        picked = browser.find_elements("css selector", "#answer .answer-charts label")
        assert len(picked) == len({(d["k"], d["n"]) for d in judged})
        if len(picked) > 1:  # the picker shows another group's chart in place of the first
            picked[1].click()
            other = visible_box(browser, f'svg[data-chart="answer-k{judged[-1]["k"]}-n0"]')
            assert other["height"] > 150 and other["bottom"] <= FIRST_SCREEN[1], other
            assert visible_box(browser, 'svg[data-chart="answer"]')["height"] == 0
            picked[0].click()
        assert chart["width"] > 600 and chart["height"] > 150, chart
        sure = browser.find_element("css selector", "#answer .sure").text
        assert "tells apart" in sure or "unclear" in sure
        # the answer comes before what was run
        run = visible_box(browser, "#run")
        assert run["top"] > chart["bottom"]
        table = browser.execute_script(
            "const w = document.querySelector('#strategies .table-wrap');"
            "return [w.scrollWidth, w.clientWidth];"
        )
        assert table[0] <= table[1], f"the per-strategy table scrolls sideways: {table}"
        png = browser.get_screenshot_as_png()
        (ARTIFACTS / "first-screen-1400x900.png").write_bytes(png)
        assert_not_blank(png, min_height=FIRST_SCREEN[1])
        at_size(browser, 800, 900)
        open_offline(browser, real_sweep / "index.html")
        advice = visible_box(browser, "#answer .decision")
        chart = visible_box(browser, 'svg[data-chart="answer"]')
        assert advice["top"] < chart["top"] and advice["bottom"] <= 900, advice
        assert chart["right"] <= 800 and chart["width"] > 500, chart
        assert advice["scroll"] <= 800, "the page scrolls sideways at 800 px"
        png = browser.get_screenshot_as_png()
        (ARTIFACTS / "first-screen-800x900.png").write_bytes(png)
        assert_not_blank(png, min_height=900)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_report_renders_in_chromium(real_sweep, browser, tmp_path):
    page = real_sweep / "index.html"
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
    # the answer's picker holds every group's chart and shows the picked one (the first)
    hidden = [b for b in boxes if b["name"].startswith("answer-")]
    assert hidden and all(b["width"] == 0 for b in hidden), hidden
    boxes = [b for b in boxes if b not in hidden]
    assert [b["name"] for b in boxes] == [c for c in CHARTS if c != "reset-vs-live"]
    for box in boxes:
        assert box["width"] > 300 and box["height"] > 150, box
        assert box["texts"] > 5, box  # title, labels, ticks, legend are text
    answer = browser.find_element("id", "answer").text
    assert "Fastest:" in answer and "Leanest:" in answer and "resolution" in answer
    assert "docs/method.md" in browser.find_element("id", "method").get_attribute("textContent")
    # the verdicts section shows, visibly, the word verdicts.json gives each comparison here
    judged = json.loads((real_sweep / verdict_records.VERDICTS).read_text())
    k, n = analysis.report(real_sweep).default
    here = [c for c in judged["comparisons"] if (c["k"], c["n"]) == (k, n)]
    assert len(here) == SWEEP_PAIRS * len(verdicts.METRICS)
    words = table_words(browser, "verdicts")
    assert words == [c["verdict"] for m in verdicts.METRICS for c in here if c["metric"] == m]
    verdicts_text = browser.find_element("id", "verdicts").text
    assert all(word in verdicts_text for word in set(words))
    at = next(f for f in judged["noise_floor"] if (f["k"], f["n"]) == (k, n))
    assert f"{at['resolution'] * 100:.1f}%" in answer
    assert "test_sum" in browser.find_element("id", "pytest-benchmark").text
    png = full_screenshot(browser, tmp_path / "report.png")
    assert_not_blank(png)


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
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


def test_compare_page_renders_in_chromium(real_sweep, slower_sweep, browser, tmp_path):
    done = run_reports("compare", str(real_sweep), str(slower_sweep))
    assert done.returncode == 0, done.stderr
    page = slower_sweep / "compare.html"
    assert done.stdout.strip() == str(page)
    result = json.loads((slower_sweep / verdict_records.COMPARE).read_text())
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
