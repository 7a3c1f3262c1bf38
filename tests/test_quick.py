"""--quick: a first answer in minutes, by changing the sweep's defaults only (a flag given
explicitly wins), and the shorter pytest-benchmark suites nox runs with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benches.sweep import cli


def resolved(tmp_path: Path, *argv: str):
    return cli.resolve(cli.build_parser().parse_args(["run", *argv, "--out", str(tmp_path)]))


def test_quick_changes_defaults_only(tmp_path):
    full = resolved(tmp_path / "full")
    assert (full.accumulate, full.live_tensors, full.budget) == ([1, 4], [0, 100_000], 600.0)
    quick = resolved(tmp_path / "quick", "--quick")
    assert (quick.accumulate, quick.live_tensors, quick.budget) == ([1], [0], 150.0)
    assert quick.quick and not full.quick
    assert quick.strategies == full.strategies  # every strategy
    assert (quick.rounds, quick.looks) == (1, full.looks)


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--accumulate", "4"], "accumulate", [4]),
        (["--live-tensors", "0,1000"], "live_tensors", [0, 1000]),
        (["--budget", "60"], "budget", 60.0),
        (["--rounds", "3"], "rounds", 3),
        (["--rounds", "3"], "budget", 0.0),
        (["--strategies", "block,lazy"], "strategies", ["block", "lazy"]),
    ],
)
def test_quick_gives_way_to_a_flag_given(tmp_path, argv, field, value):
    for i, order in enumerate((["--quick", *argv], [*argv, "--quick"])):
        assert getattr(resolved(tmp_path / str(i), *order), field) == value


def test_quick_is_a_sweep_flag_not_a_case_flag():
    with pytest.raises(cli.UsageError, match="--quick"):
        cli.build_parser().parse_args(["case", "--quick"])
