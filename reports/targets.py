"""The targets a sweep is judged by (issue: the measurement engine), computed from its rows."""

from __future__ import annotations

from typing import Any

from reports import stats

OVERHEAD_MAX, OVERHEAD_CI_MAX = 1.03, 1.05
LAZY_OVER_BLOCK_MAX = 0.5
GLOBAL_GROWTH_MIN, BLOCK_GROWTH_MAX = 1.5, 1.2


def _reset(pooled, strategy: str, k: int, n: int) -> float | None:
    for entry in pooled.values():
        if (entry["strategy"], entry["accumulate"], entry["live_tensors"]) == (strategy, k, n):
            return entry.get("phases", {}).get("reset", {}).get("median_s")
    return None


def overhead(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The core's overhead pooled over rounds: native and baseline windows, paired in-process."""
    pairs = [
        (r["samples"]["window"], r["samples"].get("baseline_window", []))
        for r in entry.get("rows", [])
        if r.get("samples", {}).get("baseline_window")
    ]
    if not pairs:
        return None
    native = [x for a, _ in pairs for x in a]
    baseline = [x for _, b in pairs for x in b]
    return stats.ratio_of_medians(native, baseline, paired=True)


def evaluate(pooled: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target that this sweep's cases can answer: what, measured, limit, ok."""
    out = []
    ks = sorted({e["accumulate"] for e in pooled.values()})
    ns = sorted({e["live_tensors"] for e in pooled.values()})
    for entry in pooled.values():
        if entry["strategy"] != "native" or (result := overhead(entry)) is None:
            continue
        label = f"K={entry['accumulate']}, N={entry['live_tensors']}"
        out.append(
            {
                "target": f"core overhead, native / baseline interleaved ({label})",
                "value": (
                    f"{result['ratio']:.3f} (95% CI {result['ci_low']:.3f}-{result['ci_high']:.3f})"
                ),
                "limit": f"<= {OVERHEAD_MAX} with CI high <= {OVERHEAD_CI_MAX}",
                "ok": result["ratio"] <= OVERHEAD_MAX and result["ci_high"] <= OVERHEAD_CI_MAX,
            }
        )
    for k in ks:
        lazy, block = _reset(pooled, "lazy", k, ns[0]), _reset(pooled, "block", k, ns[0])
        if lazy is not None and block:
            out.append(
                {
                    "target": f"lazy reset / block reset (K={k}, N={ns[0]})",
                    "value": f"{lazy / block:.3f} ({lazy * 1e6:.1f} us / {block * 1e6:.1f} us)",
                    "limit": f"<= {LAZY_OVER_BLOCK_MAX}",
                    "ok": lazy / block <= LAZY_OVER_BLOCK_MAX,
                }
            )
        if len(ns) > 1:
            for name, bound, sense in (
                ("global", GLOBAL_GROWTH_MIN, ">="),
                ("block", BLOCK_GROWTH_MAX, "<="),
            ):
                low, high = _reset(pooled, name, k, ns[0]), _reset(pooled, name, k, ns[-1])
                if low and high is not None:
                    growth = high / low
                    out.append(
                        {
                            "target": f"{name} reset at N={ns[-1]:,} / at N={ns[0]} (K={k})",
                            "value": f"{growth:.2f}x ({low * 1e3:.3f} ms -> {high * 1e3:.3f} ms)",
                            "limit": f"{sense} {bound}",
                            "ok": growth >= bound if sense == ">=" else growth <= bound,
                        }
                    )
    checks = [
        r["grad_check"] for e in pooled.values() for r in e.get("rows", []) if r.get("grad_check")
    ]
    if checks:
        worst = max(c["max_rel_diff"] for c in checks)
        tolerance = max(c["tolerance"] for c in checks)
        out.append(
            {
                "target": f"every gradient check ({len(checks)} cases), max relative difference",
                "value": f"{worst:.2e}",
                "limit": f"<= {tolerance:g}",
                "ok": all(c["ok"] for c in checks),
            }
        )
    return out
