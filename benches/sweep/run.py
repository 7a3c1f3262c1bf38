"""A sweep in progress (``SweepRun``): its processes run and recorded, the first round's pairs
planned from its finished processes, the budget spent look by look, and the wall's figures; and
run.json written whole. The command around it (arguments, resume, interrupt, the report) is
``cli``'s.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from pathlib import Path

from rich.markup import escape

from benches.engine import results
from benches.engine.spec import CaseSpec
from benches.sweep.budget import (
    FUTILITY_RULE,
    PLAN_RULE,
    REPORT_LOOKS,
    REPORT_S,
    Look,
    PairsPlan,
    Spent,
    look,
    plan_pairs,
    round_specs,
    still_open,
)
from benches.sweep.places import ClusterLost, Place
from benches.sweep.plan import cases
from benches.sweep.record import Sweep
from reports.judge.rows import pooled, read
from reports.schema.records import RUN, RunFile
from reports.schema.settings import group_of


class OutputError(Exception):
    """--out cannot be written (read-only, not a directory, disk full): one line, exit 2."""


def output_error(out: Path, err: OSError, when: str) -> OutputError:
    reason = err.strerror or str(err)
    return OutputError(f"cannot write to --out {str(out)!r} {when}: {reason}")


def write_whole(path: Path, text: str) -> None:
    """``text`` in ``path``, whole or not at all (a full disk leaves the old file, or none)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def first_round(spec: CaseSpec) -> bool:
    """Whether ``spec`` is a process of the first round: a checked one or the control's extra
    one (time-only either way); an added round's are neither."""
    return not spec.time_only or spec.control


class SweepRun:
    """One sweep in progress: its run id and git state, where its processes run (``place``),
    its progress bar, its failures, whether it was interrupted, what its processes cost
    (``budget.Spent``), and when its command started (the budget's clock). Its methods run cases and
    spend the budget; the sweep is the one writer of its rows."""

    def __init__(self, sweep: Sweep, run_id: str, git: dict, place: Place, progress, started):
        self.sweep, self.run_id, self.git = sweep, run_id, git
        self.place = place
        self.progress = progress
        self.task = progress.add_task("sweep", total=0)
        self.started = started
        self.failed = 0
        self.interrupted = False
        self.not_run = 0  # processes the cluster could not run (its connection ended)
        self.left_out: list[str] = []  # first-round cases the budget could not hold
        self.spent = Spent()  # what its processes cost: the budget's expectations
        self.timed_s = 0.0  # seconds of timed windows (the timed pairs) over the processes
        self.steps: dict[str, float] = {}  # the processes' seconds by step (rows' wall_s)
        # a resumed run's looks so far (a new run has no rows to read: its results.jsonl may
        # be anything until the first row is appended, /dev/full included)
        recorded = RunFile.read(sweep.out) if sweep.resume else None
        # the looks' plans (a resumed run's first-round plan is made again: ``first_pairs``)
        self.plan: list[dict] = [
            p for p in (recorded.plan or []) if p.get("rounds") != [0, 0]
        ] if recorded else []  # fmt: skip
        # the first round's pairs per group, planned as its processes finish (``first_pairs``)
        self.first_plan: dict[tuple, PairsPlan] = {}
        self.recorded = 0  # processes whose rows were appended
        self._plans: tuple[int, list, dict] = (-1, [], {})  # (recorded, entries, plans)
        self.taken = 1  # looks taken
        if recorded is not None:
            added = [r.round for r in read(sweep.out) if r.time_only and not r.control]
            self.taken = recorded.taken(added)

    def deadline(self, report_s: float) -> float:
        """When the last process must end: the budget less the report's time."""
        return self.started + self.sweep.budget - report_s

    def run_cases(self, specs: list[CaseSpec], deadline: float | None = None) -> int:
        """Each case in its own process, at most ``place.capacity`` in flight, each row
        appended as its process finishes; a failure is one line (its text is data, never
        markup). Stops at Ctrl-C, or submits no case that would pass ``deadline`` (a case is
        expected to cost what processes of its kind took so far, ``budget.Spent``). Returns
        how many processes it started."""
        self.progress.update(self.task, total=self.progress.tasks[0].total + len(specs))
        queue, in_flight, started = list(specs), 0, 0
        try:
            while queue or in_flight:
                while queue and in_flight < self.place.capacity:
                    spec = self.first_pairs(queue.pop(0))
                    # a time-only process keeps to its deadline: it starts if its least fits
                    expected = (self.spent.least if spec.time_only else self.spent.expected)(spec)
                    if deadline is not None and time.monotonic() + expected > deadline:
                        # the first-round cases the budget cannot hold (the control's extra
                        # processes only time: theirs is no case of its own)
                        dropped = [
                            m for c in [spec, *queue] if not c.time_only for m in c.members()
                        ]
                        if dropped:
                            self.left_out += [c.case_id for c in dropped]
                            self.progress.console.print(
                                f"budget: {len(dropped)} first-round cases left out, the next "
                                f"expected to take {expected:.0f} s with {self.sweep.budget:g} s "
                                "in all (a larger --budget runs them; --resume adds them)",
                                soft_wrap=True,
                            )
                        queue = []  # the rest would end past the deadline
                        in_flight -= self.place.drop_waiting()
                        break
                    self.progress.update(self.task, description=escape(f"{spec.case_id:<40}"))
                    if deadline is not None:  # the process measures less rather than overrun
                        spec = dataclasses.replace(spec, deadline=self.ends(spec, deadline, queue))
                    self.place.submit(spec)
                    in_flight += 1
                    started += 1
                if not in_flight:
                    return started
                spec, rows = next(iter(self.place.as_completed()))
                in_flight -= 1
                self.record(spec, rows)
        except KeyboardInterrupt:
            self.interrupted = True
        except ClusterLost as lost:  # every row written is kept; the rest did not run
            self.not_run = lost.in_flight + len(queue)
            self.progress.console.print(
                f"[red]cluster lost[/red]: {escape(str(lost))}; {self.not_run} processes did not "
                "run (--resume runs them)",
                soft_wrap=True,
            )
        return started

    def first_pairs(self, spec: CaseSpec) -> CaseSpec:
        """A first-round process (its pairs planned by no look) with the pairs its group's
        finished processes plan (``budget.plan_pairs``, Kalibera & Jones): the rule every added
        process follows, from the first moment the sweep can measure it (a process of the
        group and the variance between two of a strategy's, the control's extra processes
        give it), ``--repeat`` until then. Not where ``--repeat`` is given, nor without a budget
        (a fixed sweep keeps the design it was given); run.json's plan records it. A time-only
        one (the control's extra processes) warms up what its group's checked processes needed
        (``PairsPlan.warm_pairs``), planned or not."""
        sweep = self.sweep
        planning = not spec.pairs and sweep.budget and sweep.plan_pairs
        if not (planning or spec.time_only):
            return spec
        recorded, entries, plans = self._plans
        if recorded != self.recorded:  # a process finished since the last plan: read again
            # the process figures only: no entry's bootstrap (plan_pairs reads none)
            found = read(sweep.out) if self.recorded else []  # none yet: the file may be empty
            entries = list(pooled(found, summarised=False).values())
            recorded, plans = self.recorded, {}
            self._plans = (recorded, entries, plans)
        group = group_of(spec)
        if group not in plans:
            plans[group] = plan_pairs(entries, group, sweep.repeat, True)
        if spec.time_only:  # the warm-up its group's checked processes needed, once one ran
            spec = dataclasses.replace(spec, warm_pairs=plans[group].warm_pairs)
        if not planning or plans[group].c_process is None:  # not measured yet
            return spec
        self.first_plan[group] = plans[group]
        return dataclasses.replace(spec, pairs=plans[group].pairs)

    def first_round_plan(self) -> dict | None:
        """run.json's record of the first round's planned pairs (the last plan per group)."""
        if not self.first_plan:
            return None
        return {
            "look": 1,
            "rounds": [0, 0],
            "pairs": [
                {"group": list(g), **self.first_plan[g].record()}
                for g in sorted(self.first_plan, key=repr)
            ],
            "rule": PLAN_RULE,
        }

    def ends(self, spec: CaseSpec, deadline: float, queue: list[CaseSpec]) -> float:
        """When ``spec``'s process must end (``time.time``): a first-round process (its checks
        are every later look's footing; the control's extra processes too) its fair share of
        what is left, the left time over the first-round processes still to start, itself
        included, so that one process with many strategies does not spend what the others
        need; an added one the deadline. (A control's extra process that its group shares
        timed 10 rounds of seven loops, 196 s of a 420 s budget, on the deadline, and left
        `global`'s first process out.)"""
        left = deadline - time.monotonic()
        if first_round(spec):  # a place that runs C at once runs the rest in 1 / C the time
            waves = -(-(1 + sum(1 for c in queue if first_round(c))) // self.place.capacity)
            left /= waves
        return time.time() + left

    def record(self, spec: CaseSpec, rows: list[dict]) -> None:
        """A finished process's rows, appended at once; its wall by kind; a failure said."""
        try:
            for row in rows:
                results.append(self.sweep.out, row)
        except OSError as err:  # the case's files or its row: nothing more can be kept
            raise output_error(self.sweep.out, err, f"at case {spec.case_id}") from None
        row = rows[0]
        for r in rows:  # a rotated process's rows share its steps out among them
            for step, seconds in (r.get("wall_s") or {}).items():
                if step != "total" and seconds:
                    self.steps[step] = self.steps.get(step, 0.0) + seconds
        self.spent.add(spec, rows)
        self.recorded += 1
        if row["status"] != "ok":
            self.failed += 1
            error = escape(str(row["error"]))  # text from a case is data, never markup
            # one line, however long: a terminal may wrap it, the log never does
            self.progress.console.print(
                f"[red]failed[/red] {escape(spec.case_id)}: {error}", soft_wrap=True
            )
        self.progress.advance(self.task)

    def spend_budget(self) -> None:
        """Rounds of time-only processes for the strategies that still have a time comparison
        ``unclear`` (each look's verdicts held to its share of alpha, ``claims.look_alpha``),
        in an order shuffled per look, until every verdict is decided, the looks are used up
        (``sweep.looks``: each look adds twice the rounds of the last) or the budget is spent;
        a strategy whose comparisons are all decided gets no more processes. Each process runs
        the pairs planned for its group (``budget.plan_pairs``; the first round's:
        ``first_pairs``). The budget holds the report too: no process starts that would end
        later than the report needs (``REPORT_LOOKS`` times one look's verdicts). A look
        judges only after every process of the one before it finished; run.json records
        each look's plan and the looks taken (the report's alpha)."""
        sweep = self.sweep
        shuffle = random.Random(sweep.seed)
        planned = cases(sweep, self.run_id, self.git)
        first = [m for c in planned if not c.control and c.round == 0 for m in c.members()]
        # after every round the rows hold and the first round planned (the control's extra
        # processes, which may not have run): an added process never takes one's case id
        next_round = max((r.round for r in [*read(sweep.out), *planned]), default=0) + 1
        while self.taken < sweep.looks:
            looked = time.monotonic()
            found = look(sweep, self.taken)
            report_s = REPORT_LOOKS * (time.monotonic() - looked) + REPORT_S
            deadline = self.deadline(report_s)
            if not found.open or time.monotonic() >= deadline:
                return
            # the time left, shared by the open groups: each plans its pairs for its share
            left_s = (deadline - time.monotonic()) / max(1, len(found.open))
            plans = {
                g: plan_pairs(found.entries, g, sweep.repeat, sweep.plan_pairs, left_s)
                for g in found.open
            }
            pairs = {g: plan.pairs for g, plan in plans.items()}
            left = self.rounds_left(still_open(first, found), next_round, pairs, deadline)
            found = found.decidable(left, sweep.min_effect)
            if not found.open:  # a futility stop: no round left could decide what is unclear
                self.progress.console.print(
                    f"look {self.taken + 1}: the {found.unclear} comparisons still unclear lie "
                    f"too near the margin for the {left} rounds the budget has left to decide "
                    "them: no more processes",
                    soft_wrap=True,
                )
                self.plan.append(
                    {**self.looked(found, left), "processes": 0, "rule": FUTILITY_RULE}
                )
                self.save()
                return
            plans = {g: plans[g] for g in found.open}
            pairs = {g: plan.pairs for g, plan in plans.items()}
            # each look doubles what the last added (1, 2, 4, ... rounds): few looks, many
            # processes
            rounds = range(next_round, next_round + 2 ** (self.taken - 1))
            here = still_open(first, found)
            warm = {g: plan.warm_pairs for g, plan in plans.items()}
            specs = [s for r in rounds for s in round_specs(here, r, sweep.rotate, pairs, warm)]
            while len(specs) < self.place.capacity:  # a look fills the cluster's slots
                rounds = range(rounds[0], rounds[-1] + 2)
                specs += round_specs(here, rounds[-1], sweep.rotate, pairs, warm)
            shuffle.shuffle(specs)
            strategies = sorted({c.label for c in here})
            self.progress.console.print(
                escape(
                    f"look {self.taken + 1} of at most {sweep.looks}: {found.unclear} "
                    f"comparisons still unclear ({found.futile} of them too near the margin to "
                    f"decide in the {left} rounds left) in {len(found.open)} group(s), "
                    f"{len(strategies)} strategies open: {len(specs)} time-only processes "
                    f"(rounds {rounds[0]}-{rounds[-1]}), "
                    f"{'/'.join(str(p) for p in sorted(set(pairs.values())))} pairs each"
                ),
                soft_wrap=True,
            )
            self.plan.append(
                {
                    **self.looked(found, left),
                    "strategies": strategies,
                    "processes": len(specs),
                    "rounds": [rounds[0], rounds[-1]],
                    "pairs": [
                        {"group": list(g), **plans[g].record()} for g in sorted(plans, key=repr)
                    ],
                    "rule": PLAN_RULE,
                }
            )
            if not self.run_cases(specs, deadline):
                self.plan.pop()  # nothing fitted before the deadline: no data, no look taken
                return
            self.taken += 1  # the data of one more look, even where the deadline cut it short
            self.save()
            if self.interrupted or self.not_run:
                return
            next_round += len(rounds)

    def looked(self, found: Look, left: int) -> dict:
        """What run.json's plan records of the look about to be taken, whatever it does next:
        what it found unclear, how much of it no round left could decide, and the rounds left."""
        return {
            "look": self.taken + 1,
            "unclear": found.unclear,
            "futile": found.futile,
            "rounds_left": left,
            "decided": found.decided,  # at the level of the look before it: kept (verdicts.kept)
        }

    def rounds_left(
        self, here: list[CaseSpec], next_round: int, pairs: dict, deadline: float
    ) -> int:
        """How many more rounds the sweep could add to the strategies open in ``here``: what
        its looks left would add (each twice the last) and what the time to the deadline holds
        at the processes' expected cost (``budget.Spent``), the fewer; one at the least before
        the deadline (a time-only process shortens itself to fit: ``Spent.least``)."""
        scheduled = 2 ** (self.sweep.looks - 1) - 2 ** (self.taken - 1)
        one = round_specs(here, next_round, self.sweep.rotate, pairs)
        per_round = sum(self.spent.expected(spec) for spec in one) / max(1, self.place.capacity)
        if per_round <= 0:
            return scheduled
        return max(1, min(scheduled, int((deadline - time.monotonic()) / per_round)))

    def save(self) -> dict:
        """run.json again, with the looks taken, each look's plan and the wall's figures
        (``wall``, returned); a run.json that cannot be written is a warning (the old one stays
        whole: ``write_whole``), never the end of the sweep or its report."""
        wall = self.wall()
        run = RunFile.read(self.sweep.out)
        if run is None:
            return wall
        first = self.first_round_plan()
        run.looks_taken, run.wall = self.taken, wall
        run.plan = [first, *self.plan] if first else self.plan
        try:
            write_whole(self.sweep.out / RUN, json.dumps(run.to_json(), indent=1))
        except OSError as err:  # the rows and the report matter more: said, not raised
            said = output_error(self.sweep.out, err, "writing run.json")
            self.progress.console.print(f"[yellow]warning[/yellow]: {escape(str(said))}")
        return wall

    def wall(self) -> dict:
        """Where the sweep's wall time went: its seconds, the processes' seconds by step, and
        the timed share (timed-window seconds over the sweep's wall seconds)."""
        wall = time.monotonic() - self.started
        timed = self.steps.get("timed_pairs", 0.0)
        return {
            "sweep_s": wall,
            "timed_s": timed,
            "timed_share": timed / wall if wall > 0 else None,
            "steps": dict(sorted(self.steps.items(), key=lambda item: -item[1])),
            "left_out": self.left_out,
        }

    def say_wall(self, console, wall: dict, page=None) -> None:
        """The timed share and where the rest went, then each group's efficiency where the
        report was made (``page``: its ``wall.efficiency``), which run.json's ``wall`` then
        records too."""
        self.say_share(console, wall)
        found = page.wall.efficiency if page is not None else []
        for line in efficiency_lines(found):
            console.print(escape(line), soft_wrap=True)
        if found:
            run = RunFile.read(self.sweep.out)
            if run is not None and run.wall is not None:
                run.wall = {**run.wall, "efficiency": [e.to_json() for e in found]}
                try:
                    write_whole(self.sweep.out / RUN, json.dumps(run.to_json(), indent=1))
                except OSError as err:
                    said = output_error(self.sweep.out, err, "writing run.json")
                    console.print(f"[yellow]warning[/yellow]: {escape(str(said))}")

    def say_share(self, console, wall: dict) -> None:
        """The timed share and where the rest went (``wall``: run.json's figures)."""
        steps = wall["steps"]
        rest = ", ".join(
            f"{step.replace('_', ' ')} {seconds:.0f} s"
            for step, seconds in steps.items()
            if step != "timed_pairs" and seconds >= 0.5
        )
        share = wall["timed_share"] or 0.0
        console.print(
            escape(
                f"timed share {share:.0%}: {wall['timed_s']:.0f} s of timed windows in "
                f"{wall['sweep_s']:.0f} s before the report; the processes' other steps: "
                f"{rest or 'none'} (the gaps between processes and the looks' verdicts are "
                "the rest)"
            ),
            soft_wrap=True,
        )


def efficiency_lines(found: list) -> list[str]:
    """One line per group (``reports.judge.efficiency``): what the machine's noise allowed in
    the sweep's time, what the sweep reached, their ratio."""
    varying = {
        name
        for name in (found[0].case if found else {})
        if len({str(e.case.get(name)) for e in found}) > 1
    }
    out = []
    for e in found:
        where = f"K={e.k} N={e.n:,}" + "".join(f" {v}={e.case[v]}" for v in sorted(varying))
        allows = (
            f"the machine's noise (a pair's log ratio SD {e.s2_pair**0.5:.1%}, a round of "
            f"every strategy {e.c_round:.2f} s) allows +-{e.ideal:.1%} in the sweep's "
            f"{e.wall_s:.0f} s"
        )
        if e.efficiency is None:
            out.append(f"efficiency {where}: not measured ({allows}; no interval reached)")
            continue
        out.append(
            f"efficiency {where}: {e.efficiency:.2f}: {allows}; it reached +-{e.reached:.1%} "
            f"(the median of {e.comparisons} time comparisons' 95% half-widths)"
        )
    return out
