"""psutil where the card names it: a process tree killed whole, a case's process figures, the
machine's record, pinning, and the noise signal where PSI is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benches.engine import envinfo, process
from benches.sweep import tree
from benches.sweep.arguments import UsageError, resolve
from benches.sweep.options import build_parser
from reports.judge import noise
from reports.schema.records import CaseNoise, Row
from reports.schema.row_parts import CpuPressure, ProcessFigures, given

ROOT = Path(__file__).resolve().parent.parent
# a launcher whose child starts a grandchild in a session of its own, as torchrun starts ranks
GRANDCHILD = "import time; time.sleep(600)"
CHILD = (
    "import subprocess, sys, time; "
    f"subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}], start_new_session=True); "
    "time.sleep(600)"
)
LAUNCHER = (
    "import subprocess, sys, time; "
    f"subprocess.Popen([sys.executable, '-c', {CHILD!r}], start_new_session=True); "
    "time.sleep(600)"
)


def test_kill_tree_ends_descendants_in_sessions_of_their_own():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], start_new_session=True)
    root = psutil.Process(launcher.pid)
    deadline = time.monotonic() + 30
    while len(root.children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    below = root.children(recursive=True)
    assert len(below) == 2 and len({os.getsid(p.pid) for p in [root, *below]}) == 3
    found = tree.kill_tree(launcher.pid)
    launcher.wait(timeout=10)
    assert sorted(found) == sorted([launcher.pid, *(p.pid for p in below)])
    for proc in below:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE


def test_process_figures_over_some_work():
    figures = process.TimedPairsProcess()
    figures.start()
    end = time.process_time() + 0.2
    while time.process_time() < end:  # CPU work, on the clock of this process
        pass
    block = bytearray(64 * 2**20)  # 64 MiB touched: RSS and USS grow by it
    block[::4096] = b"x" * len(block[::4096])
    figures.sample()
    out = given(figures.figures())
    assert out["user_s"] + out["system_s"] >= 0.15
    assert out["uss_peak_bytes"] >= 64 * 2**20 and out["rss_peak_bytes"] >= out["uss_peak_bytes"]
    assert out["rss_final_bytes"] == out["rss_peak_bytes"]
    assert out["voluntary_switches"] >= 0 and out["involuntary_switches"] >= 0
    assert out["involuntary_per_s"] == out["involuntary_switches"] / out["seconds"]
    assert out["affinity"] == sorted(psutil.Process().cpu_affinity())
    del block


def test_the_machine_record_from_psutil():
    info = envinfo.environment("cpu")
    assert info["logical_cores"] == psutil.cpu_count() and info["physical_cores"] >= 1
    assert info["memory_total_bytes"] >= info["memory_available_bytes"] > 0
    assert len(info["load_average"]) == 3
    assert info["psi"] == Path("/proc/pressure/cpu").exists()
    freq = info["cpu_freq_mhz"]
    assert freq is None or freq["current"] is None or freq["current"] > 0


def test_pin_cores_pins_each_local_rank_to_a_core_of_its_own():
    cores = process.allowed_cores()
    if not cores or len(cores) < 2:
        pytest.skip("needs two cores to pin two ranks")
    seen = []
    for rank in (0, 1):
        done = subprocess.run(
            [sys.executable, "-c", "from benches.engine import process; import json, psutil; "
             "print(json.dumps([process.pin_cores(1), psutil.Process().cpu_affinity()]))"],
            cwd=ROOT,
            env={**os.environ, "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                 "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        took, now = json.loads(done.stdout)
        assert took == now and len(now) == 1
        seen.append(now[0])
    assert seen == cores[-2:]  # from the end of the allowed set, rank by rank


def _sweep(*argv: str):
    out = [] if "--out" in argv else ["--out", "/tmp/x"]
    args = build_parser().parse_args(["run", "--strategies", "block", *out, *argv])
    return resolve(args)


def test_pin_is_on_with_one_thread_and_can_be_turned_off():
    assert _sweep("--threads", "1").pin is True
    assert _sweep("--threads", "1", "--no-pin").pin is False
    assert _sweep("--threads", "2").pin is False
    cores = len(process.allowed_cores() or [])
    with pytest.raises(UsageError, match=r"--pin: .* need"):
        _sweep("--threads", str(cores + 1), "--pin")


def test_the_noise_signal_falls_back_to_involuntary_switches_without_psi():
    pressure, calm = CpuPressure(median=0.2), ProcessFigures(involuntary_per_s=1.0)
    with_psi = Row(cpu_pressure=pressure, process=calm)
    assert noise.case_noise(with_psi).signal == "psi" and noise.noisy(with_psi)
    busy = Row(cpu_pressure=CpuPressure(), process=ProcessFigures(involuntary_per_s=120.0))
    quiet = Row(cpu_pressure=CpuPressure(), process=ProcessFigures(involuntary_per_s=8.0))
    assert noise.case_noise(busy) == CaseNoise(
        signal="involuntary_switches",
        value=120.0,
        threshold=noise.NOISY_SWITCHES_PER_S,
        noisy=True,
    )
    assert not noise.noisy(quiet)
    assert noise.case_noise(Row()).signal is None and not noise.noisy(Row())


@pytest.mark.parametrize(("recorded", "pinned"), [({}, False), ({"pin": True}, True)])
def test_resume_keeps_the_runs_own_pinning(recorded, pinned, tmp_path):
    # a run from before --pin recorded no pin: it was unpinned, and resuming it stays so
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "case_settings": {**recorded}}))
    (tmp_path / "results.jsonl").write_text("")
    args = ["--threads", "1", "--resume", "--out", str(tmp_path)]
    assert _sweep(*args).pin is pinned
    other = "--no-pin" if pinned else "--pin"
    if recorded:  # asked otherwise than the run recorded: a usage error naming --pin
        with pytest.raises(UsageError, match="--pin"):
            _sweep(*args, other)
