"""The gradient check's rule on real bf16 gradients: a sum kept in bf16 or in fp32 passes, a
window that lost a micro-batch or kept the last window's fails, at every K."""

from __future__ import annotations

import pytest
import torch

from benches.engine import bound, gradients, training
from benches.workloads import protocol
from reports.schema.row_parts import given


def micro_grads(workload, batches, tokens) -> list[dict[str, torch.Tensor]]:
    names, params = zip(*workload.model.named_parameters(), strict=True)
    out = []
    for batch in batches:
        grads = torch.autograd.grad(workload.loss(batch, tokens), params, allow_unused=True)
        out.append({n: g for n, g in zip(names, grads, strict=True) if g is not None})
    return out


def summed(parts, dtype=None) -> dict[str, torch.Tensor]:
    """The parts added in order, in ``dtype`` (None: their own), as autograd adds into .grad."""
    total: dict[str, torch.Tensor] = {}
    for part in parts:
        for n, g in part.items():
            g = g if dtype is None else g.to(dtype)
            total[n] = g if n not in total else total[n] + g
    return total


@pytest.mark.parametrize("k", [1, 8, 16])
def test_bf16_sums_pass_and_a_lost_micro_batch_or_window_fails(k):
    workload = bound.build(
        protocol.DEFAULT,
        protocol.Settings(device="cpu", precision="bf16", accumulate=k, preset="tiny"),
    )
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    parts = micro_grads(workload, batches, tokens)
    expected = gradients.reference_grads(workload, batches, tokens)  # float64 sum
    same_order = gradients.reference_grads(workload, batches, tokens, sum_dtype=None)
    tolerance = training.grad_tolerance("bf16", k)

    def check(got):
        return given(gradients.accepted(got, expected, same_order, tolerance))

    in_bf16 = summed(parts)  # native, block, lazy, ...: .grad is the sum
    assert check(in_bf16)["ok"]
    in_fp32 = {n: g.to(torch.bfloat16) for n, g in summed(parts, torch.float32).items()}
    assert check(in_fp32)["ok"]  # main_grad: an fp32 sum cast once
    if k > 1:
        assert check(in_fp32)["accepted_by"] == "float64 sum"
        for lost in (0, k - 1):  # the first or the last micro-batch never added
            assert not check(summed(parts[:lost] + parts[lost + 1 :]))["ok"], lost
    # a reset that does nothing: the next window holds two windows' gradients
    other = workload.batches(1)
    previous = summed(micro_grads(workload, other, workload.window_tokens(other)))
    assert not check(summed([previous, in_bf16]))["ok"]
