"""A mixture-of-experts model from transformers (``examples/workloads/mixtral.py``): its experts
run ``torch._grouped_mm``, which has no float64 kernel, yet every strategy's gradient check
passes, and names the fp32 model that stood in for the float64 one (the ``hf`` extra).

Slow (``nox -s slow``, which CI runs): importing transformers and building the model takes 5-15 s
on two cores; tests/test_gradient_reference.py holds the same fallback on a torch-only model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import conftest
import pytest
from synthetic import rows_of

import strategies
from benches.engine import bound, gradients, training
from benches.engine.replicas import replica
from benches.engine.runner import PairedRunner
from benches.workloads import protocol

# slow; and not skipped without transformers, as the GPT-2 sweep's test: CI installs the extra
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

MIXTRAL = "examples.workloads.mixtral:workload"
STOOD_IN = "fp32 model (no float64 kernel: aten._grouped_mm)"


def mixtral(precision: str = "fp32", accumulate: int = 2) -> bound.Bound:
    settings = protocol.Settings(
        device="cpu", precision=precision, accumulate=accumulate, preset="tiny", threads=1
    )
    return bound.build(MIXTRAL, settings)


@pytest.fixture(scope="module")
def workload() -> bound.Bound:
    return mixtral()


def checked(workload: bound.Bound, name: str, precision: str = "fp32"):
    """The engine's gradient check of one case (``case.check_gradients`` without ranks): the
    strategy's loop against the reference over ``CHECK_WINDOWS`` windows, stepping between."""
    data = []
    for window in range(gradients.CHECK_WINDOWS):
        batches = workload.batches(window)
        data.append((batches, workload.window_tokens(batches)))
    runner = PairedRunner(workload, name)
    try:
        tolerance = training.grad_tolerance(precision, workload.settings.accumulate)
        return gradients.check_windows(runner.strategy, workload, data, data, tolerance)
    finally:
        runner.close()


def test_its_experts_run_grouped_mm_which_has_no_float64_kernel(workload):
    assert workload.model.config._experts_implementation == "grouped_mm"  # the default
    batch = workload.batches(0)[0]
    with pytest.raises(RuntimeError, match="got Double"):
        workload.loss(batch, 1.0, replica(workload.model).double(), "fp32")


@pytest.mark.parametrize("name", strategies.available())
def test_every_strategy_passes_the_gradient_check_against_a_named_reference(workload, name):
    check, errors = checked(workload, name)
    assert check.ok and check.windows == gradients.CHECK_WINDOWS, check
    assert check.accepted_by == "float64 sum"
    assert check.total_reference == STOOD_IN
    # fp32 against the fp32 model: rounding only
    assert 0 < errors["total_error"].max_rel < 1e-5, errors


@pytest.mark.parametrize("precision", ["bf16-autocast", "bf16"])
def test_bf16_passes_and_its_total_error_shows_bf16(precision):
    check, errors = checked(mixtral(precision), "native", precision)
    assert check.ok and check.total_reference == STOOD_IN
    # the bf16 forward against an fp32 one: about 1e-2 (fp32 against it: about 2e-7)
    assert errors["total_error"].norm_rel > 1e-3


def test_a_sweep_names_the_reference_in_its_rows_and_on_its_page(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "benches", "run", *conftest.QUICK, "--accumulate", "2",
         "--workload", MIXTRAL, "--strategies", "native,lazy", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(out)
    assert sorted(r["strategy"] for r in rows) == ["lazy", "native"]
    for row in rows:
        assert row["status"] == "ok", row.get("error")
        assert row["grad_check"]["ok"] and row["grad_check"]["total_reference"] == STOOD_IN
    assert json.loads((out / "verdicts.json").read_text())["comparisons"]
    assert f"vs {STOOD_IN}" in (out / "index.html").read_text()
