"""A convolutional image classifier on seeded random images (torch only).

    python -m benches run --workload examples.workloads.convnet:workload --preset tiny

An example of the workload protocol (benches/workloads/protocol.py): the factory gets the engine's
settings and returns the model, the micro-batches of a window, the window's normaliser (images)
and the loss of one micro-batch through whatever module the engine hands it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# preset -> (channels, blocks, image side, classes, images per micro-batch)
SIZES = {
    "tiny": (16, 2, 16, 10, 8),
    "small": (32, 4, 32, 10, 16),
    "base": (64, 8, 64, 100, 32),
    "big": (128, 12, 96, 1000, 64),
}


class Block(nn.Module):
    """conv 3x3, GroupNorm (no running statistics), GELU, with a residual connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(8, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.gelu(self.norm(self.conv(x)))


class ConvNet(nn.Module):
    def __init__(self, channels: int, blocks: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(Block(channels) for _ in range(blocks))  # FSDP2 shards each
        self.head = nn.Linear(channels, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.stem(images)
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i % 2 == 1:
                x = F.avg_pool2d(x, 2) if x.shape[-1] > 4 else x
        return self.head(x.mean(dim=(2, 3)))


@dataclass
class Images:
    images: torch.Tensor  # (B, 3, H, W)
    labels: torch.Tensor  # (B,)


class ConvWorkload:
    def __init__(self, settings) -> None:
        if settings.preset not in SIZES:
            raise ValueError(f"unknown preset {settings.preset!r}; valid: {', '.join(SIZES)}")
        channels, blocks, self.side, self.classes, self.batch = SIZES[settings.preset]
        self.settings = settings
        self.device = torch.device(settings.device)
        torch.manual_seed(settings.seed)  # weights built on the CPU: the same on every device
        self.model = ConvNet(channels, blocks, self.classes).to(self.device)

    def batches(self, window: int) -> list[Images]:
        out = []
        for micro in range(self.settings.accumulate):
            gen = torch.Generator().manual_seed(hash((self.settings.seed, window, micro)) % 2**31)
            images = torch.randn(self.batch, 3, self.side, self.side, generator=gen)
            labels = torch.randint(0, self.classes, (self.batch,), generator=gen)
            out.append(Images(images.to(self.device), labels.to(self.device)))
        return out

    def normaliser(self, batches: list[Images]) -> int:
        return sum(len(b.labels) for b in batches)

    def loss(self, batch: Images, normaliser: float, module: nn.Module) -> torch.Tensor:
        # the images in the weights' dtype: the engine casts the model to bf16 for precision bf16
        dtype = next(module.parameters()).dtype
        logits = module(batch.images.to(dtype))
        return F.cross_entropy(logits, batch.labels, reduction="sum") / normaliser


def workload(settings) -> ConvWorkload:
    return ConvWorkload(settings)


workload.honours = ("preset",)  # its sizes come from the preset (protocol.honoured)
