"""Every command guards its input: a user error is one line naming the bad value and exit 2,
never a traceback, and nothing is overwritten (issue 23, item 5). Arguments are checked before
anything runs, so these tests run no sweep; bad files are small files written here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benches.micro import clip_speed, mfu, reset_speed
from benches.sweep import cli
from reports.__main__ import main as reports_main
from reports.judge.rows import read
from reports.schema.row_parts import Memory
from tests.conftest import ROOT, run_reports
from tests.synthetic import make_row, standard_rows, write_run

ERROR = "python -m reports: error: "


def one_line(err: str) -> str:
    """The only line of ``err``: no traceback, no usage block."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """Two runs of the same cases (rows as the engine writes them), each with its report."""
    root = tmp_path_factory.mktemp("runs")
    a = write_run(root / "a", standard_rows(seed=0, ks=(1,), ns=(0,)))
    b = write_run(root / "b", standard_rows(seed=1, ks=(1,), ns=(0,)))
    for directory in (a, b):
        assert reports_main(["build", str(directory)]) == 0
    return a, b


@pytest.fixture
def runs(built, tmp_path) -> tuple[Path, Path]:
    """A copy of the two runs for this test alone."""
    return tuple(Path(shutil.copytree(d, tmp_path / d.name)) for d in built)


def snapshot(*directories: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for d in directories for p in sorted(d.rglob("*")) if p.is_file()}


# -- reports compare: no output over an input or another output -----------------------------------
@pytest.mark.parametrize(
    "out",
    [
        "{b}/results.jsonl",
        "{b}/verdicts.json",
        "{b}/run.json",
        "{b}/index.html",
        "{a}/results.jsonl",
        "{a}/verdicts.json",
        "{b}/compare.json",  # the page over its own data file
        "{b}",  # a folder
        "{b}/results.jsonl/x.html",  # under a file
        "{b}/nowhere/x.html",  # a folder that does not exist
    ],
)
def test_compare_refuses_an_out_over_the_runs(out, runs, capsys):
    a, b = runs
    before = snapshot(a, b)
    assert reports_main(["compare", str(a), str(b), "--out", out.format(a=a, b=b)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(ERROR) and "--out" in line, line
    assert snapshot(a, b) == before  # every row, report and verdict file survives


def test_compare_over_results_from_the_command_line_keeps_the_rows(runs):
    a, b = runs
    rows = (b / "results.jsonl").read_bytes()
    done = run_reports("compare", str(a), str(b), "--out", str(b / "results.jsonl"))
    assert done.returncode == 2, done.stderr
    assert "results.jsonl" in one_line(done.stderr)
    assert (b / "results.jsonl").read_bytes() == rows


def test_compare_into_a_folder_it_cannot_write_is_one_line(runs, capsys):
    a, b = runs
    if not Path("/proc").is_dir():
        pytest.skip("needs Linux /proc (a folder no one may write in, even root)")
    assert reports_main(["compare", str(a), str(b), "--out", "/proc/compare.html"]) == 2
    assert "cannot write" in one_line(capsys.readouterr().err)


def test_compare_of_runs_with_no_case_in_common_is_exit_2(tmp_path, capsys):
    a = write_run(tmp_path / "a", [make_row("native"), make_row("native", round=1)])
    b = write_run(tmp_path / "b", [make_row("lazy"), make_row("lazy", round=1)])
    assert reports_main(["compare", str(a), str(b)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no ok case in common" in line and "native K=1 N=0" in line and "lazy K=1 N=0" in line
    assert not (b / "compare.html").exists() and not (b / "compare.json").exists()


def test_a_row_reads_into_a_record_and_null_objects_read_empty(tmp_path):
    rows = [make_row("native"), {**make_row("lazy"), "memory": None, "cpu_pressure": None}]
    native, lazy = read(write_run(tmp_path / "run", rows, accumulate=[1]))
    assert (native.strategy, native.accumulate, native.ok) == ("native", 1, True)
    assert native.memory.held_bytes == rows[0]["memory"]["held_bytes"]
    assert lazy.memory == Memory() and lazy.cpu_pressure is None
    assert native.to_json()["samples"] == rows[0]["samples"]


# -- reports build / compare: malformed rows and run.json name file, line and field ---------------
@pytest.mark.parametrize(
    "field, value, named",
    [
        ("samples", "abc", "got `str` - at `$.samples`"),
        ("memory", [1], "got `array` - at `$.memory`"),
        ("accumulate", "1", "got `str` - at `$.accumulate`"),
        ("strategy", 3, "got `int` - at `$.strategy`"),
        ("samples.window", "abc", "got `str` - at `$.samples[...]`"),
        ("samples.window", [1, "x"], "got `str` - at `$.samples[...][1]`"),
        ("memory.peak_bytes", "9 MiB", "got `str` - at `$.memory.peak_bytes`"),
        ("held_byets", 10, "unknown field `held_byets`"),  # a misspelled key fails at once
        # ... inside a part of the row too (reports.schema.row_parts)
        ("memory.held_byets", 10, "unknown field `held_byets` - at `$.memory`"),
        ("grad_check.okay", True, "unknown field `okay` - at `$.grad_check`"),
        ("cpu_pressure.medain", 0.1, "unknown field `medain` - at `$.cpu_pressure`"),
    ],
)
def test_build_names_file_line_and_field_of_a_malformed_row(field, value, named, tmp_path, capsys):
    rows = [make_row("native"), make_row("lazy")]
    key, _, sub = field.partition(".")
    if sub:
        rows[1][key][sub] = value
    else:
        rows[1][key] = value
    directory = write_run(tmp_path / "run", rows, accumulate=[1])
    assert reports_main(["build", str(directory)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{directory / 'results.jsonl'}:2:" in line and named in line, line
    assert not (directory / "index.html").exists()


@pytest.mark.parametrize(
    "run, named",
    [
        ({"sweep": 3}, "got `int` - at `$.sweep`"),
        ({"env": "cpu"}, "got `str` - at `$.env`"),
        (
            {"sweep": {"min_effect": "x"}},
            "field 'sweep': Expected `float | null`, got `str` - at `$.min_effect`",
        ),
    ],
)
def test_build_and_compare_name_a_malformed_run_json(run, named, runs, capsys):
    a, b = runs
    (b / "run.json").write_text(json.dumps(run))
    for argv in (["build", str(b)], ["compare", str(a), str(b)]):
        assert reports_main(argv) == 2
        line = one_line(capsys.readouterr().err)
        assert str(b / "run.json") in line and named in line, line


def test_a_run_json_key_this_version_does_not_know_is_left_out(runs):
    _, b = runs
    (b / "run.json").write_text(json.dumps({"run_id": "r1", "written_by": "a later version"}))
    assert reports_main(["build", str(b)]) == 0
    assert "zerograd sweep r1" in (b / "index.html").read_text()


def test_history_of_malformed_asv_files_is_one_line(tmp_path):
    results = tmp_path / "asv" / "results"
    (results / "m").mkdir(parents=True)
    benchmark = {"name": "a.b", "params": 3, "param_names": [], "type": "track", "version": "1"}
    (results / "benchmarks.json").write_text(json.dumps({"version": 2, "a.b": benchmark}))
    (results / "m" / "machine.json").write_text('{"machine": "m"}')
    result = {"commit_hash": "abc", "results": {"a.b": [1]}, "result_columns": ["result"]}
    (results / "m" / "abc-py.json").write_text(json.dumps({**result, "params": {}, "version": 2}))
    done = run_reports("history", str(tmp_path / "asv"))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert line.startswith(ERROR + repr(str(results / "benchmarks.json"))), line
    assert "benchmark 'a.b': Expected `array | null`, got `int` - at `$.params`" in line, line


# -- reports gate: 2 for a bad file, an absent name, no comparison; 1 only for a regression -------
def test_gate_exit_codes(runs, tmp_path, capsys):
    _, b = runs
    verdicts = b / "verdicts.json"
    # a real regression of this sweep: global's planted 1.3x against native (controls in 3)
    assert reports_main(["gate", str(verdicts), "--pair", "global,native"]) == 1
    assert "higher: global / native" in capsys.readouterr().out
    assert reports_main(["gate", str(verdicts), "--pair", "lazy,native"]) == 0
    capsys.readouterr()
    pair = ["--pair", "global,native"]
    bad = {
        "typo": (verdicts, ["--pair", "native,natve"], "'natve' is not a strategy"),
        "twice": (verdicts, ["--pair", "native,native"], "names one strategy twice"),
        "not-json": (b / "results.jsonl", ["--pair", "a,b"], "is not JSON"),
        "empty": (tmp_path / "empty.json", [], "holds no comparison"),
        "no-verdict": (tmp_path / "bad.json", [], "comparisons[0] has no 'verdict'"),
        "bad-word": (tmp_path / "word.json", [], "has verdict 'worse'"),
        "missing": (tmp_path / "none.json", [], "cannot read"),
        "misspelled": (
            tmp_path / "typo.json",
            pair,
            "comparisons[0]: Object contains unknown field `ratoi`",
        ),
    }
    typo = json.loads(verdicts.read_text())
    typo["comparisons"][0]["ratoi"] = typo["comparisons"][0].pop("ratio")
    (tmp_path / "typo.json").write_text(json.dumps(typo))
    (tmp_path / "empty.json").write_text('{"comparisons": []}')
    (tmp_path / "bad.json").write_text('{"comparisons": [1]}')
    (tmp_path / "word.json").write_text('{"comparisons": [{"verdict": "worse"}]}')
    for name, (path, extra, named) in bad.items():
        assert reports_main(["gate", str(path), *extra]) == 2, name
        line = one_line(capsys.readouterr().err)
        assert named in line, (name, line)
    reports_main(["gate", str(verdicts), "--pair", "native,natve"])
    line = capsys.readouterr().err
    assert all(s in line for s in ("block", "flat", "global", "lazy", "native")), line


# -- benches run / case: values checked where parsed ----------------------------------------------
@pytest.mark.parametrize(
    "argv, named",
    [
        (["--seed", str(2**64)], "valid: 0 to 18446744073709551615"),
        (["--seed", "-1"], "--seed -1 is out of range"),
        (["--preset", ""], "--preset '' is empty"),
        (["--threads", ""], "--threads '' is empty"),
        (["--threads", " "], "--threads ' ' is empty"),
        (["--parallel", ""], "--parallel '' is empty"),
        (["--out", ""], "--out '' is empty"),
        (["--strategies", "native,all"], "'all' cannot be combined with names"),
        (["--strategies", "all,lazy"], "'all' cannot be combined with names"),
        (["--plugin", ""], "--plugin '' is empty"),
    ],
)
def test_run_checks_values_where_they_are_parsed(argv, named, capsys, tmp_path):
    out = ["--out", str(tmp_path / "out")] if "--out" not in argv else []
    assert cli.main(["run", *argv, *out]) == 2
    line = one_line(capsys.readouterr().err)
    assert named in line, line
    assert "valid strategies: all" not in line  # the message never contradicts itself
    assert not (tmp_path / "out").exists()


def test_run_refuses_an_out_it_cannot_use(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    old = write_run(tmp_path / "old", [make_row("native")])
    corrupt = write_run(tmp_path / "corrupt", [make_row("native")])
    (corrupt / "run.json").write_text("{not json")
    no_id = write_run(tmp_path / "noid", [make_row("native")])
    (no_id / "run.json").write_text('{"created": "2026-12-02"}')
    listed = write_run(tmp_path / "listed", [make_row("native")])
    (listed / "run.json").write_text("[1]")
    empty_id = write_run(tmp_path / "emptyid", [make_row("native")])
    (empty_id / "run.json").write_text('{"run_id": ""}')
    before = snapshot(old, corrupt, no_id, listed, empty_id)
    cases = [
        (["--out", str(a_file)], "is a file; give a folder"),
        (["--out", str(a_file / "sub")], f"{str(a_file)!r} is a file, not a folder"),
        (["--out", str(old)], "already holds a run's results.jsonl"),
        (["--out", str(corrupt), "--resume"], "run.json' is not readable JSON"),
        (["--out", str(no_id), "--resume"], "run.json' has no 'run_id'"),
        (["--out", str(listed), "--resume"], "run.json' is not a JSON object ([1])"),
        (["--out", str(empty_id), "--resume"], "run.json' has no 'run_id'"),
    ]
    if Path("/proc").is_dir():  # a folder no one may create, even root: found at the mkdir
        cases.append((["--out", "/proc/zerograd-run", "--preset", "tiny"], "cannot write"))
    for argv, named in cases:
        quick = ["--strategies", "native", "--rounds", "1", "--budget", "0"]
        assert cli.main(["run", *quick, *argv]) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert named in line, line
    assert snapshot(old, corrupt, no_id, listed, empty_id) == before
    assert a_file.read_text() == "x"


def test_a_plugin_that_exits_on_import_is_a_usage_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "exiting_plugin.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["run", "--plugin", "exiting_plugin", "--out", str(tmp_path / "out")])
    assert code == 2
    assert "--plugin 'exiting_plugin' called sys.exit(3)" in one_line(capsys.readouterr().err)


def test_a_workload_that_exits_is_a_usage_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "exiting_workload.py").write_text(
        "import sys\n\ndef workload(settings):\n    sys.exit(3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["run", "--workload", "exiting_workload:workload", "--preset", "tiny"]
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "--workload 'exiting_workload:workload' called sys.exit(3)" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--device", "nope"], "unknown device 'nope'"),
        (["--device", ""], "--device '' is empty"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--plugin", "no_such_module"], "--plugin 'no_such_module' failed to import"),
        (["--strategy", "native,lazy"], "has 2 values; a case has one"),
        (["--strategy", "nope"], "unknown strategy 'nope'"),
        (["--round", "x"], "--round 'x' is not an integer"),
        (["--seed", str(2**64)], "--seed 18446744073709551616 is out of range"),
        (["--accumulate", "1,4"], "has 2 values; a case has one"),
    ],
)
def test_case_by_hand_checks_its_flags(argv, named, capsys, tmp_path):
    strategy = [] if "--strategy" in argv else ["--strategy", "native"]
    assert cli.main(["case", *strategy, *argv, "--out", str(tmp_path / "out")]) == 2
    assert named in one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_case_by_hand_into_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert cli.main(["case", "--strategy", "native", "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in one_line(capsys.readouterr().err)


# -- the micro-benchmarks -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "module, argv, named",
    [
        (reset_speed, ["--sizes", "abc"], "argument --sizes: item 'abc' is not a number"),
        (reset_speed, ["--sizes", "-5"], "item '-5' is out of range"),
        (reset_speed, ["--sizes", "1e6,"], "item '' is not a number"),
        (reset_speed, ["--sizes", "2.5"], "item '2.5' is out of range"),
        (reset_speed, ["--sizes", "10"], "--sizes 10 is smaller than --tensors 200"),
        (reset_speed, ["--tensors", "0"], "argument --tensors: 0 is out of range"),
        (reset_speed, ["--repeat", "x"], "argument --repeat: 'x' is not an integer"),
        (reset_speed, ["--threads", "-1"], "argument --threads: -1 is out of range"),
        (clip_speed, ["--calls", "0"], "argument --calls: 0 is out of range"),
        (clip_speed, ["--bogus"], "unrecognized arguments: --bogus"),
        (mfu, ["--preset", "nope", "--device", "cpu"], "argument --preset: invalid choice"),
        (mfu, ["--windows", "0", "--device", "cpu"], "argument --windows: 0 is out of range"),
        (mfu, ["--accumulate", "-2", "--device", "cpu"], "argument --accumulate: -2"),
    ],
)
def test_micro_benchmarks_check_their_flags(module, argv, named, capsys):
    with pytest.raises(SystemExit) as exited:
        module.main(argv)
    assert exited.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("python -m benches ") and named in line, line


def test_micro_benchmark_error_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "benches", "reset-speed", "--sizes", "abc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "'abc'" in one_line(done.stderr)
