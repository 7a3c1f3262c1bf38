"""The reference workload: a seeded encoder-decoder Transformer and its synthetic batches.

The model has the shape of transformer-base (Vaswani et al. 2017, "Attention Is All You Need"):
post-norm encoder and decoder stacks built from torch.nn blocks, sinusoidal positions, and one
embedding shared by source, target and the output projection (three uses of one tensor, so the
gradient core must sum into a tied weight). The data is a reversal task with lengths drawn per
sentence, padded with PAD=0.

The workload owns its loss, token normalisation included (DESIGN.md: the yardstick must not move
when `strategies/` changes): each micro-batch's label-smoothed cross-entropy is summed over its
non-pad target tokens and divided by the non-pad target tokens of the whole window, so the K
micro-batch gradients add up to the full-batch token-mean gradient. Dividing each micro-batch's
mean by K instead is wrong when lengths vary (transformers #34191).

This module imports torch, numpy, the standard library and the protocol beside it (its one
record of a case's settings, `Settings`), never `strategies`.

    python -m benches.workloads.transformer      # prints every preset's parameter count
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

from benches.workloads import protocol

PAD, BOS, EOS = 0, 1, 2  # token ids 3..vocab_size-1 are content
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class ModelConfig:
    vocab_size: int = 32000  # one vocabulary shared by source and target, as transformer-base
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    # no preset runs dropout (docs/training-loop.md, "Dropout": what a case measures is what its
    # preset declares); a Workload given ``dropout`` draws masks from torch's global RNG
    dropout: float = 0.0
    max_len: int = 256  # positions the model accepts; the target adds one token (BOS or EOS)
    norm_first: bool = False  # post-norm, as the paper; True is the pre-norm variant
    # each layer's forward recomputed in the backward (torch.utils.checkpoint, non-reentrant):
    # its activations are not kept; the case's --checkpointing (protocol.Settings)
    checkpointing: bool = False
    # data defaults of the preset (a Workload may override each)
    batch_size: int = 64  # sequences per micro-batch
    min_seq_len: int = 8  # content tokens per sentence, drawn uniformly in [min, max]
    max_seq_len: int = 64


PRESETS: dict[str, ModelConfig] = {
    # for tests: 0.3M parameters
    "tiny": ModelConfig(
        vocab_size=1000,
        d_model=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=256,
        dropout=0.0,
        max_len=64,
        batch_size=8,
        min_seq_len=4,
        max_seq_len=16,
    ),
    # CPU default: 7.6M parameters; 32 sentences of 6..24 tokens (+EOS) = ~512 target tokens,
    # so one forward+backward takes ~0.25 s on 2 cores (the DESIGN.md scale, where a gc-scan
    # reset costs a visible fraction of a micro-batch)
    "small": ModelConfig(
        vocab_size=8000,
        d_model=256,
        n_heads=4,
        n_encoder_layers=3,
        n_decoder_layers=3,
        d_ff=1024,
        max_len=128,
        batch_size=32,
        min_seq_len=6,
        max_seq_len=24,
    ),
    # GPU default: transformer-base, 60.5M parameters; 128 x 8..64 = ~4.7k target tokens
    "base": ModelConfig(batch_size=128),
    # transformer-big: 209M parameters, with training-sized micro-batches: 256 x 32..128 =
    # ~21k target tokens, so that a GPU is busy (H200, bf16-autocast: 18% MFU eager, 25%
    # compiled; 64 sentences gave 15%; python -m benches.micro.mfu)
    "big": ModelConfig(
        d_model=1024, n_heads=16, d_ff=4096, batch_size=256, min_seq_len=32, max_seq_len=128
    ),
}


# -----------------------------------------------------------------------------
# the model


class SinusoidalPositions(nn.Module):
    """Fixed sin/cos position encodings (Vaswani et al. section 3.5); no parameters."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        position = torch.arange(config.max_len).unsqueeze(1)  # (L, 1)
        frequency = torch.exp(
            torch.arange(0, config.d_model, 2) * (-math.log(10000.0) / config.d_model)
        )  # (C/2,)
        pe = torch.zeros(config.max_len, config.d_model)  # (L, C)
        pe[:, 0::2] = torch.sin(position * frequency)
        pe[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[: x.size(1)]  # (B, T, C)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)  # shared: source, target and output
        self.positions = SinusoidalPositions(c)
        self.dropout = nn.Dropout(c.dropout)
        layer_args = dict(
            d_model=c.d_model,
            nhead=c.n_heads,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            batch_first=True,
            norm_first=c.norm_first,
        )
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(**layer_args) for _ in range(c.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            nn.TransformerDecoderLayer(**layer_args) for _ in range(c.n_decoder_layers)
        )
        # pre-norm stacks need a final norm; post-norm layers already end in one
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight  # tied (Press & Wolf 2017; the paper's 3.4)
        # N(0, d^-1/2): after the sqrt(d) scale in embed_tokens the inputs have unit variance
        nn.init.normal_(self.embed.weight, mean=0.0, std=c.d_model**-0.5)
        causal = torch.ones(c.max_len, c.max_len, dtype=torch.bool).triu(1)  # True = hidden
        self.register_buffer("causal_mask", causal, persistent=False)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.config.d_model)  # (B, T, C)
        return self.dropout(self.positions(x))

    def forward(
        self,
        src: torch.Tensor,  # (B, S) token ids
        tgt_in: torch.Tensor,  # (B, T) token ids, BOS first
        src_pad_mask: torch.Tensor,  # (B, S) bool, True at padding
        tgt_pad_mask: torch.Tensor,  # (B, T) bool, True at padding
    ) -> torch.Tensor:
        T = tgt_in.size(1)
        if max(src.size(1), T) > self.config.max_len:
            raise ValueError(
                f"sequence length {max(src.size(1), T)} exceeds max_len {self.config.max_len}"
            )
        run = self.layer_runner()
        memory = self.embed_tokens(src)  # (B, S, C)
        for layer in self.encoder:
            memory = run(layer, memory, src_key_padding_mask=src_pad_mask)
        memory = self.encoder_norm(memory)
        causal = self.causal_mask[:T, :T]  # (T, T)
        x = self.embed_tokens(tgt_in)  # (B, T, C)
        for layer in self.decoder:
            x = run(
                layer,
                x,
                memory,
                tgt_mask=causal,
                tgt_key_padding_mask=tgt_pad_mask,
                memory_key_padding_mask=src_pad_mask,
                tgt_is_causal=True,
            )
        x = self.decoder_norm(x)
        return self.lm_head(x)  # (B, T, V)

    def layer_runner(self):
        """How a layer runs: called, or (``config.checkpointing``, with autograd on) under
        ``torch.utils.checkpoint``, non-reentrant, so that its forward is recomputed in the
        backward (the RNG state kept: dropout draws the same masks both times)."""
        if not (self.config.checkpointing and torch.is_grad_enabled()):
            return lambda layer, *args, **kwargs: layer(*args, **kwargs)
        return functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

    def get_num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # parameters() yields a tied one once


# -----------------------------------------------------------------------------
# the workload


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) int64
    tgt_in: torch.Tensor  # (B, T) int64, BOS y1 .. yn PAD ..
    tgt_out: torch.Tensor  # (B, T) int64, y1 .. yn EOS PAD ..
    src_pad_mask: torch.Tensor  # (B, S) bool, True at padding
    tgt_pad_mask: torch.Tensor  # (B, T) bool, True at padding
    n_tokens: int  # non-pad target tokens (a host int: reading it needs no device sync)


def _choices(values) -> str:
    return ", ".join(str(v) for v in values)


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"invalid {name} {value!r}; valid: an integer >= {minimum}")


def model_config(
    settings: protocol.Settings, dropout: float | None, label_smoothing: float
) -> ModelConfig:
    """The model's sizes from the case's settings, in one place: the preset's, with the dropout
    given (None: the preset's); every setting checked, each a one-line ValueError."""
    if settings.preset not in PRESETS:
        raise ValueError(f"unknown preset {settings.preset!r}; valid presets: {_choices(PRESETS)}")
    device = str(settings.device)
    if device not in DEVICES and not re.fullmatch(r"cuda:\d+", device):
        raise ValueError(f"unknown device {device!r}; valid devices: {_choices(DEVICES)}, cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' is not available here; valid devices: auto, cpu")
    _check_int("accumulate", settings.accumulate, 1)
    _check_int("live_tensors", settings.live_tensors, 0)
    _check_int("seed", settings.seed, 0)
    for name, value in (("dropout", dropout), ("label_smoothing", label_smoothing)):
        if value is not None and not (isinstance(value, int | float) and 0 <= value < 1):
            raise ValueError(f"invalid {name} {value!r}; valid: a number in [0, 1)")
    if settings.checkpointing not in ("off", "on"):
        raise ValueError(f"invalid checkpointing {settings.checkpointing!r}; valid: off, on")
    mcfg = dataclasses.replace(
        PRESETS[settings.preset], checkpointing=settings.checkpointing == "on"
    )
    return mcfg if dropout is None else dataclasses.replace(mcfg, dropout=float(dropout))


def lengths(preset: str, mcfg: ModelConfig, lo: int | None, hi: int | None) -> tuple[int, int]:
    """Content tokens per sentence, [lo, hi]: the preset's where not given, checked."""
    lo = lo if lo is not None else mcfg.min_seq_len
    hi = hi if hi is not None else mcfg.max_seq_len
    longest = mcfg.max_len - 1  # the target adds BOS (input) or EOS (output)
    for name, value in (("min_len", lo), ("max_len", hi)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"invalid {name} {value!r}; valid: an integer in 1..{longest}")
    if not 1 <= lo <= hi <= longest:
        raise ValueError(
            f"invalid length range min_len={lo}, max_len={hi}; "
            f"valid: 1 <= min_len <= max_len <= {longest} for preset {preset!r}"
        )
    return lo, hi


def device_of(device: str) -> torch.device:
    """``auto``: cuda where there is one, else cpu; bare ``cuda``: the current device (a rank's
    own after torch.cuda.set_device), never a guess of 0."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    out = torch.device(device)
    if out.type == "cuda" and out.index is None:
        out = torch.device("cuda", torch.cuda.current_device())
    return out


class Workload:
    """A seeded model, its batches and its loss; everything a strategy is measured on.

    Construction seeds torch's global RNG with `seed` (as nanoGPT's bench.py does), builds the
    weights on the CPU under that seed, so they are the same on every device, then moves them.
    Dropout (when > 0) draws its masks from that global RNG, so a fresh process is reproducible.
    """

    def __init__(
        self,
        settings: protocol.Settings | None = None,
        *,
        batch_size: int | None = None,
        min_len: int | None = None,
        max_len: int | None = None,
        dropout: float | None = None,
        label_smoothing: float = 0.1,
        ballast_size: int = protocol.BALLAST_SIZE,
        **given,
    ):
        """``settings``: the case's, the protocol's one record (preset, K, live tensors, device,
        seed; threads and precision are the engine's to apply); ``given``: any of its fields
        instead (``Workload(preset="tiny", accumulate=2)``, as tests and micro-benchmarks
        build one). The keywords are this workload's own data knobs, each None for the
        preset's: sequences per micro-batch, content tokens per sentence, the dropout rate (0
        with ``settings.deterministic``), the paper's label smoothing epsilon, and the float32
        elements per ballast tensor."""
        names = [f.name for f in dataclasses.fields(protocol.Settings)]
        unknown = [key for key in given if key not in names]
        if unknown:
            valid = [*names, "batch_size", "min_len", "max_len", "dropout", "label_smoothing"]
            raise ValueError(f"unknown option {unknown[0]!r}; valid options: {_choices(valid)}")
        settings = dataclasses.replace(settings or protocol.Settings(device="auto"), **given)
        if dropout is None and settings.deterministic:
            dropout = 0.0  # the gradient check compares windows: no random masks
        self.settings = settings
        self.label_smoothing = label_smoothing
        self.model_config = model_config(settings, dropout, label_smoothing)
        mcfg = self.model_config
        _check_int("ballast_size", ballast_size, 1)
        if batch_size is not None:
            _check_int("batch_size", batch_size, 1)
        self.batch_size = batch_size if batch_size is not None else mcfg.batch_size
        self.min_len, self.max_len = lengths(settings.preset, mcfg, min_len, max_len)
        self.device = device_of(settings.device)

        torch.manual_seed(settings.seed)
        self.model = Seq2SeqTransformer(mcfg).to(self.device)
        self.model.train()
        self.ballast = []
        for _ in range(settings.live_tensors):
            t = torch.zeros(ballast_size, device=self.device, requires_grad=True)
            t.grad = torch.ones_like(t)  # non-zero, so a strategy that touches it shows
            self.ballast.append(t)

    # --- data ---

    def _draw(self, window: int, micro: int) -> tuple[np.ndarray, np.ndarray]:
        """Lengths (B,) and content (B, max_len) of one micro-batch, from (seed, window, micro).

        Seeding each micro-batch on its own keeps micro-batch i of a window the same whatever K.
        """
        rng = np.random.default_rng([self.settings.seed, window, micro])
        lengths = rng.integers(self.min_len, self.max_len + 1, size=self.batch_size)
        shape = (self.batch_size, self.max_len)
        content = rng.integers(EOS + 1, self.model_config.vocab_size, size=shape)
        return lengths, content

    def batches(self, window: int = 0) -> list[Batch]:
        """The K micro-batches of window `window`, on the device; the target reverses the source."""
        _check_int("window", window, 0)
        out = []
        for micro in range(self.settings.accumulate):
            lengths, content = self._draw(window, micro)
            B, S = self.batch_size, int(lengths.max())
            T = S + 1  # BOS + content, or content + EOS
            src = np.full((B, S), PAD, dtype=np.int64)
            tgt_in = np.full((B, T), PAD, dtype=np.int64)
            tgt_out = np.full((B, T), PAD, dtype=np.int64)
            for b, n in enumerate(lengths):
                sentence = content[b, :n]
                src[b, :n] = sentence
                tgt_in[b, 0] = BOS
                tgt_in[b, 1 : n + 1] = sentence[::-1]
                tgt_out[b, :n] = sentence[::-1]
                tgt_out[b, n] = EOS
            src_pad = np.arange(S)[None, :] >= lengths[:, None]  # (B, S)
            tgt_pad = np.arange(T)[None, :] >= lengths[:, None] + 1  # (B, T)
            out.append(
                Batch(
                    src=torch.from_numpy(src).to(self.device),
                    tgt_in=torch.from_numpy(tgt_in).to(self.device),
                    tgt_out=torch.from_numpy(tgt_out).to(self.device),
                    src_pad_mask=torch.from_numpy(src_pad).to(self.device),
                    tgt_pad_mask=torch.from_numpy(tgt_pad).to(self.device),
                    n_tokens=int(lengths.sum()) + B,  # content + EOS per sentence
                )
            )
        return out

    def window_tokens(self, batches: list[Batch]) -> int:
        return sum(b.n_tokens for b in batches)

    normaliser = window_tokens  # the protocol's name (benches/workloads/protocol.py)

    # --- loss ---

    def loss(
        self, batch: Batch, window_tokens: float, module: nn.Module | None = None
    ) -> torch.Tensor:
        """Label-smoothed cross-entropy summed over the batch's non-pad targets / window_tokens.

        ``module`` is the model to run (a replica, or the engine's DDP/FSDP2 wrapper of one); by
        default the workload's own. The workload never wraps its model (protocol.py).
        """
        if not window_tokens > 0:
            raise ValueError(f"invalid window_tokens {window_tokens!r}; valid: a number > 0")
        # precision is the engine's (engine/training.py): bf16 weights, or autocast around this
        if module is None:
            module = self.model
        logits = module(batch.src, batch.tgt_in, batch.src_pad_mask, batch.tgt_pad_mask)
        total = F.cross_entropy(
            logits.flatten(0, 1),  # (B*T, V)
            batch.tgt_out.flatten(),  # (B*T,)
            ignore_index=PAD,  # also drops the smoothing term at padding
            label_smoothing=self.label_smoothing,
            reduction="sum",
        )
        return total / window_tokens

    # --- accounting ---

    def num_params(self) -> int:
        return self.model.get_num_params()

    def tokens_per_window(self) -> int:
        """Non-pad target tokens of window 0 (from the lengths alone: nothing moves to device)."""
        return sum(
            int(self._draw(0, micro)[0].sum()) + self.batch_size
            for micro in range(self.settings.accumulate)
        )

    def flops_per_window(self) -> int:
        # 6N per token: 2N forward + 4N backward (Kaplan et al. 2020), attention ignored
        return 6 * self.num_params() * self.tokens_per_window()

    def mfu(self, window_seconds: float, peak_flops: float) -> float:
        """Model FLOPs utilisation: achieved FLOP/s of one window over the peak FLOP/s."""
        if window_seconds <= 0 or peak_flops <= 0:
            raise ValueError(
                f"invalid window_seconds={window_seconds!r}, peak_flops={peak_flops!r}; "
                "valid: both > 0"
            )
        return self.flops_per_window() / window_seconds / peak_flops


def describe_presets() -> list[tuple[str, int]]:
    """(preset, parameter count) for every preset; built on the meta device, nothing allocated."""
    out = []
    for name, config in PRESETS.items():
        with torch.device("meta"):
            out.append((name, Seq2SeqTransformer(config).get_num_params()))
    return out


if __name__ == "__main__":
    print(f"{'preset':<8}{'params':>14}  layers  d_model  heads   d_ff  vocab  batch  lengths")
    for name, n in describe_presets():
        c = PRESETS[name]
        print(
            f"{name:<8}{n:>14,}  {c.n_encoder_layers}+{c.n_decoder_layers}  {c.d_model:>7}"
            f"  {c.n_heads:>5}  {c.d_ff:>5}  {c.vocab_size:>5}  {c.batch_size:>5}"
            f"  {c.min_seq_len}..{c.max_seq_len}"
        )


def workload(settings: protocol.Settings) -> Workload:
    """The reference transformer as a workload factory (the protocol: protocol.py beside this)."""
    return Workload(settings)


workload.honours = ("preset", "checkpointing")  # what it applies (protocol.honoured)
