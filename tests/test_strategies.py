"""The shared suite: every registered strategy collects exactly the reference gradients.

Parametrised over ``strategies.available()``, so a strategy registered later is covered too.
Exact equality where the arithmetic is the same (the same additions in the same order).
"""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICES, STRATEGIES, loss_of, make_batches, make_model, reference_grads

import strategies

pytestmark = pytest.mark.parametrize("name", STRATEGIES)


def grads_of(model) -> dict[str, torch.Tensor | None]:
    return {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}


def assert_window_equals(model, expected: dict[str, torch.Tensor], exact: bool = True) -> None:
    for n, p in model.named_parameters():
        if n in expected:
            assert p.grad is not None, f"{n}: no gradient"
            if exact:
                assert torch.equal(p.grad, expected[n]), f"{n}: {p.grad} != {expected[n]}"
            else:
                torch.testing.assert_close(p.grad, expected[n])
        else:  # received nothing this window: None or zeros, never a stale value
            assert p.grad is None or not p.grad.any(), f"{n}: stale gradient {p.grad}"


def run_window(collector, model, batches, use_side=False) -> None:
    with collector:
        for tokens in batches:
            collector.backward(loss_of(model, tokens, use_side))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 3])
def test_window_equals_reference(name, device, k):
    model = make_model(device=device)
    collector = strategies.GradientCollector(model, strategy=name)
    for window in range(3):  # every window starts fresh
        batches = make_batches(k, seed=10 + window, device=device)
        expected = reference_grads(model, batches, use_side=window == 1)
        run_window(collector, model, batches, use_side=window == 1)
        assert_window_equals(model, expected)
    collector.close()


def test_unused_parameter_cleared_next_window(name):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name)
    run_window(collector, model, make_batches(2), use_side=True)
    assert model.side.weight.grad is not None and model.side.weight.grad.any()
    run_window(collector, model, make_batches(2, seed=5), use_side=False)
    assert model.side.weight.grad is None or not model.side.weight.grad.any()


def test_list_target_equals_reference(name):
    model = make_model()
    params = list(model.parameters())
    collector = strategies.GradientCollector(params + params[:1], strategy=name)  # a repeat
    assert [n for n, _ in collector.named_params] == [str(i) for i in range(len(params))]
    batches = make_batches(2)
    expected = reference_grads(model, batches)
    run_window(collector, model, batches)
    assert_window_equals(model, expected)


def test_grad_req_write_keeps_last_backward(name):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name, grad_req="write")
    for window in range(2):
        batches = make_batches(3, seed=20 + window)
        expected = reference_grads(model, batches[-1:])
        run_window(collector, model, batches)
        assert_window_equals(model, expected)


def test_grad_req_null_computes_nothing(name):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name, grad_req="null")
    assert all(not p.requires_grad for p in model.parameters())
    with collector:
        loss = loss_of(model, make_batches(1)[0])
        assert not loss.requires_grad
    assert all(p.grad is None for p in model.parameters())
    collector.close()
    assert all(p.requires_grad for p in model.parameters())


def test_grad_req_dict_mixes_modes(name):
    model = make_model()
    modes = {"mlp.0.weight": "write", "norm.weight": "null"}  # everything else: add
    collector = strategies.GradientCollector(model, strategy=name, grad_req=modes)
    assert collector.grad_req["mlp.2.weight"] == "add"
    assert "norm.weight" not in dict(collector.named_params)
    batches = make_batches(3, seed=3)
    model.norm.weight.requires_grad_(True)  # the references need every gradient
    added, last = reference_grads(model, batches), reference_grads(model, batches[-1:])
    model.norm.weight.requires_grad_(False)
    run_window(collector, model, batches)
    for n, p in model.named_parameters():
        if n == "norm.weight":
            assert p.grad is None
        elif n == "mlp.0.weight":
            assert torch.equal(p.grad, last[n])
        elif n in added:
            assert torch.equal(p.grad, added[n])


def test_retain_graph_adds_within_window(name):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name)
    tokens = make_batches(1)[0]
    expected = reference_grads(model, [tokens, tokens])
    with collector:
        loss = loss_of(model, tokens)
        collector.backward(loss, retain_graph=True)
        collector.backward(loss)
    assert_window_equals(model, expected)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_inf_in_old_gradients_gone(name, bad):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name)
    run_window(collector, model, make_batches(1))
    for p in model.parameters():
        if p.grad is not None:
            p.grad.fill_(bad)  # in place: the strategy's buffers hold the poison
    batches = make_batches(2, seed=7)
    expected = reference_grads(model, batches)
    run_window(collector, model, batches)
    assert_window_equals(model, expected)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_two_collectors_side_by_side(name):
    mine, other = make_model(seed=1), make_model(seed=2)
    other_collector = strategies.GradientCollector(other, strategy="block")
    run_window(other_collector, other, make_batches(1))
    before = grads_of(other)
    collector = strategies.GradientCollector(mine, strategy=name)
    batches = make_batches(2, seed=4)
    expected = reference_grads(mine, batches)
    run_window(collector, mine, batches)
    assert_window_equals(mine, expected)
    after = grads_of(other)
    if name == "global":  # by design: the process-wide search zeroes the other model too
        assert all(g is None or not g.any() for g in after.values())
    else:
        assert all(torch.equal(after[n], g) for n, g in before.items() if g is not None)


def test_two_windows_open_at_once(name):
    mine, other = make_model(seed=1), make_model(seed=2)
    collector = strategies.GradientCollector(mine, strategy=name)
    other_collector = strategies.GradientCollector(other, strategy="native")
    batches = make_batches(2, seed=6)
    expected_mine, expected_other = reference_grads(mine, batches), reference_grads(other, batches)
    with other_collector, collector:  # ours resets last: even global leaves `other` intact
        for tokens in batches:
            collector.backward(loss_of(mine, tokens))
            other_collector.backward(loss_of(other, tokens))
    assert_window_equals(mine, expected_mine)
    assert_window_equals(other, expected_other)


def test_step_clips_the_full_batch_gradient(name):
    model, twin = make_model(seed=3), make_model(seed=3)
    batches = make_batches(3, seed=8)
    collector = strategies.GradientCollector(model, strategy=name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    run_window(collector, model, batches)
    norm = collector.step(optimizer, clip_norm=0.1)
    # the twin: one backward over the whole batch, clipped, stepped
    loss_of(twin, torch.cat(batches)).backward()
    twin_norm = torch.nn.utils.clip_grad_norm_(list(twin.parameters()), 0.1)
    torch.optim.SGD(twin.parameters(), lr=0.5).step()
    assert norm > 0.1  # the clip really bit
    torch.testing.assert_close(norm, twin_norm)
    for (n, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=n)


def test_grad_scaler_unscales_once_per_window(name):
    model, twin = make_model(seed=4), make_model(seed=4)
    batches = make_batches(3, seed=9)
    collector = strategies.GradientCollector(model, strategy=name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    with collector:
        for tokens in batches:
            collector.backward(scaler.scale(loss_of(model, tokens)))
    collector.step(optimizer, clip_norm=1.0, scaler=scaler)
    expected = reference_grads(twin, batches)
    for n, q in twin.named_parameters():
        q.grad = expected.get(n)
    torch.nn.utils.clip_grad_norm_([q for q in twin.parameters() if q.grad is not None], 1.0)
    torch.optim.SGD(twin.parameters(), lr=0.1).step()
    assert scaler.get_scale() == 2.0**10  # finite gradients: no back-off
    for (n, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=n)


def test_step_clip_equals_clip_grad_norm_on_a_copy(name):
    model = make_model(seed=5)
    collector = strategies.GradientCollector(model, strategy=name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the step leaves .grad to compare
    # (clip norm, a .grad replaced by user code between window and step): 0.1 bites, 1e6 not
    for window, (max_norm, replaced) in enumerate([(0.1, False), (0.1, True), (1e6, False)]):
        run_window(collector, model, make_batches(3, seed=11 + window))  # side gets nothing
        if replaced:  # a strategy's own buffers are no longer all of .grad
            model.mlp[0].weight.grad = model.mlp[0].weight.grad.clone()
        copies = {}  # the reference: leaves holding copies of the window's gradients
        for n, p in model.named_parameters():
            if p.grad is not None:
                copies[n] = p.detach().clone()
                copies[n].grad = p.grad.clone()
        expected = torch.nn.utils.clip_grad_norm_(list(copies.values()), max_norm)
        norm = collector.step(optimizer, clip_norm=max_norm)
        torch.testing.assert_close(norm, expected, rtol=1e-6, atol=0)
        assert (norm > max_norm) == (max_norm < 1)
        for n, p in model.named_parameters():
            if n in copies:
                torch.testing.assert_close(p.grad, copies[n].grad, rtol=1e-6, atol=0, msg=n)
            if n.startswith("side"):
                assert p.grad is None or not p.grad.any(), n


def test_a_frozen_parameter_never_gets_a_grad_nor_counts_as_held(name):
    """A fine-tune's frozen base (requires_grad False on most parameters): every strategy gives
    the trainable ones the reference gradients, window after window, the frozen ones no .grad,
    and holds no bytes for them (``memory.held_bytes``)."""
    from benches.engine.memory import held_bytes, storage_bytes

    def collected(freeze: bool):
        model = make_model()
        if freeze:
            for p in (*model.mlp.parameters(), *model.norm.parameters(), model.side.weight):
                p.requires_grad_(False)
        collector = strategies.GradientCollector(model, strategy=name)
        for window in range(3):
            batches = make_batches(2, seed=30 + window)
            expected = reference_grads(model, batches, use_side=window == 1)
            run_window(collector, model, batches, use_side=window == 1)
            assert_window_equals(model, expected)
            frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
            assert all(p.grad is None for p in model.parameters() if not p.requires_grad), frozen
        return model, collector

    model, frozen = collected(freeze=True)
    _, every = collected(freeze=False)
    # at most two copies of the trainable ones (a strategy may keep a buffer beside .grad:
    # main_grad's float32 sums), and far below every parameter's gradient
    trainable = storage_bytes(p for p in model.parameters() if p.requires_grad)
    assert held_bytes(frozen) <= 2 * trainable < held_bytes(every)
    frozen.close()
    every.close()
