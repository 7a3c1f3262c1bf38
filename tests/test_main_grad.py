"""``main_grad``'s own semantics on a bf16 model, against sums computed here in fp32 and fp64;
the one-buffer clip of ``flat`` and ``main_grad`` against ``clip_grad_norm_``."""

from __future__ import annotations

import types

import pytest
import torch
from conftest import DEVICES, loss_of, make_batches, make_model

import strategies
from strategies import _hooks

BF16 = torch.bfloat16
U_BF16, U_FP32 = 2.0**-8, 2.0**-24  # unit roundoffs (round to nearest)


def micro_grads(model, batches, use_side=False) -> list[dict[str, torch.Tensor]]:
    """Each micro-batch's gradient at the model's dtype, as autograd hands it to AccumulateGrad."""
    names, params = zip(*model.named_parameters(), strict=True)
    out = []
    for tokens in batches:
        grads = torch.autograd.grad(loss_of(model, tokens, use_side), params, allow_unused=True)
        out.append({n: g for n, g in zip(names, grads, strict=True) if g is not None})
    return out


def sums(per_micro, dtype) -> dict[str, torch.Tensor]:
    """The sequential sum in ``dtype``: each gradient cast, then added in order."""
    total: dict[str, torch.Tensor] = {}
    for grads in per_micro:
        for n, g in grads.items():
            total[n] = g.to(dtype) if n not in total else total[n] + g.to(dtype)
    return total


def run_window(collector, model, batches, use_side=False) -> None:
    with collector:
        for tokens in batches:
            collector.backward(loss_of(model, tokens, use_side))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 4, 16])
def test_window_is_the_fp32_sum_cast_once(k, device):
    model = make_model(device=device, dtype=BF16)
    batches = make_batches(k, seed=30 + k, device=device)
    per_micro = micro_grads(model, batches)
    fp32, fp64 = sums(per_micro, torch.float32), sums(per_micro, torch.float64)
    abs_sum = sums([{n: g.abs() for n, g in grads.items()} for grads in per_micro], torch.float64)
    collector = strategies.GradientCollector(model, strategy="main_grad")
    run_window(collector, model, batches)
    for n, p in model.named_parameters():
        if n not in fp32:  # the unused branch
            assert not p.main_grad.any() and not p.grad.any(), n
            continue
        assert p.main_grad.dtype == torch.float32 and p.grad.dtype == BF16
        assert torch.equal(p.main_grad, fp32[n]), n  # (a) exactly the sequential fp32 sum
        assert torch.equal(p.grad, fp32[n].to(BF16)), n  # (b) cast once
        # (c) fp32 summation error, (K - 1) u32 sum|g|, plus the final rounding, u_bf16 |sum|
        summed = (k - 1) * U_FP32 * abs_sum[n]
        assert ((p.main_grad.double() - fp64[n]).abs() <= summed).all(), n
        bound = U_BF16 * fp32[n].double().abs() + summed
        assert ((p.grad.double() - fp64[n]).abs() <= bound).all(), n


def test_error_is_smaller_than_bf16_accumulation():
    k = 16
    batches = make_batches(k, seed=46)
    mine, native = make_model(dtype=BF16), make_model(dtype=BF16)
    fp64 = sums(micro_grads(mine, batches), torch.float64)
    run_window(strategies.GradientCollector(mine, strategy="main_grad"), mine, batches)
    run_window(strategies.GradientCollector(native, strategy="native"), native, batches)

    def error(model) -> float:
        named = dict(model.named_parameters())
        diffs = [(named[n].grad.double() - s).flatten() for n, s in fp64.items()]
        return torch.linalg.vector_norm(torch.cat(diffs)).item()

    assert 0 < error(mine) < error(native), (error(mine), error(native))


def test_second_window_starts_from_zero_and_grad_shows_the_last_window():
    model = make_model(dtype=BF16)
    collector = strategies.GradientCollector(model, strategy="main_grad")
    first, second = make_batches(2, seed=50), make_batches(3, seed=51)
    run_window(collector, model, first, use_side=True)
    assert model.side.weight.grad.any()
    shown = {n: p.grad.clone() for n, p in model.named_parameters()}
    expected = sums(micro_grads(model, second), torch.float32)  # side gets nothing
    with collector:
        for tokens in second:
            collector.backward(loss_of(model, tokens))
        # mid-window: .grad still holds the first window, .main_grad the live sum
        for n, p in model.named_parameters():
            assert torch.equal(p.grad, shown[n]), n
            live = expected.get(n, torch.zeros_like(p.main_grad))
            assert torch.equal(p.main_grad, live), n
    for n, p in model.named_parameters():
        if n in expected:
            assert torch.equal(p.grad, expected[n].to(BF16)), n
        else:  # (d) got nothing this window: zeros, not the first window's gradient
            assert not p.grad.any() and not p.main_grad.any(), n


def test_grad_req_write_keeps_the_last_gradient_in_main_grad():
    model = make_model(dtype=BF16)
    collector = strategies.GradientCollector(
        model, strategy="main_grad", grad_req={"mlp.0.weight": "write"}
    )
    batches = make_batches(3, seed=52)
    per_micro = micro_grads(model, batches)
    added = sums(per_micro, torch.float32)
    run_window(collector, model, batches)
    last = per_micro[-1]["mlp.0.weight"]
    assert torch.equal(model.mlp[0].weight.main_grad, last.float())
    assert torch.equal(model.mlp[0].weight.grad, last)
    assert torch.equal(model.mlp[2].weight.main_grad, added["mlp.2.weight"])


def test_replaced_grad_is_re_pointed_at_finish():
    model = make_model(dtype=BF16)
    collector = strategies.GradientCollector(model, strategy="main_grad")
    run_window(collector, model, make_batches(1, seed=53))
    views = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)  # user code outside the collector
    batches = make_batches(2, seed=54)
    expected = sums(micro_grads(model, batches), torch.float32)
    run_window(collector, model, batches)
    assert all(p.grad is v for p, v in zip(model.parameters(), views, strict=True))
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, expected[n].to(BF16)) if n in expected else not p.grad.any()


def test_one_buffer_per_device_and_dtype():
    model = make_model(dtype=BF16)
    collector = strategies.GradientCollector(model, strategy="main_grad")
    (main,), (grad,) = collector.strategy.main_buffers, collector.strategy.buffers
    assert main.dtype == torch.float32 and grad.dtype == BF16
    assert main.numel() == grad.numel() == sum(p.numel() for p in model.parameters())
    assert {p.grad.untyped_storage().data_ptr() for p in model.parameters()} == {grad.data_ptr()}
    assert {p.main_grad.untyped_storage().data_ptr() for p in model.parameters()} == {
        main.data_ptr()
    }


def test_detach_removes_hooks_and_main_grad_and_keeps_grad():
    model = make_model(dtype=BF16)
    # counted as changes: an unclosed collector garbage-collected earlier leaves its count
    # under an id() a new parameter may reuse
    before = [_hooks.live_prehooks(p) for p in model.parameters()]
    collector = strategies.GradientCollector(model, strategy="main_grad")
    assert [_hooks.live_prehooks(p) - 1 for p in model.parameters()] == before
    run_window(collector, model, make_batches(2, seed=55))
    kept = {n: p.grad.clone() for n, p in model.named_parameters()}
    collector.close()
    assert [_hooks.live_prehooks(p) for p in model.parameters()] == before
    assert not any(hasattr(p, "main_grad") for p in model.parameters())
    assert all(torch.equal(p.grad, kept[n]) for n, p in model.named_parameters())
    strategies.GradientCollector(model, strategy="main_grad").close()  # attachable again


@pytest.mark.parametrize(
    ("ddp", "fsdp", "named"),
    [(object(), [], "DistributedDataParallel"), (None, [object()], "FSDP2")],
)
def test_refuses_ddp_and_fsdp2_before_touching_anything(ddp, fsdp, named):
    # a stand-in collector: the refusal reads only .ddp and .fsdp (the real ones need ranks;
    # tests/test_distributed.py runs them)
    model = make_model()
    params = list(model.named_parameters())
    collector = types.SimpleNamespace(
        ddp=ddp, fsdp=fsdp, named_params=params, params=[p for _, p in params], grad_req={}
    )
    with pytest.raises(ValueError) as excinfo:
        strategies.get("main_grad").attach(collector)
    message = str(excinfo.value)
    assert "\n" not in message and "'main_grad'" in message and named in message
    assert "; use " in message
    assert all(p.grad is None and not hasattr(p, "main_grad") for p in model.parameters())


def test_refuses_a_parameter_that_has_a_main_grad():
    model = make_model()
    first = strategies.GradientCollector(model, strategy="main_grad")
    with pytest.raises(ValueError, match="already has a main_grad"):
        strategies.GradientCollector(model, strategy="main_grad")
    first.close()


# -- the clip hook ------------------------------------------------------------------------------
def leaves_holding(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    leaves = [torch.zeros_like(g) for g in grads]
    for leaf, g in zip(leaves, grads, strict=True):
        leaf.grad = g.clone()
    return leaves


@pytest.mark.parametrize("name", ["flat", "main_grad", "native"])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_equals_clip_grad_norm_across_dtypes(name, max_norm):
    # three dtypes: flat has three buffers, main_grad two fp32-or-wider sums and three .grad
    # buffers; the bf16 gradient is +-1 (norm 16, exact in bf16), since clip_grad_norm_ takes
    # its bf16 norm in bf16
    g = torch.Generator().manual_seed(7)
    a = torch.zeros(1000, requires_grad=True)
    b = torch.zeros(256, dtype=BF16, requires_grad=True)
    c = torch.zeros(50, dtype=torch.float64, requires_grad=True)
    x, y, z = (torch.randn(n, generator=g, dtype=torch.float64) for n in (1000, 256, 50))
    collector = strategies.GradientCollector([a, b, c], strategy=name)
    with collector:
        for _ in range(2):
            loss = (a * x.float()).sum() + (b * y.sign().to(BF16)).sum() / 2 + (c * z).sum()
            collector.backward(loss)
    assert torch.equal(b.grad.abs(), torch.ones(256, dtype=BF16))
    reference = leaves_holding([a.grad, b.grad, c.grad])
    expected = torch.nn.utils.clip_grad_norm_(reference, max_norm)
    norm = collector.strategy.clip_grad_norm(collector, max_norm)
    assert norm.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(norm, expected, rtol=1e-6, atol=0)
    for mine, ref in zip([a, b, c], reference, strict=True):
        torch.testing.assert_close(mine.grad, ref.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["flat", "main_grad", "native"])
def test_clip_norm_of_bf16_gradients_is_taken_in_fp32(name, device):
    model = make_model(device=device, dtype=BF16)
    collector = strategies.GradientCollector(model, strategy=name)
    run_window(collector, model, make_batches(4, seed=56, device=device))
    params = [p for p in model.parameters() if p.grad is not None]
    grads = [p.grad.clone() for p in params]
    exact = torch.linalg.vector_norm(torch.cat([g.double().flatten() for g in grads]))
    reference = leaves_holding(grads)
    expected = torch.nn.utils.clip_grad_norm_(reference, 1.0)  # a bf16 norm and coefficient
    norm = collector.strategy.clip_grad_norm(collector, 1.0)
    assert norm > 1.0  # the clip bites
    if name == "native":  # the default: clip_grad_norm_ itself
        assert torch.equal(norm, expected)
        assert all(torch.equal(p.grad, r.grad) for p, r in zip(params, reference, strict=True))
        return
    assert norm.dtype == torch.float32
    torch.testing.assert_close(norm.double(), exact, rtol=1e-6, atol=0)
    # clip_grad_norm_ rounds each tensor's norm and the total to bf16
    torch.testing.assert_close(norm, expected.float(), rtol=2 * U_BF16, atol=0)
    coef = torch.clamp(1.0 / (norm + 1e-6), max=1.0)
    for p, g, r in zip(params, grads, reference, strict=True):
        assert torch.equal(p.grad, g * coef)  # one fp32 coefficient, each product rounded once
        torch.testing.assert_close(p.grad, r.grad, rtol=4 * U_BF16, atol=0)


@pytest.mark.parametrize("name", ["flat", "main_grad"])
def test_buffer_norm_option_clips_the_same_through_clip_grad_norm_(name, monkeypatch):
    """``buffer_norm=False`` (a sweep's ``flat:buffer_norm=false``) clips with the default hook,
    ``clip_grad_norm_`` over the parameters: same norm, same clipped gradients."""
    calls = []
    original = torch.nn.utils.clip_grad_norm_

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", counting)
    norms, grads = [], []
    for buffer_norm in (True, False):
        model = make_model()
        collector = strategies.GradientCollector(
            model, strategy=strategies.get(name, buffer_norm=buffer_norm)
        )
        with collector:
            for tokens in make_batches(2):
                collector.backward(loss_of(model, tokens))
        norms.append(collector.strategy.clip_grad_norm(collector, 1e-3))
        grads.append([p.grad.clone() for p in model.parameters()])
        collector.close()
    assert len(calls) == 1  # only buffer_norm=False went through clip_grad_norm_
    torch.testing.assert_close(norms[0], norms[1], rtol=1e-6, atol=0)
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="'yes'"):
        strategies.get(name, buffer_norm="yes")


def test_clip_speed_prints_paired_ratios_and_the_a_a_pair_is_never_lower_or_higher(capsys):
    from benches.micro import clip_speed

    assert clip_speed.main(["--calls", "6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum("floor from the A/A pair" in line for line in lines) == 4
    aa = [line for line in lines if "native (A/A)" in line]
    assert len(aa) == 4 and all(line.endswith(("same", "unclear")) for line in aa), aa
    buffers = [line for line in lines if line.lstrip().startswith(("flat", "main_grad"))]
    assert len(buffers) == 8
    words = {line.rsplit(": ", 1)[1] for line in buffers}
    assert words <= {"lower", "higher", "same", "unclear"}, buffers
