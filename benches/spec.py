"""What a case is: its settings, and which of them make up its identity.

A case's identity is every setting that changes its figures. Resume skips only cases whose
identity (and round) already has an ok row; pooling merges only rows of one identity, so rounds
of different settings never mix.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from reports.rows import CASE_KEY as IDENTITY
from reports.rows import SWEEP_IDENTITY

__all__ = ["IDENTITY", "OPTION", "SWEEP_IDENTITY", "CaseSpec"]
# the option spelling of each setting, for messages
OPTION = {
    "workload": "--workload",
    "preset": "--preset",
    "device": "--device",
    "dtype": "dtype",
    "world_size": "--world-size",
    "parallel": "--parallel",
    "mesh": "--mesh",
    "grad_sync": "--grad-sync",
    "repeat": "--repeat",
    "warmup": "--warmup",
    "threads": "--threads",
    "seed": "--seed",
    "min_effect": "--min-effect",
}


@dataclasses.dataclass
class CaseSpec:
    strategy: str
    preset: str
    device: str
    accumulate: int
    live_tensors: int
    world_size: int = 1
    parallel: str = "none"  # none | ddp | fsdp2 | hsdp (benches.distributed.PARALLEL)
    mesh: str = ""  # hsdp: "RxS", replicas x shards
    grad_sync: str = "last"  # every | last | scatter: when gradients are reduced across ranks
    repeat: int = 10  # measured pairs: one strategy window and one plain-loop window each
    warmup: int = 2  # unmeasured pairs first
    threads: int = 1
    seed: int = 0
    dtype: str = "float32"
    workload: str = "benches.workload:workload"  # MODULE:FACTORY (benches/protocol.py)
    memray: bool = False  # a flamegraph of the memory pass
    keep_captures: bool = False  # keep memray's capture file beside the flamegraph
    plugins: list[str] = dataclasses.field(default_factory=list)
    run_id: str = ""
    round: int = 0
    control: bool = False  # an extra process of the control strategy: the between-process noise
    plain_timeline: bool = True  # record the plain loop's timeline too (a sweep: once per group)
    out_dir: str = "."
    git: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def case_id(self) -> str:
        return (
            f"{self.strategy}-k{self.accumulate}-n{self.live_tensors}-{self.preset}-"
            f"{self.device}{f'-w{self.world_size}' if self.world_size > 1 else ''}"
            f"{f'-{self.parallel}-{self.grad_sync}' if self.parallel != 'none' else ''}"
            f"-r{self.round}"
        )

    def identity(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in IDENTITY}
