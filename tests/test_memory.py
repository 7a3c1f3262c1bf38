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


@pytest.mark.parametrize("first", ["plain", "native"])
def test_the_plain_loop_holds_nothing_and_peaks_like_native_whichever_runs_first(
    workload, data, tmp_path, first
):
    """Identical loops, equal peaks within 1%, whichever pass comes first: the warm-up pass
    pays the process's first-use allocations (memray's own included), and Python's objects
    are traced one by one, not as pymalloc's 1 MiB arenas (which counted 1 MiB in one loop's
    peak, now and then)."""
    memory.warm_up(workload, data, tmp_path / "warm.bin")
    order = ["plain", "native"] if first == "plain" else ["native", "plain"]
    peaks = {}
    for name in order:
        figures = memory.memory_pass(workload, None if name == "plain" else name, data,
                                     tmp_path / f"{name}.bin", timeline_window=False)  # fmt: skip
        peaks[name] = figures["peak_bytes"]
        assert name == "native" or figures["held_bytes"] == 0
    assert abs(peaks["native"] / peaks["plain"] - 1) <= 0.01, peaks


def test_a_strategys_own_buffer_is_counted_once():
    model = torch.nn.Linear(4, 3)
    collector = strategies.GradientCollector(model, strategy="flat")
    # every .grad is a view of the one flat buffer: one storage, the parameters' bytes
    assert memory.held_bytes(collector) == param_bytes(model)
    collector.close()


@pytest.mark.parametrize("strategy", [None, "native", "flat"])
def test_the_timeline_is_a_window_of_the_pass_own_replica(workload, data, strategy, tmp_path):
    """The timeline comes from the memory pass's replica (one window more on CPU, after the
    tracker), starting from what that replica holds: weights, optimizer state and, for a
    strategy that keeps them, its gradients; a reset that drops the gradients (the plain loop,
    native's set_to_none) shows as a fall below the level the window starts at."""
    figures = memory.memory_pass(workload, strategy, data, tmp_path / "capture.bin")
    drawn = figures["timeline"]
    weights = param_bytes(workload.model)
    # AdamW's two moments exist from the first step: the window starts above 3x the weights
    assert drawn["start_bytes"] >= 3 * weights
    levels = [b for _, b in drawn["points"]]
    assert max(levels) > drawn["start_bytes"]  # the forward's activations
    labels = [label for label, _ in drawn["phases"]]
    assert labels[0] == "start" and labels[-1] == "end" and "reset" in labels
    # the gradients the last window left are in the start level (native drops them at its
    # reset, the plain loop at the end of its update)
    assert (drawn["start_bytes"] >= 4 * weights) == (strategy is not None)
    reset = dict(drawn["phases"])["reset"]
    at_reset = [b for t, b in drawn["points"] if t <= reset][-1]
    if strategy == "native":  # set_to_none at the reset: a fall of the gradients' bytes
        assert at_reset <= drawn["start_bytes"] - weights
    else:
        assert at_reset == drawn["start_bytes"]
