"""Replicas of a model and the tensors of a sharded one: the layer below runner and distributed.

A replica has the same weights and no gradients; a sharded (DTensor) tensor is gathered whole
(``full``) or read as this rank's shard (``local``).
"""

from __future__ import annotations

import copy

import torch


def _dtensor_type():
    from torch.distributed.tensor import DTensor

    return DTensor


def full(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded (DTensor) tensor gathered whole (a collective: every rank calls it); others as
    they are."""
    if torch.distributed.is_available() and isinstance(tensor, _dtensor_type()):
        return tensor.full_tensor()
    return tensor


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (its own storage); other tensors as they are."""
    if torch.distributed.is_available() and isinstance(tensor, _dtensor_type()):
        return tensor.to_local()
    return tensor


def replica(model: torch.nn.Module) -> torch.nn.Module:
    """A copy with the same weights and no gradients (the original keeps its own; a deep copy
    of a Parameter copies its data only, not what a strategy hung on it, e.g. ``main_grad``)."""
    params = list(model.parameters())
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        return copy.deepcopy(model)
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g


def fresh_replica(model: torch.nn.Module, parallel=None) -> torch.nn.Module:
    """A plain replica with ``model``'s weights now (a sharded one's gathered whole)."""
    return parallel.unsharded(model) if parallel is not None else replica(model)
