"""Warm-up until steady (benches/engine/warmup.py): the rule on planted pair times, its cap, and
ranks that stop together."""

from __future__ import annotations

from benches.engine import warmup


def run(times: list[float], least: int = 1, agree=None) -> list[float]:
    return warmup.warm_up(lambda i: times[i], least, agree)


def test_warm_up_stops_once_a_pair_is_no_longer_faster_than_the_one_before():
    # 17%, 7%, 3% faster pair by pair (a rotated process's first rounds here), then steady
    assert run([1.17, 1.067, 1.028, 0.999, 1.0, 1.0]) == [1.17, 1.067, 1.028, 0.999, 1.0]
    assert run([1.0, 1.01, 0.5]) == [1.0, 1.01]  # two pairs at the least: one cannot drift
    assert run([1.0, 0.985, 0.9]) == [1.0, 0.985]  # within the 2% drift


def test_warm_up_runs_warmup_pairs_at_the_least_and_stops_at_its_cap():
    assert len(run([1.0] * 20, least=5)) == 5
    falling = [1.0 - 0.05 * i for i in range(20)]  # never steady
    assert len(run(falling, least=3)) == 3 + warmup.CAP


def test_ranks_stop_warming_up_at_the_same_pair():
    """A rank steady after two pairs keeps warming up while another is not: stopping apart,
    they would wait on each other's collectives for ever."""
    others = iter([False, False, True])  # the other rank's verdicts, pair 2, 3 and 4
    asked: list[bool] = []

    def agree(mine: bool) -> bool:
        asked.append(mine)
        theirs = next(others) if len(asked) >= 2 else False
        return mine and theirs

    assert run([1.0, 1.0, 1.0, 1.0, 1.0], agree=agree) == [1.0] * 4
    assert asked == [False, True, True, True]
