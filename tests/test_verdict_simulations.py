"""The verdict rule's error rates, measured by simulated sweeps through the project's own
functions: twins under ranks and over the looks of a budgeted sweep, the interval's coverage, a
planted difference found, two runs on a drifted machine. Most are slow (``nox -s slow``); the
rule's exact cases are ``test_verdicts``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from msgspec import structs
from synthetic import pairs_row, window_entry, window_row

from reports.judge import noise, stats, verdicts
from reports.schema.verdict_records import Comparison


@pytest.mark.slow  # 2,000 simulated sweeps, about 30 s
def test_twins_with_two_processes_each_are_called_different_in_under_1_percent():
    """What a 2-core CPU under two ranks shows (--rounds 2 --control none): pairs whose log
    ratios scatter by 8-30% (Student t, 3 df), 6 pairs per process, no offset of a process;
    five strategies of 2 processes each: twins s0 and s1, and three 30%, 60% and 90% slower
    (as the sweep's slow paths are, so that Benjamini-Hochberg does not shield the twins).
    Twins called lower or higher in 2,000 such sweeps (seeds 0-1999), by the t-test of ratio 1
    (the rule before the margin): 83 (4.2%) with the variance between processes alone (df 5),
    12 (0.6%) floored at the pairs' own; with the margin as the null of a difference: 1."""
    called = 0
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        entries = [
            window_entry(
                [pairs_row(f"s{i}", r, shift + 0.05 * rng.standard_t(3, 6)) for r in (0, 1)]
            )
            for i, shift in enumerate((0.0, 0.0, 0.3, 0.6, 0.9))
        ]
        comparisons = verdicts.strategy_comparisons(entries, noise.noise(entries, 0.02), 0.02)
        verdicts.decide_time(comparisons, 0.02)
        (twins,) = [c for c in comparisons if (c.a, c.b) == ("s0", "s1") and c.timed]
        called += twins.verdict in ("lower", "higher")
    assert called / 2000 <= 0.01, called


@pytest.mark.slow  # 300 simulated sweeps, about 20 s
def test_twins_as_noisy_as_ranked_processes_are_not_called_different():
    """What DDP on 2 cores shows: 16 processes per strategy of 10 pairs each, pairs scattering
    by 8%, processes by 3.5% (an interval about as wide as the margin: SE 1.5%). Twins, and a 10%
    and a 40% slower strategy (so that Benjamini-Hochberg does not shield the twins). Over 1,000
    seeds the twins were called lower/higher in 3 (0.3%) with the margin as the null of a
    difference (``claims.beyond_p``), in 47 (4.7%) judged by the t-test of ratio 1 (the rule
    before); the 10% slower one was found in 996. This test runs seeds 0-299."""
    called = found = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        entries = []
        for i, shift in enumerate((0.0, 0.0, math.log(1.1), math.log(1.4))):
            offsets = rng.normal(0, 0.035, 16)
            logs = [shift + offsets[r] + rng.normal(0, 0.08, 10) for r in range(16)]
            entries.append(window_entry([pairs_row(f"s{i}", r, logs[r]) for r in range(16)]))
        comparisons = verdicts.strategy_comparisons(entries, noise.noise(entries, 0.02), 0.02)
        verdicts.decide_time(comparisons, 0.02)
        words = {(c.a, c.b): c.verdict for c in comparisons if c.timed}
        called += words[("s0", "s1")] in ("lower", "higher")
        found += words[("s0", "s2")] == "lower"
    assert called / 300 <= 0.01, called
    assert found / 300 >= 0.9, found


def _planted(truth: dict[str, float], processes: dict[str, int], sd: float, seed: int):
    """Entries of one group: each strategy's processes, each with 8 pairs; a process's log
    overhead is the strategy's true one, plus an offset of the process (SD ``sd``), plus each
    pair's own noise (SD 1%)."""
    rng = np.random.default_rng(seed)
    return [_processes(s, log_true, processes[s], sd, rng) for s, log_true in truth.items()]


def _processes(strategy: str, log_true: float, count: int, sd: float, rng):
    """One strategy's entry of ``count`` processes of 8 pairs: its true log overhead, plus an
    offset of the process (SD ``sd``), plus each pair's own noise (SD 1%)."""
    rows = []
    for r in range(count):
        offset = rng.normal(0, sd)
        plain = 0.01 * np.exp(rng.normal(0, 0.01, 8))
        window = plain * np.exp(log_true + offset + rng.normal(0, 0.01, 8))
        rows.append({**window_row(strategy, 1, 1.0, rnd=r), "samples": {
            "window": window.tolist(), "plain_window": plain.tolist()}})  # fmt: skip
    return window_entry(rows)


@pytest.mark.slow  # 2,000 simulated sweeps
@pytest.mark.parametrize(
    ("processes", "label"),
    [
        ({"native": 3, "lazy": 1, "block": 1}, "--rounds 1 with the control in 3 processes"),
        ({"native": 5, "lazy": 5, "block": 5}, "--rounds 5"),
    ],
)
def test_the_interval_called_95_percent_covers_the_truth_95_percent_of_the_time(processes, label):
    """1,000 simulated sweeps with a known truth (2% SD between processes, 1% per pair) through
    the project's own functions: the 95% interval of every strategy pair covers the true ratio
    in 93-97% of them (binomial SD at 1,000 x 3 pairs: 0.4%)."""
    truth = {"native": 0.0, "lazy": math.log(1.03), "block": math.log(0.98)}
    covered = total = 0
    for seed in range(1000):
        entries = _planted(truth, processes, 0.02, seed)
        spreads = noise.noise(entries, 0.02)
        for c in verdicts.strategy_comparisons(entries, spreads, 0.02):
            if c.metric != "window":
                continue
            true = math.exp(truth[c.a] - truth[c.b])
            covered += c.ci_low <= true <= c.ci_high
            total += 1
    assert 0.93 <= covered / total <= 0.97, f"{label}: coverage {covered / total:.3f}"


@pytest.mark.slow  # 200 simulated sweeps
def test_a_five_percent_difference_is_higher_and_twins_are_same_with_enough_processes():
    """200 simulated sweeps of 20 processes per strategy (2% SD between processes): native's
    twin is lower or higher in at most 1% of them (the contract: direction is decided against
    ratio 1 too, at a twentieth of alpha) and mostly same; 5% slower is higher. Measured over
    seeds 0-299: twin lower/higher 1 (0.33%); at seeds 0-199, same 83.5%."""
    truth = {"native": 0.0, "twin": 0.0, "slow": math.log(1.05)}
    words: dict[str, list[str]] = {"slow": [], "twin": []}
    for seed in range(200):
        entries = _planted(truth, {"native": 20, "twin": 20, "slow": 20}, 0.02, seed)
        comparisons = verdicts.strategy_comparisons(entries, noise.noise(entries, 0.02), 0.02)
        verdicts.decide_time(comparisons, 0.02)
        for c in comparisons:
            if c.metric == "window" and "native" in (c.a, c.b):
                c = c if c.b == "native" else c.inverted()
                words[c.a].append(c.verdict)
    called = words["twin"].count("lower") + words["twin"].count("higher")
    assert called / len(words["twin"]) <= 0.01, called
    assert words["twin"].count("same") / len(words["twin"]) > 0.7, words["twin"]
    assert words["slow"].count("higher") / len(words["slow"]) > 0.95


def _two_runs(rng, cases: int, drift: float, planted: float) -> list[Comparison]:
    """Time comparisons B / A of ``cases`` cases of two runs (8 processes per case and run,
    1.5% SD between processes), each case's overhead moved between the runs by its own
    N(0, drift), and case 0 changed by ``planted`` (log)."""
    out = []
    for case in range(cases):
        moved = rng.normal(0, drift) + (planted if case == 0 else 0.0)
        a, b = rng.normal(0, 0.015, 8), moved + rng.normal(0, 0.015, 8)
        c = Comparison(f"B{case}", f"A{case}", 1, 0, {}, "window")
        out.append(c.measured(stats.contrast(b, a, None, 0)))
    return out


def _widened(c: Comparison, variance, df) -> Comparison:
    """The comparison with the variance between runs in its interval (as compare does)."""
    return structs.replace(c).measured(stats.widened(c.to_json(), variance, df))


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_two_runs_whose_machine_drifted_are_not_called_different_and_a_real_change_is():
    """500 simulated pairs of runs of 12 cases, every case's overhead moved by its own 2% SD
    between the runs (6x its standard error inside one run): with the variance between runs
    in every interval (``stats.between_runs``), at most 5% of the pairs of runs hold any false
    lower or higher (measured: see the assertion's message); a case that really moved by 1.5x
    is higher in 95% or more. Without the variance between runs 45% of pairs of runs would."""
    rng = np.random.default_rng(0)
    false_runs = found = naive_false = 0
    for _ in range(500):
        judged = _two_runs(rng, 12, 0.02, math.log(1.5))
        verdicts.decide_time([structs.replace(c) for c in judged], 0.02)
        naive = [structs.replace(c) for c in judged]
        verdicts.decide_time(naive, 0.02)
        naive_false += any(c.verdict in ("lower", "higher") for c in naive[1:])
        variance, df = stats.between_runs([c.log for c in judged], [c.se for c in judged])
        judged = [_widened(c, variance, df) for c in judged]
        verdicts.decide_time(judged, 0.02)
        false_runs += any(c.verdict in ("lower", "higher") for c in judged[1:])
        found += judged[0].verdict == "higher"
    assert false_runs / 500 <= 0.05, f"false calls in {false_runs / 500:.1%} of pairs of runs"
    assert found / 500 >= 0.95, f"the 1.5x change found in {found / 500:.1%}"
    # the test can fail: without it, the drift is called (223 of 500 pairs of runs)
    assert naive_false / 500 > 0.3


def test_one_case_in_common_cannot_tell_the_run_from_the_code():
    (c,) = _two_runs(np.random.default_rng(1), 1, 0.0, math.log(2.0))
    assert stats.between_runs([c.log], [c.se]) == (None, 0)
    widened = _widened(c, None, 0)
    verdicts.decide_time([widened], 0.02)
    assert widened.verdict == "unclear" and widened.p is None


def _nested(truth: dict[str, float], processes: dict[str, int], seed: int):
    """``_planted``'s entries (2% SD between processes, 1% per pair), each strategy's processes
    from a stream of its own: a look with more processes holds the earlier ones, as a sweep's
    rows do."""
    return [
        _processes(s, log_true, processes[s], 0.02, np.random.default_rng([seed, i]))
        for i, (s, log_true) in enumerate(truth.items())
    ]


@pytest.mark.slow  # 300 simulated sequential sweeps
def test_twins_are_never_called_different_over_the_looks_of_a_budgeted_sweep():
    """300 simulated sweeps as the budget spends them: 1 process per strategy and the control's
    3 first, then 1, 2, 4, 8, 16 more for the strategies with a comparison still unclear, each
    look at its own alpha, the report at what the looks left. Three twin pairs (2% SD between
    processes, 1% per pair) and a 5% slower strategy: a twin is lower/higher in at most 1% of
    its comparisons (measured: the assertion's message), the slower one is found."""
    truth = {"native": 0.0, "twin": 0.0, "lazy": 0.0, "lazy_twin": 0.0, "slow": math.log(1.05)}
    false = total = found = 0
    for seed in range(300):
        counts = {name: 3 if name == "native" else 1 for name in truth}
        taken = 1
        while True:
            entries = _nested(truth, counts, seed)
            final = taken == 6
            result = verdicts.verdicts(entries, 0.02, 6, taken=taken, final=final)
            unclear = {s for c in result.comparisons if c.timed and c.verdict == "unclear"
                       for s in (c.a, c.b)}  # fmt: skip
            if final or not unclear:
                if not final:
                    result = verdicts.verdicts(entries, 0.02, 6, taken=taken)
                break
            for name in unclear:
                counts[name] += 2 ** (taken - 1)
            taken += 1
        for a, b in (("native", "twin"), ("lazy", "lazy_twin"), ("native", "lazy")):
            total += 1
            false += verdicts.lookup(result, a, b, 1, 0, "window").verdict in ("lower", "higher")
        found += verdicts.lookup(result, "slow", "native", 1, 0, "window").verdict == "higher"
    assert false / total <= 0.01, f"twins called different in {false} of {total}"
    assert found / 300 >= 0.9, f"the 5% slower one found in {found} of 300"


def _rotated_sweep(seed: int) -> list[Comparison]:
    """One group of a rotated sweep at one round and the control's extra processes: seven
    strategies sharing 3 processes (five twins and two 30% and 60% slower, so that
    Benjamini-Hochberg does not shield the twins), each process's offset (SD 3%) in every
    figure it gave, pairs 1%; and ``alone`` (a twin, as ``global`` is a process alone) in 2
    processes of its own. Its window comparisons, decided."""
    rng = np.random.default_rng(seed)
    truth = {"r0": 0.0, "r1": 0.0, "r2": 0.0, "r3": 0.0, "r4": 0.0, "s1": 0.3, "s2": 0.6}
    rows: dict[str, list[dict]] = {s: [] for s in truth}
    for r in range(3):
        offset = rng.normal(0, 0.03)
        for s, log_true in truth.items():
            row = pairs_row(s, r, log_true + offset + rng.normal(0, 0.01, 8))
            rows[s].append({**row, "process_id": f"rot-r{r}"})
    entries = [window_entry(v) for v in rows.values()]
    alone = [pairs_row("alone", 10 + r, rng.normal(0, 0.03) + rng.normal(0, 0.01, 8))
             for r in range(2)]  # fmt: skip
    entries.append(window_entry(alone))
    comparisons = verdicts.strategy_comparisons(entries, noise.noise(entries, 0.02), 0.02)
    verdicts.decide_time(comparisons, 0.02)
    slow = {"s1", "s2"}
    return [c for c in comparisons if c.timed and "alone" in (c.a, c.b) and not {c.a, c.b} & slow]


@pytest.mark.slow  # 1,000 simulated sweeps, about 60 s
def test_strategies_sharing_processes_give_the_pooled_variance_the_df_of_their_processes():
    """A shared process's offset is in every figure it gave: six strategies' sums of squares
    over 3 shared processes are worth about 2 df, not 2 each (``stats.shared_df``). ``alone``
    against each of five twins, judged by the pooled variance (fewer than 4 processes a side),
    over 1,000 seeds: with the df counted per strategy (15), the 95% interval covered the truth
    in 85.2% and a twin was lower/higher in 2.46% of 5,000 comparisons; with the shared df
    (2), 97.1% and 0.62% by the margin's claims alone; with direction against 1 at a twentieth
    of alpha besides, 0.82% (seeds 0-299 alone: 1.27%, too few for a 1% line: so 1,000)."""
    covered = false = total = 0
    for seed in range(1000):
        for c in _rotated_sweep(seed):
            total += 1
            covered += c.ci_low <= 1.0 <= c.ci_high
            false += c.verdict in ("lower", "higher")
    assert covered / total >= 0.93, f"coverage {covered / total:.3f}"
    assert false / total <= 0.01, f"twins called different in {false} of {total}"


@pytest.mark.slow  # 500 simulated sweeps of 21 comparisons, about 10 s
def test_a_true_2_2_percent_at_a_half_width_of_0_6_percent_is_higher_and_twins_are_not():
    """Issue 62: the rule of the margin called a true 2.2% ``higher`` in about 10% of sweeps
    at a 95% half-width of 0.6% (its interval must clear 2%). Deciding direction against ratio
    1 (at a twentieth of alpha) calls it in 90% or more; ten twins beside it, and ten 30%
    slower (so that Benjamini-Hochberg does not shield the twins), are lower/higher in at most
    1%. Measured, seeds 0-499: the 2.2% higher in 496, the twins lower/higher in 0 of 5,000."""
    df, half = 20.0, 0.006
    se = half / float(stats.sps.t.ppf(0.975, df))
    truths = [math.log(1.022)] + [0.0] * 10 + [math.log(1.3)] * 10
    found = twins = 0
    for seed in range(500):
        rng = np.random.default_rng(seed)
        comparisons = []
        for truth in truths:
            c = Comparison("a", "b", 1, 0, {}, "window", processes=[10, 10])
            estimate = truth + se * rng.standard_t(df)
            comparisons.append(c.measured(stats.interval(estimate, se**2, df)))
        verdicts.decide_time(comparisons, 0.02)
        found += comparisons[0].verdict == "higher"
        twins += sum(c.verdict in ("lower", "higher") for c in comparisons[1:11])
    assert found / 500 >= 0.9, f"the true 2.2% called higher in {found} of 500"
    assert twins / 5000 <= 0.01, f"twins called different in {twins} of 5000"


def _three_processes(seed: int, interaction: float, noisy: bool) -> list[tuple[Comparison, float]]:
    """Issue 62's rotation: six strategies sharing 3 processes of 12 pairs (pair SD 1.5%), each
    process's offset (SD 1%) in every figure it gave, a strategy-by-process interaction of
    SD ``interaction``; ``slow`` truly 3% slower than the five others; ``noisy``: one of them,
    ``t4``, three times as noisy pair to pair. Its window comparisons, decided, each with its
    true log ratio."""
    rng = np.random.default_rng(seed)
    truth = {"t0": 0.0, "t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 0.0, "slow": math.log(1.03)}
    rows: dict[str, list[dict]] = {s: [] for s in truth}
    for r in range(3):
        offset = rng.normal(0, 0.01)
        for s, log_true in truth.items():
            sd = 0.045 if noisy and s == "t4" else 0.015
            shift = log_true + offset + rng.normal(0, interaction)
            row = pairs_row(s, r, shift + rng.normal(0, sd, 12))
            rows[s].append({**row, "process_id": f"rot-r{r}"})
    entries = [window_entry(v) for v in rows.values()]
    comparisons = verdicts.strategy_comparisons(entries, noise.noise(entries, 0.02), 0.02)
    verdicts.decide_time(comparisons, 0.02)
    return [(c, truth[c.a] - truth[c.b]) for c in comparisons if c.timed]


@pytest.mark.slow  # 2 x 200 simulated sweeps of 15 comparisons, about 80 s
@pytest.mark.parametrize("noisy", [False, True], ids=["alike", "one-noisier"])
def test_strategies_rotated_in_three_processes_are_judged_within_them(noisy):
    """Issue 62: six strategies rotated in 3 processes (pair SD 1.5%, process offset 1%,
    interaction 0.5%). Pooled over processes with their shared df, a true 3% was decided in
    about 8% of sweeps; judged within the processes (the two-way fit: the offset cancels, the
    residual df 10, guarded by the compared pair's own residuals, floored at the pairs') it is
    decided in at least 80% (where one strategy is three times noisier, its residuals widen
    every comparison's guard: 60% at the least), its intervals cover the truth in at least 94%,
    and twins are lower/higher in at most 1%."""
    decided = covered = total = twins = pairs = 0
    for seed in range(200):
        for c, truth in _three_processes(seed, 0.005, noisy):
            total += 1
            covered += c.ci_low <= math.exp(truth) <= c.ci_high
            if c.a == "slow" and c.b != "t4":  # "slow" sorts first: a 3% slower a is higher
                decided += c.verdict == "higher"
            elif "slow" not in (c.a, c.b):
                pairs += 1
                twins += c.verdict in ("lower", "higher")
    measured = f"decided {decided} of 800, coverage {covered / total:.3f}, twins {twins} of {pairs}"
    assert decided / 800 >= (0.6 if noisy else 0.8), measured
    assert covered / total >= 0.94, measured
    assert twins / pairs <= 0.01, measured
