"""The front door: `nox -s bench -- ARGS` argument handling, and the shuffled benchmark suite."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

noxfile = pytest.importorskip("noxfile")  # needs nox, which the tests venv has

STAMP = "20240101-120000"


def bench_args(posargs, runs_dir):
    return noxfile.bench_args(posargs, STAMP, runs_dir=str(runs_dir))


@pytest.mark.parametrize(
    "posargs",
    [
        ["--out=DIR", "--preset", "tiny"],
        ["--preset", "tiny", "--out", "DIR"],
        ["--out", "DIR", "--preset=tiny"],
    ],
)
def test_out_and_preset_anywhere(posargs, tmp_path):
    args, out, preset = bench_args(posargs, tmp_path)
    assert (args, out, preset) == (["--preset", "tiny", "--out", "DIR"], "DIR", "tiny")


def test_other_args_pass_through_in_order(tmp_path):
    args, out, preset = bench_args(
        ["--strategies", "lazy", "--out", "D", "--repeat", "3"], tmp_path
    )
    assert args == ["--strategies", "lazy", "--repeat", "3", "--out", "D"]
    assert (out, preset) == ("D", None)


def test_no_out_gives_a_fresh_stamped_directory(tmp_path):
    args, out, preset = bench_args([], tmp_path)
    assert out == os.path.join(str(tmp_path), STAMP)
    assert args == ["--out", out]
    assert preset is None


def test_default_runs_dir_is_reports_runs():
    _, out, _ = noxfile.bench_args(["--accumulate", "1"], STAMP)
    assert out == os.path.join("reports", "runs", STAMP)


@pytest.mark.parametrize(
    "posargs",
    [["--out"], ["--out="], ["--repeat", "3", "--out"], ["--out", "--resume"]],
)
def test_out_without_a_value_is_an_error(posargs, tmp_path):
    with pytest.raises(ValueError) as err:
        bench_args(posargs, tmp_path)
    assert str(err.value) == "--out needs a directory: --out DIR"


@pytest.mark.parametrize("posargs", [["--preset"], ["--preset="], ["--preset", "--out", "D"]])
def test_preset_without_a_value_is_an_error(posargs, tmp_path):
    with pytest.raises(ValueError, match=r"^--preset needs a preset name: --preset NAME$"):
        bench_args(posargs, tmp_path)


@pytest.mark.parametrize(
    ("posargs", "preset"),
    [
        ([], None),
        (["--preset", "small"], "small"),
        (["--preset=base", "--memray"], "base"),
        (["--preset", "tiny", "--preset", "small"], "small"),  # the last wins, as in argparse
    ],
)
def test_preset_extraction(posargs, preset, tmp_path):
    args, _, got = bench_args(posargs, tmp_path)
    assert got == preset
    if preset is not None:
        last = len(args) - 1 - args[::-1].index("--preset")
        assert args[last + 1] == preset  # the sweep runs the same preset


def test_resume_without_out_or_latest_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(ValueError) as err:
        bench_args(["--resume"], tmp_path)
    latest = os.path.join(str(tmp_path), "latest")
    assert str(err.value) == f"--resume needs --out DIR (no {latest} to resume)"
    monkeypatch.chdir(tmp_path)  # the default runs directory, relative to a checkout without one
    with pytest.raises(ValueError) as err:
        noxfile.bench_args(["--resume"], STAMP)
    assert str(err.value) == "--resume needs --out DIR (no reports/runs/latest to resume)"


def test_resume_without_out_resumes_latest(tmp_path):
    run = tmp_path / STAMP
    run.mkdir()
    (tmp_path / "latest").symlink_to(run.name)
    args, out, _ = bench_args(["--preset", "tiny", "--resume"], tmp_path)
    assert out == str(run.resolve())
    assert args == ["--preset", "tiny", "--resume", "--out", out]


def test_resume_with_dangling_latest_is_an_error(tmp_path):
    (tmp_path / "latest").symlink_to("gone")
    with pytest.raises(ValueError, match="--resume needs --out DIR"):
        bench_args(["--resume"], tmp_path)


def test_resume_with_out_resumes_that_directory(tmp_path):
    args, out, _ = bench_args(["--resume", "--out", "D"], tmp_path)
    assert (args, out) == (["--resume", "--out", "D"], "D")


class _Stop(Exception):
    pass


class _FakeSession:
    def __init__(self, posargs, report: tuple[str, ...] = ("index.html", "verdicts.json")):
        self.posargs = posargs
        self.calls = []
        self.report = report  # what the "sweep" writes into its --out

    def error(self, message):
        self.calls.append(("error", message))
        raise _Stop

    def install(self, *args, **kwargs):
        self.calls.append(("install", args))

    def run(self, *args, **kwargs):
        self.calls.append(("run", args, kwargs))
        if args[:4] == ("python", "-m", "benches", "run"):
            out = args[args.index("--out") + 1]
            for name in self.report:
                Path(out, name).write_text("{}")


def test_bench_session_reports_a_bad_argument_before_installing():
    session = _FakeSession(["--preset", "tiny", "--out"])
    with pytest.raises(_Stop):
        noxfile.bench(session)
    assert session.calls == [("error", "--out needs a directory: --out DIR")]


def test_bench_session_passes_preset_and_out(tmp_path):
    out = str(tmp_path / "run")
    session = _FakeSession(["--out", out, "--preset", "tiny"])
    noxfile.bench(session)
    runs = [call for call in session.calls if call[0] == "run"]
    (_, pytest_args, pytest_kwargs), (_, sweep_args, _) = runs
    assert f"--benchmark-json={out}/pytest-benchmark.json" in pytest_args
    assert pytest_kwargs["env"] == {"ZEROGRAD_BENCH_PRESET": "tiny"}
    assert sweep_args[-5:] == ("--memray", "--preset", "tiny", "--out", out)
    assert os.path.isdir(out)


def test_bench_session_fails_when_the_sweep_wrote_no_report(tmp_path):
    out = str(tmp_path / "run")
    session = _FakeSession(["--out", out], report=("index.html",))
    with pytest.raises(_Stop):
        noxfile.bench(session)
    assert session.calls[-1] == ("error", f"the sweep wrote no verdicts.json in {out}")


def test_smoke_runs_every_suite_case_once_then_a_sweep_without_rounds(tmp_path):
    out = str(tmp_path / "run")
    session = _FakeSession(["--smoke", "--out", out, "--repeat", "3"])
    noxfile.bench(session)
    (_, pytest_args, _), (_, sweep_args, _) = [c for c in session.calls if c[0] == "run"]
    assert "--benchmark-disable" in pytest_args and "--benchmark-only" not in pytest_args
    assert not any(a.startswith("--benchmark-json") for a in pytest_args)  # nothing saved
    assert "--smoke" not in pytest_args and "--smoke" not in sweep_args
    # the smoke's settings first: a flag given explicitly comes later and wins (argparse)
    assert sweep_args[4:] == ("--memray", "--budget", "0", "--repeat", "2", "--repeat", "3",
                              "--out", out)  # fmt: skip


@pytest.mark.parametrize("spelling", [["--workload", "m.w:f"], ["--workload=m.w:f"]])
def test_bench_session_passes_the_workload_to_the_benchmarks(spelling, tmp_path):
    session = _FakeSession(["--out", str(tmp_path / "run"), *spelling])
    noxfile.bench(session)
    (_, _, pytest_kwargs), (_, sweep_args, _) = [c for c in session.calls if c[0] == "run"]
    assert pytest_kwargs["env"] == {"ZEROGRAD_BENCH_WORKLOAD": "m.w:f"}
    assert all(arg in sweep_args for arg in spelling)  # and the sweep gets it as given


# -- the benchmark suite itself, in a subprocess (benches/conftest.py shuffles its order) --------
def _pytest(*args: str, seed: str = "3") -> subprocess.CompletedProcess:
    # the suite's own seeded order alone (pytest-randomly would reorder a --noconftest run)
    args = ("-p", "no:cacheprovider", "-p", "no:randomly", *args)
    env = dict(os.environ, ZEROGRAD_BENCH_SEED=seed, ZEROGRAD_BENCH_PRESET="tiny")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "benches/test_bench_strategies.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_benchmark_case_runs_once_and_passes_its_checks(tmp_path):
    """What `nox -s bench -- --smoke` (CI) runs of the suites: every case, untimed, with its
    assertions. A case that breaks (as every bf16 window did at 4a7b646) fails here."""
    from benches import test_bench_strategies as suite

    done = _pytest(*noxfile.suite_args(str(tmp_path), smoke=True)[1:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the built-in strategies, as a fresh process has them (this one's tests register more)
    builtin = subprocess.run(
        [sys.executable, "-c", "import strategies; print(len(strategies.available()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    cases = int(builtin.stdout) * (
        len(suite.ACCUMULATE) * len(suite.PRECISIONS) + len(suite.LIVE_TENSORS)
    )
    assert f"{cases} passed" in done.stdout, done.stdout[-3000:]
    assert list(tmp_path.iterdir()) == []  # untimed: nothing saved


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_benchmark_runs_checks_its_gradients_and_records_its_order(tmp_path):
    report = tmp_path / "bench.json"
    done = _pytest(
        "-q", "-k", "test_window and native and 1 and fp32", f"--benchmark-json={report}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "benchmark order shuffled with seed 3 (ZEROGRAD_BENCH_SEED=3 to repeat)" in done.stdout
    machine = json.loads(report.read_text())["machine_info"]
    assert machine["zerograd_order"] == {"seed": 3, "order": ["test_window[native-1-fp32]"]}


@pytest.mark.slow
def test_benchmark_order_is_the_seeded_shuffle():
    def collected(*args: str, seed: str = "3") -> list[str]:
        done = _pytest("--collect-only", "-q", *args, seed=seed)
        assert done.returncode == 0, done.stdout + done.stderr
        return [line for line in done.stdout.splitlines() if "::" in line]

    fixed = collected("--noconftest")  # parametrize order: no shuffle
    expected = list(fixed)
    random.Random(3).shuffle(expected)
    assert collected() == expected
    assert collected(seed="4") != fixed


def test_quick_shortens_the_benchmark_suites():
    assert noxfile.bench_env(["--quick", "--out", "D"], None) == {"ZEROGRAD_BENCH_QUICK": "1"}
    assert noxfile.bench_env(["--out", "D"], "tiny") == {"ZEROGRAD_BENCH_PRESET": "tiny"}


def test_quick_suites_keep_the_answer_cases_only():
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "benches/test_bench_strategies.py", "--collect-only",
         "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "ZEROGRAD_BENCH_QUICK": "1"},
    )  # fmt: skip
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert ids and all("-4-" not in i and "bf16" not in i and "100000" not in i for i in ids)
    assert any("test_window" in i for i in ids) and any("test_reset" in i for i in ids)
