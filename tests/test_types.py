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
from reports.schema import fieldtypes
from reports.schema.records import RecordError, Row, RunFile, build
from reports.schema.row_parts import Summary
from reports.schema.verdict_records import Comparison, Verdict
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
    "hint, value, fits",
    [
        (int, 3, True),
        (int, True, False),  # a JSON true is not an integer
        (int, 3.0, False),
        (float, 3, True),  # an integer is a number
        (float, False, False),
        (float, "0.95", False),
        (float | None, None, True),
        (float, None, False),
        (bool, 1, False),
        (str, 1, False),
        (list[float], [1, 2.5, None], True),  # null in a list: a NaN, as records.finite writes
        (list[int], [1, None], False),
        (list[list[float]], [[1.0], [2, "x"]], False),
        (dict[str, float], {"a": 1.0}, True),
        (dict[str, float], [1.0], False),
        (dict[str, Any], {"a": [1, "x"]}, True),
        (Any, object(), True),
        (Verdict, "higher", True),
        (Verdict, "worse", False),
    ],
)
def test_a_value_fits_its_annotation(hint, value, fits):
    assert fieldtypes.checker(hint).fits(value) is fits


def test_the_message_names_the_field_the_value_and_what_fits():
    def message(hint, value) -> str:
        kind = fieldtypes.checker(hint)
        return fieldtypes.wrong("x", kind.explain(value))

    assert message(int | None, "8") == """field 'x' is "8"; valid: an integer or null"""
    assert message(bool | None, 1) == "field 'x' is 1; valid: true, false or null"
    assert message(list[int], [1, 2, "3"]) == """field 'x[2]' is "3"; valid: an integer"""
    assert message(dict[str, list[float]], {"w": [1, True]}) == (
        "field 'x.w[1]' is true; valid: a number"
    )
    assert message(Verdict, "worse") == (
        """field 'x' is "worse"; valid: one of lower, higher, same, unclear"""
    )
    assert message(str, "y" * 100).endswith("""yyyy...; valid: a string""")  # 60 characters


def test_build_checks_each_field_and_names_a_part_by_its_dotted_field():
    with pytest.raises(RecordError, match=r"^row 'r': field 'phases.window.n' is 1.5; valid: an"):
        build(Summary, {"n": 1.5}, "row 'r': field 'phases.window'")
    with pytest.raises(RecordError, match=r"^comparisons\[0\]: field 'k' is \"1\"; valid: an int"):
        head = {"a": "x", "b": "y", "k": "1", "n": 0, "case": {}, "metric": "window"}
        figures = {"ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "significant": False}
        words = {"verdict": "same", "confidence": 0.95, "method": "t", "noisy": False}
        Comparison.from_json({**head, **figures, **words}, "comparisons[0]")
    row = make_row("native")
    put(row, "memory.timeline", [1])
    with pytest.raises(RecordError, match=r"field 'memory.timeline' is not an object \(\[1\]\)"):
        Row.from_json(row, "row 'r'")


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
        ("ok", "overhead.ratio", "0.95", """field 'overhead.ratio' is "0.95"; valid: a number"""),
        ("ok", "phases.window.median_s", "0.1", "field 'phases.window.median_s' is \"0.1\""),
        ("ok", "clip_norm", "1.0", """field 'clip_norm' is "1.0"; valid: a number or null"""),
        ("ok", "compile", 1, "field 'compile' is 1; valid: true, false or null"),
        ("ok", "memory.growth_readings", [1, "2"], "field 'memory.growth_readings[1]' is \"2\""),
        ("failed", "repeat", "8", """field 'repeat' is "8"; valid: an integer or null"""),
        ("failed", "params", 1.5, "field 'params' is 1.5; valid: an integer or null"),
        # a list where an object belongs
        ("ok", "process", [1], "field 'process' is not an object ([1])"),
        ("ok", "memory.timeline", [1], "field 'memory.timeline' is not an object ([1])"),
        ("ok", "cost_model", [1], "field 'cost_model' is a list; valid: an object or null"),
        ("failed", "env", [1], "field 'env' is [1]; valid: an object"),
        ("failed", "wall_s", [1], "field 'wall_s' is [1]; valid: an object of numbers or null"),
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
    put(typed, "overhead.ratio", "0.95")
    cases = {
        "typed": (json.dumps(typed) + "\n", """field 'overhead.ratio' is "0.95"; valid: a numb"""),
        "listed": (json.dumps({**make_row("native"), "memory": [1]}) + "\n", "field 'memory'"),
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
        ("sweep.min_effect", "0.95", """field 'sweep.min_effect' is "0.95"; valid: a number"""),
        ("sweep.repeat", "8", """field 'sweep.repeat' is "8"; valid: an integer or null"""),
        ("sweep.accumulate", [1, "4"], """field 'sweep.accumulate[1]' is "4"; valid: an int"""),
        ("run_id", 3, "field 'run_id' is 3; valid: a string or null"),
        ("sweep", [1], "field 'sweep' is not an object"),
        ("case_settings", [1], "field 'case_settings' is not an object"),
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
            "comparisons[0]: field 'ratio' is \"0.95\"",
        ),
        ("compare.json", "comparisons.0.k", "1", """field 'k' is "1"; valid: an integer"""),
        ("compare.json", "min_effect", "0.02", """field 'min_effect' is "0.02"; valid: a num"""),
        ("compare.json", "between_runs.sd", "x", """field 'between_runs.sd' is "x"; valid: a"""),
        ("verdicts.json", "comparisons.0.ci_low", "0.9", "comparisons[0]: field 'ci_low' is"),
        ("verdicts.json", "noise_floor.0.sd", "0.1", "noise_floor[0]: field 'sd' is \"0.1\""),
        ("verdicts.json", "overheads.0.k", "1", """overheads[0]: field 'k' is "1"; valid: an in"""),
        ("verdicts.json", "error_control.alpha", True, "field 'error_control.alpha' is true"),
        # a list where an object belongs
        ("compare.json", "a", [1], "field 'a' is not an object ([1])"),
        ("compare.json", "comparisons.0.case", [1], "field 'case' is [1]; valid: an object"),
        ("compare.json", "resolution", {}, "field 'resolution' is {}; valid: a list"),
        ("verdicts.json", "error_control", [1], "field 'error_control' is not an object ([1])"),
        ("verdicts.json", "memory_growth.0", [1], "memory_growth[0] is not an object ([1])"),
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
            """'track_ratio': field 'result[0]' is "0.95"; val""",
        ),
        (
            "m/1-py.json",
            "results.track_ratio.3.1.0",
            "1",
            """field 'samples[1][0]' is "1"; valid: a n""",
        ),
        ("m/1-py.json", "date", "today", """field 'date' is "today"; valid: a number or null"""),
        (
            "benchmarks.json",
            "track_ratio.version",
            1,
            "benchmark 'track_ratio': field 'version' is 1; valid: a",
        ),
        # a list where an object belongs
        ("m/1-py.json", "params", [1], "field 'params' is [1]; valid: an object or null"),
        ("m/1-py.json", "results", [1], "field 'results' is [1]; valid: an object of lists"),
        ("benchmarks.json", "track_ratio.params", 3, "field 'params' is 3; valid: a list of lists"),
        ("m/machine.json", "machine", [1], "field 'machine' is [1]; valid: a string or null"),
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
    assert "1 unreadable results file" in page and "field &#39;result&#39; is {" in page


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
        ("benchmarks.0.stats.median", "0.95", "'benchmarks[0].stats.median' is \"0.95\"; valid"),
        ("benchmarks.0.stats.rounds", 1.5, "'benchmarks[0].stats.rounds' is 1.5; valid: an int"),
        ("machine_info.zerograd_order.seed", "1", "'machine_info.zerograd_order.seed' is \"1\""),
        # a list where an object belongs
        ("benchmarks.0.stats", [1], "field 'benchmarks[0].stats' is [1]; valid: an object"),
        ("machine_info", [1], "field 'machine_info' is [1]; valid: an object or null"),
        ("benchmarks", {}, "field 'benchmarks' is {}; valid: a list of objects"),
        ("benchmarks.0", [1], "field 'benchmarks[0]' is [1]; valid: an object"),
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
