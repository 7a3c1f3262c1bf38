"""A real tiny sweep's rows, verdicts and pages (the sweep is run once per session:
tests/conftest.py's ``real_sweep`` and ``recipe_sweep``)."""

from __future__ import annotations

import json
import types

import pytest
from conftest import SWEEP_PAIRS, SWEEP_STRATEGIES
from synthetic import (
    WORDS,
    by_id,
    rows_of,
)

from benches.engine import rotation
from benches.sweep import budget
from reports.judge import decision, noise, verdicts
from reports.judge.rows import SCHEMA_VERSION, pooled, read
from reports.page import analysis
from reports.regressions import compare
from reports.schema import records, verdict_records
from reports.schema.row_parts import ErrorFigures


def test_real_sweep_rows_and_verdicts(real_sweep):
    rows = rows_of(real_sweep)
    assert {r["schema_version"] for r in rows} == {SCHEMA_VERSION}
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows if r["error"]]
    # the control (native) shares a process with lazy: its two extra processes are that one's
    assert len(rows) == 2 * (len(SWEEP_STRATEGIES) + 2 * 2)
    controls = [r for r in rows if r["control"]]
    assert len(controls) == 2 * 2 * 2 and {r["strategy"] for r in controls} == {"native", "lazy"}
    for row in rows:
        # a process of its own runs --repeat pairs; one its group's strategies share (native
        # and lazy, global never) whole turns of its rotation
        shared = row["process_id"] != row["case_id"]
        pairs = rotation.timed_rounds(6, 3) if shared else 6
        assert shared == (row["strategy"] != "global")
        assert len(row["samples"]["window"]) == len(row["samples"]["plain_window"]) == pairs
        if row["control"]:  # the control's extra processes only time (issue 49)
            assert row["time_only"] and row["memory"].get("held_bytes") is None
            continue
        assert row["memory"]["held_bytes"] >= 0 and row["memory"]["peak_bytes"] > 0
        assert row["grad_check"]["ok"] and row["grad_check"]["windows"] >= 2
    judged = json.loads((real_sweep / verdict_records.VERDICTS).read_text())
    assert len(judged["noise_floor"]) == 2
    assert all(f["measured"] and f["resolution"] is not None for f in judged["noise_floor"])
    assert len(judged["comparisons"]) == 2 * SWEEP_PAIRS * len(verdicts.METRICS)
    assert {c["verdict"] for c in judged["comparisons"]} <= set(WORDS)
    report = analysis.report(real_sweep)
    # rebuilt: the same, to the bit
    assert judged == json.loads(records.encode(report.verdicts_json.to_json()))
    # every strategy, the control's first process too, has its timeline and its cost model
    assert {t.label for t in report.timelines} == {*SWEEP_STRATEGIES, "plain loop"}
    assert {c.strategy for c in report.costs} == set(SWEEP_STRATEGIES)
    # the answer at the default K and N follows the verdicts, whatever this machine measured
    answer = report.answer
    k, n = report.default
    assert (answer.k, answer.n) == (k, n) == (1, 0)
    here = [r for r in rows if (r["accumulate"], r["live_tensors"]) == (k, n)]
    noisy = {r["strategy"] for r in here if r["cpu_pressure"]["median"] > noise.NOISY_PRESSURE}
    assert answer.under_pressure == sorted(noisy)  # stated, never left out (issue 49)
    assert answer.candidates <= len(SWEEP_STRATEGIES)
    here_noise = next(f for f in judged["noise_floor"] if (f["k"], f["n"]) == (k, n))
    assert answer.resolution == here_noise["resolution"]
    if answer.candidates >= 2:
        lead = answer.fastest.lead
        assert lead == verdicts.lookup(report.verdicts, lead.a, lead.b, k, n, "window")
        assert answer.advice.startswith("Use") == (lead.verdict == "lower")
        assert ("tie on speed" in answer.advice) == (lead.verdict != "lower")

        overheads = {
            o["strategy"]: o["ratio"] for o in judged["overheads"] if (o["k"], o["n"]) == (k, n)
        }
        slower = decision.slower_than_another(list(overheads), report.verdicts, k, n)
        quick = {s: r for s, r in overheads.items() if s not in slower} or overheads
        assert answer.fastest.strategy == min(quick, key=quick.get)


def test_real_sweep_compared_with_itself_on_a_slower_machine(real_sweep, tmp_path):
    """Every time of the real sweep doubled, strategy and plain loop alike: no verdict moves."""
    b = tmp_path / "b"
    b.mkdir()
    with open(real_sweep / "results.jsonl") as f, open(b / "results.jsonl", "w") as out:
        for line in f:
            row = json.loads(line)
            row["samples"] = {
                p: v if p == "cpu_pressure" else [x * 2 for x in v]
                for p, v in row["samples"].items()
            }
            out.write(json.dumps(row) + "\n")
    result = compare.comparison(real_sweep, b)
    assert len(result.lines) == 2 * len(SWEEP_STRATEGIES)
    for line in result.lines:
        assert line.window.ratio == pytest.approx(1.0, rel=1e-9)
        assert line.window.verdict not in ("lower", "higher"), line.window


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_recipe_sweep_shows_every_precision_and_the_settings_compared(recipe_sweep):
    out, stdout = recipe_sweep
    rows = rows_of(out)
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows if r["error"]]
    report = analysis.report(out)
    assert (report.precision, report.precisions) == ("fp32", ["fp32", "bf16"])
    errors = {(e.precision, e.k): e for e in report.errors}
    assert sorted(errors) == [("bf16", 1), ("bf16", 4), ("fp32", 1), ("fp32", 4)]
    for precision in ("fp32", "bf16"):  # one micro-batch: nothing added, nothing rounded
        assert errors[(precision, 1)].accumulation == ErrorFigures(max_rel=0.0, norm_rel=0.0)
    # a bf16 .grad rounds each addition at 2**-8, an fp32 one at 2**-24
    assert (
        errors[("bf16", 4)].accumulation.norm_rel > 100 * errors[("fp32", 4)].accumulation.norm_rel
    )
    for e in errors.values():
        assert e.check_ok and e.tolerance >= e.accumulation.max_rel, e
    judged = json.loads((out / verdict_records.VERDICTS).read_text())
    settings = judged["settings"]
    assert {(c["case"]["precision"], c["k"], c["a"], c["b"]) for c in settings} == {
        (p, k, f"precision={p}", "precision=bf16-autocast")
        for p in ("fp32", "bf16")
        for k in (1, 4)
    }
    html = (out / "index.html").read_text()  # the sweep's own page
    section = by_id(html, "settings")
    assert section.count("<tr>") == 1 + len(settings)
    assert section.count('class="verdict verdict-') == len(settings) + 1  # + the legend's word
    assert "<code>precision=bf16</code> vs <code>precision=bf16-autocast</code>" in section
    assert 'href="#settings"' in html and 'href="#accumulation-error"' in html
    assert by_id(html, "accumulation-error").count('data-chart="accumulation-error"') == 1
    run = by_id(html, "run")
    assert "swept: <code>fp32</code>, <code>bf16</code>; the tables show <code>fp32</code>" in run
    assert "<dt>optimizer</dt><dd><code>adamw</code>" in run
    assert "<dt>clip norm</dt><dd><code>none</code></dd>" in run
    assert "<dt>torch.compile</dt><dd>off" in run
    assert "<dt>--compare-settings</dt><dd><code>precision=bf16-autocast</code>" in run
    # the terminal summary's table of the same comparisons
    assert "settings compared (--compare-settings precision=bf16-autocast" in stdout
    assert stdout.count("bf16 vs bf16-autocast") == stdout.count("fp32 vs bf16-autocast") == 2


def test_a_look_judges_what_the_report_would_without_the_headline_bootstrap(real_sweep):
    """A look (``budget.look``) pools the rows without each case's headline ratio (its bootstrap
    was 85% of a look): at every look its verdicts are those of fully summarised entries."""
    sweep = types.SimpleNamespace(out=real_sweep, min_effect=0.02, looks=6, control="native")
    rows = read(real_sweep)
    summarised, bare = (list(pooled(rows, summarised=s).values()) for s in (True, False))

    def words(entries, taken):
        judged = verdicts.verdicts(entries, 0.02, 6, "native", taken=taken, final=False)
        return [(c.a, c.b, c.k, c.n, c.log, c.se, c.q, c.verdict) for c in judged.comparisons]

    for taken in (1, 2, 5):
        every = words(summarised, taken)
        assert every and every == words(bare, taken)
        found = budget.look(sweep, taken)
        unclear = [w for w in every if w[-1] == "unclear"]
        assert [(c.a, c.b, c.k, c.n, c.log, c.se, c.q, c.verdict) for c in found.comparisons] == (
            unclear
        )
        assert all(e.overhead.ratio is None for e in found.entries if e.rows)
