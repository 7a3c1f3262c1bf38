"""The reference workload: presets, determinism, padding, token normalisation, errors, ballast."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benches.engine import training
from benches.workloads.transformer import (
    PAD,
    PRESETS,
    Batch,
    Workload,
    describe_presets,
)

REPO = Path(__file__).resolve().parents[1]


def tiny(**overrides) -> Workload:
    return Workload(**{"preset": "tiny", "device": "cpu", "dropout": 0.0, **overrides})


def grads(w: Workload, loss: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad(loss, list(w.model.parameters()))


def window_grads(w: Workload, batches: list[Batch], per_batch_tokens=None) -> list[torch.Tensor]:
    """Sum of the micro-batch gradients; each loss divided by the window's tokens, or its own."""
    total = w.window_tokens(batches)
    acc = [torch.zeros_like(p) for p in w.model.parameters()]
    for b in batches:
        n = b.n_tokens if per_batch_tokens else total
        loss = w.loss(b, n) / (len(batches) if per_batch_tokens else 1)
        for a, g in zip(acc, grads(w, loss), strict=True):
            a += g
    return acc


def concat(batches: list[Batch]) -> Batch:
    """The K micro-batches as one full batch, padded to the longest source and target."""
    S = max(b.src.size(1) for b in batches)
    T = max(b.tgt_in.size(1) for b in batches)

    def cat(name, width, value):
        parts = [getattr(b, name) for b in batches]
        return torch.cat([F.pad(p, (0, width - p.size(1)), value=value) for p in parts])

    return Batch(
        src=cat("src", S, PAD),
        tgt_in=cat("tgt_in", T, PAD),
        tgt_out=cat("tgt_out", T, PAD),
        src_pad_mask=cat("src_pad_mask", S, True),
        tgt_pad_mask=cat("tgt_pad_mask", T, True),
        n_tokens=sum(b.n_tokens for b in batches),
    )


# --- presets ---


def test_preset_parameter_counts():
    counts = dict(describe_presets())
    assert list(counts) == ["tiny", "small", "base", "big"] == list(PRESETS)
    assert counts["tiny"] < 500_000
    assert 5_000_000 <= counts["small"] <= 20_000_000
    assert 50_000_000 <= counts["base"] <= 70_000_000
    assert counts["big"] > 3 * counts["base"]


def test_base_and_big_have_transformer_shapes():
    base, big = PRESETS["base"], PRESETS["big"]
    assert (
        (base.n_encoder_layers, base.n_decoder_layers)
        == (6, 6)
        == (
            big.n_encoder_layers,
            big.n_decoder_layers,
        )
    )
    assert (base.d_model, base.n_heads, base.d_ff, base.vocab_size) == (512, 8, 2048, 32000)
    assert (big.d_model, big.n_heads, big.d_ff, big.vocab_size) == (1024, 16, 4096, 32000)


def test_embeddings_are_tied_and_counted_once():
    w = tiny()
    m = w.model
    assert m.lm_head.weight is m.embed.weight
    assert w.num_params() == dict(describe_presets())["tiny"]
    with_duplicates = sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False))
    assert with_duplicates - w.num_params() == m.embed.weight.numel()


# --- batches ---


def test_batches_are_padded_and_counted():
    w = tiny(accumulate=3, min_len=2, max_len=9)
    batches = w.batches(0)
    assert len(batches) == 3
    for b in batches:
        lengths = (~b.src_pad_mask).sum(1)
        assert lengths.min() >= 2 and lengths.max() <= 9
        assert torch.equal(b.src == PAD, b.src_pad_mask)
        assert torch.equal(b.tgt_in == PAD, b.tgt_pad_mask)
        assert torch.equal(b.tgt_out == PAD, b.tgt_pad_mask)
        assert torch.equal((~b.tgt_pad_mask).sum(1), lengths + 1)  # BOS / EOS
        assert b.n_tokens == int((b.tgt_out != PAD).sum())
        assert b.src.device == b.tgt_in.device == w.device
    assert w.window_tokens(batches) == w.tokens_per_window() == sum(b.n_tokens for b in batches)
    assert len({b.n_tokens for b in batches}) > 1  # lengths vary between micro-batches


def test_micro_batch_does_not_depend_on_k_but_on_window():
    one, four = tiny(accumulate=1).batches(0)[0], tiny(accumulate=4).batches(0)[0]
    assert torch.equal(one.src, four.src) and torch.equal(one.tgt_out, four.tgt_out)
    other = tiny(accumulate=1).batches(1)[0]
    assert one.src.shape != other.src.shape or not torch.equal(one.src, other.src)


def test_flops_and_mfu():
    w = tiny(accumulate=2)
    flops = 6 * w.num_params() * w.tokens_per_window()
    assert w.flops_per_window() == flops
    assert w.mfu(0.5, flops) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="window_seconds"):
        w.mfu(0.0, 1e12)


# the names as torch.cuda.get_device_name gives them; TFLOPS dense (the data sheets' with sparsity
# halved where they give only that)
@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 989.5),  # the SXM5
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA H100 NVL", 835.5),
        ("NVIDIA H200", 989.5),
        ("NVIDIA H200 NVL", 835.5),
        ("NVIDIA GH200 480GB", 989.5),
        ("NVIDIA B200", 2250),
        ("NVIDIA A100-SXM4-40GB", 312),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA A100-PCIE-40GB", 312),
        ("NVIDIA A100 80GB PCIe", 312),
        ("NVIDIA L40S", 362.05),
        ("NVIDIA L40", 181.05),
        ("NVIDIA L4", 121),
        ("NVIDIA A10", 125),
    ],
)
def test_the_bf16_peak_is_the_named_gpus_own(name, tflops):
    assert training.bf16_peak(name) == tflops * 1e12


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A10G",  # no NVIDIA data sheet
        "Tesla V100-SXM2-16GB",  # no bf16 tensor cores
        "Tesla T4",
        "NVIDIA T400",
        "NVIDIA RTX A1000",  # not an A100
        "NVIDIA H800",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a slice of the SMs
        "AMD Instinct MI300X",
        "NVIDIA GeForce RTX 4090",
    ],
)
def test_a_gpu_without_a_peak_of_its_own_has_no_mfu(name):
    assert training.bf16_peak(name) is None


def test_no_peak_on_cpu_or_for_fp32():
    assert training.peak_flops(torch.device("cpu"), "bf16-autocast") is None
    assert training.peak_flops(torch.device("cuda", 0), "fp32") is None  # the name is not read


# --- determinism ---


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_same_seed_same_weights_batches_and_loss(dropout):
    losses, states, batches = [], [], []
    for _ in range(2):
        w = tiny(seed=3, dropout=dropout, accumulate=2)
        bs = w.batches(5)
        n = w.window_tokens(bs)
        losses.append(torch.stack([w.loss(b, n) for b in bs]))
        states.append(w.model.state_dict())
        batches.append(bs)
    assert torch.equal(losses[0], losses[1])  # bitwise
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key
    for a, b in zip(*batches, strict=True):
        for field in ("src", "tgt_in", "tgt_out", "src_pad_mask", "tgt_pad_mask"):
            assert torch.equal(getattr(a, field), getattr(b, field)), field


def test_different_seed_differs():
    a, b = tiny(seed=0), tiny(seed=1)
    assert not torch.equal(a.model.embed.weight, b.model.embed.weight)
    ba, bb = a.batches(0)[0], b.batches(0)[0]
    assert ba.src.shape != bb.src.shape or not torch.equal(ba.src, bb.src)
    assert a.loss(ba, ba.n_tokens) != b.loss(bb, bb.n_tokens)


# --- the loss ---


def test_loss_is_label_smoothed_sum_over_non_pad_tokens():
    w = tiny(label_smoothing=0.1)
    b = w.batches(0)[0]
    logits = w.model(b.src, b.tgt_in, b.src_pad_mask, b.tgt_pad_mask)
    logp = logits.log_softmax(-1)[~b.tgt_pad_mask]  # (N, V)
    target = b.tgt_out[~b.tgt_pad_mask]  # (N,)
    nll = -logp.gather(1, target[:, None]).squeeze(1)
    expected = (0.9 * nll - 0.1 * logp.mean(-1)).sum()
    assert torch.allclose(w.loss(b, 1), expected, rtol=1e-5)
    assert torch.allclose(w.loss(b, 7), expected / 7, rtol=1e-5)


def test_padding_does_not_contribute():
    w = tiny(min_len=2, max_len=12)
    b = w.batches(0)[0]
    assert b.src_pad_mask.any() and b.tgt_pad_mask.any()
    loss = w.loss(b, b.n_tokens)
    g = grads(w, loss)
    gen = torch.Generator().manual_seed(0)
    V = w.model_config.vocab_size
    changed = Batch(
        src=torch.where(b.src_pad_mask, torch.randint(3, V, b.src.shape, generator=gen), b.src),
        tgt_in=torch.where(
            b.tgt_pad_mask, torch.randint(3, V, b.tgt_in.shape, generator=gen), b.tgt_in
        ),
        tgt_out=b.tgt_out,  # PAD there is the ignore marker, not an input
        src_pad_mask=b.src_pad_mask,
        tgt_pad_mask=b.tgt_pad_mask,
        n_tokens=b.n_tokens,
    )
    assert not torch.equal(changed.src, b.src) and not torch.equal(changed.tgt_in, b.tgt_in)
    loss2 = w.loss(changed, b.n_tokens)
    assert torch.equal(loss, loss2)
    for a, c in zip(g, grads(w, loss2), strict=True):
        assert torch.equal(a, c)


def test_token_normalisation_matches_full_batch_and_mean_over_k_does_not():
    """transformers #34191: mean per micro-batch / K is not the token mean of the window."""
    w = tiny(accumulate=4, min_len=1, max_len=15)
    w.model.double()  # float64, so the tolerance can be tight
    batches = w.batches(0)
    assert len({b.n_tokens for b in batches}) > 1
    full = concat(batches)
    full_loss = w.loss(full, full.n_tokens)  # the full-batch token mean
    reference = grads(w, full_loss)

    normalised = window_grads(w, batches)
    window_loss = sum(w.loss(b, w.window_tokens(batches)) for b in batches)
    assert torch.allclose(window_loss, full_loss, rtol=1e-12, atol=0)
    for r, g in zip(reference, normalised, strict=True):
        assert torch.allclose(g, r, rtol=1e-9, atol=1e-12)

    mean_over_k = window_grads(w, batches, per_batch_tokens=True)
    assert not all(
        torch.allclose(g, r, rtol=1e-3, atol=1e-6)
        for r, g in zip(reference, mean_over_k, strict=True)
    )


# --- errors ---


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"preset": "huge"}, "'huge'"),
        ({"device": "tpu"}, "'tpu'"),
        ({"accumulate": 0}, "accumulate 0"),
        ({"min_len": 10, "max_len": 5}, "min_len=10, max_len=5"),
        ({"min_len": 0}, "min_len=0"),
        ({"max_len": 1000}, "max_len=1000"),
        ({"live_tensors": -1}, "live_tensors -1"),
        ({"ballast_size": 0}, "ballast_size 0"),
        ({"batch_size": 0}, "batch_size 0"),
        ({"dropout": 1.5}, "dropout 1.5"),
        ({"seed": -1}, "seed -1"),
        ({"no_such_option": 1}, "'no_such_option'"),
    ],
)
def test_bad_input_is_one_line_value_error(overrides, named):
    with pytest.raises(ValueError) as info:
        Workload(**overrides)
    message = str(info.value)
    assert "\n" not in message
    assert named in message
    assert "valid" in message


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(
        ValueError, match=r"^unknown preset 'huge'; valid presets: tiny, small, base"
    ):
        Workload(preset="huge")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_cuda_without_cuda_is_a_value_error():
    with pytest.raises(ValueError, match="'cuda'") as info:
        Workload(device="cuda")
    assert "\n" not in str(info.value)


def test_bad_window_is_a_value_error():
    with pytest.raises(ValueError, match="window -1"):
        tiny().batches(-1)


# --- ballast ---


def test_ballast():
    w = tiny(live_tensors=5, ballast_size=7)
    assert len(w.ballast) == 5
    for t in w.ballast:
        assert t.is_leaf and t.requires_grad
        assert t.grad is not None and t.grad.shape == (7,) and t.grad.dtype == torch.float32
        assert t.device == w.device
    assert len({id(t) for t in w.ballast}) == 5
    assert all(t.numel() == 64 for t in tiny(live_tensors=2).ballast)
    assert tiny().ballast == []


# --- the command line ---


@pytest.mark.slow
def test_module_prints_the_presets():
    out = subprocess.run(
        [sys.executable, "-m", "benches.workloads.transformer"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for name, count in describe_presets():
        assert name in out and f"{count:,}" in out
