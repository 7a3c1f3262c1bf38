"""The budget's plan (benches/sweep/budget.py): pairs per time-only process by Kalibera & Jones
from measured costs and variances, and only the strategies still open get processes."""

from __future__ import annotations

import dataclasses
import math
import time
import types

import numpy as np
import pytest

from benches.engine.spec import PAIRS_FACTOR, CaseSpec
from benches.sweep import budget, run
from reports.judge import stats
from reports.judge.noise import process_figures
from reports.judge.rows import pooled
from reports.schema.settings import group_of
from tests.synthetic import as_row, make_row


def rows_with_walls(overhead: float, per_pair: float, offsets: dict[str, list[float]]):
    """Rows of one group: each strategy's processes (one per offset, 16 pairs), each with
    ``overhead`` seconds of start, setup and warm-up and ``per_pair`` seconds a timed pair."""
    out = []
    for name, shifts in offsets.items():
        for r, shift in enumerate(shifts):
            row = make_row(name, overhead=math.exp(shift), repeat=16, round=r, seed=r)
            row["wall_s"] = {
                "process_start": overhead / 2,
                "setup": overhead / 4,
                "warmup": overhead / 4,
                "timed_pairs": per_pair * 16,
                "memory_pass": 100.0,  # a check: a time-only process never pays it
            }
            out.append(row)
    return list(pooled(map(as_row, out)).values())


def test_pairs_per_process_follow_kalibera_and_jones():
    entries = rows_with_walls(8.0, 0.05, {"native": [0.0, 0.02, -0.01], "lazy": [0.01]})
    group = group_of(entries[0].rows[0])
    plan = budget.plan_pairs(entries, group, repeat=8, planned=True)
    assert plan.c_process == 8.0 and math.isclose(plan.c_pair, 0.05)
    figures = [list(process_figures(e).values()) for e in entries]
    between, _ = stats.pooled_variance(figures)
    pairs = [stats.log_ratios(r.samples["window"], r.samples["plain_window"]) for e in entries
             for r in e.rows]  # fmt: skip
    s2_pair = float(np.mean([p.var(ddof=1) for p in pairs]))
    s2_process = max(between - s2_pair / 16, s2_pair / 8 / 100)
    best = math.sqrt(8.0 / 0.05 * s2_pair / s2_process)
    assert plan.s2_pair == s2_pair and plan.s2_process == s2_process
    _, longest = budget.longest_near_best(8.0 / 0.05, s2_pair / s2_process)
    assert plan.pairs == int(min(PAIRS_FACTOR * 8, max(8, round(longest))))
    assert f"n* = {best:.1f}" in plan.why and f"{longest:.1f}" in plan.why


def test_the_planned_pairs_are_the_longest_whose_variance_is_within_10_percent_of_n_stars():
    def cost(n: float, r: float, q: float) -> float:  # variance x time of a mean of processes
        return (r + n) * (1 + q / n)

    for r, q in ((65.0, 27.0), (2.6, 1.5), (500.0, 0.01), (1.0, 400.0)):
        best, longest = budget.longest_near_best(r, q)
        assert best == pytest.approx(math.sqrt(r * q))
        # n* is the least variance for the time; n_hi more pairs, at 10% more variance exactly
        assert cost(best, r, q) <= min(cost(best * 0.9, r, q), cost(best * 1.1, r, q))
        assert longest > best
        assert cost(longest, r, q) == pytest.approx(budget.NEAR_BEST * cost(best, r, q))
    # the frameworks sample's group at look 3: n* 41, the plan about 79 pairs
    assert round(budget.longest_near_best(65.0, 27.0)[1]) == 79


def test_repeat_given_or_nothing_measured_keeps_repeat():
    entries = rows_with_walls(8.0, 0.05, {"native": [0.0], "lazy": [0.01]})  # no df
    group = group_of(entries[0].rows[0])
    assert budget.plan_pairs(entries, group, 8, planned=True).pairs == 8
    assert budget.plan_pairs(entries, group, 8, planned=True).why == "not measured yet"
    assert budget.plan_pairs(entries, group, 8, planned=False).why == "--repeat given"


def test_only_the_strategies_still_open_get_processes():
    first = [
        CaseSpec(strategy=s, accumulate=k, live_tensors=0, preset="tiny", device="cpu")
        for k in (1, 4)
        for s in ("native", "global")
    ]
    found = budget.Look(open={group_of(first[0]): {"native"}}, unclear=1, entries=[])
    assert [(c.strategy, c.accumulate) for c in budget.still_open(first, found)] == [("native", 1)]


def test_a_strategy_stays_open_only_for_a_comparison_more_rounds_could_decide():
    """A look's futility stop (``Look.decidable``): in one group, lazy against native 2% (SE
    1.5%, 8 processes a side: power about 0 to clear 1 in one more round), block against native
    4.5% (power about 85%); only block and native stay open. With no round left, none."""
    from reports.schema.settings import LOOP
    from reports.schema.verdict_records import Comparison

    def unclear(a: str, log: float) -> Comparison:
        c = Comparison(a, "native", 1, 0, dict.fromkeys(LOOP), "window", processes=[8, 8])
        return c.measured(stats.interval(log, 0.015**2, 14.0))

    found = budget.Look({}, 2, [], [unclear("lazy", 0.02), unclear("block", 0.045)])
    narrowed = found.decidable(1, 0.02)
    assert list(narrowed.open.values()) == [{"block", "native"}]
    assert narrowed.futile == 1 and narrowed.unclear == 2
    assert found.decidable(0, 0.02).open == {} and found.decidable(0, 0.02).futile == 2


def test_a_process_stops_its_planned_pairs_at_its_deadline_and_never_its_repeat():
    """``case.past_deadline``: a time-only process, and a checked one whose sweep planned pairs
    beyond ``--repeat`` (the first round's n*), stop adding pairs once the next would end past
    the deadline; never before ``--repeat`` pairs, and a checked one of ``--repeat`` never."""
    import dataclasses
    import time

    from benches.engine.case import past_deadline

    base = CaseSpec(strategy="global", accumulate=4, live_tensors=0, preset="tiny", device="cpu")
    soon = time.time() + 1.0  # the next pair (2 x 1 s) ends past it
    planned = dataclasses.replace(base, repeat=8, pairs=49, deadline=soon)
    assert past_deadline(planned, [1.0] * 8, [1.0] * 8)
    assert not past_deadline(planned, [1.0] * 7, [1.0] * 7)  # --repeat first
    assert not past_deadline(dataclasses.replace(planned, pairs=0), [1.0] * 8, [1.0] * 8)
    time_only = dataclasses.replace(base, repeat=8, time_only=True, deadline=soon)
    assert past_deadline(time_only, [1.0] * 8, [1.0] * 8)
    assert not past_deadline(dataclasses.replace(planned, deadline=soon + 60), [1.0] * 8, [1.0] * 8)


def test_the_first_rounds_processes_share_what_is_left_the_controls_extra_ones_too():
    """A first-round process ends at its fair share of the time left (the first round's
    processes still to start, itself included), the control's extra ones as the checked ones:
    a control's extra process that its group shares is a whole rotation, as dear as the
    checked one's timing. An added round's process runs to the deadline."""
    checked = CaseSpec(
        strategy="native",
        preset="tiny",
        device="cpu",
        accumulate=1,
        live_tensors=0,
        rotation=["native", "lazy"],
    )
    control = dataclasses.replace(checked, round=1, control=True, time_only=True)
    added = dataclasses.replace(checked, round=3, time_only=True)
    assert [run.first_round(s) for s in (checked, control, added)] == [True, True, False]
    deadline = time.monotonic() + 400.0
    queue = [dataclasses.replace(control, round=2), added]  # still to start after ``spec``
    one, two = (types.SimpleNamespace(place=types.SimpleNamespace(capacity=c)) for c in (1, 2))
    for spec in (checked, control):
        share = run.SweepRun.ends(one, spec, deadline, queue) - time.time()
        assert 400.0 / 2 - 5 < share <= 400.0 / 2
        # a place that runs two at once runs both first-round processes in one wave
        assert run.SweepRun.ends(two, spec, deadline, queue) - time.time() > 395.0
    assert run.SweepRun.ends(one, added, deadline, queue) - time.time() > 395.0


def test_the_planned_pairs_count_the_t_quantile_of_the_df_they_leave():
    """160 pairs' time left at a process cost of 30 pairs, the pairs' variance 33x the
    processes': Kalibera & Jones's n* (31 pairs) leaves 2.6 processes; the plan with the t
    quantile of the df they leave runs shorter processes, and its interval is narrower."""
    from scipy import stats as scipy_stats

    def half_width(n: int) -> float:
        m = 160 / (30 + n)
        return scipy_stats.t.ppf(0.975, m - 1) * math.sqrt((1 + 33 / n) / m)

    pairs, why = budget.interval_plan(30.0, 1.0, 33.0, 1.0, 0, 160.0, 1, 200)
    best, longest = budget.longest_near_best(30.0, 33.0)
    assert pairs < best < longest
    assert half_width(pairs) * 1.3 < half_width(round(best))
    assert half_width(pairs) <= budget.NEAR_INTERVAL * min(map(half_width, range(1, 201)))
    assert "160 s left" in why
    # where the group's processes so far leave df enough, the pairs' variance is what is left
    # to shrink: longer processes
    more, _ = budget.interval_plan(30.0, 1.0, 33.0, 1.0, 12, 160.0, 1, 200)
    assert more > pairs
