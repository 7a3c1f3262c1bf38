"""``python -m reports build DIR``: DIR/index.html, one self-contained file.

Inline CSS and inline SVG charts (matplotlib), no script, nothing fetched: the page opens from
disk, offline, and can be mailed as one file. What it says is computed in ``reports.page.analysis``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from reports.judge import wording
from reports.page import analysis, charts, columns
from reports.page.records import Page

TEMPLATES = Path(__file__).with_name("templates")
TEMPLATE = TEMPLATES / "report.html.j2"
MAX_BYTES = 5 * 2**20  # the limit for one report page


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _ms(seconds: float | None) -> str:
    """Milliseconds with three significant figures at least, so microsecond resets still show."""
    if _missing(seconds):
        return "-"
    ms = seconds * 1e3
    if abs(ms) >= 100:
        return f"{ms:.1f}"
    if abs(ms) >= 1:
        return f"{ms:.3f}"
    return f"{ms:.4f}"


def _mib(n: float | None) -> str:
    return "-" if _missing(n) else f"{n / 2**20:.2f}"


def _kib(n: float | None) -> str:
    return "-" if _missing(n) else f"{n / 2**10:+.1f}"


def _sci(x: float | None) -> str:
    """A relative error: two significant figures, 0 exactly as 0."""
    if _missing(x):
        return "-"
    return "0" if x == 0 else f"{x:.1e}"


def _seconds(s: float | None) -> str:
    return "-" if _missing(s) else f"{s:.1f}" if s >= 10 else f"{s:.2f}"


def _num(n: float | None) -> str:
    if _missing(n):
        return "-"
    return f"{n:,.0f}" if abs(n) >= 100 or float(n).is_integer() else f"{n:,.3g}"


def _code(text: str) -> Markup:
    """`name` in generated sentences -> <code>name</code>, everything else escaped."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ms=_ms, mib=_mib, kib=_kib, num=_num, code=_code, sci=_sci, seconds=_seconds)
    env.filters.update(interval=wording.interval_text)
    return env


def render_charts(report: Page) -> dict[str, Any]:
    """Each chart that this sweep's cases can draw, as inline SVG; None where it cannot."""
    out: dict[str, Any] = dict.fromkeys(
        ("answer", "phases", "memory", "reset", "window", "timeline", "errors")
    )
    out["answers"] = answer_charts(report)
    if report.errors:  # every precision's, so not tied to the default case
        out["errors"] = charts.accumulation_error(report.errors)
    if not report.default:
        return out
    k, n = report.default
    here = [c for c in report.default_cases if c.phases]
    if here:
        out["answer"] = next((c["svg"] for c in out["answers"] if c["name"] == "answer"), None)
        out["phases"] = charts.phases(here, k, n)
    measured = [
        c
        for c in here
        if c.memory and (c.memory.held_bytes is not None or c.memory.peak_bytes is not None)
    ]
    if measured:  # held and peak bytes per strategy, the plain loop's peak as the reference
        out["memory"] = charts.memory(measured, k, n)
    if len(report.ns) > 1 and report.slopes:
        out["reset"] = charts.reset_vs_live(report.slopes, k)
    if len(report.ks) > 1:
        out["window"] = charts.window_vs_k(report.cases, n)
    if report.timelines:
        out["timeline"] = charts.timelines(report.timelines, k, n)
    return out


def answer_charts(report: Page) -> list[dict[str, Any]]:
    """The answer's chart for every K and N of the tables' flavour and precision, the answer's
    own first (``answer``; the others ``answer-kK-nN``), each with the strategy to use there."""
    if not report.default:
        return []
    uses = {
        (d.k, d.n): d.use
        for d in report.decisions
        if all(d.case.get(name) == value for name, value in report.main.items())
    }
    groups = sorted({(c.k, c.n) for c in report.cases if c.phases})
    groups.sort(key=lambda kn: kn != report.default)
    out = []
    for k, n in groups:
        name = "answer" if (k, n) == report.default else f"answer-k{k}-n{n}"
        here = [c for c in report.cases if (c.k, c.n) == (k, n) and c.phases]
        svg = charts.answer(here, k, n, name)
        if svg:
            out.append({"name": name, "k": k, "n": n, "use": uses.get((k, n)), "svg": svg})
    return out


def build(directory: str | Path, report: Page | None = None) -> Path:
    """Write DIR/index.html from DIR/results.jsonl (and run.json, pytest-benchmark.json), or
    from ``report``, the page ``analysis.report`` already made of DIR."""
    directory = Path(directory)
    if report is None:
        report = analysis.report(directory)
    report.verdicts_json.write(directory)  # first: the HTML shows what this file says
    title = f"zerograd sweep {report.run.run_id or directory.name}"
    details = {"sweep": report.sweep, "env": report.env}
    html = (
        environment()
        .get_template(TEMPLATE.name)
        .render(
            title=title,
            r=report,
            charts=render_charts(report),
            columns=columns.case_columns(report.has_sync),
            env_json=json.dumps(details, indent=1, default=str),
        )
    )
    out = directory / "index.html"
    out.write_text(html, encoding="utf-8")
    return out
