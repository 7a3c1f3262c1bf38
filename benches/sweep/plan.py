"""The sweep's plan: every case it runs, in the order it runs them, with the control's extra
processes. ``cli`` runs the plan; ``bycase`` takes its one case from it, so that a case by hand
is spelled and identified as a sweep's."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from benches.engine.spec import CaseSpec
from benches.sweep.arguments import UsageError, case_settings
from benches.sweep.budget import share_processes
from benches.sweep.record import Sweep
from reports.schema.settings import SWEPT


def cases(sweep: Sweep, run_id: str, git: dict[str, Any]) -> list[CaseSpec]:
    """Every strategy at every combination of the swept settings (``settings.SWEPT``: K, N,
    flavour, precision, ...), in every round, the order rotating from group to group and round
    to round.

    With one round, the control strategy runs in ``sweep.controls`` processes at every (K, N)
    (rounds 1, 2, ... marked ``control``, time-only; where it shares a process, that whole
    process: ``processes``): the spread between its processes is the between-process noise,
    measured at every (K, N) of every sweep; the checks run once per case, in its first
    process.
    """
    # the swept settings but the strategy: the sweep holds each one's values under its name
    axes = [name for name in SWEPT if name != "strategy"]
    groups = [
        dict(zip(axes, values, strict=True))
        for values in itertools.product(*(getattr(sweep, name) for name in axes))
    ]
    control = sweep.control
    settings = case_settings(sweep)
    out = []
    for round_ in range(sweep.rounds):
        for g, group in enumerate(groups):
            names = [(name, round_, False) for name in sweep.strategies]
            # with one round, the control's extra processes, spread through the group
            if sweep.rounds == 1 and control != "none":
                for extra in range(1, sweep.controls):
                    names.insert(extra * len(names) // sweep.controls, (control, extra, True))
            shift = (g + round_) % len(names)
            plain_timeline = round_ == 0  # the plain loop's timeline: once per group is enough
            here = []
            for label, r, is_control in names[shift:] + names[:shift]:
                first = plain_timeline and not is_control
                plain_timeline = plain_timeline and not first
                name, _, options = label.partition(":")
                here.append(
                    CaseSpec(
                        strategy=name,
                        options=options,
                        **group,
                        **settings,
                        memray=sweep.memray,
                        keep_captures=sweep.keep_captures,
                        profile=sweep.profile,
                        plugins=sweep.plugins,
                        run_id=run_id,
                        round=r,
                        control=is_control,
                        # the control's extra processes measure the noise between processes:
                        # time alone (its first process checked it), as every added process
                        time_only=is_control,
                        plain_timeline=first,
                        out_dir=str(sweep.out),
                        git=git,
                    )
                )
            out += processes(here, sweep.rotate)
    ids = [spec.case_id for spec in out]
    if len(set(ids)) != len(ids):  # e.g. a plugin strategy named like another one's case
        twice = sorted({i for i in ids if ids.count(i) > 1})[0]
        raise UsageError(f"two cases would share the case id {twice!r}; rename a strategy")
    return out


def processes(group: list[CaseSpec], rotate: bool) -> list[CaseSpec]:
    """A group's cases of one round as processes: those that can share one as one process in
    the place of the first of them (``budget.share_processes``), the control's extra processes
    where they were. Where the control shares a process, each of its extra processes is that
    process again, time-only (``extra``): every strategy of it then has the control's count of
    processes from the first round on, at about the cost of the control's alone."""
    shared = iter(share_processes([c for c in group if not c.control], rotate))
    out, absorbed, rotated = [], set(), {}
    for c in group:
        if c.control:
            out.append(c)
        elif c.label not in absorbed:  # alone, or the first of those sharing a process
            process = next(shared)
            absorbed.update(process.rotation)
            rotated.update(dict.fromkeys(process.rotation, process))
            out.append(process)
    return [extra(c, rotated.get(c.label)) if c.control else c for c in out]


def extra(control: CaseSpec, process: CaseSpec | None) -> CaseSpec:
    """The control's extra process ``control``; where the control shares ``process``, that
    process in its round, time-only and marked ``control`` as the control's would be."""
    if process is None:
        return control
    return dataclasses.replace(
        process, round=control.round, control=True, time_only=True, plain_timeline=False
    )
