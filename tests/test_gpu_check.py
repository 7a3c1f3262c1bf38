"""scripts/gpu_check.sh, the GPU checks of a session: its shell parses, and its CPU parts
(``DEVICE=cpu``: the big-preset case, the profiled case and the sample's sweep, on the tiny
preset) write their reports, so the script that runs once on a lent GPU does not fail there on
a typo."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_script_parses():
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # three tiny sweeps
def test_its_cpu_parts_write_their_reports(tmp_path):
    env = {**os.environ, "DEVICE": "cpu", "OUT": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for run in ("big", "profile", "sweep"):
        log = (tmp_path / f"{run}.txt").read_text()
        assert (tmp_path / run / "index.html").is_file(), log[-2000:]
        assert (tmp_path / run / "verdicts.json").is_file(), log[-2000:]
    assert (tmp_path / "machine.txt").read_text().endswith("done\n")
