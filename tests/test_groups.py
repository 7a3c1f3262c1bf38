"""One group key (``settings.group_of``): the plan crosses every swept setting, an added round
rotates one group's strategies per process and never two groups', the budget's open groups and
the report's main values and case keys come from the same declaration."""

from __future__ import annotations

import itertools

from synthetic import entry, make_row, standard_rows, write_run

from benches.sweep import cli
from benches.sweep.budget import round_specs, wall_kind
from reports.page import analysis
from reports.schema import settings
from reports.schema.settings import at_main, group_of, group_of_record, main_values, variant

AXES = ("--accumulate", "1,4", "--live-tensors", "0,10", "--precision", "fp32,bf16-autocast")


def planned(tmp_path, *extra: str):
    argv = ["run", "--preset", "tiny", *AXES, "--strategies", "block,native,lazy,global"]
    args = cli.build_parser().parse_args([*argv, *extra, "--out", str(tmp_path)])
    return cli.cases(cli.resolve(args), "id", {})


def test_the_plan_crosses_every_swept_setting_and_each_group_has_every_strategy(tmp_path):
    specs = planned(tmp_path)
    groups = {group_of(s) for s in specs}
    assert len(groups) == 2 * 2 * 2  # K x N x precision
    expected = set(itertools.product((1, 4), (0, 10), ("fp32", "bf16-autocast")))
    assert {(g[0], g[1], g[settings.GROUP.index("precision")]) for g in groups} == expected
    for group in groups:
        here = {
            m.strategy for s in specs if group_of(s) == group and not s.control for m in s.members()
        }
        assert here == {"block", "native", "lazy", "global"}


def test_an_added_round_rotates_each_groups_strategies_in_a_process_of_their_own(tmp_path):
    first = [m for s in planned(tmp_path) if not s.control and s.round == 0 for m in s.members()]
    added = round_specs(first, 5, rotate=True)
    rotated = [s for s in added if s.rotation]
    # one rotated process per group (global alone beside it): two values of an axis never share
    assert len(rotated) == len({group_of(s) for s in first}) == 8
    assert len({group_of(s) for s in rotated}) == 8
    for lead in rotated:
        assert sorted(lead.rotation) == ["block", "lazy", "native"]
    # the expected wall time of a process is kept per group (and per rotation size)
    assert len({wall_kind(s) for s in added}) == 16


def test_a_verdict_records_group_is_the_cases_group(tmp_path):
    spec = planned(tmp_path)[0]
    case = {name: getattr(spec, name) for name in settings.LOOP}
    assert group_of_record(spec.accumulate, spec.live_tensors, case) == group_of(spec)


def test_the_tables_show_each_swept_loop_settings_default_when_swept_else_its_first_value():
    rows = [make_row("native")]
    fp32 = entry("native", rows, precision="fp32", grad_sync="last")
    bf16 = entry("native", rows, precision="bf16", grad_sync="every")
    shown = ("grad_sync", "precision")  # a swept loop setting added later has its own key too
    main = main_values([fp32, bf16])
    assert set(main) == set(settings.SWEPT_LOOP)
    assert {k: main[k] for k in shown} == {"grad_sync": "last", "precision": "fp32"}
    assert {k: main_values([bf16])[k] for k in shown} == {"grad_sync": "every", "precision": "bf16"}
    assert at_main(fp32, main) and not at_main(bf16, main)
    assert at_main(bf16, {"precision": "fp32"}, "precision")  # a table that lists precisions
    assert at_main({"precision": "fp32", "grad_sync": "last"}, main)  # a verdict's case
    assert variant(fp32) == "" and variant(bf16, "grad_sync") == " @bf16"
    assert variant(bf16) == " @grad_sync=every @bf16"


def test_the_page_keeps_two_values_of_a_swept_axis_apart(tmp_path):
    """Synthetic rows of every strategy at two precisions (the same figures): a decision per
    value, and the tables show each strategy once per K (the main value), never both values
    pooled or listed twice."""
    rows = standard_rows(ns=(0,))
    for row in standard_rows(ns=(0,)):
        row.update(precision="bf16", case_id=row["case_id"].replace("-tiny", "-bf16-tiny"))
        rows.append(row)
    report = analysis.report(write_run(tmp_path / "run", rows))
    decided = sorted((d.k, d.n, d.case["precision"]) for d in report.decisions)
    assert decided == sorted(itertools.product((1, 2), (0,), ("bf16", "fp32")))
    assert report.decision_axes == ["precision"]
    lines = [(c.strategy, c.k) for c in report.cases]
    assert len(lines) == len(set(lines)) == len(report.strategies) * 2
    for case in report.cases:  # each pooled from its fp32 rows alone
        fp32 = [r for r in rows if (r["strategy"], r["accumulate"]) == (case.strategy, case.k)]
        assert case.rounds == len([r for r in fp32 if r["precision"] == "fp32"])


def test_a_settings_values_are_in_their_order_numbers_by_value():
    assert settings.in_order({16, 8, 64}) == [8, 16, 64]  # not "16" before "8"
    assert settings.in_order({"last", "every"}) == ["every", "last"]


def test_every_swept_setting_is_a_group_of_its_own_per_value():
    """A swept setting declared without ``loop`` would pool its values' cases and give two of
    them one case id: ``settings`` refuses it where it is declared."""
    named = set(settings.GROUP) | {"strategy"}
    assert set(settings.SWEPT) <= named


def test_quick_keeps_the_sweeps_default_of_an_axis_it_does_not_set():
    import argparse

    from benches.sweep import arguments

    args = argparse.Namespace(quick=True, grad_sync=None, accumulate=None)
    assert arguments.swept(args, "grad_sync", "last") == "last"  # --quick sets no flavour
    assert arguments.swept(args, "accumulate", "1,4") == arguments.QUICK["accumulate"]
