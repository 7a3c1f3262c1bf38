"""The paired runner: the strategy's loop and an untouched plain loop, side by side, ABBA."""

from __future__ import annotations

import copy

import pytest
import torch

from benches.engine.runner import PairedRunner
from benches.workloads.transformer import Workload

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def make(device: str, strategy: str = "lazy"):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    workload = Workload(preset="tiny", accumulate=2, device=device, dropout=0.0, threads=1)
    batches = workload.batches(0)
    runner = PairedRunner(workload, strategy)
    runner.add_plain()
    return workload, runner, (batches, workload.window_tokens(batches))


@pytest.mark.parametrize("device", DEVICES)
def test_pairs_time_both_loops_and_the_phases_add_up(device):
    _, runner, data = make(device)
    for i in range(4):
        mine, plain, pressure = runner.pair(i, *data)
        for timing in (mine, plain):
            assert all(v > 0 for v in timing.values()), timing
            parts = timing["reset"] + timing["forward"] + timing["backward"] + timing["update"]
            # the window is one clock span; the phases are its parts (bookkeeping in between)
            assert parts <= timing["window"] * 1.001
            assert parts >= 0.5 * timing["window"]
        assert pressure is None or pressure >= 0
    runner.close()


def test_the_plain_replica_carries_nothing_of_the_strategy():
    _, runner, data = make("cpu", "flat")
    strategy_params = list(runner.strategy.model.parameters())
    plain_params = list(runner.plain.model.parameters())
    assert runner.plain.collector is None
    assert not {id(p) for p in strategy_params} & {id(p) for p in plain_params}
    for a, b in zip(strategy_params, plain_params, strict=True):
        assert torch.equal(a, b)  # the same weights
    runner.pair(0, *data)
    # flat's gradients are views of its buffer; the plain loop's gradients are dropped at the
    # end of its window, so a process-wide search finds nothing of it between windows
    assert all(p.grad is not None for p in strategy_params)
    assert all(p.grad is None for p in plain_params)
    for a, b in zip(strategy_params, plain_params, strict=True):
        assert torch.equal(a, b)  # the same data and the same steps keep them the same
    runner.close()


class _Mlp:
    """A small workload of the protocol (workloads/protocol.py): compiling it takes seconds."""

    def __init__(self, settings) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
        )
        self.k = settings.accumulate

    def batches(self, window: int) -> list:
        gen = torch.Generator().manual_seed(window)
        return [(torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen))] * self.k

    def normaliser(self, batches) -> float:
        return float(sum(len(x) for x, _ in batches))

    def loss(self, batch, normaliser, module):
        x, y = batch
        return torch.nn.functional.mse_loss(module(x), y, reduction="sum") / normaliser


@pytest.mark.slow
def test_a_compiled_loop_compiles_before_its_windows_and_collects_the_eager_gradient():
    from benches.engine import bound, training
    from benches.engine.runner import Loop
    from benches.workloads import protocol

    settings = protocol.Settings(device="cpu", accumulate=2)
    workload = bound.Bound(_Mlp(settings), settings)
    workload.recipe = training.Recipe(compile=True, optimizer="sgd", clip_norm=1.0)
    eager = Loop(workload, copy.deepcopy(workload.model), "main_grad",
                 recipe=training.Recipe(optimizer="sgd", clip_norm=1.0))  # fmt: skip
    loop = Loop(workload, workload.model, "main_grad")
    assert loop.forward is not loop.module  # the window's forward goes through torch.compile
    data = [(b, workload.window_tokens(b)) for b in (workload.batches(0), workload.batches(1))]
    assert loop.warm(data) > 0
    with training.no_recompile(True):  # a compile inside a window would raise here
        for w in range(4):
            for each in (loop, eager):
                each.window(*data[w % 2], update=False)
            for (n, g), (_, e) in zip(loop.grads().items(), eager.grads().items(), strict=True):
                torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-7, msg=n)
            loop.update()
            eager.update()
    loop.close()
    eager.close()
