"""The targets a sweep is judged by, computed from its rows and verdicts; each prints its figure
and its limit, and each can fail."""

from __future__ import annotations

from msgspec import Struct

from reports.judge import rows, verdicts, wording
from reports.schema.records import Entry, Paired
from reports.schema.row_parts import GradCheck
from reports.schema.verdict_records import Comparison, Verdict, VerdictFile


class Target(Struct, frozen=True):
    """A target the issues set, checked on this sweep (``targets.evaluate``)."""

    target: str  # what is measured, in words
    value: str  # the figure, formatted
    limit: str  # the target, in words
    ok: bool


OVERHEAD_MAX, OVERHEAD_CI_MAX = 1.03, 1.05
GLOBAL_GROWTH_MIN, BLOCK_GROWTH_MAX = 1.5, 1.2


def overhead_ok(result: Paired) -> bool:
    return (
        result.ratio is not None
        and result.ci_high is not None
        and result.ratio <= OVERHEAD_MAX
        and result.ci_high <= OVERHEAD_CI_MAX
    )


def _entry(pooled, strategy: str, k: int, n: int) -> Entry | None:
    for entry in pooled.values():
        if (entry.strategy, entry.k, entry.n) == (strategy, k, n):
            return entry if entry.phases else None
    return None


def _reset(pooled, strategy: str, k: int, n: int) -> float | None:
    entry = _entry(pooled, strategy, k, n)
    return entry.phases["reset"].median_s if entry and "reset" in entry.phases else None


def _ratio(c: Comparison) -> str:
    return f"{wording.ratio_text(c)}: {c.verdict}"


def _core(pooled: dict[tuple, Entry]) -> list[Target]:
    """native against the plain loop beside it: the core's own overhead, per K and N."""
    out = []
    for entry in pooled.values():
        if entry.strategy != "native" or not entry.phases:
            continue
        result = entry.overhead
        if result.ratio is None:
            continue
        out.append(
            Target(
                target=f"core overhead, native / plain loop, paired (K={entry.k}, N={entry.n})",
                value=wording.ratio_text(result),
                limit=f"<= {OVERHEAD_MAX} with CI high <= {OVERHEAD_CI_MAX}",
                ok=overhead_ok(result),
            )
        )
    return out


def _strategies(pooled, judged, k: int, ns: list[int]) -> list[Target]:
    """At one K: lazy never slower than block; global's hazard at the largest N found; how
    global's and block's resets grow with N."""
    out = []
    lazy = verdicts.lookup(judged, "lazy", "block", k, ns[0], "window")
    if lazy and lazy.ratio is not None:
        out.append(
            Target(
                target=f"lazy window / block window, paired ratios (K={k}, N={ns[0]})",
                value=_ratio(lazy),
                limit="verdict not 'higher': lazy is never slower than block",
                ok=lazy.verdict != Verdict.HIGHER,
            )
        )
    if len(ns) < 2:
        return out
    hazard = verdicts.lookup(judged, "global", "block", k, ns[-1], "window")
    if hazard and hazard.ratio is not None:
        out.append(
            Target(
                target=f"global window / block window at N={ns[-1]:,} (K={k})",
                value=_ratio(hazard),
                limit="verdict 'higher': the djl #2101 hazard is found",
                ok=hazard.verdict == Verdict.HIGHER,
            )
        )
    for name, bound, sense in (
        ("global", GLOBAL_GROWTH_MIN, ">="),
        ("block", BLOCK_GROWTH_MAX, "<="),
    ):
        low, high = _reset(pooled, name, k, ns[0]), _reset(pooled, name, k, ns[-1])
        if low and high is not None:
            growth = high / low
            out.append(
                Target(
                    target=f"{name} reset at N={ns[-1]:,} / at N={ns[0]} (K={k})",
                    value=f"{growth:.2f}x ({low * 1e3:.3f} ms -> {high * 1e3:.3f} ms)",
                    limit=f"{sense} {bound}",
                    ok=growth >= bound if sense == ">=" else growth <= bound,
                )
            )
    return out


def _gradient_checks(entries) -> list[Target]:
    """Every precision's cases (the tables show one): a line per precision, its tolerances."""
    by_precision: dict[str, list[tuple[Entry, list[GradCheck]]]] = {}
    for e in entries:
        found = [r.grad_check for r in e.rows if r.grad_check]
        if found:
            by_precision.setdefault(e.precision, []).append((e, found))
    out = []
    for precision, here in sorted(by_precision.items()):
        checks = [c for _, found in here for c in found]
        # each window is checked against the float64 sum of its micro-batch gradients, or (a sum
        # kept in the gradient's dtype) against the same additions in that dtype
        by = [rows.accepted(c) for c in checks]
        worst = max(diff for diff, _, _ in by)
        low = min(tol for _, tol, _ in by)
        high = max(tol for _, tol, _ in by)
        windows = min(c.windows or 1 for c in checks)
        same = sum(c.accepted_by == "same-order sum" for c in checks)
        note = f" (or, {same} of them, the same additions in the gradient's dtype)" if same else ""
        out.append(
            Target(
                target=f"every gradient check, {precision} ({len(here)} cases, "
                f"{len(checks)} processes, {windows} windows each), max relative difference "
                f"from the float64 sum{note}",
                value=f"{worst:.2e}",
                limit=f"<= {high:g}" if low == high else f"<= {low:g} to {high:g}",
                ok=all(c.ok for c in checks),
            )
        )
    return out


def evaluate(
    pooled: dict[tuple, Entry],
    judged: VerdictFile,
    every: dict[tuple, Entry] | None = None,
) -> list[Target]:
    """Each target that this sweep's cases (the tables' precision and flavour) can answer:
    what, measured, limit, ok; the gradient checks of ``every`` case, per precision."""
    ks = sorted({e.k for e in pooled.values()})
    ns = sorted({e.n for e in pooled.values()})
    out = _core(pooled)
    for k in ks if ns else []:
        out += _strategies(pooled, judged, k, ns)
    return out + _gradient_checks((every or pooled).values())
