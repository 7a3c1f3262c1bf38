"""The answer as a decision: the strategy to use in every group a sweep measured (K, N and the
loop's settings), the whole set it ties with, the rule that chose it and what is left open.

The rule (RULE, written once here; docs/method.md quotes it): among the strategies not decided
slower than the fastest, the leanest by the exact memory verdicts, then the reports' order. A
twin of a strategy (the A/A plugin's ``native_twin``) is ``same`` on time and memory, so the
order decides, and the original comes first: a twin never wins for speed alone.
"""

from __future__ import annotations

import math
from collections import defaultdict

from reports.judge import noise, verdicts, wording
from reports.judge.rows import strategy_order
from reports.schema.records import Entry
from reports.schema.settings import is_base, value_order
from reports.schema.verdict_records import Decision, Verdict, VerdictFile

RULE = (
    "Per group (K, N and the loop's settings): the candidates are the strategies that finished "
    "and do not leak (CPU pressure is in their intervals and is stated beside the answer; it "
    "never withholds one); the slower are the candidates whose window verdict against another "
    "candidate is higher; the fastest is the remaining candidate with the lowest paired "
    "overhead; the tie set is every remaining candidate whose window verdict against the "
    "fastest is not higher (same, unclear or lower), an unclear one only where its 95% "
    "interval against it does not lie above 1; the choice is the tie set's leanest: "
    "lower peak memory by its verdict, then, where peaks are same, lower held memory, then, "
    "where that is same too, the first in the reports' order (native, then by name). Open: an "
    "unclear window verdict of the choice against the fastest (more processes could put the "
    "choice out of the tie set)."
)
MEMORY = ("peak_memory", "held_memory")


def decisions(entries: list[Entry], result: VerdictFile) -> list[Decision]:
    """One decision per group of ``entries`` that finished, in verdicts.json's group order; the
    base build's twins (``--base``) are no candidates: the answer is the working tree's."""
    groups: dict[tuple, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.phases and not is_base(e.strategy):
            groups[noise.group_key(e)].append(e)
    floors = {(g.k, g.n, repr(sorted(g.case.items()))): g for g in result.noise_floor}
    out = []
    # K and N, then the loop's settings and ranks, each value by its type (8 before 16)
    for _, here in sorted(groups.items(), key=lambda kv: value_order(kv[0])):
        first = here[0]
        case = noise.case_fields(first)
        floor = floors.get((first.k, first.n, repr(sorted(case.items()))))
        out.append(decide(here, result, floor.resolution if floor else None))
    return out


def decide(here: list[Entry], result: VerdictFile, resolution: float | None) -> Decision:
    """The decision in one group (``here``: its finished cases), by RULE."""
    k, n, case = here[0].k, here[0].n, noise.case_fields(here[0])
    leaky = {  # a growth verdict's case holds grad_sync and precision only
        g.strategy
        for g in result.leaks
        if (g.k, g.n) == (k, n) and all(case.get(key) == v for key, v in g.case.items())
    }
    left_out = sorted((e.strategy for e in here if e.strategy in leaky), key=strategy_order)
    candidates = sorted(
        (e for e in here if e.strategy not in left_out and e.overhead.ratio is not None),
        key=lambda e: strategy_order(e.strategy),
    )
    pressed = sorted((e.strategy for e in candidates if noise.noisy_case(e)), key=strategy_order)
    out = Decision(
        k=k,
        n=n,
        case=case,
        use=None,
        left_out=left_out,
        under_pressure=pressed,
        resolution=resolution,
    )
    if not candidates:
        out.why = "No strategy finished without a leak here."
        return out

    def verdict(a: str, b: str, metric: str):
        return verdicts.lookup(result, a, b, k, n, metric, case)

    slower = slower_than_another([e.strategy for e in candidates], result, k, n, case)
    remaining = [e for e in candidates if e.strategy not in slower] or candidates
    fastest = min(remaining, key=lambda e: e.overhead.ratio or math.inf).strategy
    ties = []
    for e in remaining:
        c = verdict(e.strategy, fastest, "window")
        # higher, or unclear with a 95% interval above 1 (a stricter level left it undecided):
        # a leaner strategy measurably slower than the fastest is no tie (issue 62); same is
        # (a difference inside the margin does not matter)
        undecided_above = c is not None and c.verdict == Verdict.UNCLEAR and (c.ci_low or 0) > 1
        if c is not None and (c.verdict == Verdict.HIGHER or undecided_above):
            slower.append(e.strategy)
        else:
            ties.append(e.strategy)
    slower = sorted(set(slower), key=strategy_order)
    # king of the hill over the ties in the reports' order: a challenger wins on a lower peak,
    # or a same peak and a lower held; anything else (same, unclear, no figure) keeps the order
    use = ties[0]
    for challenger in ties[1:]:
        if winner_on_memory(challenger, use, verdict):
            use = challenger
    # what set the choice apart from the rest of the ties: the weakest of its reasons
    reasons = {winner_on_memory(use, s, verdict) or "order" for s in ties if s != use}
    by = next((r for r in ("order", "held_memory", "peak_memory") if r in reasons), "time")
    out.use, out.fastest, out.ties, out.slower, out.by = use, fastest, ties, slower, by
    lead = verdict(use, fastest, "window") if use != fastest else None
    if lead is not None and lead.verdict == Verdict.UNCLEAR:
        out.open.append(f"{use}/{fastest} window: {wording.ratio_text(lead)}")
    out.why = why(out, here, lead)
    return out


def slower_than_another(
    names: list[str], result: VerdictFile, k: int, n: int, case: dict | None = None
) -> list[str]:
    """The strategies of ``names`` whose window verdict (``result``'s, at K, N and ``case``)
    against another of them is ``higher``: never the answer, whatever a point estimate says."""
    return [
        a
        for a in names
        if any(
            (c := verdicts.lookup(result, a, b, k, n, "window", case)) is not None
            and c.verdict == Verdict.HIGHER
            for b in names
            if b != a
        )
    ]


def winner_on_memory(challenger: str, incumbent: str, verdict) -> str | None:
    """``peak_memory`` or ``held_memory`` where the challenger is leaner by RULE, else None."""
    for metric in MEMORY:
        c = verdict(challenger, incumbent, metric)
        if c is None or c.verdict == Verdict.HIGHER:
            return None
        if c.verdict == Verdict.LOWER:
            return metric
        if c.verdict != Verdict.SAME:
            return None
    return None


def why(out: Decision, here: list[Entry], lead) -> str:
    """One sentence: how RULE chose ``out.use``."""
    by_name = {e.strategy: e for e in here}
    use, fastest = out.use, out.fastest
    ratio = by_name[use].overhead.ratio
    others = [s for s in out.ties if s != use]
    if use == fastest:
        text = f"`{use}` is the fastest ({ratio:.3f}× the plain loop)"
    else:
        text = f"`{use}` is not decided slower than the fastest, `{fastest}`"
        text += f" ({lead.verdict}: {wording.ratio_text(lead)})" if lead else ""
    if out.by == "time":
        text += "; every other candidate is decided slower" if out.slower else ""
    if out.under_pressure:
        pressed = ", ".join(f"`{s}`" for s in out.under_pressure)
        text += (
            f" (measured under CPU pressure: {pressed}; the pressure widens the intervals, and "
            "the verdicts hold as stated)"
        )
    elif out.by in MEMORY:
        key = "peak_bytes" if out.by == "peak_memory" else "held_bytes"
        mine = verdicts.memory_figure(by_name[use], key)
        rest = [verdicts.memory_figure(by_name[s], key) for s in others]
        rest = [v for v in rest if v is not None]
        text += f"; of the {len(out.ties)} tied on time it needs the least {key[:4]} memory"
        if mine is not None and rest:
            text += f" ({mib(mine)} MiB; the others {mib(min(rest))}"
            text += f"-{mib(max(rest))} MiB)" if max(rest) != min(rest) else " MiB)"
    elif others:  # none where every other candidate is slower (by "time")
        tied = ", ".join(f"`{s}`" for s in others)
        text += f"; it ties with {tied} on time and memory, and comes first in the order"
    return text + "."


def mib(n: float) -> str:
    return f"{n / 2**20:,.2f}"


def agree(found: list[Decision]) -> str | None:
    """The one strategy every group chose, or None where they differ (or none chose)."""
    uses = {d.use for d in found}
    return uses.pop() if len(uses) == 1 and None not in uses else None


def varying(found: list[Decision]) -> list[str]:
    """The loop settings whose values differ between the groups (the decision table's columns
    besides K and N)."""
    names = [name for d in found[:1] for name in d.case]
    return [name for name in names if len({repr(d.case.get(name)) for d in found}) > 1]
