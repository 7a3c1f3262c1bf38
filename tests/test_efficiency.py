"""Efficiency (``reports.judge.efficiency``): the half-width a sweep's time comparisons reached
against the one its wall would give were it all timed rounds; exact on made-up rows, and
printed, recorded in run.json and shown on the page of a real sweep."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from synthetic import entry

from reports.judge.efficiency import Z95, efficiency
from reports.schema.verdict_records import Comparison

LOGS = np.array([0.1, -0.1, 0.2, -0.2, 0.0, 0.05, -0.05, 0.0])  # one pair's log ratios


def timed_row(round_: int, timed_s: float, total_s: float) -> dict:
    plain = [0.01] * LOGS.size
    return {
        "case_id": f"x-r{round_}",
        "process_id": f"x-r{round_}",
        "round": round_,
        "samples": {"window": (0.01 * np.exp(LOGS)).tolist(), "plain_window": plain},
        "wall_s": {"timed_pairs": timed_s, "total": total_s, "warmup": total_s - timed_s},
    }


def comparison(low: float, high: float, **given) -> Comparison:
    case = {"grad_sync": "last", "precision": "fp32", "checkpointing": "off"}
    case |= {"optimizer": "adamw", "clip_norm": None, "compile": False, "compare_settings": ""}
    return Comparison(
        a="lazy", b="native", k=1, n=0, case=case, metric="window", ci_low=low, ci_high=high,
        **given,
    )  # fmt: skip


def test_efficiency_is_the_ideal_half_width_over_the_median_reached():
    # two strategies, a process each of 8 pairs: a pair of each costs 0.5 s, a round 1 s
    entries = [entry(s, [timed_row(0, 4.0, 10.0)]) for s in ("native", "lazy")]
    widths = [0.02, 0.04, 0.10]  # log half-widths: the median is 0.04
    judged = [comparison(math.exp(-w), math.exp(w)) for w in widths]
    judged.append(comparison(None, None))  # no interval: not counted
    (found,) = efficiency(entries, judged, sweep_s=100.0)
    s2 = float(LOGS.var(ddof=1))
    ideal = Z95 * math.sqrt(2 * s2 * 1.0 / 100.0)
    assert (found.k, found.n, found.comparisons) == (1, 0, 3)
    assert found.c_round == pytest.approx(1.0)
    assert found.s2_pair == pytest.approx(s2)
    assert found.ideal == pytest.approx(math.expm1(ideal))
    assert found.reached == pytest.approx(math.expm1(0.04))
    assert found.efficiency == pytest.approx(ideal / 0.04)
    # four times the wall: the ideal half as wide, the efficiency halved
    (longer,) = efficiency(entries, judged, sweep_s=400.0)
    assert longer.efficiency == pytest.approx(found.efficiency / 2)
    # without the sweep's clock, the processes' seconds (20 s)
    (alone,) = efficiency(entries, judged, sweep_s=None)
    assert alone.wall_s == pytest.approx(20.0)


def test_a_group_without_an_interval_has_no_efficiency():
    entries = [entry(s, [timed_row(0, 4.0, 10.0)]) for s in ("native", "lazy")]
    (found,) = efficiency(entries, [comparison(None, None)], sweep_s=50.0)
    assert found.reached is None and found.efficiency is None and found.comparisons == 0


def test_a_real_sweep_prints_records_and_shows_its_efficiency(real_sweep):
    run = json.loads((real_sweep / "run.json").read_text())
    recorded = run["wall"]["efficiency"]
    assert {(e["k"], e["n"]) for e in recorded} == {(1, 0), (2, 0)}
    for e in recorded:
        assert e["ideal"] > 0 and e["c_round"] > 0 and e["s2_pair"] > 0
        assert e["wall_s"] == pytest.approx(run["wall"]["sweep_s"])
        if e["reached"] is not None:
            ideal, reached = math.log1p(e["ideal"]), math.log1p(e["reached"])
            assert e["efficiency"] == pytest.approx(ideal / reached)
    html = (real_sweep / "index.html").read_text()
    assert '<dt id="efficiency">efficiency</dt>' in html
