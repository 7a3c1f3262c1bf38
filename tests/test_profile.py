"""``--profile``: the profiled windows under the real torch.profiler, the operator signatures
of each strategy against the plain loop, the trace file, its bound, and a failing profiler.

The signatures are facts of each strategy's code (strategies/*.py): when a strategy changes what
it calls, these tests fail."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.autograd.profiler_util import FunctionEvent

from benches.engine import case, profiling
from benches.engine.runner import PairedRunner
from benches.engine.spec import CaseSpec
from reports.page import profile as report_profile
from reports.page.records import CaseLine
from reports.schema.row_parts import Profile, given

SIGNED = ("native", "block", "foreach", "lazy", "flat", "global")


def _profiled(strategy: str, trace: Path, pairs: int = 2) -> dict:
    """One case's profiled pairs, in this process, as a case runs them: the strategy's loop after
    one window (so it holds gradients, as after the gradient check), the plain loop beside it."""
    spec = CaseSpec(strategy=strategy, preset="tiny", device="cpu", accumulate=1,
                    live_tensors=0)  # fmt: skip
    threads = torch.get_num_threads()
    try:
        workload = case.setup(spec)
        data, _ = case.case_data(workload, 0, 1)
        runner = PairedRunner(workload, spec.label)
        runner.strategy.window(*data[0])
        runner.add_plain()
        profiled = profiling.profiled_pair(runner, *data[0], trace, 0, 1, pairs)
        assert isinstance(profiled, Profile)  # the row's record, made where it is measured
        out = given(profiled)
        out["params"] = sum(1 for p in workload.model.parameters() if p.requires_grad)
        out["runner"] = runner
        out["data"] = data
        out["trace_path"] = trace
        return out
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> dict[str, dict]:
    """Every signed strategy's profiled pairs (tiny, K=1), one module-wide set."""
    out_dir = tmp_path_factory.mktemp("profiled")
    out = {}
    for name in SIGNED:
        # block's figures are medians over two profiled pairs; one pair each elsewhere (the
        # suite's time)
        pairs = 2 if name == "block" else 1
        out[name] = _profiled(name, out_dir / "traces" / f"{name}.json.gz", pairs)
    yield out
    for figures in out.values():
        figures["runner"].close()


def _diff(figures: dict, phase: str) -> dict[str, dict]:
    return {line["name"]: line for line in report_profile.diff(figures["windows"])[phase]}


def _operator_lines(figures: dict, phase: str) -> dict[str, dict]:
    return {k: v for k, v in _diff(figures, phase).items() if k != report_profile.OUTSIDE}


def test_every_profile_ran_without_warning(profiled):
    for name, figures in profiled.items():
        assert figures["warning"] is None, name
        pairs = 2 if name == "block" else 1
        assert figures["pairs"] == pairs
        for role in profiling.ROLES:
            window = figures["windows"][role]
            assert window["windows"] == pairs, (name, role)
            # K=1: one forward, one backward, one update, and the reset at both ends
            assert [window[p]["ranges"] for p in profiling.PHASES] == [2, 1, 1, 1]
            for phase in profiling.PHASES:
                figures_ = window[phase]
                assert 0 <= figures_["outside_s"] <= figures_["seconds"]
                assert figures_["launches"] is None  # CPU: no kernel launches to count


def test_block_zeroes_each_gradient(profiled):
    figures = profiled["block"]
    reset = _diff(figures, "reset")
    assert reset["aten::zero_"]["delta_calls"] == figures["params"]
    assert reset["aten::zero_"]["word"] == "added"


def test_foreach_is_one_fused_call(profiled):
    reset = _diff(profiled["foreach"], "reset")
    assert reset["aten::_foreach_zero_"]["calls"] == 1
    assert reset["aten::_foreach_zero_"]["word"] == "added"


def test_lazy_and_native_reset_call_no_operator(profiled):
    for name in ("lazy", "native"):
        assert profiled[name]["windows"]["strategy"]["reset"]["operators"] == [], name
        assert _operator_lines(profiled[name], "reset") == {}, name


def test_lazy_writes_the_first_gradient_by_copy(profiled):
    figures = profiled["lazy"]
    backward = _diff(figures, "backward")
    # its AccumulateGrad pre-hook copies each first gradient into the kept buffer
    assert backward["aten::copy_"]["delta_calls"] == figures["params"]


def test_flat_is_one_memset_and_adds_into_its_views(profiled):
    figures = profiled["flat"]
    reset = _diff(figures, "reset")
    assert reset["aten::zero_"]["calls"] == 1  # one buffer: one device, one dtype
    backward = _diff(figures, "backward")
    assert backward["aten::add_"]["delta_calls"] == figures["params"]


def test_kept_gradients_are_added_to_not_stolen(profiled):
    """The plain loop's gradients are None at a window's start, so AccumulateGrad steals the
    incoming one (a detach); a strategy that keeps them adds in place (an add_) per parameter."""
    for name in ("block", "foreach", "flat", "global"):
        figures = profiled[name]
        backward = _diff(figures, "backward")
        assert backward["aten::add_"]["delta_calls"] == figures["params"], name
        assert backward["aten::detach"]["delta_calls"] == -figures["params"], name
    assert "aten::detach" not in _diff(profiled["native"], "backward")


def test_global_reset_is_mostly_outside_any_operator(profiled):
    figures = profiled["global"]
    reset = figures["windows"]["strategy"]["reset"]
    assert reset["outside_s"] > 0.5 * reset["seconds"]
    line = _diff(figures, "reset")[report_profile.OUTSIDE]
    assert line["word"] == "higher"
    assert _diff(figures, "reset")["aten::zero_"]["calls"] >= figures["params"]


def test_trace_holds_both_loops_named_phases(profiled):
    figures = profiled["block"]
    assert figures["trace"] == "block.json.gz"
    events = json.loads(gzip.decompress(figures["trace_path"].read_bytes()))["traceEvents"]
    assert figures["trace_bytes"] < profiling.TRACE_LIMIT_BYTES and not figures["trace_trimmed"]
    windows = {e["name"]: e for e in events if e.get("name", "").startswith("zerograd/window:")}
    assert set(windows) == {"zerograd/window:strategy", "zerograd/window:plain"}
    for window in windows.values():
        start, end = window["ts"], window["ts"] + window["dur"]
        inside = {
            e["name"]
            for e in events
            if e.get("name", "").startswith("zerograd/") and start < e["ts"] < end
        }
        assert {f"zerograd/{p}" for p in profiling.PHASES} <= inside


def test_a_trace_over_the_limit_keeps_the_strategy_window(profiled, tmp_path):
    whole = json.loads(gzip.decompress(profiled["foreach"]["trace_path"].read_bytes()))
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(whole))
    out = profiling.bounded_trace(raw, tmp_path / "small.json.gz", limit=1000)
    assert out["trace_trimmed"] and "limit" in out["trace_note"]
    kept = json.loads(gzip.decompress((tmp_path / "small.json.gz").read_bytes()))["traceEvents"]
    names = {e.get("name") for e in kept}
    assert "zerograd/window:strategy" in names and "zerograd/window:plain" not in names
    assert len(kept) < len(whole["traceEvents"])


def test_a_failing_profiler_is_a_warning_and_the_loops_go_on(tmp_path):
    blocked = tmp_path / "traces"
    blocked.write_text("a file where the traces folder would be")
    figures = _profiled("block", blocked / "block.json.gz", pairs=1)
    runner, data = figures["runner"], figures["data"]
    assert figures["warning"].startswith("profiler failed:")
    mine, plain, _ = runner.pair(0, *data[0])  # the case's next steps still run
    assert mine["window"] > 0 and plain["window"] > 0
    runner.close()


def test_timed_windows_have_no_named_ranges(profiled):
    """The timed pairs run the code they run without --profile: no zerograd/ range in them."""
    figures = profiled["native"]
    runner, data = figures["runner"], figures["data"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        runner.pair(0, *data[0])
    assert not [e.name for e in prof.events() if e.name.startswith("zerograd/")]
    assert [e for e in prof.events() if e.name == "aten::mm"]  # it did profile the windows


def test_phase_ranges_follow_the_window_marks():
    marks = ["start", "reset", "forward 1", "backward 1", "forward 2", "backward 2"]
    marks += ["update", "end"]
    phases = [profiling.phase_after(m, 2) for m in marks]
    assert phases == [
        "reset",
        "forward",
        "backward",
        "forward",
        "backward",
        "reset",
        "update",
        None,
    ]


def _event(i: int, name: str, start: float, end: float, annotation: bool = False):
    return FunctionEvent(i, name, thread=1, start_us=start, end_us=end, stack=[],
                         is_user_annotation=annotation)  # fmt: skip


def test_kernel_launches_are_counted_per_phase_on_cuda():
    """The launch count of a phase: the runtime's launch calls inside its ranges."""
    span = _event(0, "zerograd/reset", 0, 100, annotation=True)
    calls = ["cudaLaunchKernel", "cudaLaunchKernel", "cuLaunchKernel", "cudaMemsetAsync"]
    ops = profiling.subset([_event(i + 1, n, 10 * i, 10 * i + 5) for i, n in enumerate(calls)])
    summary = profiling.phase_summary([span], ops, torch.device("cuda"))
    assert summary["launches"] == 3
    assert profiling.phase_summary([span], ops, torch.device("cpu"))["launches"] is None
    assert summary["outside_s"] == pytest.approx((100 - 4 * 5) / 1e6)


def test_report_names_the_phase_with_most_launches():
    def phase(launches: int) -> dict:
        return {"launches": launches}

    windows = {
        "strategy": {"reset": phase(61), "forward": phase(40), "backward": phase(90),
                     "update": phase(5)},
        "plain": {"reset": phase(0), "forward": phase(40), "backward": phase(90),
                  "update": phase(5)},
    }  # fmt: skip
    out = report_profile.launches(windows)
    assert out["most"] == "backward"
    assert out["window"] == {"strategy": 196, "plain": 135}


def test_calls_and_time_words():
    assert report_profile.calls_word(3, 0) == "added"
    assert report_profile.calls_word(0, 3) == "removed"
    assert report_profile.calls_word(4, 3) == "more"
    assert report_profile.calls_word(3, 3) is None
    assert report_profile.time_word(1e-3, 4e-4) == "higher"
    assert report_profile.time_word(6e-5, 2e-5) is None  # under the 50 µs floor
    assert report_profile.time_word(1e-3, 6e-4) is None  # under 2x
    # 2x between the least, but a window of each side overlaps the other's: not named
    assert report_profile.time_word(1e-3, 4e-4, 1.2e-3, 1.1e-3) is None
    assert report_profile.time_word(1e-3, 4e-4, 1.2e-3, 5e-4) == "higher"
    assert report_profile.time_word(4e-4, 1e-3, 5e-4, 1.2e-3) == "lower"


def test_profile_flag_reaches_every_case(tmp_path):
    from conftest import QUICK

    from benches.sweep import cli

    argv = ["run", *QUICK, "--strategies", "block,lazy", "--out", str(tmp_path)]
    without = cli.cases(cli.resolve(cli.build_parser().parse_args(argv)), "id", {})
    assert [spec.rotation for spec in without] == [["block", "lazy"]]  # one process, shared
    without = [case for spec in without for case in spec.members()]
    assert [spec.profile for spec in without] == [False, False]
    argv.append("--profile")
    specs = cli.cases(cli.resolve(cli.build_parser().parse_args(argv)), "id", {})
    assert [spec.profile for spec in specs] == [True, True]  # each profiled in its own process
    assert not any(spec.rotation for spec in specs)
    # not part of a case's identity: resume and pooling treat a profiled round as any other
    assert specs[0].identity() == without[0].identity()


# -- end to end: a real sweep with --profile (and --memray), its report, its rows ---------------
def _sweep(out: Path, *extra: str) -> list[dict]:
    from conftest import QUICK, ROOT

    command = [sys.executable, "-m", "benches", "run", *QUICK, "--profile", "--out", str(out)]
    done = subprocess.run(
        [*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=900
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_profiled_sweep_writes_traces_and_the_report_shows_the_diff(tmp_path):
    from conftest import run_reports

    out = tmp_path / "sweep"
    rows = _sweep(out, "--strategies", "block,global", "--live-tensors", "0,100000", "--memray")
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    for row in rows:
        figures = row["profile"]
        assert figures["warning"] is None
        trace = out / figures["trace"]
        assert trace.parent == out / "traces" and trace.name == f"{row['case_id']}.json.gz"
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        names = {e.get("name") for e in events}
        assert "zerograd/window:strategy" in names
        # global zeroes the 100,000 ballast tensors' gradients too: its trace is over the
        # bound and keeps the strategy's window, and its first pair alone is profiled
        walk = (row["strategy"], row["live_tensors"]) == ("global", 100000)
        assert figures["trace_trimmed"] is walk
        assert ("zerograd/window:plain" in names) is not walk
        assert figures["pairs"] == (1 if walk else profiling.PAIRS)
        assert {f"zerograd/{p}" for p in profiling.PHASES} <= names
        assert (out / row["memory"]["memray_flamegraph"]).is_file()  # --memray beside it
        assert row["wall_s"]["profile"] > 0
    walk = next(r for r in rows if r["strategy"] == "global" and r["live_tensors"] == 100000)
    reset = walk["profile"]["windows"]["strategy"]["reset"]
    assert reset["outside_s"] > 0.5 * reset["seconds"]  # the gc walk: no operator at all
    zero = next(op for op in reset["operators"] if op[0] == "aten::zero_")
    assert zero[1] > 100000  # the ballast's gradients: the hazard of a process-wide search
    page = (out / "index.html").read_text()
    assert 'id="profiles"' in page and "ui.perfetto.dev" in page
    assert f'href="traces/{rows[0]["case_id"]}.json.gz"' in page
    assert "aten::zero_" in page and report_profile.OUTSIDE in page
    (out / "index.html").unlink()  # the rows alone rebuild it
    assert run_reports("build", str(out)).returncode == 0
    assert (out / "index.html").read_text().count('id="profiles"') == 1


@pytest.mark.slow
def test_with_ranks_only_rank_0_is_profiled(tmp_path):
    rows = _sweep(tmp_path / "ranks", "--strategies", "block", "--world-size", "2")
    (row,) = rows
    assert row["status"] == "ok", row.get("error")
    assert row["profile"]["rank"] == 0 and "rank 0 of 2" in row["profile"]["ranks_note"]
    assert row["profile"]["windows"]["strategy"]["reset"]["ranges"] == 2


def test_a_trace_left_behind_is_not_linked(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "kept.json.gz").write_bytes(b"")
    traces = ("traces/kept.json.gz", "traces/gone.json.gz", None)
    lines = [CaseLine("lazy", 1, 0, 1, 0, True, False, trace=trace) for trace in traces]
    out = report_profile.with_traces(tmp_path, lines)
    assert [line.trace_present for line in out] == [True, False, False]
