"""The verdicts of an asv history (``python -m reports history``): between consecutive commits
of a series a word, ``lower``, ``higher``, ``same`` or ``unclear``, decided by
``reports.judge.verdicts.decide`` with one of the ``RULES`` (the rules and why: ``history``'s
docstring). ``history`` draws them."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import Any

from reports.judge import stats, verdicts
from reports.regressions.asv_results import Point, Series

PREDICTION_LEVEL = 0.99
PAIRED_UNIT = "ratio"
WORDS = ("higher", "lower", "unclear", "same")  # the summary's order: regressions first
RING = {"higher": "#9d1018", "lower": "#12612a"}  # the page's colours for the two words

RULES = {
    "paired": (
        "Paired figure (unit ratio: the strategy's window over the plain PyTorch loop's, both "
        "timed in one process). r = value after / value before; t = max(min_effect, noise "
        "floor), where the noise floor is the larger of (a) the largest spread between the "
        "processes that measured one commit, seen on this benchmark at any commit and any "
        "parameter set (from asv's raw samples, one per process; from asv's 99% CI of the "
        "median where samples were not recorded) and (b) a 99% Student-t prediction bound for "
        "two single processes, from the between-process SD pooled over the benchmark. higher: "
        "r > 1 + t; lower: r < 1 / (1 + t); same: r inside [1 / (1 + min_effect), "
        "1 + min_effect]; unclear otherwise."
    ),
    "paired-no-spread": (
        "Paired figure without a spread between processes (one process measured each commit: "
        "asv keeps a single number per commit for a track that returns one): the noise floor "
        "is unknown, so the step is never lower or higher; same when r = after / before is "
        "inside [1 / (1 + min_effect), 1 + min_effect], unclear otherwise."
    ),
    "unpaired": (
        "Unpaired figure (time_*, peakmem_*: each commit measured in processes of its own, "
        "which differ by more than most changes on a shared machine). The step's interval runs "
        "from min(after) / max(before) to max(after) / min(before), over asv's raw samples of "
        "all processes of each commit (asv's 99% CI of the median where samples were not "
        "recorded; the value alone where asv has neither); t = max(min_effect, q), where q is "
        "the largest change max(after / before, before / after) - 1 of this benchmark, any "
        "parameter set, over the quiet steps of this history: steps between commits where "
        "nothing changed, that is, steps that a paired benchmark with a measured noise floor "
        "judged and that no paired benchmark called lower or higher. higher: the whole "
        "interval above 1 + t; lower: the whole interval below 1 / (1 + t); same: the whole "
        "interval inside [1 / (1 + min_effect), 1 + min_effect]; unclear otherwise."
    ),
    "unpaired-no-quiet": (
        "Unpaired figure in a history without a quiet step (no paired benchmark with a "
        "measured noise floor found a step that changed nothing): the noise between commits "
        "is unknown, so the step is never lower or higher; same when its whole interval (as "
        "above) is inside [1 / (1 + min_effect), 1 + min_effect], unclear otherwise."
    ),
}
RULE_NAMES = {
    "paired": "paired",
    "paired-no-spread": "paired, no process spread",
    "unpaired": "unpaired",
    "unpaired-no-quiet": "unpaired, no quiet step",
}


# -- verdicts --------------------------------------------------------------------------------------
def is_paired(bench: dict[str, Any]) -> bool:
    return bench.get("unit") == PAIRED_UNIT


def paired_floor(series: list[Series]) -> dict[str, Any]:
    """A paired benchmark's noise floor on one machine and env, from asv's processes.

    Fractions: ``observed`` is the largest spread max/min - 1 between the processes of one
    commit (raw samples), or of asv's 99% CI where samples were not recorded; ``bound`` the
    99% prediction bound for two single processes, pooled over the benchmark's parameter sets
    and commits. ``floor`` is their maximum, None when no commit had several processes.
    """
    processes: list[list[float]] = []
    ci_spreads: list[float] = []
    for s in series:
        for p in s.points:
            xs = p.process_values()
            if xs is not None:
                processes.append([math.log(x) for x in xs])
            elif p.ci is not None and p.ci[0] > 0 and (p.repeat or 0) > 1:
                ci_spreads.append(math.log(p.ci[1] / p.ci[0]))
    spread = stats.between_processes(processes, PREDICTION_LEVEL)
    bound, df = spread["bound"], spread["df"]
    seen = [x for x in (spread["observed"], *ci_spreads) if x is not None]
    observed = max(seen) if seen else None
    known = [x for x in (observed, bound) if x is not None]
    return {
        "observed": math.expm1(observed) if observed is not None else None,
        "observed_from": "raw samples"
        if spread["observed"] is not None
        else ("asv's 99% CI" if ci_spreads else None),
        "bound": math.expm1(bound) if bound is not None else None,
        "df": df,
        "floor": math.expm1(max(known)) if known else None,
    }


def _step(before: Point, after: Point) -> dict[str, Any]:
    return {
        "from": before.commit,
        "to": after.commit,
        "from_date": before.date,
        "to_date": after.date,
        "before": before.value,
        "after": after.value,
        "ratio": after.value / before.value if before.value > 0 and after.value >= 0 else None,
    }


def judge_paired(series: list[Series], min_effect: float) -> dict[str, Any]:
    """Verdicts of every step of a paired benchmark's series (one machine and env)."""
    noise = paired_floor(series)
    floor = noise["floor"]
    rule = "paired" if floor is not None else "paired-no-spread"
    threshold = max(min_effect, floor) if floor is not None else None
    _judge_steps(series, lambda step, *_: (step["ratio"], step["ratio"]), min_effect, floor, rule)
    return {**noise, "rule": rule, "threshold": threshold}


def _judge_steps(series, interval, min_effect: float, floor: float | None, rule: str, **more):
    """Every step of every series: its interval (``interval(step, before, after)``), the verdict
    word for it at ``floor`` (none measured: never lower or higher), and the rule; ``more``:
    extra fields, each a function of (before, after)."""
    threshold = max(min_effect, floor) if floor is not None else None
    for s in series:
        s.steps = []
        for before, after in itertools.pairwise(s.points):
            step = _step(before, after)
            low, high = interval(step, before, after)
            word = verdicts.decide(low, high, min_effect, floor if floor is not None else math.inf)
            step.update(low=low, high=high, threshold=threshold, verdict=word, rule=rule)
            step.update({key: field(before, after) for key, field in more.items()})
            s.steps.append(step)


def _interval(before: Point, after: Point) -> tuple[float, float] | None:
    """The step's interval from the two commits' spreads (the values where there is none)."""
    lo_a, hi_a = before.spread() or (before.value, before.value)
    lo_b, hi_b = after.spread() or (after.value, after.value)
    if lo_a <= 0 or hi_a <= 0 or lo_b < 0:
        return None
    return (lo_b / hi_a, hi_b / lo_a)


def judge_unpaired(
    series: list[Series], order: list[str], quiet: set[tuple[str, str]], min_effect: float
) -> dict[str, Any]:
    """Verdicts of every step of an unpaired benchmark's series (one machine and env).

    ``order``: the commits of the machine and env, oldest first; ``quiet``: the transitions
    (commit, next commit) of that order where nothing changed. A step of a series is quiet when
    every transition it spans is (a series may skip a commit).
    """
    changes: list[float] = []
    for s in series:
        for before, after in itertools.pairwise(s.points):
            r = _step(before, after)["ratio"]
            if r and _spans_quiet(order, before.commit, after.commit, quiet):
                changes.append(abs(math.log(r)))
    q = math.expm1(max(changes)) if changes else None
    rule = "unpaired" if q is not None else "unpaired-no-quiet"
    threshold = max(min_effect, q) if q is not None else None
    _judge_steps(
        series,
        lambda step, before, after: _interval(before, after) or (None, None),
        min_effect,
        q,
        rule,
        quiet=lambda before, after: _spans_quiet(order, before.commit, after.commit, quiet),
    )
    return {"quiet_change": q, "quiet_steps": len(changes), "rule": rule, "threshold": threshold}


def _spans_quiet(order: list[str], a: str, b: str, quiet: set[tuple[str, str]]) -> bool:
    if a not in order or b not in order:
        return False
    i, j = order.index(a), order.index(b)
    return all((order[k], order[k + 1]) in quiet for k in range(i, j))


def quiet_transitions(paired: list[Series], order: list[str]) -> set[tuple[str, str]]:
    """Transitions between consecutive commits (of ``order``) where nothing changed: some
    paired step with a measured noise floor spans them, and no paired step spanning them was
    called lower or higher."""
    covered: set[tuple[str, str]] = set()
    moved: set[tuple[str, str]] = set()
    position = {c: i for i, c in enumerate(order)}
    for s in paired:
        for step in s.steps:
            i, j = position.get(step["from"]), position.get(step["to"])
            if i is None or j is None:
                continue
            spanned = {(order[k], order[k + 1]) for k in range(i, j)}
            if step["rule"] == "paired":  # a floor was measured: "not lower or higher" means it
                covered |= spanned
            if step["verdict"] in ("lower", "higher"):
                moved |= spanned
    return covered - moved


def judge(history: dict[str, Any], min_effect: float) -> dict[str, Any]:
    """Verdicts for every series' steps; per benchmark and group, the noise it was judged by."""
    benchmarks = history["benchmarks"]
    by_group: dict[tuple[str, str], dict[str, list[Series]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for s in history["series"]:
        by_group[s.group][s.benchmark].append(s)
    noise: dict[tuple[str, str, str], dict[str, Any]] = {}
    for group, benches in by_group.items():
        order = [c["commit"] for c in history["commits"] if (c["machine"], c["env"]) == group]
        paired_series = []
        for name, here in benches.items():
            if is_paired(benchmarks[name]):
                noise[(name, *group)] = judge_paired(here, min_effect)
                paired_series += here
        quiet = quiet_transitions(paired_series, order)
        for name, here in benches.items():
            if not is_paired(benchmarks[name]):
                noise[(name, *group)] = judge_unpaired(here, order, quiet, min_effect)
    return noise
