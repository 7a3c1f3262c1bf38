"""Shared fixtures: a tiny deterministic model with tied weights and an unused branch."""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import strategies

# a sweep that tests the sweep's mechanics, not verdicts: tiny, few pairs, no extra processes
QUICK = [
    "--preset",
    "tiny",
    "--accumulate",
    "1",
    "--live-tensors",
    "0",
    "--repeat",
    "2",
    "--warmup",
    "0",
    "--threads",
    "1",
    "--control",
    "none",
]

# ZEROGRAD_PLUGINS=mod1,mod2 imports plugin modules first, so the suite covers their strategies
for _module in filter(None, os.environ.get("ZEROGRAD_PLUGINS", "").split(",")):
    importlib.import_module(_module.strip())
STRATEGIES = strategies.available()
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
        ],
    ),
]


class TinyLM(nn.Module):
    """Embedding tied to the output projection, an MLP, and a branch that only some calls use."""

    def __init__(self, vocab: int = 11, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.side = nn.Linear(dim, dim)  # used only when use_side=True

    def forward(self, tokens: torch.Tensor, use_side: bool = False) -> torch.Tensor:
        h = self.embed(tokens)  # (B, T, C)
        h = h + self.mlp(h)
        if use_side:
            h = h + self.side(h)
        return self.head(self.norm(h))  # (B, T, vocab)


def make_model(seed: int = 0, device: str = "cpu", dtype=torch.float32) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM().to(device=device, dtype=dtype)


def make_batches(k: int, seed: int = 1, device: str = "cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 11, (2, 5), generator=g).to(device) for _ in range(k)]


def loss_of(model: nn.Module, tokens: torch.Tensor, use_side: bool = False) -> torch.Tensor:
    logits = model(tokens, use_side)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten(), reduction="sum")


def reference_grads(model, batches, use_side=False) -> dict[str, torch.Tensor]:
    """Per-parameter sum of the micro-batch gradients, added in order, without any strategy."""
    names, params = zip(*model.named_parameters(), strict=True)
    total: list[torch.Tensor | None] = [None] * len(params)
    for tokens in batches:
        grads = torch.autograd.grad(loss_of(model, tokens, use_side), params, allow_unused=True)
        for i, g in enumerate(grads):
            if g is not None:
                total[i] = g.clone() if total[i] is None else total[i] + g
    return {n: t for n, t in zip(names, total, strict=True) if t is not None}


@pytest.fixture(autouse=True)
def _free_between_tests():
    yield
    gc.collect()


ROOT = Path(__file__).resolve().parent.parent


def run_reports(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m reports ARGS`` from the checkout, as a user runs it; output captured."""
    return subprocess.run(
        [sys.executable, "-m", "reports", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
