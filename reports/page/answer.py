"""The report's answer at one K and N: the fastest and the leanest strategy with their
verdicts against the runner-up, the one sentence of advice, and how each strategy's reset grows
with live tensors (the slopes)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from reports.judge import decision, leaks, noise, stats, verdicts, wording
from reports.judge.rows import memory_note, strategy_order
from reports.page.records import Answer, Pick, Reference, Slope, SlopePoint
from reports.schema.records import Entry, RecordError, RunFile
from reports.schema.verdict_records import Verdict, VerdictFile, held_to_version


def default_case(run: RunFile, entries: list[Entry]) -> tuple[int, int] | None:
    """The K and N the answer is given for: the sweep's first K, and N=0 (no ballast)."""
    ok = [e for e in entries if e.phases]
    if not ok:
        return None
    ks = sorted({e.k for e in ok})
    ns = sorted({e.n for e in ok})
    listed = run.sweep.get("accumulate") or []
    k = next((k for k in listed if k in ks), ks[0])
    n = 0 if 0 in ns else ns[0]
    return k, n


def answer(entries: list[Entry], k: int, n: int, result: VerdictFile) -> Answer:
    """Fastest (lowest paired overhead) and leanest (lowest peak bytes) at K, N, with verdicts.

    Cases measured under CPU pressure stay in (the pressure is in their intervals), and the
    answer says which; a strategy that a verdict calls slower than another is never the
    fastest (``decision.slower_than_another``).
    """
    here = [e for e in entries if e.phases and (e.k, e.n) == (k, n)]
    leaky = leaks.leaking(result, k, n)  # never the answer, on time or on memory
    here = [e for e in here if e.strategy not in leaky]
    pressed = sorted(e.strategy for e in here if noise.noisy_case(e))
    every = here
    slower = set(decision.slower_than_another([e.strategy for e in here], result, k, n))
    # the group's noise at K, N (the precision the answer reads: the first group there)
    floor = next((f for f in result.noise_floor if (f.k, f.n) == (k, n)), None)
    out = Answer(
        k=k,
        n=n,
        candidates=len(here),
        under_pressure=pressed,
        excluded_leaking=[c for c in result.leaks if (c.k, c.n) == (k, n)],
        resolution=floor.resolution if floor else None,
        between_process_sd=floor.sd if floor else None,
        min_effect=result.min_effect,
        leanest=leanest(every, k, n, result),
    )
    if not here:
        out.advice = f"No strategy finished without a leak at K={k}, N={n}."
        return leak_advice(out)
    # never one a verdict calls slower than another first, whatever its point estimate
    by_time = sorted(here, key=lambda e: (e.strategy in slower, e.overhead.ratio or math.inf))
    fastest = by_time[0]
    out.fastest = Pick(
        strategy=fastest.strategy,
        overhead=fastest.overhead,
        window=fastest.phases["window"],
        cv=fastest.phases["window"].cv,
    )
    if len(by_time) > 1:
        runner = by_time[1]
        out.fastest.runner_up = Pick(strategy=runner.strategy, overhead=runner.overhead)
        out.fastest.lead = verdicts.lookup(
            result, fastest.strategy, runner.strategy, k, n, "window"
        )
    out.advice = advice(out, entries, k)
    return leak_advice(out)


def leak_advice(out: Answer) -> Answer:
    """The advice says which strategies leak, and that they were left out of it."""
    leaky = out.excluded_leaking
    if leaky:
        names = ", ".join(_name(c.strategy) for c in leaky)
        worst = max(c.excess_bytes_per_window or 0.0 for c in leaky)
        out.advice += (
            f" Left out: {names} {'leaks' if len(leaky) == 1 else 'leak'} memory (up to "
            f"{worst / 2**10:,.0f} KiB per window beyond the plain loop's growth)."
        )
    return out


def leanest(here: list[Entry], k: int, n: int, result: VerdictFile) -> Pick | None:
    """The lowest peak at K, N and its verdict against the runner-up."""
    sized = [(e, verdicts.memory_figure(e, "peak_bytes")) for e in here]
    sized = sorted(((e, v) for e, v in sized if v is not None), key=lambda ev: ev[1])
    if not sized:
        return None
    lean, peak = sized[0]
    out = Pick(
        strategy=lean.strategy,
        peak_bytes=peak,
        held_bytes=verdicts.memory_figure(lean, "held_bytes"),
        method=memory_note(lean.rows, "peak_method"),
    )
    if len(sized) > 1:
        other, other_peak = sized[1]
        out.runner_up = Pick(
            strategy=other.strategy,
            peak_bytes=other_peak,
            held_bytes=verdicts.memory_figure(other, "held_bytes"),
        )
        out.lead = verdicts.lookup(result, lean.strategy, other.strategy, k, n, "peak_memory")
    return out


def _name(strategy: str) -> str:
    return f"`{strategy}`"


def _ci(c) -> str:
    return f"ratio {wording.ratio_text(c)}"


def advice(result: Answer, entries: list[Entry], k: int) -> str:
    """One sentence from the verdicts: "use X" only when X is lower than the runner-up."""
    fastest, leanest = result.fastest, result.leanest
    if not fastest:
        return "No strategy finished, so there is nothing to advise."
    name = fastest.strategy
    lead = fastest.lead
    resolution = result.resolution
    tells = f"this sweep tells apart {resolution:.1%} here" if resolution is not None else ""
    if lead is None:
        text = f"Only {_name(name)} finished here, so there is nothing to compare it with"
    elif lead.verdict == Verdict.LOWER:
        text = (
            f"Use {_name(name)} for speed: it is lower than {_name(lead.b)}, the next "
            f"fastest ({_ci(lead)}), significant over the sweep and beyond min-effect "
            f"{result.min_effect:.0%}"
        )
    else:
        why = {
            Verdict.SAME: f"their 90% interval lies within +-{result.min_effect:.0%}",
            Verdict.UNCLEAR: (
                f"the difference is neither significant beyond min-effect "
                f"{result.min_effect:.0%} nor inside it ({tells}; more processes would "
                "narrow it)"
                if resolution is not None
                else "no variance between processes was measured here (one process per "
                "strategy, no control, nothing to borrow), so no difference in time is called"
            ),
            Verdict.HIGHER: "the ranking by point estimate disagrees with the CI",
        }[lead.verdict]
        text = (
            f"{_name(name)} and {_name(lead.b)} tie on speed here ({_ci(lead)}: "
            f"{lead.verdict}, because {why}), so choose on memory"
        )
    if leanest:
        mem = leanest.lead
        if leanest.strategy == name and mem and mem.verdict == Verdict.LOWER:
            text += f", and {_name(name)} also needs the least memory"
        elif mem and mem.verdict == Verdict.LOWER:
            text += f"; {_name(leanest.strategy)} needs the least memory at peak"
        elif mem:
            text += (
                f"; {_name(leanest.strategy)} and {_name(mem.b)} peak within "
                f"{result.min_effect:.0%} of each other"
            )
    worst = steepest(entries, k)
    if worst and worst.per_10k_s > 1e-3:  # more than 1 ms more per 10,000 live tensors
        text += (
            f"; avoid {_name(worst.strategy)} where many tensors are alive: its reset grows by "
            f"{worst.per_10k_s * 1e3:.1f} ms per 10,000 live tensors"
        )
    return text + "."


SAMPLES = Path(__file__).resolve().parents[1] / "samples"  # committed full sweeps (git-tracked)
FULL_K, FULL_N = "--accumulate 1,4", "--live-tensors 0,100000"  # the default sweep's axes


def unseen(entries: list[Entry]) -> list[str]:
    """What a sweep left out of its answer, plainly: an axis run at one value hides an effect."""
    names = {e.name for e in entries}
    out = []
    if entries and max(e.n for e in entries) == 0:
        out.append(
            "Only N=0 was run, so `global`'s search hazard (its reset walks every live tensor "
            f"in the process, djl #2101) is invisible here: `{FULL_N}` shows it."
            if "global" in names
            else "Only N=0 was run: how a reset grows with unrelated live tensors is not "
            f"measured (`{FULL_N}`)."
        )
    if entries and {e.k for e in entries} == {1}:
        out.append(
            "Only K=1 was run: accumulating several micro-batches per window is not measured "
            f"(`{FULL_K}`)."
        )
    return out


def full_sweep(entries: list[Entry], k: int, n: int) -> Reference | None:
    """The committed sample of a full sweep of the same workload, preset, device and precision
    (reports/samples/), with what it told apart at K, N: a measured figure, not a typed one."""
    if not entries or not SAMPLES.is_dir():
        return None
    e = entries[0]
    for folder in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        try:
            run = RunFile.read(folder)
            judged = json.loads((folder / "verdicts.json").read_text(encoding="utf-8"))
            rows = len((folder / "results.jsonl").read_text(encoding="utf-8").splitlines())
            held_to_version(judged, str(folder / "verdicts.json"))  # another version's: skipped
        except (OSError, ValueError, RecordError):
            continue
        if run is None or not _same_kind(run.sweep, e):
            continue
        for group in judged.get("noise_floor") or []:
            here = (group.get("k"), group.get("n")) == (k, n)
            if here and (group.get("case") or {}).get("precision") == e.precision:
                resolution = group.get("resolution")
                if isinstance(resolution, (int, float)):
                    return Reference(folder.name, float(resolution), rows)
    return None


def _same_kind(sweep: dict[str, Any], e: Entry) -> bool:
    """A full sweep (not --quick, the default axes) of the entry's workload, preset and device."""
    return (
        not sweep.get("quick")
        and sweep.get("accumulate") == [1, 4]
        and sweep.get("live_tensors") == [0, 100_000]
        and (sweep.get("workload"), sweep.get("preset"), sweep.get("device"))
        == (e.workload, e.preset, e.device)
        and e.precision in (sweep.get("precision") or ["fp32"])
    )


def reset_slopes(entries: list[Entry], k: int) -> list[Slope]:
    """Per strategy at K: reset medians over N and their least-squares slope (s per tensor)."""
    out = []
    for strategy in sorted({e.strategy for e in entries}, key=strategy_order):
        points = sorted(
            ((e.n, e.phases["reset"]) for e in entries
             if e.strategy == strategy and e.k == k and "reset" in e.phases),
            key=lambda point: point[0],
        )  # fmt: skip
        if not points:
            continue
        xs = [n for n, _ in points]
        ys = [p.median_s for _, p in points]
        slope = stats.slope(xs, ys)
        out.append(
            Slope(
                strategy=strategy,
                points=[SlopePoint(n, p) for n, p in points],
                slope_s=slope,
                per_10k_s=slope * 1e4 if not math.isnan(slope) else None,
            )
        )
    return out


def steepest(entries: list[Entry], k: int) -> Slope | None:
    slopes = [s for s in reset_slopes(entries, k) if s.per_10k_s is not None]
    return max(slopes, key=lambda s: s.per_10k_s, default=None)
