"""What a report says, computed from a sweep's rows: the answer, the tables, the slopes.

Everything here is plain data (dicts, lists, floats in seconds and bytes) so that the HTML
templates only format it and the tests can check the figures without a browser.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

from reports import leaks, profile, stats, targets, verdicts
from reports.recipe import (
    check_summary,
    error_table,
    main_precision,
    precision_order,
    recipe,
    settings_table,
)
from reports.records import Entry, Growth, VerdictFile
from reports.rows import REFERENCE, RESULTS, SchemaError, pooled, process_of, read, strategy_order


def _run_info(directory: Path) -> dict[str, Any]:
    """DIR/run.json ({} when there is none, or it is not JSON: the rows are the data); a
    run.json whose parts have the wrong type is a SchemaError naming the field."""
    path = directory / "run.json"
    if not path.exists():
        return {}
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    if not isinstance(run, dict):
        return {}
    for key in ("sweep", "env", "case_settings"):
        if run.get(key) is not None and not isinstance(run[key], dict):
            raise SchemaError(f"{path}: field {key!r} is not an object")
    min_effect = (run.get("sweep") or {}).get("min_effect")
    if min_effect is not None and (
        isinstance(min_effect, bool) or not isinstance(min_effect, int | float)
    ):
        raise SchemaError(
            f"{path}: field 'sweep.min_effect' is {json.dumps(min_effect)}; valid: a fraction"
        )
    return run


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
        "order": machine.get("zerograd_order"),  # the shuffled order's seed (benches/conftest)
    }


# -- the answer -----------------------------------------------------------------------------------
def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def default_case(run: dict[str, Any], entries: list[Entry]) -> tuple[int, int] | None:
    """The K and N the answer is given for: the sweep's first K, and N=0 (no ballast)."""
    ok = [e for e in entries if e.phases]
    if not ok:
        return None
    ks = sorted({e.k for e in ok})
    ns = sorted({e.n for e in ok})
    listed = (run.get("sweep") or {}).get("accumulate") or []
    k = next((k for k in listed if k in ks), ks[0])
    n = 0 if 0 in ns else ns[0]
    return k, n


def noisy_entry(entry: Entry) -> bool:
    return any(verdicts.noisy(r) for r in entry.rows)


def answer(entries: list[Entry], k: int, n: int, result: VerdictFile) -> dict[str, Any]:
    """Fastest (lowest paired overhead) and leanest (lowest peak bytes) at K, N, with verdicts.

    Cases measured under CPU pressure are left out, and the answer says which.
    """
    here = [e for e in entries if e.phases and (e.k, e.n) == (k, n)]
    leaky = leaks.leaking(result, k, n)  # never the answer, on time or on memory
    here = [e for e in here if e.strategy not in leaky]
    excluded = sorted(e.strategy for e in here if noisy_entry(e))
    every = here  # memory is exact: CPU pressure does not touch it
    here = [e for e in here if not noisy_entry(e)]
    # the group's noise at K, N (the precision the answer reads: the first group there)
    floor = next((f for f in result.noise_floor if (f.k, f.n) == (k, n)), None)
    out: dict[str, Any] = {
        "k": k,
        "n": n,
        "candidates": len(here),
        "excluded_noisy": excluded,
        "excluded_leaking": [c for c in result.leaks if (c.k, c.n) == (k, n)],
        "resolution": floor.resolution if floor else None,
        "between_process_sd": floor.sd if floor else None,
        "min_effect": result.min_effect,
    }
    leanest(every, k, n, result, out)
    if not here:
        out["advice"] = f"No strategy finished without CPU pressure at K={k}, N={n}."
        return leak_advice(out)
    by_time = sorted(here, key=lambda e: e.overhead.ratio or math.inf)
    fastest = by_time[0]
    out["fastest"] = {
        "strategy": fastest.strategy,
        "overhead": fastest.overhead,
        "window": fastest.phases["window"],
        "cv": fastest.phases["window"].get("cv"),
    }
    if len(by_time) > 1:
        runner = by_time[1]
        out["fastest"]["runner_up"] = {
            "strategy": runner.strategy,
            "overhead": runner.overhead,
        }
        out["fastest"]["lead"] = verdicts.lookup(
            result, fastest.strategy, runner.strategy, k, n, "window"
        )
    out["advice"] = advice(out, entries, k)
    return leak_advice(out)


def leak_advice(out: dict[str, Any]) -> dict[str, Any]:
    """The advice says which strategies leak, and that they were left out of it."""
    leaky: list[Growth] = out["excluded_leaking"]
    if leaky:
        names = ", ".join(_name(c.strategy) for c in leaky)
        worst = max(c.excess_bytes_per_window or 0.0 for c in leaky)
        out["advice"] += (
            f" Left out: {names} {'leaks' if len(leaky) == 1 else 'leak'} memory (up to "
            f"{worst / 2**10:,.0f} KiB per window beyond the plain loop's growth)."
        )
    return out


def leanest(
    here: list[dict[str, Any]], k: int, n: int, result: VerdictFile, out: dict[str, Any]
) -> None:
    """The lowest peak at K, N and its verdict against the runner-up (into ``out``)."""
    sized = [(e, verdicts.memory_figure(e, "peak_bytes")) for e in here]
    sized = sorted(((e, v) for e, v in sized if v is not None), key=lambda ev: ev[1])
    if sized:
        lean, peak = sized[0]
        out["leanest"] = {
            "strategy": lean.strategy,
            "peak_bytes": peak,
            "held_bytes": verdicts.memory_figure(lean, "held_bytes"),
            "method": next(
                (r["memory"].get("peak_method") for r in lean.rows if r.get("memory")), None
            ),
        }
        if len(sized) > 1:
            other, other_peak = sized[1]
            out["leanest"]["runner_up"] = {
                "strategy": other.strategy,
                "peak_bytes": other_peak,
                "held_bytes": verdicts.memory_figure(other, "held_bytes"),
            }
            out["leanest"]["lead"] = verdicts.lookup(
                result, lean.strategy, other.strategy, k, n, "peak_memory"
            )


def _name(strategy: str) -> str:
    return f"`{strategy}`"


def _ci(c) -> str:
    return f"ratio {verdicts.ratio_text(c)}"


def advice(result: dict[str, Any], entries: list[Entry], k: int) -> str:
    """One sentence from the verdicts: "use X" only when X is lower than the runner-up."""
    fastest, leanest = result.get("fastest"), result.get("leanest")
    if not fastest:
        return "No strategy finished, so there is nothing to advise."
    name = fastest["strategy"]
    lead = fastest.get("lead")
    resolution = result.get("resolution")
    tells = f"this sweep tells apart {resolution:.1%} here" if resolution is not None else ""
    if lead is None:
        text = f"Only {_name(name)} finished here, so there is nothing to compare it with"
    elif lead.verdict == "lower":
        text = (
            f"Use {_name(name)} for speed: it is lower than {_name(lead.b)}, the next "
            f"fastest ({_ci(lead)}), significant over the sweep and beyond min-effect "
            f"{result['min_effect']:.0%}"
        )
    else:
        why = {
            "same": f"their 90% interval lies within +-{result['min_effect']:.0%}",
            "unclear": (
                f"the difference is neither significant beyond min-effect "
                f"{result['min_effect']:.0%} nor inside it ({tells}; more processes would "
                "narrow it)"
                if resolution is not None
                else "no variance between processes was measured here (one process per "
                "strategy, no control, nothing to borrow), so no difference in time is called"
            ),
            "higher": "the ranking by point estimate disagrees with the CI",
        }[lead.verdict]
        text = (
            f"{_name(name)} and {_name(lead.b)} tie on speed here ({_ci(lead)}: "
            f"{lead.verdict}, because {why}), so choose on memory"
        )
    if leanest:
        mem = leanest.get("lead")
        if leanest["strategy"] == name and mem and mem.verdict == "lower":
            text += f", and {_name(name)} also needs the least memory"
        elif mem and mem.verdict == "lower":
            text += f"; {_name(leanest['strategy'])} needs the least memory at peak"
        elif mem:
            text += (
                f"; {_name(leanest['strategy'])} and {_name(mem.b)} peak within "
                f"{result['min_effect']:.0%} of each other"
            )
    worst = steepest(entries, k)
    if worst and worst["per_10k_s"] > 1e-3:  # more than 1 ms more per 10,000 live tensors
        text += (
            f"; avoid {_name(worst['strategy'])} where many tensors are alive: its reset grows by "
            f"{worst['per_10k_s'] * 1e3:.1f} ms per 10,000 live tensors"
        )
    return text + "."


# -- reset against live tensors -------------------------------------------------------------------
def reset_slopes(entries: list[Entry], k: int) -> list[dict[str, Any]]:
    """Per strategy at K: reset medians over N and their least-squares slope (s per tensor)."""
    out = []
    for strategy in sorted({e.strategy for e in entries}, key=strategy_order):
        points = sorted(
            (e.n, e.phases["reset"])
            for e in entries
            if e.strategy == strategy and e.k == k and e.phases.get("reset")
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


def steepest(entries: list[Entry], k: int) -> dict[str, Any] | None:
    slopes = [s for s in reset_slopes(entries, k) if s["per_10k_s"] is not None]
    return max(slopes, key=lambda s: s["per_10k_s"], default=None)


# -- tables ---------------------------------------------------------------------------------------
def process_line(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A case's process figures over its rounds (psutil): context switches per second of the
    timed pairs (the busiest process), whether it was pinned and to which cores, and the noise
    signal that judged it."""
    figures = [r["process"] for r in rows if r.get("process")]

    def busiest(key: str) -> float | None:
        values = [f[key] for f in figures if f.get(key) is not None]
        return max(values) if values else None

    voluntary = [f["voluntary_switches"] / f["seconds"] for f in figures if f.get("seconds")]
    # every rank's cores where the row has them (torchrun), else the process's own
    cores = sorted(
        {
            tuple(cs)
            for f in figures
            for cs in (f.get("rank_affinity") or [f.get("affinity")])
            if cs is not None
        }
    )
    return {
        "involuntary_per_s": busiest("involuntary_per_s"),
        "voluntary_per_s": max(voluntary) if voluntary else None,
        "pinned": any(r.get("pin") for r in rows),
        "cores": [list(c) for c in cores],
        "noise_signals": sorted({verdicts.case_noise(r).signal or "none" for r in rows}),
    }


def case_table(entries: list[Entry], result: VerdictFile) -> list[dict[str, Any]]:
    """One line per case: paired overhead, verdicts against native, memory, gradient check."""
    out = []
    for e in sorted(entries, key=lambda e: (e.k, e.n, strategy_order(e.strategy))):
        line: dict[str, Any] = {
            "strategy": e.strategy,
            "k": e.k,
            "n": e.n,
            "rounds": e.rounds,
            "failed": len(e.failed),
            "ok": bool(e.phases),
            "noisy": noisy_entry(e),
            "trace": profile.trace_of(e),
        }
        if e.phases:
            line.update(measured_line(e, result))
        out.append(line)
    return out


CASE_MEMORY = (  # the memory figures of a case's line, each its median over processes
    "held_bytes",
    "peak_bytes",
    "plain_held_bytes",
    "plain_peak_bytes",
    "param_bytes",
    "peak_rss_bytes",
    "growth_bytes_per_window",
    "plain_growth_bytes_per_window",
)


def measured_line(e: Entry, result: VerdictFile) -> dict[str, Any]:
    """What a finished case's line shows: its phases and overhead, its verdicts against
    native, memory and growth, CPU pressure, its processes, collectives, gradient check."""
    rows = e.rows
    line: dict[str, Any] = {"phases": e.phases, "overhead": e.overhead}
    if e.strategy != REFERENCE:
        line["vs_native"] = {
            metric: verdicts.lookup(result, e.strategy, REFERENCE, e.k, e.n, metric)
            for metric in verdicts.METRICS
        }
    line["memory"] = {key: verdicts.memory_figure(e, key) for key in CASE_MEMORY}
    line["leak"] = leaks.lookup(result, e)
    line["memory"]["growth_measure"] = next(
        (r["memory"].get("growth_measure") for r in rows if r.get("memory")), None
    )
    pressure = [
        (r.get("cpu_pressure") or {}).get("median")
        for r in rows
        if (r.get("cpu_pressure") or {}).get("median") is not None
    ]
    line["cpu_pressure"] = max(pressure) if pressure else None
    line["process"] = process_line(rows)
    calls = [r["allreduce_per_window"] for r in rows if r.get("allreduce_per_window")]
    line["allreduce_per_window"] = _median(calls) if calls else None
    checks = [r["grad_check"] for r in rows if r.get("grad_check")]
    if checks:
        line["grad_check"] = {
            "max_rel_diff": max(c["max_rel_diff"] for c in checks),
            "max_abs_diff": max(c["max_abs_diff"] for c in checks),
            "tolerance": max(c["tolerance"] for c in checks),
            "windows": min(c.get("windows", 1) for c in checks),
            "ok": all(c["ok"] for c in checks),
        }
    return line


def core_overheads(entries: list[Entry]) -> list[dict[str, Any]]:
    """The core's overhead per K and N: native's paired ratio to the plain loop."""
    out = []
    for e in sorted(entries, key=lambda e: (e.k, e.n)):
        if e.strategy != REFERENCE or not e.phases:
            continue
        result = e.overhead
        plain = [x for r in e.rows for x in r["samples"].get("plain_window", [])]
        out.append(
            {
                "k": e.k,
                "n": e.n,
                "native": e.phases["window"],
                "plain": stats.summarize(plain),
                "overhead": result,
                "ok": targets.overhead_ok(result),
            }
        )
    return out


def flamegraphs(directory: Path, entries: list[Entry]) -> list[dict[str, Any]]:
    """Each ok case's memray flamegraph, and whether its file is still beside the report."""
    out = []
    for e in sorted(
        entries,
        key=lambda e: (strategy_order(e.strategy), e.k, e.n),
    ):
        for row in e.rows:
            path = (row.get("memory") or {}).get("memray_flamegraph")
            if path:
                out.append(
                    {
                        "strategy": e.strategy,
                        "k": e.k,
                        "n": e.n,
                        "round": row.get("round", 0),
                        "path": path,
                        "present": (directory / path).is_file(),
                        "peak_bytes": row["memory"].get("peak_bytes"),
                    }
                )
    return out


def _first_process(entry: Entry) -> dict[str, Any] | None:
    """The case's first process that is not one of the control's extra ones (those measure
    noise only: no timeline, no cost model)."""
    return next((r for r in entry.rows if not r.get("control")), None)


def timelines(entries: list[Entry], k: int, n: int) -> list[dict[str, Any]]:
    """One window's memory timeline per strategy at K, N (its first process), and the plain
    loop's beside them (from the first case that has one)."""
    out, plain = [], None
    for e in sorted(entries, key=lambda e: strategy_order(e.strategy)):
        row = _first_process(e)
        if (e.k, e.n) != (k, n) or row is None:
            continue
        memory = row.get("memory") or {}
        if memory.get("timeline"):
            out.append({"label": e.strategy, "timeline": memory["timeline"]})
        if plain is None and memory.get("plain_timeline"):
            plain = {"label": "plain loop", "timeline": memory["plain_timeline"]}
    return [*out, plain] if out and plain else out


def cost_table(entries: list[Entry], k: int) -> list[dict[str, Any]]:
    """The cost model's prediction against the measured reset and paired cost, per strategy and
    N at K (each case's first process: coefficients are calibrated in each process)."""
    out = []
    for e in sorted(entries, key=lambda e: (strategy_order(e.strategy), e.n)):
        row = _first_process(e)
        if e.k != k or row is None:
            continue
        model = row.get("cost_model")
        if not model:
            continue
        predicted, measured = model["predicted"], model["measured"]
        reset, paired = measured["reset"], measured["paired_cost"]
        out.append(
            {
                "strategy": e.strategy,
                "n": e.n,
                "counts": model["counts"],
                "predicted": predicted,
                "reset": reset,
                "paired": paired,
                "reset_ratio": (
                    reset["median_s"] / predicted["reset_s"] if predicted["reset_s"] else None
                ),
                "explained": model["explained"],
                "flags": model["flags"],
                "coefficients": model["coefficients"],
            }
        )
    return out


def main_flavour(entries) -> str:
    """The grad_sync flavour the report's tables show: last if swept, else the first."""
    flavours = sorted({e.grad_sync for e in entries})
    return "last" if "last" in flavours or not flavours else flavours[0]


def flavour_table(entries: list[Entry], judged: VerdictFile) -> list[dict[str, Any]]:
    """Under DDP/FSDP2/HSDP, one line per case and flavour: overhead, the flavour against
    ``every`` on one model (verdicts.json's ``grad_sync``), collectives, memory per rank."""
    if not any(e.phases and e.rows[0].get("parallel", "none") != "none" for e in entries):
        return []
    against = {
        (v.strategy, v.k, v.n, v.a, v.case.get("precision", "fp32")): v for v in judged.grad_sync
    }
    out = []
    order = {"every": 0, "scatter": 1, "last": 2}
    for e in sorted(
        (e for e in entries if e.phases),
        key=lambda e: (
            e.k,
            e.n,
            strategy_order(e.strategy),
            order.get(e.grad_sync, 3),
        ),
    ):
        row = e.rows[0]
        out.append(
            {
                "strategy": e.strategy,
                "k": e.k,
                "n": e.n,
                "grad_sync": e.grad_sync,
                "overhead": e.overhead,
                "window": e.phases["window"],
                "vs_every": against.get(
                    (
                        e.strategy,
                        e.k,
                        e.n,
                        e.grad_sync,
                        e.precision,
                    )
                ),
                "collectives": row.get("collectives_per_window") or {},
                "held_bytes": verdicts.memory_figure(e, "held_bytes"),
                "peak_bytes": verdicts.memory_figure(e, "peak_bytes"),
            }
        )
    return out


def wall_time(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the sweep's wall time went: each step's seconds summed over its cases' processes
    (the rows' ``wall_s``), largest first, with its share of the total."""
    steps: dict[str, float] = {}
    for r in rows:
        for step, seconds in (r.get("wall_s") or {}).items():
            if step != "total":
                steps[step] = steps.get(step, 0.0) + seconds
    total = sum(steps.values())
    ordered = sorted(steps.items(), key=lambda item: -item[1])
    return {
        "total_s": total,
        # strategies that shared a process (engine.rotation) count it once
        "processes": len({process_of(r) for r in rows if r.get("wall_s")}),
        "time_only": len({process_of(r) for r in rows if r.get("time_only")}),
        "steps": [
            {"step": s, "seconds": v, "share": v / total if total else None} for s, v in ordered
        ],
    }


def min_effect_of(run: dict[str, Any]) -> float:
    value = (run.get("sweep") or {}).get("min_effect")
    return float(value) if value is not None else verdicts.DEFAULT_MIN_EFFECT


def judge_sweep(
    entries, run: dict[str, Any], main: dict[str, Any]
) -> tuple[VerdictFile, VerdictFile]:
    """verdicts.json's content (every flavour and precision), and the part the tables show
    (the main flavour's and precision's comparisons)."""
    looks = int((run.get("sweep") or {}).get("looks") or 1)  # an adaptive sweep's looks
    judged_all = verdicts.verdicts(entries, min_effect_of(run), looks)
    shown = [
        c
        for c in judged_all.comparisons
        if all(c.case.get(name) == value for name, value in main.items())
    ]
    return judged_all, dataclasses.replace(judged_all, comparisons=shown)


def report(directory: str | Path) -> dict[str, Any]:
    """Everything index.html shows, in the order it shows it; verdicts.json's content too."""
    directory = Path(directory)
    rows = read(directory)
    run = _run_info(directory)
    every_case = pooled(rows)
    every = list(every_case.values())
    # strategies are compared within one grad_sync flavour: the tables show the main one ("last",
    # what DDP's no_sync does), the flavour section every one (verdicts.json holds them all)
    flavour, precision = main_flavour(every), main_precision(every)
    main = {"grad_sync": flavour, "precision": precision}
    cases = {
        key: e
        for key, e in every_case.items()
        if all(verdicts.case_fields(e).get(name) == value for name, value in main.items())
    }
    entries = list(cases.values())
    page = the_run(directory, rows, run)
    chosen = default_case(run, entries)
    judged_all, judged = judge_sweep(every, run, main)
    result: dict[str, Any] = {
        **page,
        "ks": sorted({e.k for e in entries}),
        "ns": sorted({e.n for e in entries}),
        "strategies": sorted({e.strategy for e in entries}, key=strategy_order),
        "default": chosen,
        "verdicts": judged,  # the main flavour's comparisons: what the tables show
        "verdicts_json": judged_all,  # every flavour's: verdicts.json
        "grad_sync": flavour,
        "precision": precision,
        "precisions": sorted({e.precision for e in every}, key=precision_order),
        "recipe": recipe(rows, every, page["sweep"]),
        "errors": error_table(every, flavour),
        "grad_checks": check_summary(every),
        "settings": settings_table(every, judged_all),
        "flavours": flavour_table(every, judged_all),
        "cases": profile.with_traces(directory, case_table(entries, judged)),
        "overheads": core_overheads(entries),
        "overhead_limit": (targets.OVERHEAD_MAX, targets.OVERHEAD_CI_MAX),
        "targets": targets.evaluate(cases, judged, every_case),
        "flamegraphs": flamegraphs(directory, entries),
        "profiles": profile.profiles(directory, entries, chosen),
    }
    return {**result, **at_the_answer(entries, chosen, judged, result["cases"])}


def the_run(directory: Path, rows: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """What the page says of the run as a whole: its settings and environment, its rows,
    where its time went, its failed and noisy processes, pytest-benchmark's figures."""
    ok_rows = [r for r in rows if r.get("status") == "ok"]
    first = ok_rows[0] if ok_rows else (rows[0] if rows else {})
    return {
        "directory": directory,
        "world_size": max((r.get("world_size") or 1 for r in rows), default=1),
        "workload": first["workload"],
        "has_sync": any("sync" in (r.get("phases") or {}) for r in ok_rows),
        "run": run,
        "sweep": run.get("sweep") or {},
        "env": {**(run.get("env") or {}), **(first.get("env") or {})},
        "first": first,
        "rows": len(rows),
        "ok_rows": len(ok_rows),
        "wall": wall_time(rows),
        "parallel": first.get("parallel", "none"),
        "failed": [r for r in rows if r.get("status") != "ok"],
        "noisy": [r["case_id"] for r in ok_rows if verdicts.noisy(r)],
        "noisy_pressure": verdicts.NOISY_PRESSURE,
        "noisy_switches": verdicts.NOISY_SWITCHES_PER_S,
        # which signal judged the rows: psi where it exists, else involuntary switches
        "noise_signals": sorted({verdicts.case_noise(r).signal or "none" for r in ok_rows}),
        "pytest_benchmark": _pytest_benchmark(directory),
        "results": RESULTS,
    }


def at_the_answer(entries, chosen: tuple[int, int] | None, judged, cases) -> dict[str, Any]:
    """What the page shows at the answer's K and N: timelines, costs, the answer, slopes."""
    if not chosen:
        return {"timelines": [], "costs": [], "answer": None, "slopes": [], "default_cases": []}
    k, n = chosen
    return {
        "timelines": timelines(entries, k, n),
        "costs": cost_table(entries, k),
        "answer": answer(entries, k, n, judged),
        "slopes": reset_slopes(entries, k),
        "default_cases": [c for c in cases if (c["k"], c["n"]) == (k, n)],
    }
