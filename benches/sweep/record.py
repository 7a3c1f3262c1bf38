"""The validated sweep (``Sweep``): the record every part of the sweep reads, made by
``arguments.resolve``. Data only: a module that reads a sweep (``cluster.resources``, the plan,
the budget, a place) imports this, never the module that decides it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from reports.judge.verdicts import DEFAULT_MIN_EFFECT
from reports.schema.settings import FixedSettings, SweptSettings

MAX_LOOKS = 6  # the first round and up to 5 added rounds; alpha spent over them (claims.spent)
CONTROL_PROCESSES = 3  # processes of the control strategy per (K, N) when --rounds is 1


@dataclasses.dataclass(kw_only=True)
class Sweep(FixedSettings, SweptSettings):
    """A validated sweep: every fixed setting of its cases (``FixedSettings``) and every swept
    one as a list of values (``SweptSettings``), both from ``reports.schema.settings
    .CaseSettings``; its strategies' labels, and the sweep's own."""

    strategies: list[str]
    rounds: int
    timeout: float
    resume: bool
    out: Path
    min_effect: float = DEFAULT_MIN_EFFECT
    control: str = "none"
    budget: float = 0.0  # seconds for the whole sweep; > 0: rounds added while verdicts are open
    looks: int = 1  # how often the sweep may look at its verdicts (alpha spent over them)
    # added processes run the pairs planned from measured costs and variances
    # (budget.plan_pairs); False where --repeat was given
    plan_pairs: bool = True
    rotate: bool = True  # added rounds: a group's strategies share a process (engine.rotation)
    quick: bool = False  # --quick: its defaults (options.QUICK); the report says what it missed
    # processes of the control strategy per (K, N) with one round: on a cluster, at least two
    # per machine (the spread between machines is estimated from them)
    controls: int = CONTROL_PROCESSES
    cluster: str | None = None  # --cluster: a Ray cluster's address, or None (this machine)
    per_node: int | None = None  # --per-node: processes at once per node (None: the default)
    exclusive: bool = False  # --exclusive: one process per node
    # --base: the sweep's strategies the base build lacks, each with why (measured at head only)
    base_missing: list[str] = dataclasses.field(default_factory=list)
