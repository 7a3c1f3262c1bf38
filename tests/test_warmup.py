"""Warm-up until steady (benches/engine/warmup.py): the rule on planted pair times, its cap, and
ranks that stop together."""

from __future__ import annotations

from benches.engine import warmup


def run(times: list[float], least: int = 1, agree=None, timed: int = 40) -> list[float]:
    return warmup.warm_up(lambda i: times[i], least, agree, timed=timed)


def test_warm_up_stops_once_a_pair_is_no_longer_faster_than_the_one_before():
    # 17%, 7%, 3% faster pair by pair (a rotated process's first rounds here), then steady
    assert run([1.17, 1.067, 1.028, 0.999, 1.0, 1.0]) == [1.17, 1.067, 1.028, 0.999, 1.0]
    assert run([1.0, 1.01, 0.5]) == [1.0, 1.01]  # two pairs at the least: one cannot drift
    assert run([1.0, 0.985, 0.9]) == [1.0, 0.985]  # within the 2% drift


def test_warm_up_runs_warmup_pairs_at_the_least_and_stops_at_its_cap():
    assert len(run([1.0] * 20, least=5)) == 5
    falling = [1.0 - 0.05 * i for i in range(20)]  # never steady
    assert len(run(falling, least=3, timed=0)) == 3  # --warmup at the least
    # a quarter of the pairs the process will time
    assert len(run(falling, least=2, timed=24)) == 6
    # a process of 2 timed rounds warms up 1: the cap stops the test, which needs 2
    assert len(run(falling, least=1, timed=2)) == 1


def test_ranks_stop_warming_up_at_the_same_pair():
    """A rank steady after two pairs keeps warming up while another is not: stopping apart,
    they would wait on each other's collectives for ever."""
    others = iter([False, False, True])  # the other rank's verdicts, pair 2, 3 and 4
    asked: list[bool] = []

    def agree(mine: bool) -> bool:
        asked.append(mine)
        theirs = next(others) if len(asked) >= 3 else False  # asked before each pair
        return mine and theirs

    assert run([1.0, 1.0, 1.0, 1.0, 1.0], agree=agree) == [1.0] * 4
    assert asked == [False, False, True, True, True]


def test_a_noisy_window_is_steady_within_its_own_spread():
    """Pairs that vary 10% pair to pair with no trend stop where a 2% tolerance would run on
    to the cap: the tolerance is twice the pairs' own spread."""
    noisy = [1.3, 1.0, 1.1, 0.95, 1.08, 0.92, 1.05, 0.9, 1.1, 0.9, 1.1, 0.9]
    assert warmup.tolerance(noisy[:5]) > 0.1
    assert len(warmup.warm_up(lambda i: noisy[i], 2, timed=40)) < len(noisy)
    assert warmup.tolerance([1.3, 1.0, 1.0, 1.0, 1.0]) == warmup.DRIFT


def test_the_windows_run_before_count_and_a_learned_count_runs_untested():
    calls: list[int] = []

    def pair(i: int) -> float:
        calls.append(i)
        return 1.0

    # the check's windows: a cold one, then steady: no warm-up pair more
    assert warmup.warm_up(pair, 2, timed=10, before=[1.3, 1.0, 1.0]) == [1.3, 1.0, 1.0]
    assert calls == []
    # a time-only process runs what its group's checked process needed, however they look
    assert warmup.needed([1.3, 1.0, 1.0], 2) == 1
    assert warmup.warm_up(pair, 2, timed=10, learned=1) == [1.0] and calls == [0]
    # one that stopped at its cap needed all of them
    assert warmup.needed([1.3, 1.2, 1.1, 1.0], 2) == 4
