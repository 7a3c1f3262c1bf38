"""What a case is: its settings, and which of them make up its identity.

A case's identity is every setting that changes its figures. Resume skips only cases whose
identity (and round) already has an ok row; pooling merges only rows of one identity, so rounds
of different settings never mix.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any

from benches.engine.training import Recipe
from reports.schema.settings import CASE_KEY as IDENTITY
from reports.schema.settings import OPTION, SWEEP_IDENTITY, CaseSettings, id_part, label

__all__ = ["IDENTITY", "OPTION", "PAIRS_FACTOR", "SWEEP_IDENTITY", "CaseSpec"]


# a process the sweep plans (``pairs``) runs at most this many times ``repeat``'s pairs: its
# timeout allows for it (``sweep.machine.case_timeout``)
PAIRS_FACTOR = 8


@dataclass(frozen=True, kw_only=True)
class CaseSpec(CaseSettings):
    """One process of a sweep: a case's settings (``CaseSettings``, each declared once there)
    and what the process needs besides: its run, round and role, and where it writes."""

    run_id: str = ""
    round: int = 0
    # an extra process of the control strategy (the between-process noise): the control alone,
    # or the process it shares with its group's strategies (``plan.extra``)
    control: bool = False
    # a repeat process that a sweep adds for a verdict still open: timed pairs only (the case's
    # first process checked its gradients and measured its memory and cost model)
    time_only: bool = False
    # a time-only process of several strategies (engine.rotation): every label it measures, each
    # on its own replica, rotated with the plain loop; each gets a row, all with one process_id
    rotation: list[str] = field(default_factory=list)
    process_id: str = ""  # the process whose figures a row shares with others: "" = case_id
    # timed pairs this process runs, where the sweep planned them from measured costs and
    # variances (budget.plan_pairs; 0: ``repeat``). Not identity: a process with more pairs
    # measures the same figure, more closely
    pairs: int = 0
    # warm-up pairs a time-only process runs untested: what its group's checked processes
    # needed (``engine.warmup.needed``, set by the sweep; 0: until steady)
    warm_pairs: int = 0
    # when the sweep's budget wants the process to end (time.time(); 0: no budget): a process
    # measures fewer timed rounds or pairs rather than run past it (never fewer than its least)
    deadline: float = 0.0
    plain_timeline: bool = True  # record the plain loop's timeline too (a sweep: once per group)
    out_dir: str = "."
    git: dict[str, Any] = field(default_factory=dict)

    @property
    def recipe(self) -> Recipe:
        """The training loop's settings (checked: a bad one is a one-line ValueError)."""
        return Recipe(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Recipe)})

    @property
    def pairs_planned(self) -> int:
        """The timed pairs this process runs: the sweep's plan, else ``repeat``."""
        return self.pairs or self.repeat

    @property
    def label(self) -> str:
        """The strategy with its options, ``name`` or ``name:k=v``: what a loop is built from."""
        return label(self.strategy, self.options)

    @property
    def case_id(self) -> str:
        # readable, and a short hash of the exact options: two option sets never share an id
        options = self.options.replace(":", "+").replace("=", "-")
        if options:
            options += f"+{zlib.crc32(self.options.encode()):08x}"
        return (
            f"{f'rot{len(self.rotation)}-' if self.rotation else ''}"
            f"{self.strategy}{f'+{options}' if options else ''}"
            f"{id_part(self)}"
            f"-k{self.accumulate}-n{self.live_tensors}-{self.preset}-"
            f"{self.device}{f'-w{self.world_size}' if self.world_size > 1 else ''}"
            f"{f'-{self.parallel}-{self.grad_sync}' if self.parallel != 'none' else ''}"
            f"-r{self.round}"
        )

    def identity(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in IDENTITY}

    def members(self) -> list[CaseSpec]:
        """The cases this process measures: each strategy of ``rotation`` as a case of its own
        (its row's identity), all with this process's ``process_id``; a case's process: itself."""
        if not self.rotation:
            return [self]
        out = []
        for each in self.rotation:
            name, _, options = each.partition(":")
            out.append(
                dataclasses.replace(
                    self, strategy=name, options=options, rotation=[], process_id=self.case_id
                )
            )
        return out


def parse_options(text: str) -> dict[str, Any]:
    """``k=v:k2=v2`` -> {k: v, k2: v2}; values true/false/none, integers and floats are
    converted, anything else stays a string. A ValueError names a malformed item, or a key
    given twice (the last would win silently)."""
    out: dict[str, Any] = {}
    for item in filter(None, str(text).split(":")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"strategy option {item!r} is not KEY=VALUE")
        if key.strip() in out:
            raise ValueError(f"option {key.strip()!r} is given twice; give each option once")
        out[key.strip()] = _value(value.strip())
    return out


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
