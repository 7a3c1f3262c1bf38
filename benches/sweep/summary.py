"""The terminal table at the end of a sweep: each case's paired overhead and its verdicts."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reports.judge import decision
from reports.judge.wording import ratio_text, word_text
from reports.page import analysis
from reports.page.records import CaseMemory, Page
from reports.schema.row_parts import Summary


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


def _count(n: float | None) -> str:
    return "-" if n is None else str(n)


def print_summary(
    directory: Path, console: Console | None = None, report: Page | None = None
) -> None:
    """The terminal tables of DIR's page (``report``, when the caller has made it already)."""
    # rich truncates numbers at 80 columns when output goes to a pipe or a CI log: use 140
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    if report is None:
        report = analysis.report(directory)
    judged = report.verdicts
    console.print(case_table(report, directory))
    if report.flavours:
        console.print(flavour_table(report))
    if report.settings:
        console.print(settings_table(report))
    floors = judged.noise_floor
    varies = decision.varying(floors)  # the loop settings that differ between the groups
    resolution = ", ".join(
        f"K={f.k} N={f.n:,}"
        + "".join(f" {a}={f.case.get(a)}" for a in varies)
        + ": "
        + (f"{f.resolution:.1%}" if f.resolution is not None else "not measured")
        for f in floors
    )
    console.print(
        f"verdicts: same inside min-effect {judged.min_effect:.0%}, else higher/lower where "
        f"the interval is clear of 1 (beyond the margin where it clears that too), over the "
        f"sweep's {judged.error_control.comparisons} time comparisons (Benjamini-Hochberg); "
        f"resolution (the smallest difference this sweep tells apart) {resolution or '-'}"
    )
    if report.noisy:
        console.print(
            f"[yellow]warning[/yellow]: {len(report.noisy)} cases ran while other work held "
            f"the CPU ({noise_rule(report)}): their intervals are wider and the answer names "
            "them; a quiet machine or --threads 1 narrows them"
        )
    for line in build_lines(report):
        console.print(escape(line))
    for line in decision_lines(report):
        console.print(escape(line))
    answer = report.answer
    if answer:
        console.print(f"in detail (K={answer.k}, N={answer.n:,}): {escape(answer.advice)}")
    for target in report.targets:
        mark = "[green]PASS[/green]" if target.ok else "[red]FAIL[/red]"
        text = f"{target.target}: {target.value} (target {target.limit})"
        console.print(f"{mark} {escape(text)}")


def build_lines(report: Page) -> list[str]:
    """--base: each strategy's window, working tree against base, one line per case."""
    out = []
    for line in report.builds:
        c = line.get("window")
        if c is not None:
            word = word_text(c, report.verdicts.min_effect)
            out.append(
                f"working tree against base {report.base[:12]}: {line['strategy']} "
                f"K={line['k']} N={line['n']:,} window {word}, {ratio_text(c)}"
            )
    out += [f"measured at the working tree only: {m}" for m in report.base_missing]
    return out


def decision_lines(report: Page) -> list[str]:
    """The answer as verdicts.json's decisions say it: one line where every group chose the
    same strategy, else one line per group."""
    found = report.decisions
    if report.decided:
        return [f"answer: use {report.decided} at every setting measured ({len(found)} groups)"]
    out = []
    for d in found:
        where = f"K={d.k} N={d.n:,}" + "".join(f" {a}={d.case[a]}" for a in report.decision_axes)
        if d.use is None:
            out.append(f"answer at {where}: none. {d.why}")
            continue
        ties = ", ".join(s for s in d.ties if s != d.use) or "none"
        text = f"answer at {where}: use {d.use} (ties with {ties})"
        out.append(text + (f"; open: {'; '.join(d.open)}" if d.open else ""))
    return out


def case_table(report: Page, directory: Path) -> Table:
    """One line per case: its window, paired overhead, verdict against native, memory, check."""
    title = f"paired overhead per case ({escape(directory.name)})"
    if len(report.precisions) > 1:
        title = (
            f"paired overhead per case ({escape(directory.name)}; precision {report.precision}: "
            "verdicts.json holds every precision)"
        )
    table = Table(title=title, title_justify="left")
    columns = ["strategy", "K", "live", "window ms", "x plain loop (CI)", "vs native"]
    columns += ["held MiB", "peak MiB", "grad diff", "status"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("strategy", "status") else "right")
    for line in report.cases:
        window = line.phases.get("window", Summary())
        vs = (line.vs_native or {}).get("window")
        memory = line.memory or CaseMemory()
        check = line.grad_check
        status = "ok" if line.ok else "[red]failed[/red]"
        if line.noisy:
            status += " [yellow]noisy[/yellow]"
        table.add_row(
            escape(line.strategy),  # a plugin's label is data, never markup
            str(line.k),
            f"{line.n:,}",
            _ms(window.median_s),
            ratio_text(line.overhead),
            f"{ratio_text(vs)} {word_text(vs, report.verdicts.min_effect)}" if vs else "-",
            _mib(memory.held_bytes),
            _mib(memory.peak_bytes),
            f"{check.max_rel_diff:.1e}" if check else "-",
            status,
        )
    return table


def flavour_table(report: Page) -> Table:
    """Under DDP/FSDP2/HSDP: every grad_sync flavour, with its paired ratio against every."""
    table = Table(
        title=f"grad_sync flavours ({report.parallel}; the table above shows {report.grad_sync})",
        title_justify="left",
    )
    columns = ["strategy", "K", "live", "grad_sync", "window ms", "vs every (CI)"]
    columns += ["reduce-scatters", "all-reduces", "held MiB/rank", "peak MiB/rank"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("strategy", "grad_sync") else "right")
    for line in report.flavours:
        vs = line.vs_every
        collectives = line.collectives
        table.add_row(
            escape(line.strategy),  # a plugin's label is data, never markup
            str(line.k),
            f"{line.n:,}",
            line.grad_sync,
            _ms(line.window.median_s),
            f"{ratio_text(vs)} {word_text(vs, report.verdicts.min_effect)}" if vs else "-",
            _count(collectives.reduce_scatter),
            _count(collectives.allreduce),
            _mib(line.held_bytes),
            _mib(line.peak_bytes),
        )
    return table


def settings_table(report: Page) -> Table:
    """--compare-settings: each case's loop against the same strategy's loop with the other
    setting (every precision), its paired ratio and verdict (verdicts.json's ``settings``)."""
    compared = escape(report.recipe.compare_settings)
    table = Table(
        title=f"settings compared (--compare-settings {compared}; a / b window, paired in each "
        "process)",
        title_justify="left",
    )
    compiled = any(line.compile_s is not None for line in report.settings)
    setting = report.settings[0].setting
    columns = ["strategy", "precision", "K", "live", f"{setting}: a vs b", "a / b (CI)"]
    columns += ["verdict"]
    columns += ["compile s"] if compiled else []
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in ("K", "live", "a / b (CI)", "compile s") else "left",
        )
    for line in report.settings:
        c = line.comparison
        ratio = ratio_text(c)
        verdict = c.verdict + (" [yellow]noisy[/yellow]" if c.noisy else "")
        cells = [escape(line.strategy), line.precision, str(line.k), f"{line.n:,}"]
        cells += [escape(f"{line.a_value} vs {line.b_value}"), ratio, verdict]
        if compiled:
            cells.append("-" if line.compile_s is None else f"{line.compile_s:.2f}")
        table.add_row(*cells)
    return table


def noise_rule(report: Page) -> str:
    """The rule that called cases noisy, by the signal their rows had."""
    rules = {
        "psi": f"PSI: median CPU pressure above {report.noisy_pressure:.0%}",
        "involuntary_switches": "no PSI: involuntary context switches above "
        f"{report.noisy_switches:g}/s",
    }
    return "; ".join(rules[s] for s in report.noise_signals if s in rules) or "-"
