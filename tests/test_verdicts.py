"""The statistics and the verdict rule, on figures whose answer the maths gives exactly."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from msgspec import structs
from synthetic import as_row, pairs_row, standard_rows, window_entry, window_row
from synthetic import entry as entry_of

from reports.judge import claims, noise, stats, verdicts, wording
from reports.schema.records import Paired
from reports.schema.verdict_records import Comparison, Verdict


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 4, 2.776),
        (0.995, 8, 3.355),
        (0.975, 30, 2.042),
    ],
)
def test_student_t_quantiles(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-3)


def test_a_paired_ratio_with_few_pairs_says_it_has_no_95_percent_ci():
    result = stats.paired([stats.log_ratios([2.0, 2.2, 1.8], [1.0, 1.0, 1.0])])
    assert result["confidence"] is None and "fewer than 6 pairs" in result["method"]
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((1.8, 2.2))
    assert result["ratio"] == pytest.approx(math.exp(np.mean(np.log([2.0, 2.2, 1.8]))))


def test_a_paired_ratio_is_the_trimmed_mean_of_log_ratios_with_a_bootstrap_ci():
    a = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 100.0]  # one window hit by a neighbour
    b = [1.0] * 10
    result = stats.paired([stats.log_ratios(a, b)])
    logs = np.sort(np.log(a))[2:8]  # 20% cut from each end of 10
    assert result["ratio"] == pytest.approx(math.exp(logs.mean()))
    assert result["confidence"] == 0.95 and "one process" in result["method"]
    assert result["ci_low"] < result["ratio"] < result["ci_high"]
    two = stats.paired([stats.log_ratios(a[:5], b[:5]), stats.log_ratios(a[5:], b[5:])])
    assert "2 processes resampled, then pairs" in two["method"]


def test_identical_processes_give_ratio_one_between_them():
    logs = np.log([1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0])
    a, b = stats.paired([logs], seed=1), stats.paired([logs], seed=2)
    between = stats.ratio_between(a, b)
    assert between["ratio"] == pytest.approx(1.0)
    assert between["ci_low"] < 1 < between["ci_high"]


@pytest.mark.parametrize(
    ("low", "high", "floor", "word"),
    [
        (1.10, 1.20, 0.05, "higher"),
        (1.04, 1.20, 0.05, "unclear"),  # beyond min_effect but not beyond the noise floor
        (0.80, 0.90, 0.05, "lower"),
        (0.99, 1.01, 0.05, "same"),
        (0.97, 1.01, 0.05, "unclear"),  # crosses 1 / (1 + min_effect)
        (0.90, 0.96, 0.05, "unclear"),  # 0.96 is not below 1 / 1.05
        (1 / 0.96, 1 / 0.90, 0.05, "unclear"),  # its mirror
        (1.03, 1.04, 0.0, "higher"),  # beyond min_effect, floor 0
        (1.01, 1.03, 0.0, "unclear"),
    ],
)
def test_the_verdict_rule(low, high, floor, word):
    assert verdicts.decide(low, high, 0.02, floor) == word
    # a / b and b / a always get mirrored words, whatever order the names sort in
    assert verdicts.decide(1 / high, 1 / low, 0.02, floor) == Verdict(word).mirrored


@pytest.mark.parametrize(
    ("a", "b", "word"),
    [
        (100, 100, "same"),
        (101, 100, "same"),
        (110, 100, "higher"),
        (0, 100, "lower"),
        (0, 0, "same"),
    ],
)
def test_exact_memory_verdicts(a, b, word):
    result = verdicts.decide_exact(a, b, 0.02)
    assert result["verdict"] == word and result["ci_low"] is None


def test_a_memory_difference_inside_the_measured_memory_floor_is_unclear():
    assert verdicts.decide_exact(110, 100, 0.02, floor=0.15)["verdict"] == "unclear"
    assert verdicts.decide_exact(100, 110, 0.02, floor=0.15)["verdict"] == "unclear"
    assert verdicts.decide_exact(130, 100, 0.02, floor=0.15)["verdict"] == "higher"


def test_the_memory_floor_is_the_spread_of_identical_loops_between_processes():
    def entry(strategy, peaks, plain_peaks):
        rows = [
            {"memory": {"peak_bytes": p, "held_bytes": 10, "plain_peak_bytes": q}}
            for p, q in zip(peaks, plain_peaks, strict=True)
        ]
        return entry_of(strategy, rows)

    exact = [entry("a", [100], [90]), entry("b", [120], [90])]
    assert noise.memory_floors(exact) == {"peak_memory": 0.0, "held_memory": 0.0}
    # the plain loop's peak moved 10% between processes (gloo's threads): a 10% floor
    moved = [entry("a", [100, 100], [90, 100]), entry("b", [120], [95])]
    assert noise.memory_floors(moved)["peak_memory"] == pytest.approx(0.10)


def test_a_groups_noise_is_the_pooled_variance_of_process_figures_with_its_df():
    entries = [
        window_entry([window_row("native", 1, 1.0), window_row("native", 1, 1.02, rnd=1)]),
        window_entry([window_row("block", 1, 1.5)]),
    ]
    (spread,) = noise.noise(entries, 0.02).values()
    # two processes of native: variance of (0, log 1.02) with df 1; block's one adds no df
    assert spread.variance == pytest.approx(math.log(1.02) ** 2 / 2)
    assert (spread.df, spread.processes, spread.strategies) == (1, 3, 2)
    assert spread.pooled_from == [] and spread.measured
    # at the level direction is decided (ALPHA x DIRECTION_SHARE, two-sided)
    level = 1 - stats.ALPHA * stats.DIRECTION_SHARE / 2
    half = stats.t_quantile(level, 1) * math.sqrt(spread.variance * 2 / 1.5)
    assert spread.resolution == pytest.approx(math.expm1(half))


def test_strategies_sharing_processes_pool_a_variance_worth_their_processes_df():
    """A rotated process's offset is in every strategy's figure there (``stats.shared_df``)."""
    offsets = {"p0": 0.03, "p1": -0.02, "p2": 0.01}
    shared = [{p: u + 0.001 * i * (j - 1) for j, (p, u) in enumerate(offsets.items())}
              for i in range(7)]  # fmt: skip
    variance, df = stats.pooled_variance([*shared, [0.02, -0.01]])
    # the offsets dominate: about the distinct processes less one (2 + 1), not 7 x 2 + 1 = 15
    assert df == 2 and variance == pytest.approx(
        (sum(((np.array(list(g.values())) - np.mean(list(g.values()))) ** 2).sum() for g in shared)
         + 0.03**2 / 2) / 15)  # fmt: skip
    # two strategies sharing one process, each with one of its own: no residual df, the lowest
    assert stats.pooled_variance([{"a": 0.01, "b": 0.03}, {"a": 0.02, "c": -0.01}])[1] == 1
    # nothing shared: the count, as before; figures of their own (no offset in common): near it
    assert stats.pooled_variance([[0.01, 0.02, 0.0], [0.03, 0.01]])[1] == 3
    rng = np.random.default_rng(0)
    own = [{p: rng.normal(0, 0.03) for p in offsets} for _ in range(7)]
    assert stats.pooled_variance(own)[1] >= 10


def test_without_a_second_process_the_noise_is_unknown_and_time_is_never_decided():
    entries = [
        window_entry([window_row("native", 1, 1.0)]),
        window_entry([window_row("block", 1, 3.0)]),
    ]
    result = verdicts.verdicts(entries, 0.02)
    assert result.noise_floor[0].resolution is None
    window = [c for c in result.comparisons if c.metric == "window"]
    assert [c.verdict for c in window] == ["unclear"]


def test_a_group_without_df_borrows_from_its_settings_at_other_k_and_says_so():
    entries = [
        window_entry([window_row("native", 1, 1.0)]),
        window_entry([window_row("block", 1, 1.3)]),
        window_entry([window_row("native", 4, 1.0), window_row("native", 4, 1.01, rnd=1)]),
        window_entry([window_row("block", 4, 1.3)]),
    ]
    spreads = noise.noise(entries, 0.02)
    at = {key[0]: s for key, s in spreads.items()}
    assert at[1].pooled_from == [[4, 0]] and at[1].df == 1
    assert at[1].variance == pytest.approx(at[4].variance)
    assert at[4].pooled_from == []
    # another precision never lends: bf16 judges bf16
    bf16 = [structs.replace(e, precision="bf16") for e in entries[:2]]
    spreads = noise.noise([*bf16, *entries[2:]], 0.02)
    lone = next(s for key, s in spreads.items() if dict(key[2])["precision"] == "bf16")
    assert lone.df == 0 and lone.resolution is None


def test_process_within_is_yuens_standard_error_of_the_trimmed_mean():
    logs = np.array([0.3, -0.1, 0.0, 0.05, -0.2, 0.1])  # 20% of 6: one cut from each end
    winsorized = np.array([0.1, -0.1, 0.0, 0.05, -0.1, 0.1])
    expected = winsorized.var(ddof=1) * 5 / (4 * 3)
    assert stats.process_within(np.exp(logs), np.ones(6)) == pytest.approx(expected)
    assert stats.process_within([1.0, 2.0], [1.0, 1.0]) is not None  # no cut below 5 pairs
    assert stats.process_within([1.0], [1.0]) is None


def test_processes_that_agree_by_chance_never_give_an_interval_narrower_than_their_pairs():
    # each strategy's two processes hold the same noisy pairs in another order: their figures
    # agree exactly, so the variance between processes is 0, and the pairs' own spread (8% per
    # pair) is what is left. Without the floor, 0.5% apart would be a certain difference
    rng = np.random.default_rng(3)
    pairs = rng.normal(0, 0.08, 6)
    entries = [
        window_entry([pairs_row(s, r, rng.permutation(pairs) + shift) for r in range(2)])
        for s, shift in (("native", 0.0), ("twin", 0.005), ("lazy", 0.0))
    ]
    (spread,) = noise.noise(entries, 0.02).values()
    assert spread.between_sd == pytest.approx(0.0, abs=1e-12) and spread.df == 3
    within = stats.process_within(np.exp(pairs), np.ones(6))
    assert spread.within == pytest.approx(within) and spread.variance == spread.within
    result = verdicts.verdicts(entries, 0.02)
    (twin,) = [c for c in result.comparisons if {c.a, c.b} == {"native", "twin"} and c.timed]
    assert twin.se == pytest.approx(math.sqrt(within)) and twin.verdict == "unclear"
    assert result.noise_floor[0].to_json()["within_sd"] == pytest.approx(math.expm1(twin.se))


def test_the_margins_claim_first_then_direction_against_ratio_1_at_any_size():
    """``judge``: the margin's claim (``same`` inside it, ``higher``/``lower`` beyond it, by
    where the estimate lies) at alpha; otherwise the interval clear of 1 at the direction's
    level (0.4 of alpha where the 95% interval is no wider than the margin, a twentieth where
    it is wider) is ``lower``/``higher`` at any size; neither is ``unclear``."""
    c = Comparison("a", "b", 1, 0, {}, "window", ci_low=1.005, ci_high=1.015, df=20,
                   log=math.log(1.01), ci90_low=1.006, ci90_high=1.014)  # fmt: skip
    assert verdicts.judge(c, 1e-6, 1e-6, 0.02) == "same"
    assert verdicts.judge(c, 0.3, 1e-4, 0.02) == "higher"  # 1% slower, clear of 1: decided
    assert verdicts.judge(structs.replace(c, log=-0.01), 0.3, 1e-4, 0.02) == "lower"
    assert verdicts.judge(c, 0.3, 0.01, 0.02) == "higher"  # narrow: clear of 1 at 2% is enough
    assert verdicts.judge(c, 0.3, 0.03, 0.02) == "unclear"  # not at 2%
    wide = structs.replace(c, ci_low=1.001, ci_high=1.06)  # wider than the margin: a twentieth
    assert verdicts.judge(wide, 0.3, 0.01, 0.02) == "unclear"
    assert verdicts.judge(wide, 0.3, 0.002, 0.02) == "higher"
    assert verdicts.judge(structs.replace(c, ci_low=None), 1e-6, 1e-6, 0.02) == "unclear"
    beyond = structs.replace(c, log=math.log(1.05))
    assert verdicts.judge(beyond, 0.01, 0.2, 0.02) == "higher"  # beyond the margin at alpha


def test_a_decided_direction_says_whether_it_clears_the_margin_and_unclear_says_why():
    def made(log: float, se: float) -> Comparison:
        c = Comparison("a", "b", 1, 0, {}, "window", processes=[20, 20])
        return c.measured(stats.interval(log, se**2, 38.0))

    # 1.8% slower, its interval 1.0-2.6%: neither inside the margin nor clear of it
    inside, beyond = made(math.log(1.018), 0.004), made(math.log(1.05), 0.002)
    # an interval wider than the margin; one as narrow as it reaching past it and to 1
    wide, edge = made(0.0, 0.02), made(math.log(1.01), 0.008)
    verdicts.decide_time([inside, beyond, wide, edge], 0.02)
    assert (inside.verdict, inside.beyond, inside.why) == ("higher", False, None)
    assert (beyond.verdict, beyond.beyond, beyond.why) == ("higher", True, None)
    assert wide.verdict == "unclear" and wide.why.startswith("too few data")
    assert edge.verdict == "unclear" and edge.why.startswith("on the margin")
    assert (wide.beyond, edge.beyond) == (None, None)
    assert beyond.to_json()["beyond"] is True and "beyond" not in wide.to_json()
    assert wide.to_json()["why"] == wide.why


def test_every_unordered_pair_once_per_metric_and_k():
    entries = [
        window_entry([window_row(s, k, 1.0), window_row(s, k, 1.0, rnd=1)])
        for s in ("a", "b", "c")
        for k in (1, 4)
    ]
    result = verdicts.verdicts(entries, 0.02)
    keys = [(c.a, c.b, c.k, c.metric) for c in result.comparisons]
    assert len(keys) == len(set(keys)) == 3 * 2 * len(verdicts.METRICS)
    assert {frozenset((a, b)) for a, b, _, _ in keys} == {
        frozenset(p) for p in (("a", "b"), ("a", "c"), ("b", "c"))
    }
    for c in result.to_json()["comparisons"]:
        assert {"a", "b", "k", "n", "case", "metric", "ratio", "ci_low", "ci_high"} <= set(c)
        assert {"significant", "verdict"} <= set(c)
    flipped = verdicts.lookup(result, "b", "a", 1, 0, "peak_memory")
    assert (flipped.a, flipped.b, flipped.verdict) == ("b", "a", "same")


def test_a_row_without_a_field_of_its_identity_is_refused_naming_file_line_and_field(tmp_path):
    import json

    from reports.judge.rows import SCHEMA_VERSION, SchemaError, read

    row = {"schema_version": SCHEMA_VERSION, "case_id": "x-k1", "status": "ok", "strategy": "x"}
    (tmp_path / "results.jsonl").write_text("\n" + json.dumps(row) + "\n")
    with pytest.raises(SchemaError, match=r"results.jsonl:2: row 'x-k1' has no field 'options'"):
        read(tmp_path)


def test_verdicts_json_is_read_and_written_by_its_record_key_for_key():
    """A sweep's verdicts.json read into the records and written back: the same JSON; a
    misspelled field fails at once, in a file and on a record."""
    import json

    from reports.judge.rows import pooled
    from reports.schema.records import RecordError, encode
    from reports.schema.verdict_records import VerdictFile

    entries = list(pooled(map(as_row, standard_rows(ks=(1,)))).values())
    data = json.loads(encode(verdicts.verdicts(entries, 0.02).to_json()))
    assert data["comparisons"] and data["memory_growth"] and data["overheads"]
    assert VerdictFile.from_json(data).to_json() == data
    missing = json.loads(json.dumps(data))
    del missing["comparisons"][0]["verdict"]  # never read as the default "unclear"
    with pytest.raises(RecordError, match="comparisons\\[0\\] has no field 'verdict'"):
        VerdictFile.from_json(missing)
    data["comparisons"][0]["verdcit"] = "lower"
    with pytest.raises(RecordError, match=r"comparisons\[0\]: .* unknown field `verdcit`"):
        VerdictFile.from_json(data)
    c = Comparison("a", "b", 1, 0, {}, "window")
    with pytest.raises(AttributeError):
        c.verdcit = "lower"  # type: ignore[attr-defined]


def test_a_ratio_and_its_interval_are_spelled_one_way_in_text_and_on_the_page():
    few = Paired.from_stats(stats.paired([stats.log_ratios([2.0, 2.2, 1.8], [1.0] * 3)]))
    assert wording.ratio_text(few) == "1.993 (bounds 1.800-2.200)"  # 3 pairs: no 95% CI
    assert wording.interval_text(few, short=True) == "bounds 1.800\u20132.200"
    c = Comparison("a", "b", 1, 0, {}, "window", ratio=1.02, ci_low=1.01, ci_high=1.03)
    c.confidence = 0.95
    assert wording.ratio_text(c) == "1.020 (95% CI 1.010-1.030)"
    assert wording.interval_text(c, short=True) == "1.010\u20131.030"
    memory = Comparison("a", "b", 1, 0, {}, "peak_memory", ratio=1.5)
    assert (wording.ratio_text(memory), wording.interval_text(memory)) == ("1.500", "exact")
    assert wording.ratio_text(None) == "-"


@pytest.mark.parametrize("n", [*range(1, 40), 101, 400])
def test_median_ci_is_the_order_statistic_interval_of_its_definition(n):
    """The largest j whose [x_(j), x_(n-j+1)] covers the median with 95%: P(j <= B <= n-j),
    B ~ Binomial(n, 1/2), summed term by term as its docstring defines it."""
    xs = [float(i) for i in range(n)]
    best = 1
    for j in range(1, n // 2 + 1):
        if sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2**n < 0.95:
            break
        best = j
    assert stats.median_ci(xs) == (xs[best - 1], xs[n - best])


# -- issue 49: alpha spent over the looks taken, each side's own floor, same under control --------
def test_a_comparison_too_near_the_margin_for_the_rounds_left_is_not_decidable():
    """The futility stop (``verdicts.decidable``): 8 processes a side, SE 1.5%, margin 2%. One
    more process a side gives SE 1.41%, the estimate moving by SD 0.5% meanwhile: clearing 1 at
    the direction's level (z 2.81) needs an estimate past 3.97%, and none can fall 1.645 SE
    inside a 2% margin."""

    def unclear(log, se=0.015):
        c = Comparison("a", "b", 1, 0, {}, "window", processes=[8, 8])
        return c.measured(stats.interval(log, se**2, 14.0))

    assert not verdicts.decidable(unclear(0.02), 1, 0.02)  # power about 0
    assert not verdicts.decidable(unclear(-0.02), 1, 0.02)  # the other way, the same
    assert verdicts.decidable(unclear(0.045), 1, 0.02)  # power about 85%
    assert verdicts.decidable(unclear(0.0, se=0.004), 4, 0.02)  # far inside: same is near
    # 24 more processes a side: SE 0.75%, the estimate moving by 1.3%: 2% is worth them
    assert verdicts.decidable(unclear(0.02), 24, 0.02)
    # no round left: nothing undecided is decidable; no interval yet: decidable while rounds are
    assert not verdicts.decidable(unclear(0.045), 0, 0.02)
    assert verdicts.decidable(Comparison("a", "b", 1, 0, {}, "window"), 1, 0.02)


def test_alpha_is_spent_over_the_looks_a_sweep_took():
    """Lan-DeMets, O'Brien-Fleming type: the interim looks' levels and the final one's add up
    to alpha whatever look the sweep stopped at; a sweep that looked once tests at alpha
    itself; the last of six looks keeps more than Bonferroni's share (0.05 / 6)."""
    assert claims.final_alpha(1, 6) == pytest.approx(stats.ALPHA)
    for taken in range(1, 7):
        interim = sum(claims.look_alpha(i, 6) for i in range(1, taken))
        assert interim + claims.final_alpha(taken, 6) == pytest.approx(stats.ALPHA)
    steps = [claims.look_alpha(i, 6) for i in range(1, 7)]
    assert all(0 < a < b for a, b in itertools.pairwise(steps))  # little spent early
    assert claims.final_alpha(6, 6) == pytest.approx(steps[-1])
    # 2 - 2 Phi(1.96 / sqrt(5 / 6)) spent by look 5: 0.0318, so the sixth keeps 0.0182
    assert claims.final_alpha(6, 6) == pytest.approx(0.0182, abs=1e-4)
    assert claims.final_alpha(6, 6) > stats.ALPHA / 6
    entries = [
        window_entry([window_row(s, 1, 1.0), window_row(s, 1, 1.0, rnd=1)]) for s in ("a", "b")
    ]
    once = verdicts.verdicts(entries, 0.02, 6, taken=1).error_control
    assert (once.looks, once.looks_taken, once.alpha_per_look) == (6, 1, pytest.approx(0.05))
    interim = verdicts.verdicts(entries, 0.02, 6, taken=2, final=False).error_control
    assert interim.alpha_per_look == pytest.approx(claims.look_alpha(2, 6))


def _noisy_rows(strategy: str, processes: int, pair_sd: float, seed: int, offset=0.0) -> list:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(processes):
        plain = 0.01 * np.exp(rng.normal(0, 0.002, 16))
        window = plain * np.exp(offset + rng.normal(0, pair_sd, 16))
        rows.append({**window_row(strategy, 1, 1.0, rnd=r), "samples": {
            "window": window.tolist(), "plain_window": plain.tolist()}})  # fmt: skip
    return rows


def test_a_quiet_pair_of_strategies_is_not_judged_by_a_noisy_thirds_pairs():
    """The H200 sample: global's one process (its reset varying 55-88 ms) raised every fp32
    comparison's SD 7.5x under a group-wide floor. Each side is floored at its own processes'
    pairs: adding a noisy third leaves a quiet pair's interval as it was."""
    quiet = [
        window_entry(_noisy_rows("native", 3, 0.001, 1)),
        window_entry(_noisy_rows("lazy", 1, 0.001, 2)),
    ]
    noisy = window_entry(_noisy_rows("global", 1, 0.3, 3, offset=0.2))

    def lazy_vs_native(entries):
        result = verdicts.verdicts(entries, 0.02)
        return verdicts.lookup(result, "lazy", "native", 1, 0, "window")

    alone, beside = lazy_vs_native(quiet), lazy_vs_native([*quiet, noisy])
    assert beside.se == pytest.approx(alone.se)
    assert beside.verdict == alone.verdict == "same"
    # the noisy side's own comparison carries its own floor: far wider
    result = verdicts.verdicts([*quiet, noisy], 0.02)
    assert verdicts.lookup(result, "global", "native", 1, 0, "window").se > 20 * alone.se


def test_same_is_adjusted_over_the_sweep_as_lower_and_higher_are():
    """One comparison whose 90% interval lies inside the margin (its own two one-sided tests at
    p 0.04) among nine that cannot tell: alone it is same; in the sweep's family its q is not
    below alpha, so it is unclear (the old rule called it same whatever the family)."""
    margin = math.log1p(0.02)

    def comparison(se):
        c = Comparison("a", "b", 1, 0, {}, "window")
        return c.measured(stats.interval(0.0, se**2, 30.0))

    # se such that the two one-sided tests give p = 0.04 at df 30
    se = margin / float(stats.sps.t.ppf(0.96, 30))
    alone = [comparison(se)]
    verdicts.decide_time(alone, 0.02)
    assert alone[0].p_same == pytest.approx(0.04, rel=1e-3) and alone[0].verdict == "same"
    family = [comparison(se), *(comparison(margin) for _ in range(9))]
    verdicts.decide_time(family, 0.02)
    # Benjamini-Hochberg: min(10 x 0.04, the next q) = the others' p_same (0.163 at 1 SE)
    assert family[0].q == pytest.approx(family[1].p_same) and family[0].verdict == "unclear"


def test_a_looks_decision_is_kept_where_the_report_would_leave_it_unclear():
    """An interim look decided ``higher`` at its level; the report, judging again at its own,
    leaves it unclear: it keeps the look's word and says so, where its own 95% interval still
    lies clear of 1. One whose interval now reaches 1, one the report decides otherwise, and
    one no look decided keep the report's word."""

    def unclear(a: str, b: str, low: float = 1.004) -> Comparison:
        c = Comparison("a", "b", 1, 0, {"preset": "tiny"}, "window", processes=[3, 3],
                       ci_low=low, ci_high=1.03, ci90_low=low + 0.002, ci90_high=1.028)  # fmt: skip
        return structs.replace(c, a=a, b=b, verdict=Verdict.UNCLEAR)

    looked = structs.replace(unclear("lazy", "native"), verdict=Verdict.HIGHER)
    decided = [verdicts.decision_of(looked, 2)]
    shown, other = unclear("lazy", "native"), unclear("block", "native")
    verdicts.kept([shown, other], decided, 0.02)
    assert shown.verdict == Verdict.HIGHER and "look 2" in shown.why
    assert other.verdict == Verdict.UNCLEAR
    reaches_one = unclear("lazy", "native", low=0.99)
    verdicts.kept([reaches_one], decided, 0.02)
    assert reaches_one.verdict == Verdict.UNCLEAR
    now_same = structs.replace(unclear("lazy", "native"), verdict=Verdict.SAME)
    verdicts.kept([now_same], decided, 0.02)
    assert now_same.verdict == Verdict.SAME
