"""pytest-benchmark suites: each strategy's whole window and its reset alone, in-process.

Run: ``pytest benches/test_bench_strategies.py --benchmark-only`` (``nox -s bench`` does).
Each benchmark builds its own workload in a fixture and frees it, with ``gc.collect()``,
before the next one, and afterwards checks the gradients it produced against a reference
computed without any strategy. The order of the benchmarks is shuffled per session
(benches/conftest.py; ZEROGRAD_BENCH_SEED=N repeats an order). ZEROGRAD_BENCH_PRESET picks the
preset (default tiny; ``nox -s bench -- --preset X`` sets it to the sweep's preset),
ZEROGRAD_BENCH_WORKLOAD the workload (MODULE:FACTORY, workloads/protocol.py; ``nox -s bench --
--workload X`` sets it), and ZEROGRAD_BENCH_THREADS the torch threads (default 1: steady on a
shared machine). ZEROGRAD_BENCH_QUICK=1 (``nox -s bench -- --quick``) keeps the answer's cases
only: windows at K=1 in fp32, resets at N=0.
"""

from __future__ import annotations

import gc
import os

import pytest
import torch

import strategies
from benches.engine import bound, training
from benches.engine.bound import Bound as Workload
from benches.engine.gradients import accepted, reference_grads
from benches.workloads import protocol

PRESET = os.environ.get("ZEROGRAD_BENCH_PRESET", "tiny")
WORKLOAD = os.environ.get("ZEROGRAD_BENCH_WORKLOAD", protocol.DEFAULT)
THREADS = int(os.environ.get("ZEROGRAD_BENCH_THREADS", "1"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROUNDS = 10
QUICK = os.environ.get("ZEROGRAD_BENCH_QUICK", "") == "1"
ACCUMULATE = [1] if QUICK else [1, 4]
PRECISIONS = ["fp32"] if QUICK else ["fp32", "bf16"]
LIVE_TENSORS = [0] if QUICK else [0, 100_000]
# fp32: summation order alone moves a gradient by a few ulps; CUDA kernels reorder more
TOLERANCE = {"rtol": 1e-4, "atol": 1e-6} if DEVICE == "cuda" else {"rtol": 1e-5, "atol": 1e-6}


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


@pytest.fixture
def build():
    """Build a workload + collector for one benchmark; free both afterwards."""
    made = []

    def make(strategy: str, accumulate: int = 1, live_tensors: int = 0, precision: str = "fp32"):
        workload = bound.build(
            WORKLOAD,
            protocol.Settings(
                device=DEVICE,
                precision=precision,
                seed=0,
                accumulate=accumulate,
                live_tensors=live_tensors,
                threads=THREADS,
                preset=PRESET,
            ),
        )
        collector = strategies.GradientCollector(workload.model, strategy=strategy)
        optimizer = training.optimizer(training.Recipe(), workload.model.parameters())
        made.append((workload, collector, optimizer))
        return workload, collector, optimizer

    yield make
    for _, collector, _ in made:
        collector.close()
    made.clear()
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def _assert_grads(workload: Workload, expected: dict[str, torch.Tensor]) -> None:
    """Every parameter's .grad is the reference; one the window did not reach is None or 0."""
    for name, param in workload.model.named_parameters():
        ref = expected.get(name)
        if ref is None:
            assert param.grad is None or not param.grad.any(), f"stale gradient in {name}"
        else:
            assert param.grad is not None, f"no gradient in {name}"
            torch.testing.assert_close(
                param.grad, ref, **TOLERANCE, msg=lambda m, name=name: f"{name}: {m}"
            )


def _extra(benchmark, workload: Workload, strategy: str, **more) -> None:
    benchmark.extra_info.update(
        strategy=strategy,
        preset=PRESET,
        workload=WORKLOAD,
        device=DEVICE,
        threads=THREADS,
        params=workload.num_params(),
        tokens=workload.tokens_per_window(),
        **more,
    )


@pytest.mark.benchmark(group="window")
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("accumulate", ACCUMULATE)
@pytest.mark.parametrize("strategy", strategies.available())
def test_window(benchmark, build, strategy, accumulate, precision):
    """reset + K forward/backward + update: one whole window (bf16: bf16 weights and .grad)."""
    workload, collector, optimizer = build(strategy, accumulate=accumulate, precision=precision)
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)

    def window():
        with collector:
            for batch in batches:
                collector.backward(workload.loss(batch, tokens))
        collector.step(optimizer)
        _sync()

    _extra(benchmark, workload, strategy, accumulate=accumulate, precision=precision)
    benchmark.group = f"window K={accumulate} {precision}"
    benchmark.pedantic(window, rounds=ROUNDS, warmup_rounds=2)

    # one more window, no update: its gradient is the reference at the current weights
    with collector:
        for batch in batches:
            collector.backward(workload.loss(batch, tokens))
    if precision == "fp32":
        _assert_grads(workload, reference_grads(workload, batches, tokens, sum_dtype=None))
    else:  # where the sum lives differs by strategy: the sweep's tolerance for bf16 and K
        got = {n: p.grad for n, p in workload.model.named_parameters()}
        check = accepted(
            got,
            reference_grads(workload, batches, tokens),
            reference_grads(workload, batches, tokens, sum_dtype=None),
            training.grad_tolerance(precision, accumulate),
        )
        assert check.ok, check


@pytest.mark.benchmark(group="reset")
@pytest.mark.parametrize("live_tensors", LIVE_TENSORS)
@pytest.mark.parametrize("strategy", strategies.available())
def test_reset(benchmark, build, strategy, live_tensors):
    """The strategy's reset hook alone (window start), after a window filled the gradients."""
    workload, collector, _ = build(strategy, live_tensors=live_tensors)
    batch = workload.batches(0)[0]
    tokens = workload.window_tokens([batch])

    def fill():  # untimed: every round starts from a window's worth of gradients
        with collector:
            collector.backward(workload.loss(batch, tokens))
        _sync()

    strategy_reset = collector.strategy.reset

    def reset():
        strategy_reset(collector)
        _sync()

    _extra(benchmark, workload, strategy, live_tensors=live_tensors)
    benchmark.group = f"reset N={live_tensors:,}"
    benchmark.pedantic(reset, setup=fill, rounds=ROUNDS, warmup_rounds=1)

    # the last timed reset followed a fill: one more fill must give one micro-batch's gradient,
    # not two (a reset that does nothing leaves the earlier fill's gradient to add to)
    fill()
    _assert_grads(workload, reference_grads(workload, [batch], tokens, sum_dtype=None))
