"""Records check types (issue 30, item 3): a value of the wrong type in any file zerograd reads
(results.jsonl, run.json, verdicts.json, compare.json, asv's results, pytest-benchmark's JSON)
is one line naming the file, the field and what was expected, exit 2: never a traceback, and
never the gate's exit 1 (a regression to a CI job). A results.jsonl with no readable row is an
error, not an empty page. Each file: a wrong-typed number, a list where an object belongs, and
a file whose every line (or whose whole) is corrupt."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benches.sweep import cli
from reports.__main__ import main as reports_main
from reports.judge.rows import read
from reports.schema.records import RecordError, Row, RunFile
from reports.schema.verdict_records import Comparison
from tests.conftest import ROOT, run_reports
from tests.synthetic import make_row, standard_rows, write_run

ERROR = "python -m reports: error: "


def one_line(err: str) -> str:
    """The only line of ``err``: no traceback, no usage block, no warning before it."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def put(data: Any, path: str, value: Any) -> None:
    """``data`` with the value at ``path`` (``a.b.0.c``: keys and list indexes) set."""
    *head, last = path.split(".")
    for key in head:
        data = data[int(key)] if isinstance(data, list) else data[key]
    if isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """Two runs of the same cases, each with its report, and B's comparison with A."""
    root = tmp_path_factory.mktemp("typed")
    a = write_run(root / "a", standard_rows(seed=0, ks=(1,), ns=(0,)))
    b = write_run(root / "b", standard_rows(seed=1, ks=(1,), ns=(0,)))
    for directory in (a, b):
        assert reports_main(["build", str(directory)]) == 0
    assert reports_main(["compare", str(a), str(b)]) == 0
    return a, b


@pytest.fixture
def runs(built, tmp_path) -> tuple[Path, Path]:
    return tuple(Path(shutil.copytree(d, tmp_path / d.name)) for d in built)


# -- the check itself -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value, fits",
    [
        ("params", 3, True),
        ("params", True, False),  # a JSON true is not an integer
        ("params", 3.0, False),
        ("tokens_per_second", 3, True),  # an integer is a number
        ("tokens_per_second", False, False),
        ("tokens_per_second", "0.95", False),
        ("tokens_per_second", None, True),
        ("memory.held_bytes", 1.5, False),
        ("compile", 1, False),
        ("error", 1, False),
        ("samples.window", [1, 2.5, None], True),  # null in a list: a NaN, as msgspec writes it
        ("memory.growth_readings", [1, None], False),
        ("memory.timeline.points", [[1.0], [2, "x"]], False),
        ("wall_s", {"a": 1.0}, True),
        ("wall_s", [1.0], False),
        ("env", {"a": [1, "x"]}, True),
        ("accumulate", 0, False),  # its declared minimum, 1
        ("live_tensors", -1, False),
    ],
)
def test_a_value_fits_its_field(field, value, fits):
    row = make_row("native")
    row["memory"]["timeline"] = {"method": "m", "start_bytes": 0, "window_ms": 1.0}
    row["memory"]["timeline"] |= {"points": [], "phases": []}
    put(row, field, value)
    try:
        Row.from_json(row)
    except RecordError:
        assert not fits
    else:
        assert fits


def test_the_message_names_the_record_the_field_and_what_fits():
    with pytest.raises(RecordError, match=r"^row 'r': Expected `int`, got `float` - at `\$.phases"):
        Row.from_json({"phases": {"window": {"n": 1.5}}}, "row 'r'")
    with pytest.raises(
        RecordError, match=r"^comparisons\[0\]: Expected `int`, got `str` - at `\$.k`"
    ):
        head = {"a": "x", "b": "y", "k": "1", "n": 0, "case": {}, "metric": "window"}
        figures = {"ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "significant": False}
        words = {"verdict": "same", "confidence": 0.95, "method": "t", "noisy": False}
        Comparison.from_json({**head, **figures, **words}, "comparisons[0]")
    with pytest.raises(RecordError, match=r"Invalid enum value 'worse' - at `\$.verdict`"):
        Comparison.from_json({**head, "k": 1, **figures, **words, "verdict": "worse"}, "c")
    row = make_row("native")
    put(row, "memory.timeline", [1])
    with pytest.raises(
        RecordError, match=r"Expected `object \| null`, got `array` - at `\$.memory"
    ):
        Row.from_json(row, "row 'r'")
    with pytest.raises(RecordError, match=r"unknown field `heldbytes` - at `\$.memory`"):
        Row.from_json({"memory": {"heldbytes": 1}}, "row 'r'")


def test_every_row_and_run_json_of_the_committed_samples_reads():
    """Real rows the engine wrote, each part of each type its record says."""
    samples = sorted(p for p in (ROOT / "reports" / "samples").iterdir() if p.is_dir())
    assert samples
    for sample in samples:
        assert read(sample) and RunFile.read(sample) is not None


# -- results.jsonl ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "status, field, value, named",
    [
        # a wrong-typed number
        (
            "ok",
            "memory.held_bytes",
            "10",
            "Expected `int | null`, got `str` - at `$.memory.held_bytes`",
        ),
        ("ok", "samples.window.0", "0.1", "got `str` - at `$.samples[...][0]`"),
        ("ok", "clip_norm", "1.0", "got `str` - at `$.clip_norm`"),
        ("ok", "compile", 1, "Expected `bool | null`, got `int` - at `$.compile`"),
        ("ok", "memory.growth_readings", [1, "2"], "got `str` - at `$.memory.growth_readings[1]`"),
        ("failed", "repeat", "8", "got `str` - at `$.repeat`"),
        ("failed", "params", 1.5, "Expected `int | null`, got `float` - at `$.params`"),
        # a list where an object belongs
        ("ok", "process", [1], "got `array` - at `$.process`"),
        ("ok", "memory.timeline", [1], "got `array` - at `$.memory.timeline`"),
        ("ok", "cost_model", [1], "Expected `object | null`, got `array` - at `$.cost_model`"),
        ("failed", "env", [1], "got `array` - at `$.env`"),
        ("failed", "wall_s", [1], "Expected `object | null`, got `array` - at `$.wall_s`"),
    ],
)
def test_build_of_a_wrong_typed_row_is_one_line(status, field, value, named, tmp_path, capsys):
    rows = [make_row("native"), make_row("lazy", status=status, error="x")]
    put(rows[1], field, value)
    directory = write_run(tmp_path / "run", rows, accumulate=[1])
    assert reports_main(["build", str(directory)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"{ERROR}{directory / 'results.jsonl'}:2: row "), line
    assert named in line, line
    assert not (directory / "index.html").exists()


def reports_in_process(*args: str) -> SimpleNamespace:
    """``python -m reports ARGS`` in this process (its own ``main``), its exit code and output
    captured: the many wrong-typed files below each cost an interpreter's start otherwise
    (the results-file test above runs the real command)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = reports_main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.mark.parametrize(
    "text, named",
    [
        ('{"strategy": "lazy", "stat\n[1, 2]\nnot json at all\n', "every line is corrupt (line 1:"),
        ("\n\n", "is empty: no row to read"),
    ],
)
def test_a_results_file_with_no_readable_row_is_an_error(runs, text, named):
    a, b = runs
    (b / "index.html").unlink()
    (b / "results.jsonl").write_text(text)
    for argv in (["build", str(b)], ["compare", str(a), str(b), "--out", str(b / "c.html")]):
        done = run_reports(*argv)  # the real command: a warning would be a line more
        assert done.returncode == 2, done.stdout + done.stderr
        line = one_line(done.stderr)
        assert line.startswith(f"{ERROR}{b / 'results.jsonl'}") and named in line, line
    assert not (b / "index.html").exists() and not (b / "c.html").exists()


def test_resume_of_a_wrong_typed_or_unreadable_results_file_is_one_line(tmp_path, capsys):
    typed = make_row("native")
    put(typed, "samples.window.0", "0.95")
    cases = {
        "typed": (json.dumps(typed) + "\n", "got `str` - at `$.samples[...][0]`"),
        "listed": (json.dumps({**make_row("native"), "memory": [1]}) + "\n", "at `$.memory`"),
        "corrupt": ("garbage\n{not json\n", "every line is corrupt"),
    }
    for name, (text, named) in cases.items():
        out = write_run(tmp_path / name, [make_row("native")])
        (out / "results.jsonl").write_text(text)
        quick = ["--strategies", "native", "--rounds", "1", "--budget", "0", "--preset", "tiny"]
        assert cli.main(["run", *quick, "--out", str(out), "--resume"]) == 2, name
        line = one_line(capsys.readouterr().err)
        assert str(out / "results.jsonl") in line and named in line, (name, line)
        assert (out / "results.jsonl").read_text() == text  # nothing appended


# -- run.json -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value, named",
    [
        (
            "sweep.min_effect",
            "0.95",
            "field 'sweep': Expected `float | null`, got `str` - at `$.min_effect`",
        ),
        ("sweep.repeat", "8", "field 'sweep': Expected `int | null`, got `str` - at `$.repeat`"),
        (
            "sweep.accumulate",
            [1, "4"],
            "field 'sweep': Expected `int`, got `str` - at `$.accumulate[1]`",
        ),
        ("run_id", 3, "Expected `str | null`, got `int` - at `$.run_id`"),
        ("sweep", [1], "Expected `object | null`, got `array` - at `$.sweep`"),
        ("case_settings", [1], "got `array` - at `$.case_settings`"),
    ],
)
def test_a_wrong_typed_run_json_is_one_line_everywhere_it_is_read(
    field, value, named, runs, capsys
):
    a, b = runs
    run = json.loads((b / "run.json").read_text())
    put(run, field, value)
    (b / "run.json").write_text(json.dumps(run))
    quick = ["run", "--strategies", "native", "--rounds", "1", "--budget", "0", "--preset", "tiny"]
    for argv, main in (
        (["build", str(b)], reports_main),
        (["compare", str(a), str(b), "--out", str(b / "c.html")], reports_main),
        ([*quick, "--out", str(b), "--resume"], cli.main),
    ):
        assert main(argv) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert str(b / "run.json") in line and named in line, (argv, line)


@pytest.mark.parametrize(
    "text, named", [("{not json", "is not readable JSON"), ("[1]", "is not a JSON object ([1])")]
)
def test_a_corrupt_run_json_is_refused_by_the_report_too(text, named, runs, capsys):
    """The sweep writes run.json whole: one it cannot read is not its own, and its settings
    (--min-effect) decide verdicts, so the report never defaults them silently."""
    _, b = runs
    (b / "index.html").unlink()
    (b / "run.json").write_text(text)
    assert reports_main(["build", str(b)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(b / "run.json") in line and named in line, line
    assert not (b / "index.html").exists()


# -- verdicts.json and compare.json: python -m reports gate ----------------------------------------
@pytest.mark.parametrize(
    "name, field, value, named",
    [
        # a wrong-typed number
        (
            "compare.json",
            "comparisons.0.ratio",
            "0.95",
            "comparisons[0]: Expected `float | null`, got `str` - at `$.ratio`",
        ),
        (
            "compare.json",
            "comparisons.0.k",
            "1",
            "comparisons[0]: Expected `int`, got `str` - at `$.k`",
        ),
        ("compare.json", "min_effect", "0.02", "Expected `float`, got `str` - at `$.min_effect`"),
        ("compare.json", "between_runs.sd", "x", "got `str` - at `$.between_runs.sd`"),
        ("verdicts.json", "comparisons.0.ci_low", "0.9", "comparisons[0]: Expected `float | null`"),
        ("verdicts.json", "noise_floor.0.sd", "0.1", "noise_floor[0]: Expected `float | null`"),
        (
            "verdicts.json",
            "overheads.0.k",
            "1",
            "overheads[0]: Expected `int`, got `str` - at `$.k`",
        ),
        ("verdicts.json", "error_control.alpha", True, "got `bool` - at `$.error_control.alpha`"),
        # a list where an object belongs
        ("compare.json", "a", [1], "Expected `object`, got `array` - at `$.a`"),
        ("compare.json", "comparisons.0.case", [1], "got `array` - at `$.case`"),
        ("compare.json", "resolution", {}, "field 'resolution' is {}; valid: a list"),
        ("verdicts.json", "error_control", [1], "got `array` - at `$.error_control`"),
        (
            "verdicts.json",
            "memory_growth.0",
            [1],
            "memory_growth[0]: Expected `object`, got `array`",
        ),
    ],
)
def test_gate_on_a_wrong_typed_file_is_exit_2_never_1(name, field, value, named, runs, tmp_path):
    _, b = runs
    data = json.loads((b / name).read_text())
    put(data, field, value)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    pair = ["--pair", "global,native"] if name == "verdicts.json" else []
    done = reports_in_process("gate", str(path), *pair)  # a traceback would exit 1
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert line.startswith(f"{ERROR}{str(path)!r} is no {name}: ") and named in line, line
    assert done.stdout == ""


@pytest.mark.parametrize("name", ["compare.json", "verdicts.json"])
def test_gate_on_a_corrupt_file_is_exit_2(name, runs, tmp_path, capsys):
    _, b = runs
    path = tmp_path / name
    path.write_text((b / name).read_text()[:200])  # cut off
    assert reports_main(["gate", str(path), "--pair", "global,native"]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"{ERROR}{str(path)!r} is not JSON")


# -- asv's results: python -m reports history -----------------------------------------------------
def asv_results(root: Path, commits: int = 2) -> Path:
    """A small asv results directory as asv writes it: one benchmark over one parameter."""
    results = root / "results"
    (results / "m").mkdir(parents=True)
    bench = {
        "name": "track_ratio",
        "params": [["'x'", "'y'"]],
        "param_names": ["strategy"],
        "type": "track",
        "unit": "ratio",
        "version": "1",
    }
    (results / "benchmarks.json").write_text(json.dumps({"version": 2, "track_ratio": bench}))
    (results / "m" / "machine.json").write_text('{"machine": "m", "version": 1}')
    columns = ["result", "params", "version", "samples", "stats_ci_99_a", "stats_ci_99_b"]
    for c in range(commits):
        row = [[1.0, 1.1], [["'x'", "'y'"]], "1", [[1.0, 1.01], [1.1, 1.11]], [0.9, 1], [1.1, 1.2]]
        data = {
            "commit_hash": f"{c + 1:x}" * 40,
            "date": 1_767_225_600_000 + c,
            "env_name": "py",
            "params": {"machine": "m"},
            "version": 2,
            "result_columns": columns,
            "results": {"track_ratio": row},
        }
        (results / "m" / f"{c + 1:x}-py.json").write_text(json.dumps(data))
    return root


@pytest.mark.parametrize(
    "file, field, value, named",
    [
        # a wrong-typed number
        (
            "m/1-py.json",
            "results.track_ratio.0.0",
            "0.95",
            "'track_ratio': Expected `float | null`, got `str` - at `$.result[0]`",
        ),
        (
            "m/1-py.json",
            "results.track_ratio.3.1.0",
            "1",
            "Expected `float`, got `str` - at `$.samples[1][0]`",
        ),
        ("m/1-py.json", "date", "today", "Expected `float | null`, got `str` - at `$.date`"),
        (
            "benchmarks.json",
            "track_ratio.version",
            1,
            "benchmark 'track_ratio': Expected `str | null`, got `int` - at `$.version`",
        ),
        # a list where an object belongs
        ("m/1-py.json", "params", [1], "Expected `object | null`, got `array` - at `$.params`"),
        ("m/1-py.json", "results", [1], "Expected `object`, got `array` - at `$.results`"),
        ("benchmarks.json", "track_ratio.params", 3, "got `int` - at `$.params`"),
        ("m/machine.json", "machine", [1], "Expected `str | null`, got `array` - at `$.machine`"),
    ],
)
def test_history_of_a_wrong_typed_asv_file_is_one_line(file, field, value, named, tmp_path):
    root = asv_results(tmp_path / "asv", commits=1)
    path = root / "results" / file
    data = json.loads(path.read_text())
    put(data, field, value)
    path.write_text(json.dumps(data))
    done = reports_in_process("history", str(root))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert line.startswith(ERROR) and f"{str(path)!r}: " in line and named in line, line
    assert not (root / "history.html").exists()


def test_history_skips_a_wrong_typed_results_file_among_readable_ones_as_asv_does(tmp_path):
    root = asv_results(tmp_path / "asv", commits=3)
    path = root / "results" / "m" / "2-py.json"
    data = json.loads(path.read_text())
    put(data, "results.track_ratio.0", {"x": 1})
    path.write_text(json.dumps(data))
    done = reports_in_process("history", str(root))
    assert done.returncode == 0, done.stderr
    page = (root / "history.html").read_text()
    assert "1 unreadable results file" in page and "got `object` - at `$.result`" in page


def test_history_of_only_corrupt_asv_results_files_is_one_line(tmp_path):
    root = asv_results(tmp_path / "asv", commits=2)
    for path in (root / "results" / "m").glob("?-py.json"):
        path.write_text("{not json")
    done = reports_in_process("history", str(root))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert "holds no readable asv results file (2 unreadable; the first: " in line, line
    assert "1-py.json' is not JSON" in line, line


# -- pytest-benchmark's JSON: read by the report build ---------------------------------------------
PYTEST_BENCHMARK = {
    "datetime": "2026-01-01T00:00:00",
    "version": "5.1.0",
    "machine_info": {"cpu": {"brand_raw": "Test CPU"}, "zerograd_order": {"seed": 4242}},
    "commit_info": {"id": "0123456789abcdef"},
    "benchmarks": [
        {
            "name": "test_reset[lazy]",
            "group": "reset",
            "stats": {"median": 1.4e-5, "iqr": 2e-6, "min": 1e-5, "rounds": 100, "ops": 7e4},
            "extra_info": {"strategy": "lazy"},
        }
    ],
}


@pytest.mark.parametrize(
    "field, value, named",
    [
        # a wrong-typed number
        ("benchmarks.0.stats.median", "0.95", "got `str` - at `$.benchmarks[0].stats.median`"),
        (
            "benchmarks.0.stats.rounds",
            1.5,
            "Expected `int | null`, got `float` - at `$.benchmarks[0].stats.rounds`",
        ),
        (
            "machine_info.zerograd_order.seed",
            "1",
            "got `str` - at `$.machine_info.zerograd_order.seed`",
        ),
        # a list where an object belongs
        ("benchmarks.0.stats", [1], "got `array` - at `$.benchmarks[0].stats`"),
        ("machine_info", [1], "Expected `object | null`, got `array` - at `$.machine_info`"),
        ("benchmarks", {}, "Expected `array | null`, got `object` - at `$.benchmarks`"),
        ("benchmarks.0", [1], "Expected `object`, got `array` - at `$.benchmarks[0]`"),
    ],
)
def test_build_with_a_wrong_typed_pytest_benchmark_json_is_one_line(
    field, value, named, runs, capsys
):
    _, b = runs
    (b / "index.html").unlink()
    data = json.loads(json.dumps(PYTEST_BENCHMARK))
    put(data, field, value)
    (b / "pytest-benchmark.json").write_text(json.dumps(data))
    assert reports_main(["build", str(b)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"{ERROR}{b / 'pytest-benchmark.json'}: ") and named in line, line
    assert not (b / "index.html").exists()


def test_a_pytest_benchmark_json_that_is_no_object_is_one_line_and_a_cut_off_one_is_shown(
    runs, capsys
):
    """pytest-benchmark writes its file at the end of its session, not whole or not at all: a
    cut-off file is said on the page (tests/test_report_page.py); a JSON list is no such file."""
    _, b = runs
    (b / "pytest-benchmark.json").write_text("[1]")
    assert reports_main(["build", str(b)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{b / 'pytest-benchmark.json'} is not a JSON object ([1])" in line, line
    (b / "pytest-benchmark.json").write_text(json.dumps(PYTEST_BENCHMARK)[:100])
    assert reports_main(["build", str(b)]) == 0
    assert "pytest-benchmark.json is not valid JSON" in (b / "index.html").read_text()
