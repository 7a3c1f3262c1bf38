"""The figures a sweep states, shared by the terminal table and the HTML report."""

from __future__ import annotations

from typing import Any

from reports import stats
from reports.rows import pooled, read


def case_rows(directory) -> list[dict[str, Any]]:
    """One line per pooled case: window time, its ratio to baseline of the same K and N, ..."""
    cases = pooled(read(directory))
    baselines = {
        (e["accumulate"], e["live_tensors"]): e
        for e in cases.values()
        if e["strategy"] == "baseline"
    }
    out = []
    for entry in sorted(
        cases.values(),
        key=lambda e: (
            e["accumulate"],
            e["live_tensors"],
            e["strategy"] != "baseline",
            e["strategy"],
        ),
    ):
        line: dict[str, Any] = {k: entry[k] for k in ("strategy", "accumulate", "live_tensors")}
        line["status"] = "ok" if entry.get("phases") else "failed"
        line["errors"] = [r.get("error") for r in entry["failed"]]
        line["rounds"] = entry["rounds"]
        if entry.get("phases"):
            line["phases"] = entry["phases"]
            base = baselines.get((entry["accumulate"], entry["live_tensors"]))
            if base is not None and base.get("samples") and entry["strategy"] != "baseline":
                line["vs_baseline"] = stats.ratio_of_medians(
                    entry["samples"]["window"], base["samples"]["window"]
                )
            last = entry["rows"][-1]
            line["grad_check"] = last.get("grad_check")
            line["memory"] = last.get("memory", {})
            line["overhead"] = last.get("overhead")
        out.append(line)
    return out
