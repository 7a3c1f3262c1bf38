"""The history page (``python -m reports history``) from results that asv itself wrote.

A scratch git repository holds two empty commits a day apart; asv runs this checkout's suite in
the current environment (``existing``) once per commit (``--set-commit-hash``), saving real
results with ``--record-samples``: the paired ``StrategyOverhead.track_window_over_plain`` for
two strategies and one unpaired ``StrategyWindow.time_window``. Both commits install the same
code, so the history is an A/A test: no step may be lower or higher. A copy with one paired
value of the second commit scaled by 1.5 (value, samples and statistics, in asv's own file)
must show that step as the one regression, first on the page.

Each commit's paired figure comes from two processes (``PairedOverheadMixin`` measures in
asv's process and in one fresh interpreter: asv gives a track one process per commit), each one
asv sample. asv's ``--quick`` is not used: it takes one timing sample per benchmark, and in
asv 0.6.6 its results are saved like real ones.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browser import (  # the reports' browser, reused: one way to open a page
    assert_not_blank,
    chart_boxes,
    full_screenshot,
    open_offline,
)
from conftest import run_reports
from test_asv import asv, scratch_asv

from benches.asv_common import PairedOverheadMixin
from reports.regressions import history

pytestmark = pytest.mark.slow  # real asv runs over two commits

ROOT = Path(__file__).resolve().parents[1]
PAIRED = "asv_strategies.StrategyOverhead.track_window_over_plain"
UNPAIRED = "asv_strategies.StrategyWindow.time_window"
SELECT = (  # asv matches -b against "name(param, ...)" for parameterised benchmarks
    r"StrategyOverhead\.track_window_over_plain\('(native|lazy)', 1\)",
    r"StrategyWindow\.time_window\('native', 1, 'fp32'\)",
)
DATES = ("2026-01-01T12:00:00+00:00", "2026-01-02T12:00:00+00:00")
WORDS = ("lower", "higher", "same", "unclear")


def git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    if args[0] == "commit":
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = args[-1]
        args = args[:-1]
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_history(*args: str) -> subprocess.CompletedProcess:
    return run_reports("history", *args)


@pytest.fixture(scope="module")
def asv_dir(tmp_path_factory) -> Path:
    """A real asv results directory: two commits, each measured by `asv run`."""
    tmp = tmp_path_factory.mktemp("history")
    repo = tmp / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    commits = []
    for i, date in enumerate(DATES):
        git("commit", "-q", "--allow-empty", "-m", f"commit {i}", date, cwd=repo)
        commits.append(git("rev-parse", "HEAD", cwd=repo))
    out = tmp / "asv"
    config, env = scratch_asv(repo, tmp, out)
    for commit in commits:
        done = asv(
            *("run", "--config", str(config), "-E", f"existing:{sys.executable}"),
            *("--set-commit-hash", commit, "--record-samples", "--show-stderr"),
            *("-a", "repeat=3", "-a", "warmup_time=0"),  # a short time_window; rounds stay 2
            *(arg for regex in SELECT for arg in ("-b", regex)),
            cwd=ROOT,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "failed" not in done.stdout.lower(), done.stdout
    return out


@pytest.fixture(scope="module")
def page(asv_dir) -> Path:
    done = run_history(str(asv_dir))
    assert done.returncode == 0, done.stderr
    path = asv_dir / history.PAGE
    assert done.stdout.strip().splitlines()[-1] == str(path)  # the path is the last line
    return path


def result_files(asv_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in (asv_dir / "results").glob("*/*.json")
        if p.name not in (history.MACHINE, history.BENCHMARKS)
    )


def test_reads_results_as_asv_does(asv_dir):
    """Every value, sample and CI we read is the one asv's own loader gives."""
    from asv.results import Results

    benchmarks = json.loads((asv_dir / "results" / history.BENCHMARKS).read_text())
    files = result_files(asv_dir)
    assert len(files) == 2
    for path in files:
        ours = history.read_result_file(path, benchmarks)
        theirs = Results.load(str(path))
        assert ours["commit"] == theirs.commit_hash and ours["date"] == theirs.date
        for name in (PAIRED, UNPAIRED):
            params = benchmarks[name]["params"]
            values = theirs.get_result_value(name, params)
            samples = theirs.get_result_samples(name, params)
            stats = theirs.get_result_stats(name, params)
            combos = list(itertools.product(*params))
            measured = [j for j, v in enumerate(values) if v is not None and not math.isnan(v)]
            assert len(measured) == (2 if name == PAIRED else 1)
            for j, combo in enumerate(combos):
                point = ours["points"].get((name, combo))
                if j not in measured:
                    assert point is None
                    continue
                assert point.value == values[j]
                assert point.samples == samples[j]
                assert point.ci == (stats[j]["ci_99_a"], stats[j]["ci_99_b"])
                assert point.quartiles == (stats[j]["q_25"], stats[j]["q_75"])


def test_paired_track_keeps_one_ratio_per_process(asv_dir):
    """asv took each process's paired ratio as one sample: `processes_per_commit` of them, and
    its value is their median; time_window kept its raw samples (--record-samples)."""
    loaded = history.load(asv_dir)
    processes = PairedOverheadMixin.processes_per_commit
    assert processes >= 2
    paired = [s for s in loaded["series"] if s.benchmark == PAIRED]
    assert sorted(s.params[0] for s in paired) == ["'lazy'", "'native'"]
    for s in paired:
        assert len(s.points) == 2
        for p in s.points:
            assert p.process_values() is not None and len(p.samples) == processes
            assert 0.5 < p.value < 5, p  # a window over the plain loop's: near 1
            assert min(p.samples) <= p.value <= max(p.samples)
    (window,) = [s for s in loaded["series"] if s.benchmark == UNPAIRED]
    assert all(p.samples and len(p.samples) >= 3 for p in window.points)
    assert [p.date for p in window.points] == sorted(p.date for p in window.points)


def test_aa_history_is_never_lower_or_higher(asv_dir):
    """The same code at both commits: every step same or unclear, each with its rule."""
    shown = history.history_page(asv_dir)
    steps = shown["steps"]
    assert len(steps) == 3  # two paired series and one unpaired, one step each
    assert {s["verdict"] for s in steps} <= {"same", "unclear"}, steps
    assert shown["changed"] == []
    paired = [s for s in steps if s["benchmark"] == PAIRED]
    assert {s["rule"] for s in paired} == {"paired"}  # the floor was measured
    assert all(s["threshold"] >= shown["min_effect"] for s in paired)
    (unpaired,) = [s for s in steps if s["benchmark"] == UNPAIRED]
    # nothing changed in paired terms, so the step is quiet: q is its own change, never beaten
    assert unpaired["rule"] == "unpaired" and unpaired["quiet"]
    assert unpaired["threshold"] >= abs(unpaired["ratio"] - 1) - 1e-12


def scale_result(path: Path, name: str, combo_index: int, factor: float) -> None:
    """Multiply one measured value of asv's file, its samples and statistics, by factor."""
    data = json.loads(path.read_text())
    columns = data["result_columns"]
    row = data["results"][name]
    for key in ("result", "samples", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        k = columns.index(key)
        value = row[k][combo_index]
        row[k][combo_index] = [x * factor for x in value] if key == "samples" else value * factor
    path.write_text(json.dumps(data))


def test_planted_regression_comes_first(asv_dir, tmp_path):
    planted = tmp_path / "asv"
    shutil.copytree(asv_dir / "results", planted / "results")
    benchmarks = json.loads((planted / "results" / history.BENCHMARKS).read_text())
    combos = list(itertools.product(*benchmarks[PAIRED]["params"]))
    native = combos.index(("'native'", "1"))
    scale_result(result_files(planted)[-1], PAIRED, native, 1.5)
    done = run_history(str(planted))
    assert done.returncode == 0, done.stderr
    assert "1 higher" in done.stdout
    shown = history.history_page(planted)
    first = shown["changed"][0]
    assert (first["benchmark"], first["params"], first["verdict"]) == (
        PAIRED,
        "strategy=native, accumulate=1",
        "higher",
    )
    assert first["ratio"] == pytest.approx(1.5, rel=0.1)
    (lazy,) = [s for s in shown["steps"] if s["params"] == "strategy=lazy, accumulate=1"]
    assert lazy["verdict"] in ("same", "unclear")
    # the paired step moved, so no step of this history is quiet: the unpaired one is undecided
    (window,) = [s for s in shown["steps"] if s["benchmark"] == UNPAIRED]
    assert window["rule"] == "unpaired-no-quiet" and window["verdict"] in ("same", "unclear")
    html = (planted / history.PAGE).read_text()
    changes = html[html.index('id="changes"') : html.index("</table>", html.index('id="changes"'))]
    assert changes.count("<tr>") == 2  # the header and the one regression
    assert "verdict-higher" in changes and "native" in changes


def test_history_page_renders_in_chromium(page, asv_dir, browser, tmp_path):
    html = page.read_text()
    assert "<script" not in html
    open_offline(browser, page)
    for section in ("summary", "rules", "commits"):
        assert browser.find_element("id", section).is_displayed()
    names = {PAIRED, UNPAIRED}
    boxes = chart_boxes(browser)
    assert sorted(b["name"] for b in boxes) == sorted("h-" + history.slug(n) for n in names)
    for box in boxes:  # a chart per benchmark, drawn, with text for its axes and legend
        assert box["width"] > 300 and box["height"] > 150, box
        assert box["texts"] > 5, box
    for name in names:
        section = browser.find_element("id", "b-" + history.slug(name))
        rows = section.find_elements("css selector", "table.steps tbody tr")
        assert len(rows) == (2 if name == PAIRED else 1)
        for row in rows:
            word = row.find_element("css selector", ".verdict").text
            assert word in ("same", "unclear"), row.text
            rule = row.find_element("css selector", "td.rule").text
            assert rule == ("paired" if name == PAIRED else "unpaired"), row.text
        commits = section.find_element("css selector", "table").text
        for path in result_files(asv_dir):
            assert json.loads(path.read_text())["commit_hash"][:8] in commits
    rules = browser.find_element("id", "rules").text
    assert "max(min_effect, noise floor)" in rules and "quiet steps" in rules
    assert "No step is lower or higher" in browser.find_element("id", "summary").text
    assert_not_blank(full_screenshot(browser, tmp_path / "history.png"))


# -- the rules, on files asv's own writer saves (figures chosen here, no benchmark run) -----------
def write_with_asv(out: Path, figures: dict[str, list], benchmarks: dict[str, dict]) -> None:
    """asv's Results.save for each commit: figures[name][commit] is, per parameter set, a list
    of samples (a timing or a paired track), a number (a plain track), or NaN (skipped)."""
    asv_results = pytest.importorskip("asv.results")
    asv_runner = pytest.importorskip("asv.runner")
    asv_util = pytest.importorskip("asv.util")
    results = out / "results"
    asv_util.write_json(str(results / "m" / history.MACHINE), {"machine": "m"}, api_version=1)
    asv_util.write_json(str(results / history.BENCHMARKS), benchmarks, api_version=2)
    for c in range(4):
        commit = f"{c + 1:x}" * 40
        day = 1_767_225_600_000 + c * 86_400_000  # 2026-01-01 and the days after, in ms
        saved = asv_results.Results({"machine": "m"}, {}, commit, day, "3.11", "py", {})
        for name, per_commit in figures.items():
            bench = {**benchmarks[name], "version": benchmarks[name].get("saved", "v1")}
            cells = per_commit[c]
            timed = [isinstance(x, list) for x in cells]
            result = asv_runner.BenchmarkResult(
                result=[True if t else x for t, x in zip(timed, cells, strict=True)],
                samples=[x if t else None for t, x in zip(timed, cells, strict=True)],
                number=[1 if t else None for t in timed],
                errcode=0,
                stderr="",
                profile=None,
            )
            saved.add_result(bench, result, record_samples=True)
        saved.save(str(results))


def jitter(value: float, width: float, n: int) -> list[float]:
    return [value * (1 + width * (2 * i / (n - 1) - 1)) for i in range(n)]


def test_rules_on_results_written_by_asv(tmp_path):
    """A paired regression at the last commit, an unpaired drift at a quiet commit: the paired
    step is higher, the quiet drift sets q, and only the unpaired step beyond q is higher."""
    ab = [["'a'", "'b'", "'c'"]]
    benchmarks = {
        "s.P.track_p": {"name": "s.P.track_p", "params": ab, "param_names": ["strategy"],
                        "type": "track", "unit": "ratio", "version": "v1"},
        "s.U.time_u": {"name": "s.U.time_u", "params": ab, "param_names": ["strategy"],
                       "type": "time", "unit": "seconds", "version": "v1", "rounds": 2},
        "s.N.track_n": {"name": "s.N.track_n", "params": [], "param_names": [],
                        "type": "track", "unit": "ratio", "version": "v1"},
        "s.S.time_s": {"name": "s.S.time_s", "params": [], "param_names": [], "type": "time",
                       "unit": "seconds", "version": "v2", "saved": "v1", "rounds": 2},
    }  # fmt: skip
    nan = math.nan
    b_paired = [1.2, 1.2, 1.2, 1.5]  # b's overhead regresses at the last commit
    a_time = [0.010, 0.010, 0.013, 0.010]  # a's time drifts at a quiet commit, and back
    b_time = [0.020, 0.020, 0.020, 0.030]
    figures = {
        "s.P.track_p": [[jitter(1.1, 0.005, 2), jitter(b, 0.005, 2), nan] for b in b_paired],
        "s.U.time_u": [
            [jitter(a, 0.01, 5), jitter(b, 0.01, 5), nan]
            for a, b in zip(a_time, b_time, strict=True)
        ],
        "s.N.track_n": [[x] for x in (1.05, 1.06, 1.30, 1.30)],
        "s.S.time_s": [[jitter(0.01, 0.01, 5)]] * 4,  # another version of the code: skipped
    }
    write_with_asv(tmp_path, figures, benchmarks)
    (tmp_path / "results" / "m" / "deadbeef-py.json").write_text("{not json")  # asv skips it
    shown = history.history_page(tmp_path)
    assert shown["stale"] == {"s.S.time_s": 4}
    assert len(shown["unreadable"]) == 1 and "deadbeef-py.json" in shown["unreadable"][0]
    got = {
        (s["benchmark"].split(".")[1], s["params"], s["to"][0]): (s["verdict"], s["rule"])
        for s in shown["steps"]
    }
    assert len(got) == 3 * 2 + 3 * 2 + 3  # 'c' was skipped everywhere: no series
    for c in "234":
        assert got[("P", "strategy=a", c)] == ("same", "paired")
        assert got[("P", "strategy=b", c)] == ("higher" if c == "4" else "same", "paired")
    assert got[("N", "(no parameters)", "2")] == ("same", "paired-no-spread")
    assert got[("N", "(no parameters)", "3")] == ("unclear", "paired-no-spread")  # +23%: no floor
    # quiet steps: the first two (paired: all same); q = a's drift of 30% at commit 3
    (noise,) = next(b for b in shown["sections"] if b["name"] == "s.U.time_u")["noise"]
    assert (noise["quiet_steps"], noise["quiet_change"]) == (4, pytest.approx(0.3))
    assert got[("U", "strategy=a", "3")] == ("unclear", "unpaired")  # within q
    assert got[("U", "strategy=a", "4")] == ("unclear", "unpaired")  # back: within q too
    assert got[("U", "strategy=b", "4")] == ("higher", "unpaired")  # 1.5x with the paired step
    assert [(s["benchmark"], s["params"]) for s in shown["changed"]] == [
        ("s.U.time_u", "strategy=b"),  # regressions first, the largest change (1.5x) first
        ("s.P.track_p", "strategy=b"),  # 1.25x
    ]
    assert shown["counts"]["higher"] == 2 and shown["counts"]["lower"] == 0


def test_aa_results_written_by_asv_are_never_lower_or_higher(tmp_path):
    """The same figures at every commit, processes jittered: nothing lower or higher."""
    benchmarks = {
        "s.P.track_p": {"name": "s.P.track_p", "params": [["'a'"]], "param_names": ["strategy"],
                        "type": "track", "unit": "ratio", "version": "v1"},
        "s.U.time_u": {"name": "s.U.time_u", "params": [["'a'"]], "param_names": ["strategy"],
                       "type": "time", "unit": "seconds", "version": "v1", "rounds": 2},
    }  # fmt: skip
    paired = [1.10, 1.13, 1.08, 1.11]  # between-process noise of a few percent
    times = [0.010, 0.016, 0.009, 0.012]  # unpaired: processes differ by up to 1.8x
    figures = {
        "s.P.track_p": [[[x, x * 1.03]] for x in paired],
        "s.U.time_u": [[jitter(t, 0.05, 5)] for t in times],
    }
    write_with_asv(tmp_path, figures, benchmarks)
    shown = history.history_page(tmp_path)
    assert len(shown["steps"]) == 6
    assert {s["verdict"] for s in shown["steps"]} <= {"same", "unclear"}


@pytest.mark.parametrize("setup", ["missing", "empty", "no-benchmarks", "no-files"])
def test_bad_directory_is_one_line_and_exit_2(setup, tmp_path):
    target = tmp_path / "asv"
    if setup != "missing":
        target.mkdir()
    if setup in ("no-benchmarks", "no-files"):
        (target / "results").mkdir()
    if setup == "no-files":
        (target / "results" / history.BENCHMARKS).write_text('{"version": 2}')
    done = run_history(str(target))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m reports: error: "), lines
    assert str(target) in lines[0]


def test_nox_asv_session_records_samples_and_writes_the_history():
    """`nox -s asv`: asv run --record-samples, asv publish, then the history page; both paths."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    noxfile = pytest.importorskip("noxfile")

    class Session:
        def __init__(self) -> None:
            self.posargs: list[str] = []
            self.calls: list[tuple[str, ...]] = []
            self.logs: list[str] = []

        def install(self, *args: str) -> None:
            self.calls.append(("install", *args))

        def run(self, *args: str, **kwargs) -> str | None:
            self.calls.append(args)
            return "7" if args[:2] == ("git", "rev-list") else None

        def log(self, message: str) -> None:
            self.logs.append(message)

    session = Session()
    noxfile.asv(session)
    runs = [c for c in session.calls if c[0] != "install"]
    asv_run = next(c for c in runs if c[:2] == ("asv", "run"))
    assert "--record-samples" in asv_run
    order = [c[:4] for c in runs]
    publish = order.index(("asv", "publish"))
    assert order[publish + 1] == ("python", "-m", "reports", "history")
    installed = " ".join(" ".join(c) for c in session.calls if c[0] == "install")
    for need in ("asv==0.6.6", "jinja2", "matplotlib", "numpy"):
        assert need in installed
    assert any("html/index.html" in line for line in session.logs)
    assert any("history.html" in line for line in session.logs)
