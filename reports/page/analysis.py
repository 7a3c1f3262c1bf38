"""What a report says, computed from a sweep's rows: the page's data assembled from the
run (``runinfo``), the verdicts (``verdicts``), the answer (``answer``) and the tables
(``tables``, ``recipe``, ``profile``, ``targets``).

The page is a ``page.records.Page`` (figures in seconds and bytes) so that the HTML template
and the sweep's terminal tables only format it, and the tests can check the figures without a
browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import structs

from reports.judge import decision, noise, targets, verdicts
from reports.judge.efficiency import efficiency
from reports.judge.rows import pooled, read, strategy_order
from reports.page import frameworks, profile
from reports.page.answer import answer, default_case, full_sweep, reset_slopes, unseen
from reports.page.recipe import (
    check_summary,
    error_table,
    precision_order,
    recipe,
    settings_table,
)
from reports.page.records import Page, shallow
from reports.page.runinfo import control_of, min_effect_of, run_info, the_run
from reports.page.tables import (
    case_table,
    core_overheads,
    cost_table,
    flamegraphs,
    flavour_table,
    timelines,
    where_it_ran,
)
from reports.schema.records import RunFile
from reports.schema.settings import main_values
from reports.schema.verdict_records import VerdictFile


def judge_sweep(entries, run: RunFile, main: dict[str, Any]) -> tuple[VerdictFile, VerdictFile]:
    """verdicts.json's content (every flavour and precision), and the part the tables show
    (the main flavour's and precision's comparisons)."""
    added = [r.round for e in entries for r in e.rows if r.time_only and not r.control]
    taken = run.taken(added)
    judged_all = verdicts.verdicts(
        entries, min_effect_of(run), run.looks, control_of(run), taken, decided=run.decided()
    )
    judged_all.decisions = decision.decisions(entries, judged_all)
    judged_all.decision_rule = decision.RULE
    shown = [
        c
        for c in judged_all.comparisons
        if all(c.case.get(name) == value for name, value in main.items())
    ]
    return judged_all, structs.replace(judged_all, comparisons=shown)


def build_lines(judged: VerdictFile) -> list[dict[str, Any]]:
    """--base: one line per case of the tables (the main flavour and precision) with its
    comparisons of the working tree against the base build, by metric."""
    lines: dict[tuple, dict[str, Any]] = {}
    for c in verdicts.head_against_base(judged):
        line = lines.setdefault((c.k, c.n, c.a), {"strategy": c.a, "k": c.k, "n": c.n})
        line[c.metric] = c
    return [
        lines[key] for key in sorted(lines, key=lambda kn: (kn[0], kn[1], strategy_order(kn[2])))
    ]


def report(directory: str | Path) -> Page:
    """Everything index.html shows, in the order it shows it; verdicts.json's content too."""
    directory = Path(directory)
    rows = read(directory)
    run = run_info(directory)
    every_case = pooled(rows)
    every = list(every_case.values())
    # strategies are compared within one grad_sync flavour: the tables show the main one ("last",
    # what DDP's no_sync does), the flavour section every one (verdicts.json holds them all)
    main = main_values(every)  # one value of each swept loop setting: grad_sync, precision, ...
    flavour, precision = main["grad_sync"], main["precision"]
    cases = {
        key: e
        for key, e in every_case.items()
        if all(noise.case_fields(e).get(name) == value for name, value in main.items())
    }
    entries = list(cases.values())
    page = the_run(directory, rows, run)
    chosen = default_case(run, entries)
    judged_all, judged = judge_sweep(every, run, main)
    page.wall.efficiency = efficiency(every, judged_all.comparisons, page.wall.sweep_s)
    lines = profile.with_traces(directory, case_table(entries, judged))
    return Page(
        **shallow(page),
        ks=sorted({e.k for e in entries}),
        ns=sorted({e.n for e in entries}),
        strategies=sorted({e.strategy for e in entries}, key=strategy_order),
        default=chosen,
        decisions=judged_all.decisions,
        decided=decision.agree(judged_all.decisions),
        decision_axes=decision.varying(judged_all.decisions),
        verdicts=judged,  # the main flavour's comparisons: what the tables show
        verdicts_json=judged_all,  # every flavour's: verdicts.json
        builds=build_lines(judged),
        base=str(page.sweep.get("base") or ""),
        base_missing=list(page.sweep.get("base_missing") or []),
        main=main,
        grad_sync=flavour,
        precision=precision,
        precisions=sorted({e.precision for e in every}, key=precision_order),
        recipe=recipe(rows, every, page.sweep),
        errors=error_table(every, main),
        grad_checks=check_summary(every),
        settings=settings_table(every, judged_all, main),
        flavours=flavour_table(every, judged_all, main),
        cases=lines,
        overheads=core_overheads(entries),
        overhead_limit=(targets.OVERHEAD_MAX, targets.OVERHEAD_CI_MAX),
        targets=targets.evaluate(cases, judged, every_case),
        flamegraphs=flamegraphs(directory, entries),
        profiles=profile.profiles(directory, entries, chosen),
        where=where_it_ran(rows, judged_all),
        **at_the_answer(entries, chosen, judged, lines),
    )


def at_the_answer(entries, chosen: tuple[int, int] | None, judged, cases) -> dict[str, Any]:
    """What the page shows at the answer's K and N, as ``Page`` fields: timelines, costs, the
    answer, slopes (none without a case that finished)."""
    if not chosen:
        return {}
    k, n = chosen
    said = answer(entries, k, n, judged)
    said.unseen = unseen(entries)
    if said.unseen:  # a shorter sweep: what the committed full sweep told apart here
        said.full_sweep = full_sweep(entries, k, n)
    here = [c for c in cases if (c.k, c.n) == (k, n)]
    paths = frameworks.path_lines(here, judged)
    return {
        "timelines": timelines(entries, k, n),
        "costs": cost_table(entries, k),
        "answer": said,
        "slopes": reset_slopes(entries, k),
        "default_cases": here,
        "paths": paths,
        "cheapest_path": frameworks.cheapest(paths, judged, k, n),
    }
