"""A LoRA fine-tune: a Llama-shaped model from Hugging Face ``transformers``, built from a config,
with ``peft`` adapters of rank 4 on the attention's query and value projections; the base is
frozen (``requires_grad`` False on every weight but the adapters').

    pip install -e '.[hf]'
    python -m benches run --workload examples.workloads.lora:workload --preset tiny \\
        --checkpointing off,on

Nothing is downloaded: ``LlamaForCausalLM(LlamaConfig(...))`` builds seeded random weights, and
the data are seeded random token ids. With ``--checkpointing on`` the model checkpoints each
decoder layer by transformers' own ``activation_checkpointing_enable`` (non-reentrant), as a
fine-tune on one GPU runs it. The loss is the next-token cross-entropy summed over the
micro-batch and divided by the window's predicted tokens, computed through the module the engine
hands it (the model, or a DDP/FSDP2 wrapper of a replica).
"""

from __future__ import annotations

import torch

from examples.workloads.gpt2 import GPT2Workload

# preset -> (layers, heads, key-value heads, width, MLP width, vocabulary, sequence length,
# sequences per micro-batch)
SIZES = {
    "tiny": (2, 4, 2, 64, 128, 512, 32, 4),
    "small": (4, 4, 2, 128, 256, 2048, 64, 8),
    "base": (16, 32, 8, 2048, 8192, 32000, 512, 4),  # Llama-3.2-1B-shaped
}
RANK, ALPHA, TARGETS = 4, 8, ["q_proj", "v_proj"]  # LoRA's rank, scale and target modules


class LoraWorkload(GPT2Workload):
    """GPT-2's token stream, normaliser and loss (a causal LM's), over a Llama with adapters."""

    def __init__(self, settings) -> None:
        from peft import LoraConfig, get_peft_model
        from transformers import LlamaConfig, LlamaForCausalLM

        if settings.preset not in SIZES:
            raise ValueError(f"unknown preset {settings.preset!r}; valid: {', '.join(SIZES)}")
        layers, heads, kv_heads, width, mlp, self.vocab, self.seq, self.batch = SIZES[
            settings.preset
        ]
        self.settings = settings
        self.device = torch.device(settings.device)
        config = LlamaConfig(
            vocab_size=self.vocab,
            hidden_size=width,
            intermediate_size=mlp,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            max_position_embeddings=self.seq,
            use_cache=False,
        )
        torch.manual_seed(settings.seed)  # weights built on the CPU: the same on every device
        base = LlamaForCausalLM(config)
        # no adapter dropout: the gradient check needs the windows deterministic
        adapters = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0)
        self.model = get_peft_model(base, adapters).to(self.device)
        if getattr(settings, "checkpointing", "off") == "on":  # transformers' own, per layer
            self.model.activation_checkpointing_enable({"use_reentrant": False})
        self.model.train()

    def flops_per_window(self) -> int:
        # forward through every weight; backward through the activations of every layer, but
        # weight gradients for the adapters only (about 4x params x tokens, not 6x)
        params = sum(p.numel() for p in self.model.parameters())
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return (4 * params + 2 * trainable) * self.tokens_per_window()


def workload(settings) -> LoraWorkload:
    return LoraWorkload(settings)


workload.honours = ("preset", "checkpointing")  # what it applies (protocol.honoured)
