"""``python -m reports compare DIR_A DIR_B``: one page comparing two runs, case by case.

Before and after a change, or CPU against GPU: for every strategy, K and N that both runs have,
each phase's median in A and B, the ratio B / A, its 95% CI and whether the difference is
significant. The test is stated on the page (``TEST``): a percentile bootstrap of the ratio of
medians on the raw per-window samples, unpaired, since the two runs ran in different processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports import analysis, charts, stats
from reports.build import environment
from reports.rows import PHASES, pooled, read

TEST = (
    "percentile bootstrap of the ratio of medians, B / A, on the raw per-window samples of each "
    f"phase ({stats.BOOTSTRAP_RESAMPLES} resamples, seeded, unpaired: the runs are different "
    "processes); a difference is significant when the 95% CI of the ratio excludes 1"
)


def _side(directory: Path) -> dict[str, Any]:
    rows = read(directory)
    run = analysis._run_info(directory)
    ok = [r for r in rows if r.get("status") == "ok"]
    first = ok[0] if ok else (rows[0] if rows else {})
    env = {**(run.get("env") or {}), **(first.get("env") or {})}
    cases: dict[tuple, dict[str, Any]] = {}
    for entry in pooled(rows).values():
        key = (entry["strategy"], entry["accumulate"], entry["live_tensors"])
        # one run normally holds one preset and device; keep the first if it holds more
        cases.setdefault(key, entry)
    return {
        "directory": directory,
        "name": directory.resolve().name,
        "run_id": run.get("run_id") or first.get("run_id") or "-",
        "created": run.get("created", "-"),
        "preset": first.get("preset", "-"),
        "device": env.get("device", first.get("device", "-")),
        "device_name": env.get("device_name") or env.get("cpu_model") or "-",
        "torch": env.get("torch", "-"),
        "threads": env.get("threads", first.get("threads", "-")),
        "commit": (env.get("git_commit") or "-")[:12],
        "dirty": bool(env.get("git_dirty")),
        "rows": len(rows),
        "ok_rows": len(ok),
        "cases": cases,
    }


def comparison(dir_a: str | Path, dir_b: str | Path) -> dict[str, Any]:
    """Per common case and phase: medians, ratio B / A, CI, significance; and what is unmatched."""
    a, b = _side(Path(dir_a)), _side(Path(dir_b))
    common = sorted(
        set(a["cases"]) & set(b["cases"]),
        key=lambda k: (analysis.strategy_order(k[0]), k[1], k[2]),
    )
    lines = []
    for key in common:
        ea, eb = a["cases"][key], b["cases"][key]
        if not (ea.get("samples") and eb.get("samples")):
            continue
        strategy, k, n = key
        phases = []
        for phase in PHASES:
            xa, xb = ea["samples"].get(phase) or [], eb["samples"].get(phase) or []
            if not xa or not xb:
                continue
            ratio = stats.ratio_of_medians(xb, xa)
            phases.append(
                {
                    "phase": phase,
                    "a": ea["phases"][phase],
                    "b": eb["phases"][phase],
                    **ratio,
                    "direction": (
                        "same"
                        if not ratio["significant"]
                        else ("B slower" if ratio["ratio"] > 1 else "B faster")
                    ),
                }
            )
        lines.append(
            {
                "strategy": strategy,
                "k": k,
                "n": n,
                "label": f"{strategy}  K={k} N={n:,}",
                "phases": phases,
                "window": next((p for p in phases if p["phase"] == "window"), None),
            }
        )
    windows = [line["window"] for line in lines if line["window"]]
    return {
        "a": a,
        "b": b,
        "lines": lines,
        "test": TEST,
        "only_a": [k for k in a["cases"] if k not in b["cases"]],
        "only_b": [k for k in b["cases"] if k not in a["cases"]],
        "failed": [
            (side, key)
            for side, s in (("A", a), ("B", b))
            for key, e in s["cases"].items()
            if not e.get("samples")
        ],
        "slower": sum(w["significant"] and w["ratio"] > 1 for w in windows),
        "faster": sum(w["significant"] and w["ratio"] < 1 for w in windows),
        "same": sum(not w["significant"] for w in windows),
    }


def compare(dir_a: str | Path, dir_b: str | Path, out: str | Path | None = None) -> Path:
    """Write the comparison page (default DIR_B/compare.html) and return its path."""
    result = comparison(dir_a, dir_b)
    out = Path(out) if out else Path(dir_b) / "compare.html"
    chart_lines = [
        {"label": line["label"], **line["window"]} for line in result["lines"] if line["window"]
    ]
    chart = charts.ratios(chart_lines, "A", "B") if chart_lines else None
    html = (
        environment()
        .get_template("compare.html.j2")
        .render(
            title=f"zerograd: run {result['b']['run_id']} against run {result['a']['run_id']}",
            c=result,
            chart=chart,
            details=json.dumps(
                {side: {k: v for k, v in result[side].items() if k != "cases"} for side in "ab"},
                indent=1,
                default=str,
            ),
        )
    )
    out.write_text(html, encoding="utf-8")
    return out
