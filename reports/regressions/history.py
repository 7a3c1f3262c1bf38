"""``python -m reports history [ASV_DIR]``: asv's results over commits as one self-contained page.

Reads what asv itself wrote (``ASV_DIR/results/benchmarks.json`` and
``ASV_DIR/results/<machine>/<hash>-<env>.json``, parsed as ``asv.results.Results.load`` does)
and writes ``ASV_DIR/history.html``: inline CSS and inline SVG (matplotlib), no script, nothing
fetched, so it opens from disk on a machine without internet, where asv's own site cannot.

Per benchmark, one chart of every parameter set's value over commits; between consecutive
commits of a series a verdict word, ``lower``, ``higher``, ``same`` or ``unclear``, decided by
``reports.judge.verdicts.decide`` (the one place a verdict is decided) with one of these rules,
and the page names the rule beside every verdict:

- **paired** (unit ``ratio``: a strategy's window over the plain loop's, in one process): the
  step's ratio r = after / before against ``t = max(min_effect, noise floor)``; the floor is the
  larger of the largest spread between the processes that measured one commit (asv's samples,
  one per process: ``benches.asv_common.PairedOverheadMixin``) seen on this benchmark, and a 99%
  Student-t prediction bound for two single processes, from the between-process SD pooled over
  the benchmark. Without several processes per commit the floor is unknown, and no paired step
  is ``lower`` or ``higher``.
- **unpaired** (``time_*``, ``peakmem_*``: each commit measured in its own processes): the
  step's interval runs from min(after) / max(before) to max(after) / min(before), over asv's raw
  samples of each commit (its 99% CI where samples were not recorded), against
  ``t = max(min_effect, q)``, where q is the largest change of this benchmark over the quiet
  steps: steps between commits where nothing changed, which a paired benchmark with a measured
  floor judged and no paired benchmark called lower or higher. Without a quiet step q is
  unknown, and no unpaired step is ``lower`` or ``higher``.

So an A/A history (the same code measured at every commit) comes out ``same`` or ``unclear``:
its paired steps stay inside the floor their own processes measured, and every one of its steps
is quiet, so q is at least each unpaired step's own change.
"""

from __future__ import annotations

import datetime
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from reports.judge import verdicts
from reports.page import charts
from reports.regressions.asv_results import (  # noqa: F401 (re-exported: the page's readers use them)
    BENCHMARKS,
    MACHINE,
    RESULTS,
    HistoryError,
    Point,
    Series,
    commit_order,
    finite_number,
    load,
    read_result_file,
    results_dir,
)
from reports.regressions.steps import (
    PAIRED_UNIT,
    PREDICTION_LEVEL,
    RING,
    RULE_NAMES,
    RULES,
    WORDS,
    is_paired,
    judge,
)

PAGE = "history.html"
TEMPLATE = "history.html.j2"


# -- the page --------------------------------------------------------------------------------------
def _date(ms: int | None) -> str:
    if ms is None:
        return "no date"
    return datetime.datetime.fromtimestamp(ms / 1e3, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def scale(unit: str | None, values: list[float]) -> tuple[float, str]:
    """(factor, label) so the figures read in a natural unit."""
    top = max((abs(v) for v in values if finite_number(v)), default=0.0)
    if unit == "seconds":
        if top and top < 1e-3:
            return 1e6, "µs"
        return (1e3, "ms") if top < 1 else (1.0, "s")
    if unit == "bytes":
        return 1 / 2**20, "MiB"
    if unit == PAIRED_UNIT:
        return 1.0, "× the plain loop"
    return 1.0, unit or ""


def params_label(bench: dict[str, Any], combo: tuple[str, ...]) -> str:
    if not combo:
        return "(no parameters)"
    names = bench.get("param_names") or [f"p{i}" for i in range(len(combo))]
    return ", ".join(f"{n}={v.strip(chr(39))}" for n, v in zip(names, combo, strict=False))


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def short(name: str) -> str:
    """A benchmark's name without its module: ``Class.method`` (asv's names are dotted)."""
    parts = name.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 else name


def chart(name: str, bench: dict[str, Any], series: list[Series], many_groups: bool) -> str:
    """Every parameter set's value over commits; bars: the spread the verdicts use."""
    order = sorted(
        {(p.commit, p.date) for s in series for p in s.points},
        key=lambda cd: commit_order(cd[1], cd[0]),
    )
    x_of = {c: i for i, (c, _) in enumerate(order)}
    factor, label = scale(bench.get("unit"), [p.value for s in series for p in s.points])
    fig = Figure(figsize=(charts.WIDTH, 4.8), layout="constrained")
    ax = fig.add_subplot()
    values = []
    for i, s in enumerate(series):
        xs = [x_of[p.commit] for p in s.points]
        ys = [p.value * factor for p in s.points]
        values += ys
        low, high = [], []
        for p, y in zip(s.points, ys, strict=True):
            lo, hi = p.spread() or (p.value, p.value)
            low.append(max(0.0, y - lo * factor))
            high.append(max(0.0, hi * factor - y))
        text = ", ".join(v.strip("'") for v in s.params) or short(name)
        if many_groups:
            text += f" [{s.machine}, {s.env}]"
        style = charts.style(i)
        ax.errorbar(xs, ys, yerr=[low, high], label=text, capsize=3, linewidth=1.3, **style)
        for step in s.steps:  # a ring around the later commit of a lower/higher step
            if step["verdict"] in ("lower", "higher"):
                ax.plot(
                    x_of[step["to"]],
                    step["after"] * factor,
                    "o",
                    markersize=16,
                    markerfacecolor="none",
                    markeredgecolor=RING[step["verdict"]],
                    markeredgewidth=2,
                )
    finite = [v for v in values if finite_number(v) and v > 0]
    if finite and max(finite) / min(finite) > 20:
        ax.set_yscale("log")
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(
        [f"{c[:8]}\n{_date(d)[:10]}" for c, d in order],
        rotation=0 if len(order) <= 8 else 45,
        fontsize="small",
    )
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.set_xlabel("commit (hash, commit date)")
    ax.set_ylabel(f"{bench.get('unit') or 'value'} ({label})")
    ax.set_title(short(name))
    ax.grid(alpha=0.3)
    names = ", ".join(bench.get("param_names") or [])
    fig.legend(
        loc="outside lower center",
        fontsize="small",
        ncols=min(4, max(1, len(series))),
        title=names or None,
        title_fontsize="small",
    )
    return charts.to_svg(fig, "h-" + slug(name))


def _size(step: dict[str, Any]) -> float:
    r = step["ratio"]
    return abs(math.log(r)) if r else 0.0


def _section(name: str, bench: dict, here: list[Series], noise: dict, many_groups: bool) -> dict:
    """One benchmark's part of the page: its chart, steps (commit to commit) and table."""
    factor, label = scale(bench.get("unit"), [p.value for s in here for p in s.points])
    rows = [
        {
            **step,
            "benchmark": name,
            "short": short(name),
            "anchor": "b-" + slug(name),
            "params": params_label(bench, s.params),
            "machine": s.machine,
            "env": s.env,
            "factor": factor,
            "label": label,
        }
        for s in here
        for step in s.steps
    ]
    commits = sorted(
        {(p.commit, p.date) for s in here for p in s.points},
        key=lambda cd: commit_order(cd[1], cd[0]),
    )
    table = [
        {
            "params": params_label(bench, s.params)
            + (f" [{s.machine}, {s.env}]" if many_groups else ""),
            "values": [next((p for p in s.points if p.commit == c), None) for c, _ in commits],
        }
        for s in here
    ]
    return {
        "name": name,
        "short": short(name),
        "anchor": "b-" + slug(name),
        "unit": bench.get("unit"),
        "type": bench.get("type"),
        "kind": "paired" if is_paired(bench) else "unpaired",
        "rounds": bench.get("rounds"),
        "processes": max(
            (len(p.process_values() or [p.value]) for s in here for p in s.points), default=1
        ),
        "param_names": bench.get("param_names") or [],
        "chart": chart(name, bench, here, many_groups),
        "noise": [
            {"machine": g[0], "env": g[1], **noise[(name, *g)]}
            for g in sorted({s.group for s in here})
        ],
        "steps": rows,
        "commits": [{"commit": c, "date": _date(d)} for c, d in commits],
        "table": table,
        "factor": factor,
        "label": label,
    }


def history_page(asv_dir: Path, min_effect: float = verdicts.DEFAULT_MIN_EFFECT) -> dict[str, Any]:
    """What the page shows: benchmarks with charts, series, steps, and the summary."""
    history = load(asv_dir)
    noise = judge(history, min_effect)
    many_groups = len({s.group for s in history["series"]}) > 1
    by_bench: dict[str, list[Series]] = defaultdict(list)
    for s in history["series"]:
        by_bench[s.benchmark].append(s)
    sections = [
        _section(name, history["benchmarks"][name], by_bench[name], noise, many_groups)
        for name in sorted(by_bench)
    ]
    steps = [row for section in sections for row in section["steps"]]
    counts = {w: sum(1 for s in steps if s["verdict"] == w) for w in WORDS}
    changed = sorted(
        (s for s in steps if s["verdict"] in ("higher", "lower")),
        key=lambda s: (WORDS.index(s["verdict"]), -_size(s)),
    )
    return {
        "asv_dir": str(asv_dir),
        "min_effect": min_effect,
        "level": PREDICTION_LEVEL,
        "commits": [{**c, "when": _date(c["date"])} for c in history["commits"]],
        "files": history["files"],
        "stale": history["stale"],
        "unreadable": history["unreadable"],
        "sections": sections,
        "steps": steps,
        "changed": changed,
        "counts": counts,
        "rules": RULES,
        "rule_names": RULE_NAMES,
        "many_groups": many_groups,
    }


def write(
    asv_dir: str | Path, min_effect: float = verdicts.DEFAULT_MIN_EFFECT
) -> tuple[Path, dict]:
    """Write ASV_DIR/history.html; return its path and what it shows."""
    from reports.page.build import environment

    asv_dir = Path(asv_dir)
    page = history_page(asv_dir, min_effect)
    html = (
        environment()
        .get_template(TEMPLATE)
        .render(title=f"zerograd over commits: {asv_dir.resolve().name or asv_dir}", h=page)
    )
    out = asv_dir / PAGE
    out.write_text(html, encoding="utf-8")
    return out, page
