"""A Mixtral-shaped mixture-of-experts decoder from Hugging Face ``transformers``, built from a
config.

    pip install -e '.[hf]'
    python -m benches run --workload examples.workloads.mixtral:workload --preset tiny

Nothing is downloaded: ``MixtralForCausalLM(MixtralConfig(...))`` builds seeded random weights,
and the data are seeded random token ids. Its experts run transformers' default experts
implementation, ``torch._grouped_mm`` (transformers 5), which has no float64 kernel: the
gradient check's float64 model cannot run, and ``grad_check.total_reference`` names the fp32
model that stands in (docs/training-loop.md). The loss is the next-token cross-entropy summed
over the micro-batch and divided by the window's predicted tokens (the normaliser); the router's
load-balancing loss is left out (``output_router_logits`` off), so that the window's gradient
is the sum of its tokens' gradients, as the protocol's normaliser asks.
"""

from __future__ import annotations

import torch

from examples.workloads.gpt2 import GPT2Workload

# preset -> (layers, heads, key-value heads, width, expert width, experts, experts per token,
#            vocabulary, sequence length, sequences per micro-batch)
SIZES = {
    "tiny": (2, 4, 2, 64, 128, 4, 2, 512, 32, 4),  # 0.29 M parameters
    "small": (4, 4, 2, 128, 256, 8, 2, 2048, 64, 8),  # 3.9 M
    "base": (8, 8, 4, 512, 1024, 8, 2, 32000, 512, 8),  # 140 M
    "big": (16, 16, 8, 1024, 2816, 8, 2, 32000, 1024, 8),  # 1.2 B, 8 experts of 2 per token
}


class MixtralWorkload(GPT2Workload):
    """GPT-2's token stream, normaliser and loss (a causal LM's), over a Mixtral model."""

    def __init__(self, settings) -> None:
        from transformers import MixtralConfig, MixtralForCausalLM

        if settings.preset not in SIZES:
            raise ValueError(f"unknown preset {settings.preset!r}; valid: {', '.join(SIZES)}")
        layers, heads, kv_heads, width, ffn, experts, top_k, self.vocab, self.seq, self.batch = (
            SIZES[settings.preset]
        )
        self.settings = settings
        self.device = torch.device(settings.device)
        config = MixtralConfig(
            vocab_size=self.vocab,
            hidden_size=width,
            intermediate_size=ffn,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            num_local_experts=experts,
            num_experts_per_tok=top_k,
            max_position_embeddings=self.seq,
            attention_dropout=0.0 if settings.deterministic else 0.1,
            router_jitter_noise=0.0,  # no random numbers in the forward
            output_router_logits=False,  # no load-balancing loss: a token sum (the docstring)
            use_cache=False,
        )
        torch.manual_seed(settings.seed)  # weights built on the CPU: the same on every device
        self.model = MixtralForCausalLM(config).to(self.device)
        self.model.train()

    def flops_per_window(self) -> int:
        # 6 N per token over the parameters a token runs through: all but the experts it skips
        config = self.model.config
        experts = sum(p.numel() for n, p in self.model.named_parameters() if ".experts." in n)
        active = experts * config.num_experts_per_tok // config.num_local_experts
        dense = sum(p.numel() for p in self.model.parameters()) - experts
        return 6 * (dense + active) * self.tokens_per_window()


def workload(settings) -> MixtralWorkload:
    return MixtralWorkload(settings)


workload.honours = ("preset",)  # its sizes come from the preset (protocol.honoured)
