"""Window = full batch, for every registered strategy, on the reference workload."""

from __future__ import annotations

import pytest
import torch
from test_workload import concat

import strategies
from benches.engine.gradients import reference_grads
from benches.workloads.transformer import Workload


@pytest.mark.parametrize("name", strategies.available())
def test_window_equals_full_batch(name):
    w = Workload(preset="tiny", accumulate=3, dropout=0.0, device="cpu", seed=2)
    batches = w.batches(0)
    tokens = w.window_tokens(batches)
    # the same additions, in the same order
    exact = reference_grads(w, batches, tokens, sum_dtype=None)
    params = [p for _, p in w.model.named_parameters()]
    full = concat(batches)
    full_batch = torch.autograd.grad(w.loss(full, full.n_tokens), params)
    collector = strategies.GradientCollector(w.model, strategy=name)
    for _window in range(2):  # the second window starts fresh from the first's gradients
        with collector:
            for batch in batches:
                collector.backward(w.loss(batch, tokens))
        for (n, p), g in zip(w.model.named_parameters(), full_batch, strict=True):
            assert torch.equal(p.grad, exact[n]), n
            # one full batch sums in another order: equal to float32 rounding
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6, msg=n)
    collector.close()
