"""``python -m benches run``: bad arguments, failures, timeouts, resume, interrupt, rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import QUICK, run_reports, sweep
from synthetic import rows_of

from benches.sweep import cli
from reports.judge import summaries
from reports.schema.records import Row

ROOT = Path(__file__).resolve().parent.parent
REQUIRED_FIELDS = {
    "schema_version",
    "run_id",
    "strategy",
    "preset",
    "device",
    "accumulate",
    "live_tensors",
    "world_size",
    "status",
    "error",
    "params",
    "tokens_per_window",
    "phases",
    "overhead",
    "memory",
    "grad_check",
    "env",
}


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--strategies", "block,zeroish"], "'zeroish'"),
        (["--preset", "huge"], "'huge'"),
        (["--device", "tpu"], "'tpu'"),
        (["--accumulate", "0"], "0"),
        (["--accumulate", "1,x"], "'x'"),
        (["--accumulate", "1,,2"], "'1,,2'"),
        (["--live-tensors", "-5"], "-5"),
        (["--repeat", "many"], "'many'"),
        (["--warmup", "-1"], "-1"),
        (["--rounds", "0"], "0"),
        (["--threads", "0"], "0"),
        (["--timeout", "soon"], "'soon'"),
        (["--timeout", "-3"], "'-3'"),
        (["--plugin", "no_such_module_zg"], "'no_such_module_zg'"),
        (["--bogus"], "--bogus"),
        (["--min-effect", "2"], "'2'"),
        (["--min-effect", "x"], "'x'"),
        (["--strategies", "baseline"], "'baseline'"),
        (["--strategies", "block", "--control", "lazy"], "'lazy'"),
        (["--parallel", "zero3"], "'zero3'"),
        (["--parallel", "none", "--world-size", "2"], "--world-size 2"),
        (["--parallel", "fsdp2", "--world-size", "2", "--grad-sync", "scatter"], "'scatter'"),
        (["--parallel", "ddp", "--grad-sync", "every,often"], "'often'"),
        (["--parallel", "hsdp", "--world-size", "4", "--mesh", "3x2"], "'3x2'"),
        (["--parallel", "hsdp", "--world-size", "4", "--mesh", "two"], "'two'"),
        (["--parallel", "hsdp", "--world-size", "3"], "--world-size 3"),
        (["--parallel", "fsdp2", "--world-size", "2", "--mesh", "1x2"], "'1x2'"),
        (["--precision", "fp16"], "'fp16'"),
        (["--precision", "fp32,bf17"], "'bf17'"),
        (["--optimizer", "adam"], "'adam'"),
        (["--clip-norm", "0"], "'0'"),
        (["--clip-norm", "big"], "'big'"),
        (["--compare-settings", "dropout=0.1"], "'dropout=0.1'"),
        (["--compare-settings", "compile=maybe"], "'compile=maybe'"),
        (["--compare-settings", "precision=fp8"], "'precision=fp8'"),
        (["--compare-settings", "clip_norm=-1"], "'clip_norm=-1'"),
        (["--strategies", "native:set_to_none=banana"], "'banana'"),
        (["--strategies", "native:zero=1"], "'zero'"),
        (["--strategies", "lazy:x"], "'x'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, named, capsys, tmp_path):
    code = cli.main(["run", *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert named in err, err
    assert not (tmp_path / "out").exists()  # nothing started


def test_unknown_strategy_lists_the_valid_ones(capsys):
    assert cli.main(["run", "--strategies", "nope"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in ("global", "block", "native", "lazy"))


def test_cuda_without_a_gpu_is_a_usage_error(capsys):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert cli.main(["run", "--device", "cuda"]) == 2
    assert "'cuda'" in capsys.readouterr().err


def test_usage_error_from_the_command_line():
    done = sweep("--preset", "huge")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "tiny, small, base, big" in done.stderr


def test_rotating_order_and_rounds(tmp_path):
    args = cli.build_parser().parse_args(
        [
            "run",
            *QUICK,
            "--accumulate",
            "1,2",
            "--strategies",
            "block,lazy",
            "--rounds",
            "2",
            "--no-rotate",  # each strategy a process of its own
            "--out",
            str(tmp_path),
        ]
    )
    specs = cli.cases(cli.resolve(args), "id", {})
    assert len(specs) == 2 * 2 * 2  # rounds x K x strategies; no baseline case any more
    firsts = [specs[i].strategy for i in range(0, len(specs), 2)]
    assert firsts == ["block", "lazy", "lazy", "block"]  # each group starts elsewhere
    assert not any(s.control for s in specs)  # two rounds: every strategy has two processes


def test_one_round_adds_control_processes_at_every_k_and_n(tmp_path):
    argv = ["run", "--preset", "tiny", "--accumulate", "1,2", "--live-tensors", "0,10"]
    args = cli.build_parser().parse_args([*argv, "--strategies", "block,native,lazy"])
    specs = cli.cases(cli.resolve(args), "id", {})
    groups = {(s.accumulate, s.live_tensors) for s in specs}
    assert len(groups) == 4
    for k, n in groups:
        here = [s for s in specs if (s.accumulate, s.live_tensors) == (k, n)]
        # the control shares a process with block and lazy: its extra processes are that
        # process's, time-only, so each of the three has the control's count of processes
        controls = [s for s in here if s.control]
        assert [sorted(s.rotation) for s in controls] == [["block", "lazy", "native"]] * (
            cli.CONTROL_PROCESSES - 1
        )
        assert all(s.time_only and s.round > 0 for s in controls)
        measured = [m for s in here for m in s.members()]
        for strategy in ("block", "native", "lazy"):
            rounds = sorted(s.round for s in measured if s.strategy == strategy)
            assert rounds == list(range(cli.CONTROL_PROCESSES))
        assert len({s.case_id for s in here}) == len(here)  # every process its own files
        # the plain loop's timeline is the same in every case: one case records it
        (first,) = [s for s in here if s.plain_timeline]
        assert not first.control and first.round == 0
    # each strategy in a process of its own: the control's extra processes are its own
    alone = cli.resolve(cli.build_parser().parse_args([*argv, "--no-rotate"]))
    controls = [s for s in cli.cases(alone, "id", {}) if s.control]
    assert len(controls) == 4 * (cli.CONTROL_PROCESSES - 1)
    assert {(s.strategy, tuple(s.rotation)) for s in controls} == {("native", ())}


@pytest.fixture(scope="module")
def plugin_sweep(plugin_dir, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One sweep of a failing plugin strategy, block, and the README's plugin example."""
    out = tmp_path_factory.mktemp("plugin-sweep") / "run"
    done = sweep(
        *QUICK,
        *("--strategies", "boom,block,drop"),
        *("--plugin", "zg_test_plugin", "--plugin", "examples.drop_strategy"),
        *("--out", str(out)),
        plugin_dir=plugin_dir,
    )
    return out, done


@pytest.mark.slow  # a real sweep with a failing plugin, about 16 s
def test_failing_plugin_strategy_is_a_failed_row_and_the_sweep_goes_on(plugin_sweep):
    out, done = plugin_sweep
    assert done.returncode == 1, done.stderr
    rows = {r["strategy"]: r for r in rows_of(out)}
    assert set(rows) == {"boom", "block", "drop"}
    assert rows["boom"]["status"] == "failed" and "boom at reset" in rows["boom"]["error"]
    # the failure line printed as it came (escaped, not markup), and the sweep went on
    printed = " ".join(done.stderr.split())  # rich wraps long lines at the console's width
    assert "boom at reset [/gloo/transport/tcp/pair.cc:553] [red]" in printed, done.stderr
    assert rows["block"]["status"] == "ok"
    for row in rows.values():
        assert set(row) >= REQUIRED_FIELDS, REQUIRED_FIELDS - set(row)
    ok = rows["block"]
    assert ok["schema_version"] == 2 and ok["world_size"] == 1
    assert ok["grad_check"]["ok"] and ok["grad_check"]["max_rel_diff"] == 0.0
    assert ok["grad_check"]["windows"] == 3
    assert len(ok["samples"]["plain_window"]) == len(ok["samples"]["window"]) == 2
    # the engine records, the reports summarise: no summary in the row, each derived when asked
    assert ok["overhead"] is None and not ok["phases"]
    typed = Row.from_json(ok)
    overhead = summaries.overhead(typed)
    assert overhead.pairs == 2 and overhead.confidence is None  # < 6 pairs
    params = ok["memory"]["param_bytes"]
    assert ok["memory"]["held_bytes"] == params and ok["memory"]["plain_held_bytes"] == 0
    window = summaries.phases(typed)["window"]
    assert None not in (window.median_s, window.iqr_s, window.ci_low_s, window.ci_high_s, window.cv)
    assert window.n == 2
    assert ok["env"]["torch"] and "git_commit" in ok["env"]
    assert (out / "index.html").exists()
    assert "boom" in done.stdout  # the summary table


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_a_case_that_times_out(plugin_dir, tmp_path):
    out = tmp_path / "run"
    start = time.monotonic()
    done = sweep(
        *QUICK,
        "--strategies",
        "sleepy",
        "--plugin",
        "zg_test_plugin",
        "--timeout",
        "4",
        "--out",
        str(out),
        plugin_dir=plugin_dir,
    )
    assert time.monotonic() - start < 80
    assert done.returncode == 1
    rows = {r["strategy"]: r for r in rows_of(out)}
    assert rows["sleepy"]["status"] == "failed" and "timed out after 4 s" in rows["sleepy"]["error"]


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_a_reset_that_does_nothing_fails_the_gradient_check(plugin_dir, tmp_path):
    # in bf16 at K=8 too, where the tolerance (derived from precision and K) is the largest
    out = tmp_path / "run"
    done = sweep(
        *QUICK,
        "--accumulate",
        "8",
        "--precision",
        "fp32,bf16",
        "--strategies",
        "noop",
        "--plugin",
        "zg_test_plugin",
        "--out",
        str(out),
        plugin_dir=plugin_dir,
    )
    assert done.returncode == 1
    rows = rows_of(out)
    assert sorted(r["precision"] for r in rows) == ["bf16", "fp32"]
    for row in rows:
        assert row["status"] == "failed" and "gradient check failed" in row["error"], row["error"]


@pytest.mark.slow  # three sweeps
def test_resume_runs_only_what_is_missing(tmp_path, capsys):
    out = tmp_path / "run"
    assert sweep(*QUICK, "--strategies", "block,lazy", "--out", str(out)).returncode == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2
    (out / "results.jsonl").write_text(lines[0] + "\n")  # as if interrupted after one case
    run_id = json.loads(lines[0])["run_id"]
    done = sweep(*QUICK, "--strategies", "block,lazy", "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert sorted(r["strategy"] for r in rows) == ["block", "lazy"]
    assert {r["run_id"] for r in rows} == {run_id}
    done = sweep(*QUICK, "--strategies", "block,lazy", "--out", str(out), "--resume")
    assert "0 cases (2 already done)" in done.stderr
    assert len(rows_of(out)) == 2
    # another setting would mix cases: a usage error naming it, nothing run
    for option, value in (("--repeat", "3"), ("--seed", "1"), ("--threads", "2")):
        args = [*QUICK, option, value, "--strategies", "block,lazy", "--out", str(out), "--resume"]
        code = cli.main(["run", *args])  # in this process: checked before anything runs
        err = capsys.readouterr().err
        assert code == 2 and option in err, err
        assert len(err.strip().splitlines()) == 1
    assert len(rows_of(out)) == 2


@pytest.mark.slow  # a sweep interrupted mid-case
def test_interrupt_keeps_finished_rows_and_writes_the_report(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benches", "run", *QUICK, "--repeat", "30", "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job starts with SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: give the sweep the default handler, however the tests were started
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (results.exists() and results.read_text()):
        time.sleep(0.2)
    time.sleep(1.0)  # into the next case
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    rows = rows_of(out)
    # fewer than every built-in strategy's row (7): the sweep stopped before its last process
    assert 1 <= len(rows) < 7 and all(r["status"] == "ok" for r in rows)
    assert (out / "index.html").exists()
    assert "interrupted" in stderr


def test_corrupt_line_is_skipped_with_a_warning(tmp_path):
    good = {"schema_version": 2, "strategy": "block", "status": "failed", "error": "x"}
    (tmp_path / "results.jsonl").write_text(
        json.dumps(good) + "\n" + '{"strategy": "lazy", "stat' + "\n" + json.dumps(good) + "\n"
    )
    with pytest.warns(UserWarning, match=r"results.jsonl:2: skipped a corrupt line"):
        rows = rows_of(tmp_path)
    assert len(rows) == 2


def test_rows_of_an_older_schema_are_refused_in_one_line(tmp_path):
    old = {"schema_version": 1, "strategy": "block", "status": "ok"}
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n")
    done = run_reports("build", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "schema_version 1" in done.stderr


def test_case_without_arguments_is_a_usage_line():
    done = subprocess.run(
        [sys.executable, "-m", "benches.engine.case"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith("usage: python -m benches.engine.case")


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_case_by_hand_takes_the_sweeps_flags_and_writes_a_sweeps_row(tmp_path, capsys):
    def case(*args):
        return subprocess.run(
            [sys.executable, "-m", "benches", "case", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )

    done = case("--strategy", "lazy", "--repeat", "2", "--warmup", "0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (row,) = rows_of(tmp_path)
    assert row["status"] == "ok" and row["strategy"] == "lazy"
    assert (row["accumulate"], row["live_tensors"], row["preset"]) == (4, 0, "tiny")
    assert row["workload"] == "benches.workloads.transformer:workload"
    for bad, word in (
        (["--strategy", "lazy", "--accumulate", "1,4"], "'1,4' has 2 values"),
        (["--strategy", "bogus"], "unknown strategy 'bogus'"),
        (["--strategy", "lazy", "--preset", "huge"], "unknown preset 'huge'"),
        (["--strategy", "lazy"], "needs --out DIR"),
    ):
        out = [] if "--out" in word else ["--out", str(tmp_path)]
        code = cli.main(["case", *bad, *out])  # in this process: checked before anything runs
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and word in err, err
    assert len(rows_of(tmp_path)) == 1


@pytest.mark.slow  # a real sweep with a failing plugin, about 16 s
def test_readme_plugin_example_runs_in_a_sweep(plugin_sweep):
    out, _ = plugin_sweep  # beside a failing plugin strategy and block
    rows = {r["strategy"]: r for r in rows_of(out)}
    assert rows["drop"]["status"] == "ok" and rows["drop"]["grad_check"]["ok"]


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_readme_plugin_example_passes_the_shared_suite():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "drop",
            "tests/test_strategies.py",
        ],
        cwd=ROOT,
        env=dict(os.environ, ZEROGRAD_PLUGINS="examples.drop_strategy"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]  # 5 if -k drop had selected nothing


@pytest.mark.slow
def test_recipe_options_and_settings_compared_are_recorded_and_judged(tmp_path):
    from benches.engine import training
    from reports.schema import verdict_records

    out = tmp_path / "run"
    done = sweep(
        *QUICK,
        "--strategies",
        "native,native:set_to_none=false",
        "--precision",
        "bf16",
        "--optimizer",
        "sgd",
        "--clip-norm",
        "0.5",
        "--compare-settings",
        "precision=fp32",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert sorted(r["options"] for r in rows) == ["", "set_to_none=false"]
    assert {r["strategy"] for r in rows} == {"native"}
    assert len({r["case_id"] for r in rows}) == 2
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert (row["precision"], row["optimizer"], row["clip_norm"]) == ("bf16", "sgd", 0.5)
        assert row["grad_check"]["tolerance"] == training.grad_tolerance("bf16", 1)
        assert set(row["accumulation_error"]) == {"max_rel", "norm_rel"}
        assert row["total_error"]["norm_rel"] > 0  # bf16 against a float64 model
        vs = summaries.loop_ratio(Row.from_json(row), "settings")
        assert (vs.setting, vs.mine, vs.other) == ("precision", "bf16", "fp32")
        assert vs.ratio > 0
    judged = json.loads((out / "verdicts.json").read_text())
    assert len(judged["settings"]) == 2
    assert {s["a"] for s in judged["settings"]} == {"precision=bf16"}
    assert {s["verdict"] for s in judged["settings"]} <= set(verdict_records.WORDS)
    (c,) = {(c["a"], c["b"]) for c in judged["comparisons"]}
    assert set(c) == {"native", "native:set_to_none=false"}
    assert judged["comparisons"][0]["case"]["precision"] == "bf16"


def test_the_first_round_shares_a_process_per_group_and_checks_each_strategy_in_it(tmp_path):
    argv = ["run", *QUICK, "--accumulate", "1,2", "--strategies", "native,global,block,lazy"]
    specs = cli.cases(
        cli.resolve(cli.build_parser().parse_args([*argv, "--out", str(tmp_path)])), "id", {}
    )
    for k in (1, 2):
        here = [s for s in specs if s.accumulate == k and not s.control]
        (shared,) = [s for s in here if s.rotation]
        assert sorted(shared.rotation) == ["block", "lazy", "native"]
        assert not shared.time_only and shared.round == 0
        assert sum(s.plain_timeline for s in here) == 1  # the plain loop's timeline once
        assert [s.strategy for s in here if not s.rotation] == ["global"]  # a process alone
        members = shared.members()
        assert {m.process_id for m in members} == {shared.case_id}
        assert [m.label for m in members] == shared.rotation and not any(
            m.rotation for m in members
        )
    alone = cli.cases(
        cli.resolve(cli.build_parser().parse_args([*argv, "--no-rotate", "--out", str(tmp_path)])),
        "id",
        {},
    )
    assert not any(s.rotation for s in alone) and len(alone) == len(specs) + 2 * 2
