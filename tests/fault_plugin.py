"""Fault plugin: ``faulty`` is ``block`` that fails, the way real code fails, where the
environment says (``--plugin tests.fault_plugin``; the sweep's environment reaches every case)
or its options do (``faulty:fault=abort:rank=1:at=2``: several faults in one sweep):

- ``ZEROGRAD_FAULT``: ``raise`` (a RuntimeError whose text holds brackets, as gloo's does),
  ``oom-reset`` / ``oom-backward`` (``torch.OutOfMemoryError`` in a reset / in a backward),
  ``sigkill`` (the process kills itself), ``abort`` (``os.abort()``: SIGABRT, as a failed
  assertion in native code ends a process), ``segfault`` (a read of address 0: SIGSEGV),
  ``hang`` (sleeps for an hour); unset: no fault;
- ``ZEROGRAD_FAULT_RANK``: only this rank faults (``RANK`` under torchrun, 0 without); unset:
  every rank;
- ``ZEROGRAD_FAULT_AT``: the reset (or backward) that faults, counted from 1 (default 1);
- ``ZEROGRAD_HOLD``: seconds a cluster's case process (``ZEROGRAD_NODE_ID`` set) waits when it
  loads this plugin, before its device or workload can fail: processes dispatched together
  then run at once, whatever a busy machine does to their starts.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

import torch

import strategies
from benches.engine import envinfo
from strategies.block import BlockStrategy

if os.environ.get("ZEROGRAD_HOLD") and os.environ.get(envinfo.NODE_ID):
    time.sleep(float(os.environ["ZEROGRAD_HOLD"]))

KINDS = ("raise", "oom-reset", "oom-backward", "sigkill", "abort", "segfault", "hang")


def _armed(kind: str | None, rank: str | None) -> str | None:
    """The fault this process is to commit, if any."""
    if kind not in KINDS:
        return None
    if rank is not None and os.environ.get("RANK", "0") != str(rank):
        return None
    return kind


def _commit(kind: str, where: str) -> None:
    rank = os.environ.get("RANK", "0")
    if kind == "raise":
        raise RuntimeError(f"rank {rank} failed in {where} [/gloo/transport/tcp/pair.cc:553]")
    if kind.startswith("oom"):
        raise torch.OutOfMemoryError(f"planted out of memory in {where} on rank {rank}")
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "abort":
        os.abort()
    if kind == "segfault":  # a read of address 0, as a bug in native code makes
        ctypes.string_at(0)
    if kind == "hang":
        time.sleep(3600)


class FaultyStrategy(BlockStrategy):
    """``block``, with the fault of ``ZEROGRAD_FAULT`` at reset or backward number AT."""

    def __init__(self, fault=None, rank=None, at=None) -> None:
        super().__init__()
        env = os.environ.get
        rank = rank if rank is not None else env("ZEROGRAD_FAULT_RANK")
        self.kind = _armed(fault or env("ZEROGRAD_FAULT"), rank)
        self.at = int(at or env("ZEROGRAD_FAULT_AT", "1"))
        self.resets = self.backwards = 0

    def attach(self, collector) -> None:
        super().attach(collector)
        if self.kind == "oom-backward":
            first = next(p for p in collector.params if p.requires_grad)
            first.register_hook(self._on_backward)

    def _on_backward(self, grad: torch.Tensor) -> torch.Tensor:
        self.backwards += 1
        if self.backwards == self.at:
            _commit("oom-backward", "backward")
        return grad

    def reset(self, collector) -> None:
        self.resets += 1
        if self.kind not in (None, "oom-backward") and self.resets == self.at:
            _commit(self.kind, "reset")
        super().reset(collector)


if "faulty" not in strategies.available():
    strategies.register("faulty", FaultyStrategy)
