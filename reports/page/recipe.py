"""The training loop's side of a report: which precision the tables show, the window
gradient's error against K per strategy and precision, the gradient checks per precision, the
recipe every case ran with (optimizer, clip norm, compile, options, compile time, MFU), and the
``--compare-settings`` comparisons. Plain data, like ``reports.page.analysis``, which calls these.
"""

from __future__ import annotations

import statistics
from typing import Any

from reports.judge.rows import accepted, strategy_order
from reports.page.records import (
    CheckSummary,
    CompileTime,
    ErrorLine,
    LoopSetting,
    MfuLine,
    Recipe,
    SettingLine,
    StrategyOptions,
)
from reports.schema.records import Entry, Row
from reports.schema.row_parts import ErrorFigures
from reports.schema.settings import LOOP, SETTINGS, at_main, main_values, spell
from reports.schema.verdict_records import VerdictFile

PRECISION_ORDER = ("fp32", "bf16-autocast", "bf16")  # the order precisions are listed in


def precision_order(precision: str) -> tuple:
    known = precision in PRECISION_ORDER
    return (not known, PRECISION_ORDER.index(precision) if known else 0, precision)


def _case_order(e: dict[str, Any]) -> tuple:
    return (
        strategy_order(e.strategy),
        precision_order(e.precision),
        e.k,
        e.n,
    )


def error_table(entries: list[Entry], main: dict[str, Any]) -> list[ErrorLine]:
    """One line per strategy, precision and K (every precision, the main value of every other
    swept loop setting (``main``: the grad_sync flavour, ...), the smallest N): the window
    gradient's error figures from the case's first ok row (its other processes ran the same
    windows on the same data: the same figures), and its gradient check.
    Empty when no row has the figures (rows written before they existed)."""
    out: list[ErrorLine] = []
    seen: set[tuple] = set()
    for e in sorted(entries, key=_case_order):
        key = (e.strategy, e.precision, e.k)
        if not at_main(e, main, "precision") or key in seen:
            continue
        row = next((r for r in e.rows if r.accumulation_error), None)
        if row is None:
            continue
        seen.add(key)
        checks = [r.grad_check for r in e.rows if r.grad_check]
        out.append(
            ErrorLine(
                strategy=e.strategy,
                precision=key[1],
                k=e.k,
                n=e.n,
                accumulation=row.accumulation_error,
                total=row.total_error or ErrorFigures(),
                # against the reference that accepted each window (rows.accepted)
                tolerance=max((accepted(c)[1] for c in checks), default=None),
                check_max_rel=max((accepted(c)[0] for c in checks), default=None),
                check_by=sorted({accepted(c)[2] for c in checks}),
                check_ok=all(c.ok for c in checks) if checks else None,
                windows=min((c.windows or 1 for c in checks), default=None),
                total_reference=sorted({c.total_reference for c in checks if c.total_reference}),
            )
        )
    return out


def check_summary(entries: list[Entry]) -> list[CheckSummary]:
    """Per precision: how many ok cases' gradient checks passed (every strategy, K, N and
    flavour), the worst max relative difference and the range of tolerances (derived from the
    precision and K)."""
    out = []
    for precision in sorted({e.precision for e in entries}, key=precision_order):
        checks = [
            [r.grad_check for r in e.rows if r.grad_check]
            for e in entries
            if e.precision == precision and e.rows
        ]
        checks = [c for c in checks if c]
        if not checks:
            continue
        every = [c for case in checks for c in case]
        out.append(
            CheckSummary(
                precision=precision,
                cases=len(checks),
                passed=sum(all(c.ok for c in case) for case in checks),
                worst=max(accepted(c)[0] for c in every),
                tolerance_min=min(accepted(c)[1] for c in every),
                tolerance_max=max(accepted(c)[1] for c in every),
            )
        )
    return out


def _join(values) -> str:
    return ", ".join(str(v) for v in values)


def recipe(rows: list[Row], entries: list[Entry], sweep: dict[str, Any]) -> Recipe:
    """The training recipe every case ran with (optimizer, clip norm, compile,
    --compare-settings; each the same in every row of one sweep), strategy options, the
    compile time per strategy (median over its processes) and each case's MFU (where measured)."""
    ok = [r for r in rows if r.ok] or rows

    def values(key: str) -> list[Any]:
        found = []
        for row in ok:
            value = getattr(row, key)
            if value not in found:
                found.append(value)
        return found or [sweep.get(key)]

    compile_s: dict[str, list[float]] = {}
    mfu = []
    for e in sorted(entries, key=_case_order):
        for r in e.rows:
            if r.compile_s is not None:
                compile_s.setdefault(e.strategy, []).append(r.compile_s)
        figures = [r.mfu for r in e.rows if r.mfu]
        if figures:
            mfu.append(
                MfuLine(
                    strategy=e.strategy,
                    precision=e.precision,
                    k=e.k,
                    n=e.n,
                    value=statistics.median(f.value for f in figures),
                    peak_flops=figures[0].peak_flops,
                    measure=figures[0].measure,
                )
            )
    options = {e.strategy: (e.name, e.options) for e in entries if e.options}
    return Recipe(
        loop=loop_settings(entries, main_values(entries)),
        compile=any(bool(v) for v in values("compile")),
        compare_settings=_join(v for v in values("compare_settings") if v),
        options=[
            StrategyOptions(label, name, text)
            for label, (name, text) in sorted(options.items(), key=lambda x: strategy_order(x[0]))
        ],
        compile_s=[
            CompileTime(s, statistics.median(v), len(v))
            for s, v in sorted(compile_s.items(), key=lambda x: strategy_order(x[0]))
        ],
        mfu=mfu,
    )


#: loop settings "What was run" states in lines of their own (grad_sync: with the ranks)
OWN_LINES = ("grad_sync", "compile", "compare_settings")


def loop_settings(entries: list[Entry], main: dict[str, Any]) -> list[LoopSetting]:
    """Every loop setting the page states from its declaration alone (not ``OWN_LINES``): its
    values in the declaration's order of choices, else its default first, then as found."""
    out = []
    for f in SETTINGS:
        if f.name not in LOOP or f.name in OWN_LINES:
            continue
        found = list(dict.fromkeys(getattr(e, f.name) for e in entries))
        order = f.metadata["choices"] or (f.default,)
        found.sort(key=lambda v: order.index(v) if v in order else len(order))
        values = [spell(v) for v in found]
        shown = spell(main[f.name]) if f.name in main else ", ".join(values)
        label = f.name.replace("_", " ")
        out.append(LoopSetting(f.name, label, values, shown, swept=f.name in main))
    return out


def _fields(case: dict[str, Any]) -> tuple[str, str]:
    """(precision, grad_sync) of a verdict's ``case``."""
    return case.get("precision", "fp32"), case.get("grad_sync", "last")


def settings_table(
    entries: list[Entry], judged: VerdictFile, main: dict[str, Any]
) -> list[SettingLine]:
    """--compare-settings: one line per case (every precision and flavour, the main value of
    any other swept loop setting), its loop against the same strategy's loop with the other
    setting, as verdicts.json's ``settings`` states it, with the case's compile time (median
    over its processes; None without --compile)."""
    listed = ("precision", "grad_sync")
    by_case = {
        (e.strategy, e.precision, e.grad_sync, e.k, e.n): e
        for e in entries
        if at_main(e, main, *listed)
    }
    out = []
    for c in judged.settings:
        if not at_main(c.case, main, *listed):
            continue
        precision, flavour = _fields(c.case)
        e = by_case.get((c.strategy, precision, flavour, c.k, c.n))
        rows = e.rows if e else []
        compiled = [r.compile_s for r in rows if r.compile_s is not None]
        out.append(
            SettingLine(
                strategy=c.strategy,
                precision=precision,
                grad_sync=flavour,
                k=c.k,
                n=c.n,
                a=c.a,
                b=c.b,
                # "SETTING=VALUE" on both sides: the setting once, then each side's value
                setting=c.a.partition("=")[0],
                a_value=c.a.partition("=")[2],
                b_value=c.b.partition("=")[2],
                comparison=c,
                compile_s=statistics.median(compiled) if compiled else None,
            )
        )
    out.sort(
        key=lambda line: (
            strategy_order(line.strategy),
            precision_order(line.precision),
            line.grad_sync,
            line.k,
            line.n,
        )
    )
    return out
