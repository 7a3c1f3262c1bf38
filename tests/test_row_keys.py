"""The rows the engine writes keep their keys, kind by kind: ``tests/row_keys.json`` holds the
keys each kind of row had on disk before the engine built its rows as records (``Row`` and the
``row_parts`` records); a key lost, renamed or added fails here, naming it."""

from __future__ import annotations

import json

import pytest
from row_keys import EXPECTED, kind_of, mismatches, run, swept

KEYS = json.loads(EXPECTED.read_text())
ONE_PROCESS = (
    *("profiled", "time-only", "rotated", "profile-failed", "failed", "failed-launch"),
    "shared-alone",
)


def test_a_sweeps_rows_and_its_controls_keep_their_keys(real_sweep):
    kinds = swept(real_sweep)
    for kind, rows in kinds.items():
        assert rows, kind
        for row in rows:
            assert mismatches(row, KEYS[kind_of(kind, row)]) == [], (kind, row["case_id"])
    # the check bites: a key renamed, in the row or in a part, is named
    row = json.loads(json.dumps(kinds["ok"][0]))
    row["memory"]["held"] = row["memory"].pop("held_bytes")
    row["tokens"] = row.pop("tokens_per_window")
    assert mismatches(row, KEYS["ok"]) == [
        "missing tokens_per_window",
        "unexpected tokens",
        "missing memory.held_bytes",
        "unexpected memory.held",
    ]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """Every kind of row of one process, each case run as the sweep runs it."""
    return run(tmp_path_factory.mktemp("kinds"))


@pytest.mark.slow  # every kind of case run for real, about 25 s: nox -s tests stays under 5 min
@pytest.mark.parametrize("kind", ONE_PROCESS)
def test_every_kind_of_row_keeps_its_keys(kinds, kind):
    assert kinds[kind]
    for row in kinds[kind]:
        assert mismatches(row, KEYS[kind]) == [], row["case_id"]


@pytest.mark.slow
def test_rows_under_ranks_keep_their_keys(tmp_path):
    for kind, rows in run(tmp_path, ranks=True).items():
        assert rows, kind
        for row in rows:
            assert row["status"] == "ok", row["error"]
            assert mismatches(row, KEYS[kind]) == [], (kind, row["case_id"])
