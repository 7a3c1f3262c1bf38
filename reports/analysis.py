"""What a report says, computed from a sweep's rows: the answer, the tables, the slopes.

Everything here is plain data (dicts, lists, floats in seconds and bytes) so that the HTML
templates only format it and the tests can check the figures without a browser.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from reports import stats, targets
from reports.rows import RESULTS, pooled, read

BASELINE = "baseline"
REFERENCE = "native"  # PyTorch's own zero_grad: what every other strategy is compared with
LEAD_TEST = (
    "percentile bootstrap of the ratio of medians of the raw per-window samples "
    f"({stats.BOOTSTRAP_RESAMPLES} resamples, seeded; unpaired: the cases ran in different "
    "processes); significant when the 95% CI excludes 1"
)
TIE = 0.01  # memory peaks within 1% of each other are called a tie


def strategy_order(name: str) -> tuple:
    return (name != BASELINE, name != REFERENCE, name)


def _run_info(directory: Path) -> dict[str, Any]:
    path = directory / "run.json"
    if not path.exists():
        return {}
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return run if isinstance(run, dict) else {}


def _pytest_benchmark(directory: Path) -> dict[str, Any] | None:
    """pytest-benchmark's --benchmark-json output, reduced to what the table shows."""
    path = directory / "pytest-benchmark.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        return {"error": f"{path.name} is not valid JSON ({err})", "benchmarks": []}
    benchmarks = []
    for bench in data.get("benchmarks", []):
        st = bench.get("stats", {})
        benchmarks.append(
            {
                "name": bench.get("name") or bench.get("fullname", "?"),
                "group": bench.get("group") or "",
                "median_s": st.get("median"),
                "iqr_s": st.get("iqr"),
                "min_s": st.get("min"),
                "mean_s": st.get("mean"),
                "stddev_s": st.get("stddev"),
                "rounds": st.get("rounds"),
                "ops": st.get("ops"),
                "extra": ", ".join(f"{k}={v}" for k, v in (bench.get("extra_info") or {}).items()),
            }
        )
    benchmarks.sort(key=lambda b: (b["group"], b["median_s"] or math.inf))
    machine = data.get("machine_info") or {}
    commit = data.get("commit_info") or {}
    return {
        "error": None,
        "benchmarks": benchmarks,
        "datetime": data.get("datetime"),
        "version": data.get("version"),
        "machine": machine.get("cpu", {}).get("brand_raw") or machine.get("processor"),
        "commit": (commit.get("id") or "")[:12],
    }


# -- memory ---------------------------------------------------------------------------------------
def memory_metric(entries: list[dict[str, Any]], device: str | None) -> tuple[str, str]:
    """The memory figure that ranks strategies here: (key, what it is, in words)."""
    rows = [r for e in entries for r in e.get("rows", [])]
    has = {k: any((r.get("memory") or {}).get(k) for r in rows) for k in MEMORY_LABELS}
    if device == "cuda" and has["cuda_peak_allocated_bytes"]:
        key = "cuda_peak_allocated_bytes"
    elif has["memray_peak_bytes"]:
        key = "memray_peak_bytes"
    else:
        key = "rss_above_setup_bytes"
    return key, MEMORY_LABELS[key]


MEMORY_LABELS = {
    "cuda_peak_allocated_bytes": "GPU peak allocated (torch.cuda)",
    "memray_peak_bytes": "memray peak heap of the tracked windows",
    "rss_above_setup_bytes": "host peak RSS above the RSS after setup",
}


def memory_values(entry: dict[str, Any], key: str) -> list[float]:
    """One value per ok round of a case (memory is measured once per process)."""
    out = []
    for row in entry.get("rows", []):
        memory = row.get("memory") or {}
        if key == "rss_above_setup_bytes":
            peak, setup = memory.get("peak_rss_bytes"), memory.get("rss_after_setup_bytes")
            value = peak - setup if peak is not None and setup is not None else None
        else:
            value = memory.get(key)
        if value is not None:
            out.append(float(value))
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# -- the answer -----------------------------------------------------------------------------------
def default_case(run: dict[str, Any], entries: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The K and N the answer is given for: the sweep's first K, and N=0 (no ballast)."""
    ok = [e for e in entries if e.get("phases")]
    if not ok:
        return None
    ks = sorted({e["accumulate"] for e in ok})
    ns = sorted({e["live_tensors"] for e in ok})
    listed = (run.get("sweep") or {}).get("accumulate") or []
    k = next((k for k in listed if k in ks), ks[0])
    n = 0 if 0 in ns else ns[0]
    return k, n


def answer(entries: list[dict[str, Any]], k: int, n: int, device: str | None) -> dict[str, Any]:
    """Fastest and leanest strategy (baseline excluded) at K, N, with CIs and significance."""
    here = [
        e
        for e in entries
        if e.get("phases") and (e["accumulate"], e["live_tensors"]) == (k, n)
        if e["strategy"] != BASELINE
    ]
    out: dict[str, Any] = {"k": k, "n": n, "test": LEAD_TEST, "candidates": len(here)}
    if not here:
        out["advice"] = f"No strategy other than baseline finished at K={k}, N={n}."
        return out
    by_time = sorted(here, key=lambda e: e["phases"]["window"]["median_s"])
    fastest = by_time[0]
    out["fastest"] = {"strategy": fastest["strategy"], **fastest["phases"]["window"]}
    if len(by_time) > 1:
        runner = by_time[1]
        lead = stats.ratio_of_medians(runner["samples"]["window"], fastest["samples"]["window"])
        out["fastest"]["runner_up"] = {
            "strategy": runner["strategy"],
            **runner["phases"]["window"],
        }
        out["fastest"]["lead"] = lead

    key, label = memory_metric(here, device)
    out["memory_metric"], out["memory_label"] = key, label
    sized = [(e, memory_values(e, key)) for e in here]
    sized = [(e, v) for e, v in sized if v]
    if sized:
        sized.sort(key=lambda ev: _median(ev[1]))
        lean, values = sized[0]
        out["leanest"] = {
            "strategy": lean["strategy"],
            "bytes": _median(values),
            "low": min(values),
            "high": max(values),
            "rounds": len(values),
        }
        if len(sized) > 1:
            other, other_values = sized[1]
            a, b = _median(values), _median(other_values)
            margin = (b - a) / b if b else 0.0
            if len(values) > 1 and len(other_values) > 1:
                clear = max(values) < min(other_values)
                verdict = (
                    "The lead is clear: the ranges over rounds do not overlap."
                    if clear
                    else "The lead is not clear: the ranges over rounds overlap."
                )
            else:
                clear = None
                verdict = (
                    "Memory is measured once per case's process, so there is no CI "
                    "(run with --rounds 3 for one)."
                )
            out["leanest"]["runner_up"] = {
                "strategy": other["strategy"],
                "bytes": b,
                "margin": margin,
                "clear": clear,
                "verdict": verdict,
                "tie": margin < TIE,
            }
    out["advice"] = advice(out, entries, k)
    return out


def _name(strategy: str) -> str:
    return f"`{strategy}`"


def advice(result: dict[str, Any], entries: list[dict[str, Any]], k: int) -> str:
    """One sentence, from the figures: what to use, and what to avoid if something stands out."""
    fastest, leanest = result.get("fastest"), result.get("leanest")
    if not fastest:
        return "No strategy finished, so there is nothing to advise."
    name = fastest["strategy"]
    lead = fastest.get("lead")
    if lead is None:
        text = f"Only {_name(name)} finished here, so there is nothing to compare it with"
    elif lead["significant"]:
        text = (
            f"Use {_name(name)} for speed: {_name(fastest['runner_up']['strategy'])}, the next "
            f"fastest, takes {lead['ratio']:.2f}x as long per window, a significant lead"
        )
    else:
        text = (
            f"{_name(name)} and {_name(fastest['runner_up']['strategy'])} are not significantly "
            f"different in speed here (ratio {lead['ratio']:.2f}, 95% CI {lead['ci_low']:.2f}-"
            f"{lead['ci_high']:.2f}), so choose between them on memory"
        )
    if leanest:
        runner = leanest.get("runner_up")
        if leanest["strategy"] == name:
            text += f", and {_name(name)} also needs the least memory"
        elif runner and runner["tie"]:
            text += (
                f"; {_name(leanest['strategy'])} needs the least memory, within 1% of "
                f"{_name(runner['strategy'])}"
            )
        else:
            text += f"; {_name(leanest['strategy'])} needs the least memory"
    worst = steepest(entries, k)
    if worst and worst["per_10k_s"] > 1e-3:  # more than 1 ms more per 10,000 live tensors
        text += (
            f"; avoid {_name(worst['strategy'])} where many tensors are alive: its reset grows by "
            f"{worst['per_10k_s'] * 1e3:.1f} ms per 10,000 live tensors"
        )
    return text + "."


# -- reset against live tensors -------------------------------------------------------------------
def reset_slopes(entries: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Per strategy at K: reset medians over N and their least-squares slope (s per tensor)."""
    out = []
    for strategy in sorted({e["strategy"] for e in entries}, key=strategy_order):
        points = sorted(
            (e["live_tensors"], e["phases"]["reset"])
            for e in entries
            if e["strategy"] == strategy
            and e["accumulate"] == k
            and e.get("phases", {}).get("reset")
        )
        if not points:
            continue
        xs = [n for n, _ in points]
        ys = [p["median_s"] for _, p in points]
        slope = stats.slope(xs, ys)
        out.append(
            {
                "strategy": strategy,
                # "live", not "n": a phase summary already has n, its sample count
                "points": [{**p, "live": n} for n, p in points],
                "slope_s": slope,
                "per_10k_s": slope * 1e4 if not math.isnan(slope) else None,
            }
        )
    return out


def steepest(entries: list[dict[str, Any]], k: int) -> dict[str, Any] | None:
    slopes = [s for s in reset_slopes(entries, k) if s["per_10k_s"] is not None]
    return max(slopes, key=lambda s: s["per_10k_s"], default=None)


# -- tables ---------------------------------------------------------------------------------------
def case_table(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per case: window, ratios to baseline and native of the same K and N, memory."""
    by_key = {(e["strategy"], e["accumulate"], e["live_tensors"]): e for e in entries}
    out = []
    for e in sorted(
        entries,
        key=lambda e: (e["accumulate"], e["live_tensors"], strategy_order(e["strategy"])),
    ):
        line: dict[str, Any] = {
            "strategy": e["strategy"],
            "k": e["accumulate"],
            "n": e["live_tensors"],
            "rounds": e["rounds"],
            "failed": len(e["failed"]),
            "ok": bool(e.get("phases")),
        }
        if e.get("phases"):
            line["phases"] = e["phases"]
            for name, ref in (("vs_baseline", BASELINE), ("vs_native", REFERENCE)):
                other = by_key.get((ref, e["accumulate"], e["live_tensors"]))
                if e["strategy"] != ref and other and other.get("samples"):
                    line[name] = stats.ratio_of_medians(
                        e["samples"]["window"], other["samples"]["window"]
                    )
            rows = e["rows"]
            memory = [r.get("memory") or {} for r in rows]

            def med(key, memory=memory):
                return _median([float(m[key]) for m in memory if m.get(key) is not None])

            line["memory"] = {
                "peak_rss_bytes": med("peak_rss_bytes"),
                "rss_above_setup_bytes": _median(memory_values(e, "rss_above_setup_bytes")),
                "cuda_peak_allocated_bytes": med("cuda_peak_allocated_bytes"),
                "cuda_peak_reserved_bytes": med("cuda_peak_reserved_bytes"),
                "growth_bytes_per_window": med("growth_bytes_per_window"),
                "growth_measure": next((m.get("growth_measure") for m in memory), None),
                "memray_peak_bytes": med("memray_peak_bytes"),
                "memray_allocations": med("memray_allocations"),
            }
            calls = [r["allreduce_per_window"] for r in rows if r.get("allreduce_per_window")]
            line["allreduce_per_window"] = _median(calls) if calls else None
            checks = [r["grad_check"] for r in rows if r.get("grad_check")]
            if checks:
                line["grad_check"] = {
                    "max_rel_diff": max(c["max_rel_diff"] for c in checks),
                    "max_abs_diff": max(c["max_abs_diff"] for c in checks),
                    "tolerance": max(c["tolerance"] for c in checks),
                    "ok": all(c["ok"] for c in checks),
                }
        out.append(line)
    return out


def overheads(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The core's overhead per K and N: native / baseline windows, interleaved in one process."""
    out = []
    for e in sorted(entries, key=lambda e: (e["accumulate"], e["live_tensors"])):
        if e["strategy"] != REFERENCE or (result := targets.overhead(e)) is None:
            continue
        baseline = [x for r in e["rows"] for x in r["samples"].get("baseline_window", [])]
        out.append(
            {
                "k": e["accumulate"],
                "n": e["live_tensors"],
                "native": e["phases"]["window"],
                "baseline": stats.summarize(baseline),
                **result,
                "ok": result["ratio"] <= targets.OVERHEAD_MAX
                and result["ci_high"] <= targets.OVERHEAD_CI_MAX,
            }
        )
    return out


def flamegraphs(directory: Path, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ok case's memray flamegraph, and whether its file is still beside the report."""
    out = []
    for e in sorted(
        entries,
        key=lambda e: (strategy_order(e["strategy"]), e["accumulate"], e["live_tensors"]),
    ):
        for row in e.get("rows", []):
            path = (row.get("memory") or {}).get("memray_flamegraph")
            if path:
                out.append(
                    {
                        "strategy": e["strategy"],
                        "k": e["accumulate"],
                        "n": e["live_tensors"],
                        "round": row.get("round", 0),
                        "path": path,
                        "present": (directory / path).is_file(),
                        "peak_bytes": row["memory"].get("memray_peak_bytes"),
                        "allocations": row["memory"].get("memray_allocations"),
                    }
                )
    return out


def report(directory: str | Path) -> dict[str, Any]:
    """Everything index.html shows, in the order it shows it."""
    directory = Path(directory)
    rows = read(directory)
    run = _run_info(directory)
    cases = pooled(rows)
    entries = list(cases.values())
    ok_rows = [r for r in rows if r.get("status") == "ok"]
    first = ok_rows[0] if ok_rows else (rows[0] if rows else {})
    env = {**(run.get("env") or {}), **(first.get("env") or {})}
    sweep = run.get("sweep") or {}
    device = first.get("device") or env.get("device")
    chosen = default_case(run, entries)
    result: dict[str, Any] = {
        "directory": directory,
        "has_gpu_memory": any(
            (r.get("memory") or {}).get("cuda_peak_allocated_bytes") is not None for r in ok_rows
        ),
        # DDP runs: the sync phase (all-reduce the last backward did not hide) and its calls
        "world_size": max((r.get("world_size") or 1 for r in rows), default=1),
        "has_sync": any("sync" in (r.get("phases") or {}) for r in ok_rows),
        "run": run,
        "sweep": sweep,
        "env": env,
        "first": first,
        "rows": len(rows),
        "ok_rows": len(ok_rows),
        "ks": sorted({e["accumulate"] for e in entries}),
        "ns": sorted({e["live_tensors"] for e in entries}),
        "strategies": sorted({e["strategy"] for e in entries}, key=strategy_order),
        "default": chosen,
        "cases": case_table(entries),
        "overheads": overheads(entries),
        "overhead_limit": (targets.OVERHEAD_MAX, targets.OVERHEAD_CI_MAX),
        "targets": targets.evaluate(cases),
        "failed": [r for r in rows if r.get("status") != "ok"],
        "flamegraphs": flamegraphs(directory, entries),
        "pytest_benchmark": _pytest_benchmark(directory),
        "results": RESULTS,
    }
    if chosen:
        k, n = chosen
        result["answer"] = answer(entries, k, n, device)
        result["slopes"] = reset_slopes(entries, k)
        result["default_cases"] = [c for c in result["cases"] if (c["k"], c["n"]) == (k, n)]
    else:
        result["answer"] = None
        result["slopes"] = []
        result["default_cases"] = []
    return result
