"""The A/A test: exact twins of three strategies must never be called different, while a planted
slowdown far beyond the noise must be found; inside one sweep, and between two sweeps.

A statistical test on real sweeps (tiny preset, K=1, one thread). Its false-failure rate was
measured by repeating it (see the issue note); a flaky run here is a defect of the statistics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_reports

pytestmark = pytest.mark.slow  # statistical: sweeps of twins and a planted slowdown

ROOT = Path(__file__).resolve().parent.parent
TWINS = {"block_twin": "block", "native_twin": "native", "lazy_twin": "lazy"}
STRATEGIES = [*TWINS.values(), *TWINS, "sleepy"]


def sweep(out: Path, names: list[str], sleep: str = "0.050") -> subprocess.CompletedProcess:
    argv = ["--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--threads", "1"]
    argv += ["--budget", "150"]  # rounds added while a comparison is unclear, as by default
    done = subprocess.run(
        [
            *(sys.executable, "-m", "benches", "run", *argv),
            *("--strategies", ",".join(names), "--plugin", "tests.aa_plugin", "--out", str(out)),
        ],
        cwd=ROOT,
        env=dict(os.environ, ZEROGRAD_SLEEPY_S=sleep),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("aa") / "first"
    sweep(out, STRATEGIES)
    return out


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> Path:
    """Another sweep of three of them, in which sleepy lost its sleep: the planted change."""
    out = tmp_path_factory.mktemp("aa") / "second"
    sweep(out, ["block", "native", "sleepy"], sleep="0.0")
    return out


def _find(comparisons, a, b, metric):
    for c in comparisons:
        if {c["a"], c["b"]} == {a, b} and c["metric"] == metric:
            return c
    raise AssertionError(f"no comparison of {a} and {b} on {metric}")


def test_twins_are_never_lower_or_higher_and_the_planted_slowdown_is_found(first):
    result = json.loads((first / "verdicts.json").read_text())
    comparisons = result["comparisons"]
    for twin, original in TWINS.items():
        window = _find(comparisons, twin, original, "window")
        assert window["verdict"] in ("same", "unclear"), window
        for metric in ("peak_memory", "held_memory"):
            assert _find(comparisons, twin, original, metric)["verdict"] == "same"
    slow = _find(comparisons, "sleepy", "block", "window")
    expected = "higher" if slow["a"] == "sleepy" else "lower"
    assert slow["verdict"] == expected, slow
    assert result["noise_floor"][0]["resolution"] is not None  # measured, from the control


def test_the_report_shows_what_verdicts_json_says(first):
    html = (first / "index.html").read_text()
    result = json.loads((first / "verdicts.json").read_text())
    resolution = result["noise_floor"][0]["resolution"]
    assert f"{resolution:.1%}" in html
    assert "sleepy" in html and "higher" in html


def test_two_sweeps_compare_same_except_the_planted_change(first, second):
    done = run_reports("compare", str(first), str(second))
    assert done.returncode == 0, done.stderr
    result = json.loads((second / "compare.json").read_text())
    window = {c["strategy"]: c for c in result["comparisons"] if c["metric"] == "window"}
    assert set(window) == {"block", "native", "sleepy"}
    for name in ("block", "native"):
        assert window[name]["verdict"] in ("same", "unclear"), window[name]
    assert window["sleepy"]["verdict"] == "lower", window["sleepy"]  # B (no sleep) is faster
    assert (second / "compare.html").exists()


def gate(*args: str) -> subprocess.CompletedProcess:
    return run_reports("gate", *args)


def test_the_gate_passes_twins_and_fails_the_planted_slowdown(first):
    verdicts_json = str(first / "verdicts.json")
    for twin, original in TWINS.items():
        done = gate(verdicts_json, "--pair", f"{twin},{original}")
        assert done.returncode == 0 and done.stdout.startswith("gate passed"), done.stdout
    done = gate(verdicts_json, "--pair", "sleepy,block")
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    assert line.startswith("higher: sleepy / block K=1 N=0 window ratio ") and "95% CI" in line
    done = gate(verdicts_json)  # one sweep always holds real differences: say which pair
    assert done.returncode == 2 and "--pair" in done.stderr


def test_the_gate_on_two_runs(first, second, tmp_path):
    for before, after, code in ((first, second, 0), (second, first, 1)):
        page = str(tmp_path / f"{after.name}.html")
        compared = run_reports("compare", str(before), str(after), "--out", page)
        assert compared.returncode == 0, compared.stderr
        done = gate(str(tmp_path / "compare.json"))
        assert done.returncode == code, done.stdout
        if code:  # the run with the sleep is the regression: sleepy, and only sleepy
            assert [line.split()[1] for line in done.stdout.splitlines()] == ["sleepy"]


def test_a_planted_five_percent_is_higher_and_twins_are_same_in_a_default_sweep(tmp_path):
    """``busy`` (native plus a busy-wait in every reset of 5% of its own window, at one
    thread) against native and native's twin, in fp32 and bf16-autocast, with the default
    budget: busy is higher than both in both precisions, the twins are never lower or higher."""
    out = tmp_path / "planted"
    argv = ["--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--threads", "1"]
    argv += ["--strategies", "native,native_twin,busy", "--precision", "fp32,bf16-autocast"]
    argv += ["--plugin", "tests.aa_plugin", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "benches", "run", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "verdicts.json").read_text())
    assert {f["case"]["precision"] for f in result["noise_floor"]} == {"fp32", "bf16-autocast"}
    for precision in ("fp32", "bf16-autocast"):
        here = [c for c in result["comparisons"] if c["case"]["precision"] == precision]
        for other in ("native", "native_twin"):
            c = _find(here, "busy", other, "window")
            assert c["verdict"] == ("higher" if c["a"] == "busy" else "lower"), c
        twins = _find(here, "native", "native_twin", "window")
        assert twins["verdict"] in ("same", "unclear"), twins
