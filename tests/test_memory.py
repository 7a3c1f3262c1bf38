"""The memory pass: held bytes exact from storages, peak bytes from a tracker started before
attach. A strategy that keeps gradients between windows holds exactly the parameters' bytes."""

from __future__ import annotations

import pytest
import torch

import strategies
from benches.engine import memory
from benches.workloads.transformer import Workload

PERSISTENT = {"block", "lazy", "flat", "foreach", "global"}


@pytest.fixture(scope="module")
def workload():
    return Workload(preset="tiny", accumulate=2, device="cpu", dropout=0.0, threads=1)


@pytest.fixture(scope="module")
def data(workload):
    return [(b, workload.window_tokens(b)) for b in (workload.batches(0), workload.batches(1))]


def param_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.parametrize("strategy", ["block", "flat", "foreach", "global", "lazy", "native"])
def test_held_bytes_are_exact(workload, data, strategy, tmp_path):
    figures = memory.memory_pass(workload, strategy, data, tmp_path / "capture.bin")
    if strategy == "native":  # set_to_none: nothing kept between windows
        assert figures["held_bytes"] == 0
    else:
        assert strategy in PERSISTENT
        assert figures["held_bytes"] == param_bytes(workload.model)
    # the peak holds at least the replica's weights and one set of gradients
    assert figures["peak_bytes"] >= 2 * param_bytes(workload.model)
    assert "memray" in figures["peak_method"]


def test_the_plain_loop_holds_nothing_and_peaks_like_native(workload, data, tmp_path):
    # the first pass of a process pays torch's one-time initialisations (a case's process runs
    # its timed pairs first): warm up, so that this test holds alone as in the file
    memory.memory_pass(workload, None, data, tmp_path / "warm.bin")
    plain = memory.memory_pass(workload, None, data, tmp_path / "plain.bin")
    native = memory.memory_pass(workload, "native", data, tmp_path / "native.bin")
    assert plain["held_bytes"] == 0
    assert abs(plain["peak_bytes"] - native["peak_bytes"]) <= 0.02 * plain["peak_bytes"]


def test_a_strategys_own_buffer_is_counted_once():
    model = torch.nn.Linear(4, 3)
    collector = strategies.GradientCollector(model, strategy="flat")
    # every .grad is a view of the one flat buffer: one storage, the parameters' bytes
    assert memory.held_bytes(collector) == param_bytes(model)
    collector.close()
