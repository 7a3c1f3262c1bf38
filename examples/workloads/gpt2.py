"""A decoder-only GPT-2-shaped model from Hugging Face ``transformers``, built from a config.

    pip install -e '.[hf]'
    python -m benches run --workload examples.workloads.gpt2:workload --preset tiny

Nothing is downloaded: ``GPT2LMHeadModel(GPT2Config(...))`` builds seeded random weights, and the
data are seeded random token ids. The loss is the next-token cross-entropy summed over the
micro-batch and divided by the window's predicted tokens (the normaliser), computed through the
module the engine hands it (the model, or a DDP/FSDP2 wrapper of a replica).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# preset -> (layers, heads, width, vocabulary, sequence length, sequences per micro-batch)
SIZES = {
    "tiny": (2, 2, 64, 512, 32, 4),
    "small": (4, 4, 128, 2048, 64, 8),
    "base": (12, 12, 768, 50257, 512, 8),  # GPT-2 small
    "big": (24, 16, 1024, 50257, 1024, 8),  # GPT-2 medium
}


class GPT2Workload:
    def __init__(self, settings) -> None:
        from transformers import GPT2Config, GPT2LMHeadModel

        if settings.preset not in SIZES:
            raise ValueError(f"unknown preset {settings.preset!r}; valid: {', '.join(SIZES)}")
        layers, heads, width, self.vocab, self.seq, self.batch = SIZES[settings.preset]
        self.settings = settings
        self.device = torch.device(settings.device)
        dropout = 0.0 if settings.deterministic else 0.1
        config = GPT2Config(
            vocab_size=self.vocab,
            n_positions=self.seq,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            use_cache=False,
        )
        torch.manual_seed(settings.seed)  # weights built on the CPU: the same on every device
        self.model = GPT2LMHeadModel(config).to(self.device)
        if getattr(settings, "checkpointing", "off") == "on":  # transformers' own, per block
            self.model.activation_checkpointing_enable({"use_reentrant": False})
        self.model.train()

    def batches(self, window: int) -> list[torch.Tensor]:
        out = []
        for micro in range(self.settings.accumulate):
            gen = torch.Generator().manual_seed(hash((self.settings.seed, window, micro)) % 2**31)
            ids = torch.randint(0, self.vocab, (self.batch, self.seq), generator=gen)
            out.append(ids.to(self.device))
        return out

    def normaliser(self, batches: list[torch.Tensor]) -> int:
        return sum(ids.shape[0] * (ids.shape[1] - 1) for ids in batches)  # predicted tokens

    def loss(self, ids: torch.Tensor, normaliser: float, module: nn.Module) -> torch.Tensor:
        # the engine applies settings.precision (bf16 weights, or autocast around this call)
        logits = module(input_ids=ids).logits
        total = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="sum")
        return total / normaliser

    def tokens_per_window(self) -> int:
        return self.settings.accumulate * self.batch * (self.seq - 1)

    def flops_per_window(self) -> int:
        params = sum(p.numel() for p in self.model.parameters())
        return 6 * params * self.tokens_per_window()  # forward + backward, dense layers


def workload(settings) -> GPT2Workload:
    return GPT2Workload(settings)


workload.honours = ("preset", "checkpointing")  # what it applies (protocol.honoured)
