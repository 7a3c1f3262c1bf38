"""The terminal table at the end of a sweep: window time per case and its ratio to baseline."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reports import analysis, targets
from reports.rows import pooled, read

NOISY_PRESSURE = 20.0  # % of time a runnable task waited for a CPU (Linux PSI, avg10)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def print_summary(directory: Path, console: Console | None = None) -> None:
    # rich truncates numbers at 80 columns when output goes to a pipe or a CI log: use 140
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    table = Table(title=f"window time per case ({directory.name})", title_justify="left")
    rows = read(directory)
    cases = pooled(rows)
    lines = analysis.case_table(list(cases.values()))
    distributed = any("sync" in line.get("phases", {}) for line in lines)
    columns = ["strategy", "K", "live", "window ms", "95% CI", "vs baseline", "reset ms"]
    columns += ["sync ms"] * distributed + ["grad diff", "status"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("strategy", "status") else "right")
    for line in lines:
        window = line.get("phases", {}).get("window", {})
        ratio = line.get("vs_baseline")
        ratio_text = "-"
        if ratio:
            star = " *" if ratio["significant"] else ""
            ratio_text = f"{ratio['ratio']:.3f}{star}"
        check = line.get("grad_check") or {}
        table.add_row(
            line["strategy"],
            str(line["k"]),
            f"{line['n']:,}",
            _ms(window.get("median_s")),
            f"{_ms(window.get('ci_low_s'))}-{_ms(window.get('ci_high_s'))}" if window else "-",
            ratio_text,
            _ms(line.get("phases", {}).get("reset", {}).get("median_s")),
            *[_ms(line.get("phases", {}).get("sync", {}).get("median_s"))] * distributed,
            f"{check['max_rel_diff']:.1e}" if check else "-",
            "ok" if line["ok"] else "[red]failed[/red]",
        )
    console.print(table)
    console.print("* the 95% bootstrap CI of the ratio excludes 1: a significant difference")
    noisy = [
        r["case_id"]
        for r in rows
        if (r.get("env") or {}).get("cpu_pressure_avg10") is not None
        and r["env"]["cpu_pressure_avg10"] > NOISY_PRESSURE
    ]
    if noisy:
        console.print(
            f"[yellow]warning[/yellow]: {len(noisy)} of {len(rows)} cases ran while other work "
            f"held the CPU (pressure above {NOISY_PRESSURE:g}%): their times are suspect; "
            "rerun on a quiet machine or with --threads 1"
        )
    for target in targets.evaluate(cases):
        mark = "[green]PASS[/green]" if target["ok"] else "[red]FAIL[/red]"
        console.print(f"{mark} {target['target']}: {target['value']} (target {target['limit']})")
