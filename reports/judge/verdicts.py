"""Paired ratios into verdict words: ``lower``, ``higher``, ``same`` or ``unclear``.

The rule is written once, in docs/method.md ("The verdict rule"); ``RULE`` below is its
one-line form that verdicts.json and the pages carry. This module is the only place a verdict
is decided, with the noise of ``reports.judge.noise`` (a group's variance between processes and
machines, its resolution; a case on a busy machine):

- ``strategy_comparisons``, ``loop_verdicts``: process figures into comparisons (unpaired, or
  paired where strategies shared ``stats.OWN_VARIANCE_PROCESSES`` or more processes);
- ``decide_time`` (Benjamini-Hochberg over the sweep, at a look's spent alpha) and ``judge``:
  the words;
  memory's exact rule beside them;
- ``decide`` (a CI against a margin): the rule of the history page and the micro-benchmarks,
  whose figures are not process figures of a sweep.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from itertools import combinations
from typing import Any

from reports.judge import claims, leaks, machines, stats
from reports.judge.noise import (
    MACHINE_LEVEL,
    MACHINE_METHOD,
    MEMORY_KEYS,
    NOISE_METHOD,
    case_fields,
    case_noise,
    group_key,
    noise,
    noisy_case,
    paired_logs,
    paired_resolution,
    paired_within,
    process_figures,
    side_within,
)
from reports.judge.rows import LOOP_SAMPLES, spell
from reports.schema.records import Entry
from reports.schema.row_parts import LoopRatio
from reports.schema.settings import is_base, twins, value_order
from reports.schema.verdict_records import (
    CaseOverhead,
    Comparison,
    ErrorControl,
    GroupNoise,
    LoopComparison,
    Verdict,
    VerdictFile,
)

METRICS = ("window", "peak_memory", "held_memory")
DEFAULT_MIN_EFFECT = 0.02
RULE = (
    "time: a Student-t interval of per-process figures (each side's own variance with 4+ "
    "processes, Welch df; else the group's pooled variance; each side never below what its "
    "own processes' pairs show); the margin's claim, one per comparison by where its "
    "estimate lies: same where two one-sided tests put it inside 1 +- min_effect, higher/lower "
    "where a t-test puts it beyond; else higher/lower where the t-test of ratio 1 puts "
    "it clear of 1, at any size, at a twentieth of alpha (beyond: its 95% interval clears the "
    "margin); each family's p adjusted by Benjamini-Hochberg over the sweep's "
    "time comparisons, 0.05 spent over the looks the sweep took (Lan-DeMets, O'Brien-Fleming "
    "type); otherwise unclear, saying why (too few data, or on the margin). memory: exact, "
    "beyond max(min_effect, memory floor) of the larger is lower/higher, else same"
)
# where a sweep ran on more than one machine (machines.machine_of), RULE and NOISE_METHOD go on
MACHINE_RULE = (
    "; time whose sides ran on different machines, not paired in one process: the interval "
    "also carries the variance between machines (the group's, from the control), times the sum "
    "of each side's squared shares of its machines, Welch-Satterthwaite df; unmeasured: unclear"
)
MEMORY_METHOD = (
    "exact bytes: no CI; a difference beyond max(min_effect, memory floor) of the larger decides"
)


def decide(low: float | None, high: float | None, min_effect: float, floor: float) -> Verdict:
    """The verdict word of a ratio's CI."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return Verdict.UNCLEAR
    # symmetric on the log scale, so a / b and b / a always get mirrored words
    threshold = max(min_effect, floor)
    if low > 1 + threshold:
        return Verdict.HIGHER
    if high < 1 / (1 + threshold):
        return Verdict.LOWER
    if low >= 1 / (1 + min_effect) and high <= 1 + min_effect:
        return Verdict.SAME
    return Verdict.UNCLEAR


def decide_exact(
    a: float | None, b: float | None, min_effect: float, floor: float = 0.0
) -> dict[str, Any]:
    """An exact figure a against b: ratio and verdict, no CI; ``floor``: the relative spread
    the same figure showed between identical processes (unclear within it)."""
    if a is None or b is None:
        return {
            "ratio": None,
            "ci_low": None,
            "ci_high": None,
            "significant": False,
            "verdict": Verdict.UNCLEAR,
            "method": MEMORY_METHOD,
        }
    ratio = a / b if b else None
    larger = max(a, b)
    if a == b or abs(a - b) <= min_effect * larger:
        verdict = Verdict.SAME
    elif abs(a - b) <= floor * larger:
        verdict = Verdict.UNCLEAR
    else:
        verdict = Verdict.HIGHER if a > b else Verdict.LOWER
    return {
        "ratio": ratio,
        "ci_low": None,
        "ci_high": None,
        "significant": a != b,
        "verdict": verdict,
        "method": MEMORY_METHOD,
    }


def memory_figure(entry: Entry, key: str) -> float | None:
    """An exact memory figure of a case: its median over processes (they agree when exact)."""
    values = [v for v in (getattr(r.memory, key) for r in entry.rows) if v is not None]
    return statistics.median(values) if values else None


def claim_p(c: Comparison, min_effect: float) -> tuple[float | None, float | None]:
    """The p-values of the two claims a time comparison tests. First the claim of the margin,
    one per comparison: ``higher``/``lower`` beyond it (a t-test that the ratio lies beyond 1
    +- min_effect, ``claims.beyond_p``) where its estimate lies beyond min_effect, else
    ``same`` (two one-sided tests that it lies inside, ``claims.equivalence_p``); each null
    ends at the margin, so each claim is controlled as the other is. Then direction at any
    size: the t-test of ratio 1 (``c.p``: the interval clear of 1, as criterion.rs and pyperf
    decide it). (None, None) without an interval."""
    if c.log is None or c.ci_low is None or c.p is None:
        return None, None
    margin = math.log1p(min_effect)
    c.p_same = claims.equivalence_p(c.log, c.se, c.df, margin)
    c.p_beyond = claims.beyond_p(c.log, c.se, c.df, margin)
    return (c.p_beyond if abs(c.log) > margin else c.p_same), c.p


def judge(
    c: Comparison,
    q_margin: float | None,
    q_direction: float | None,
    min_effect: float,
    alpha: float = stats.ALPHA,
) -> Verdict:
    """The word of a time comparison from its claims' q (``claim_p``'s, each family adjusted
    over the sweep): where q_margin < alpha, its margin claim (``higher``/``lower`` with the
    estimate beyond min_effect, else ``same``: the interval inside the margin comes first);
    else ``higher``/``lower`` by the estimate's sign where q_direction < alpha x its share
    (``stats.direction_share``: 0.4 where the 95% interval is no wider than the margin on 8 df
    or more, a twentieth otherwise; the interval clear of 1, at any size); otherwise
    ``unclear``."""
    if c.log is None or c.ci_low is None:
        return Verdict.UNCLEAR
    if q_margin is not None and q_margin < alpha:
        if abs(c.log) > math.log1p(min_effect):
            return Verdict.HIGHER if c.log > 0 else Verdict.LOWER
        return Verdict.SAME
    half = stats.half_width(c.ci_low, c.ci_high)
    share = stats.direction_share(half, math.log1p(min_effect), c.df)
    if q_direction is not None and q_direction < alpha * share:
        return Verdict.HIGHER if c.log > 0 else Verdict.LOWER
    return Verdict.UNCLEAR


def beyond_margin(c: Comparison, min_effect: float) -> bool:
    """Whether a comparison's 95% interval lies clear of the margin (``beyond`` in the files:
    "beyond the 2% margin" beside its word)."""
    if c.ci_low is None or c.ci_high is None:
        return False
    return c.ci_low > 1 + min_effect or c.ci_high < 1 / (1 + min_effect)


def unclear_why(c: Comparison, min_effect: float) -> str:
    """Why an ``unclear`` time comparison is so: no interval; too few data (its 95% interval
    wider than the margin: more processes narrow it); or a difference on the margin (an
    interval no wider than it, reaching past the margin on one side and to ratio 1 or near it
    on the other)."""
    if c.ci_low is None or c.ci_high is None:
        return "no interval"
    half = stats.half_width(c.ci_low, c.ci_high)
    if half > math.log1p(min_effect):
        return f"too few data: its interval +-{math.expm1(half):.1%} is wider than the margin"
    return "on the margin: neither inside it nor clear of 1 at the level direction is decided"


# a comparison whose conditional power is below this is not worth another round (a futility stop)
LEAST_POWER = 0.1


def decidable(c: Comparison, added: int, min_effect: float) -> bool:
    """Whether a time comparison still ``unclear`` could yet be decided by ``added`` more
    processes on each side (the rounds its sweep has left): its conditional power under its
    current estimate (Lan, Simon & Halperin 1982, stochastic curtailment) is at least
    ``LEAST_POWER``. Those processes would shrink its SE by sqrt(n / (n + added)) (n: its fewer
    side's processes) to ``final``, while its estimate moves by a normal of SD sqrt(se^2 -
    final^2); the power is the chance that the estimate then clears ratio 1 by z final, z the
    normal's quantile at the direction's level (``lower``/``higher``, ``stats.direction_share``), or
    lies inside the margin by 1.645 final (``same``), with no adjustment over the sweep or its
    looks (optimistic). One it calls undecidable keeps no strategy in the
    rotation (a futility stop, never binding: it leaves a claim untested, so no error rate
    grows); one without an interval yet is decidable while rounds are left, none without."""
    if added <= 0:
        return False  # nothing more is measured: it stays as it is
    if c.log is None or c.se is None or not c.processes:
        return True
    n = min(c.processes)
    final = c.se * math.sqrt(n / (n + added))
    move = math.sqrt(max(0.0, c.se**2 - final**2))
    beyond = abs(c.log) - math.log1p(min_effect)  # > 0: beyond the margin, < 0: inside

    def power(room: float, z: float) -> float:
        if move == 0:
            return float(room > z * final)
        return float(stats.sps.norm.cdf((room - z * final) / move))

    share = stats.direction_share(1.96 * final, math.log1p(min_effect), c.df)
    z = float(stats.sps.norm.ppf(1 - stats.ALPHA * share / 2))
    return power(abs(c.log), z) + power(-beyond, 1.645) >= LEAST_POWER


def decide_time(
    comparisons: list[Comparison], min_effect: float, alpha: float = stats.ALPHA
) -> None:
    """Adjust the p-values of a sweep's time comparisons' claims together (Benjamini-Hochberg,
    ``claim_p``), then word each (in place): the error rate of every word but ``unclear`` is
    controlled over the sweep, not per comparison. ``alpha``: the level of this look
    (``claims.look_alpha`` while a sweep adds rounds, ``final_alpha`` for its report: alpha
    spent over the looks taken)."""
    timed = [c for c in comparisons if c.timed]
    ps = [claim_p(c, min_effect) for c in timed]
    q_margin = claims.adjusted([margin for margin, _ in ps])
    q_direction = claims.adjusted([direction for _, direction in ps])
    for c, qm, qd in zip(timed, q_margin, q_direction, strict=True):
        c.verdict = judge(c, qm, qd, min_effect, alpha)
        by_direction = c.verdict in (Verdict.LOWER, Verdict.HIGHER) and not (qm and qm < alpha)
        c.q = qd if by_direction else qm  # the claim that decided; unclear: the margin's
        c.significant = c.verdict in (Verdict.LOWER, Verdict.HIGHER)
        c.beyond = beyond_margin(c, min_effect) if c.significant else None
        c.why = unclear_why(c, min_effect) if c.verdict == Verdict.UNCLEAR else None


def decision_of(c: Comparison, look: int) -> dict[str, Any]:
    """What run.json keeps of a time comparison an interim look decided (``kept``)."""
    key = [c.a, c.b, c.k, c.n, dict(sorted(c.case.items())), c.metric]
    return {"key": key, "verdict": str(c.verdict), "look": look}


def kept(comparisons: list[Comparison], decided: list[dict[str, Any]], min_effect: float) -> None:
    """A look's decisions kept: a time comparison that an interim look decided (``decided``,
    ``decision_of``'s from run.json's plan) and that the report would leave ``unclear`` keeps
    the look's word (the alpha of that look was spent on it; judged again from scratch at the
    report's own level, 2.9% of the decisions of 60 simulated sweeps were taken back) where the
    report's own interval still shows it: ``higher``/``lower`` the 95% interval clear of 1 on
    that side, ``same`` the 90% interval inside the margin. A word the data since contradict, or
    no longer show, is not kept: the page never shows a word beside an interval that does not
    bear it out."""
    words = {}
    for d in decided:
        a, b, k, n, case, metric = d["key"]
        words[(a, b, k, n, repr(sorted(case.items())), metric)] = d
    margin = 1 + min_effect
    for c in comparisons:
        if not c.timed or c.verdict != Verdict.UNCLEAR or c.ci_low is None or c.ci_high is None:
            continue
        d = words.get((c.a, c.b, c.k, c.n, repr(sorted(c.case.items())), c.metric))
        word = Verdict(d["verdict"]) if d is not None else None
        shown = {
            Verdict.HIGHER: c.ci_low > 1,
            Verdict.LOWER: c.ci_high < 1,
            Verdict.SAME: c.ci90_low is not None
            and c.ci90_high is not None
            and 1 / margin < c.ci90_low
            and c.ci90_high < margin,
        }
        if word is not None and shown.get(word, False):
            c.verdict = word
            c.significant = word in (Verdict.LOWER, Verdict.HIGHER)
            c.beyond = beyond_margin(c, min_effect) if c.significant else None
            c.why = f"decided at look {d['look']}, at that look's level (kept: its alpha spent)"


def compare_time(
    ea, eb, spread: GroupNoise | None, across: bool = False, group: list | None = None
) -> dict[str, Any]:
    """a / b of two cases of one group: the contrast of their process figures (its word comes
    later, once the sweep's p-values are adjusted together: ``decide_time``); ``across``: two
    strategies of one sweep, whose sides may have run on different machines
    (``across_machines``). Two strategies rotated in the same processes are judged within
    them: the two-way fit of every strategy of ``group`` (their entries) rotated there
    (``stats.two_way_contrast``); else, in 4 or more shared processes, their differences
    paired; else the group's pooled variance."""
    fa, fb = process_figures(ea), process_figures(eb)
    shared = [p for p in fa if p in fb]
    rotated = within_processes(ea, eb, shared, group or [])
    if rotated is not None:
        c = rotated
    elif len(shared) >= stats.OWN_VARIANCE_PROCESSES:  # measured side by side: paired
        within = paired_within(ea, eb, shared)
        c = stats.paired_contrast([fa[p] - fb[p] for p in shared], within=within)
    else:  # the group's pooled variance; each side floored at its own processes' pairs
        variance, df = (spread.between, spread.df) if spread else (None, 0)
        c = stats.contrast(
            list(fa.values()),
            list(fb.values()),
            variance,
            df,
            within=side_within(ea),
            within_b=side_within(eb),
        )
    return across_machines(c, fa, fb, machines.process_machines([ea, eb]), spread) if across else c


def within_processes(ea, eb, shared: list[str], group: list) -> dict[str, Any] | None:
    """The two-way contrast of ``ea`` against ``eb`` over the processes they shared, from the
    figures every entry of ``group`` gave in those processes (``stats.two_way_contrast``);
    None where fewer than 2 shared or fewer than 3 strategies ran there."""
    if len(shared) < 2:
        return None
    table = {}
    for i, e in enumerate(group):
        mine = {p: x for p, x in process_figures(e).items() if p in shared}
        if mine:
            table[i] = mine
    a = next((i for i, e in enumerate(group) if e is ea), None)
    b = next((i for i, e in enumerate(group) if e is eb), None)
    if a not in table or b not in table:
        return None
    return stats.two_way_contrast(table, a, b, within=paired_within(ea, eb, shared))


def across_machines(
    c: dict[str, Any],
    fa: dict[str, float],
    fb: dict[str, float],
    where: dict[str, str],
    spread: GroupNoise | None,
) -> dict[str, Any]:
    """A contrast of two sides whose processes (``fa``, ``fb``; their machines ``where``) ran
    on more than one machine: it says on how many (``machines``), and, unless paired in its
    processes, its interval also carries the group's variance between machines v_m times
    sum_j w_aj^2 + sum_j w_bj^2 (w_aj: side a's share of its processes on machine j), with df
    machines - 1 (``stats.widened``); v_m unmeasured: no interval, the method says why. A
    machine's effect on one strategy's figure need not be its effect on another's, so the
    sides' machines count as their own even where they share some (never less variance)."""
    count = len({where.get(p, machines.LOCAL) for p in (*fa, *fb)})
    if count <= 1:
        return c
    c = {**c, "machines": count}
    if c.get("paired"):  # inside one process: whatever the machine did, it did to both
        return c
    weight = sum(w * w for w in machines.shares(fa, where))
    weight += sum(w * w for w in machines.shares(fb, where))
    if spread is not None and spread.machine_variance is not None and spread.machine_df > 0:
        return stats.widened(c, spread.machine_variance * weight, spread.machine_df, MACHINE_LEVEL)
    return stats.widened(c, None, 0, MACHINE_LEVEL, unmeasured(spread, count))


def unmeasured(spread: GroupNoise | None, count: int) -> str:
    """Why a comparison across ``count`` machines has no interval: the group's variance
    between machines was not measured."""
    have = spread.control_machines if spread else 0
    control = f" of the control ({spread.machine_from})" if spread and spread.machine_from else ""
    return (
        f"{MACHINE_LEVEL} not measured ({count} machines, {have} with "
        f"{machines.MIN_PER_MACHINE} or more processes{control}; needs "
        f"{machines.MIN_MACHINES}): no interval"
    )


def comparison(
    ea,
    eb,
    metric: str,
    min_effect: float,
    spread: GroupNoise | None,
    record: type[Comparison] = Comparison,
    across: bool = False,
    group: list | None = None,
    **fields: Any,
) -> Comparison:
    """a against b on one metric, as a ``record`` with ``fields`` (a, b, k, n, case, ...);
    a time comparison's word is set by ``decide_time``, a memory one's here against the
    group's memory floor. ``across``: two strategies of one sweep; ``group``: the entries of
    their group (``compare_time``)."""
    noisy_sides = noisy_case(ea) or noisy_case(eb)
    c = record(metric=metric, noisy=noisy_sides, **fields)
    if c.timed:
        return c.measured(compare_time(ea, eb, spread, across, group))
    key = MEMORY_KEYS[metric]
    floor = spread.memory.get(metric, 0.0) if spread else 0.0
    a, b = memory_figure(ea, key), memory_figure(eb, key)
    return c.measured(decide_exact(a, b, min_effect, floor))


def strategy_comparisons(
    entries: list[Entry], spreads: dict[tuple, GroupNoise], min_effect: float
) -> list[Comparison]:
    """Every unordered pair of strategies in every group, per metric (time words unset until
    ``decide_time``). A base build's twin (``--base``: ``block@base``) is compared with its own
    strategy only, as ``a`` = the working tree, ``b`` = the base (``compared``)."""
    groups: dict[tuple, list[Entry]] = defaultdict(list)
    for e in entries:
        groups[group_key(e)].append(e)
    out = []
    for key, here in sorted(groups.items(), key=lambda item: value_order(item[0])):
        spread = spreads[key]
        for ea, eb in combinations(sorted(here, key=lambda e: e.strategy), 2):
            if not compared(ea.strategy, eb.strategy):
                continue
            for metric in METRICS:
                out.append(
                    comparison(
                        ea,
                        eb,
                        metric,
                        min_effect,
                        spread,
                        across=True,
                        group=here,
                        a=ea.strategy,
                        b=eb.strategy,
                        k=key[0],
                        n=key[1],
                        case=case_fields(ea),
                    )
                )
    return out


def compared(a: str, b: str) -> bool:
    """Whether strategies ``a`` and ``b`` (sorted: a strategy before its base twin) are compared:
    two of the working tree, or one and its own base twin."""
    return twins(a, b) if is_base(a) or is_base(b) else True


def head_against_base(result: VerdictFile) -> list[Comparison]:
    """The comparisons of each strategy at the working tree against itself at the base build
    (``--base``), as ``verdicts.json`` holds them: ``a`` the working tree's, ``b`` the base's."""
    return [c for c in result.comparisons if twins(c.a, c.b)]


def by_case(entries: list[Entry]) -> list[Entry]:
    """Cases in the order verdicts.json lists them: K, N, strategy."""
    return sorted(entries, key=lambda e: (e.k, e.n, e.strategy))


def verdicts(
    entries: list[Entry],
    min_effect: float,
    looks: int = 1,
    control: str | None = None,
    taken: int = 1,
    final: bool = True,
    decided: list[dict[str, Any]] | None = None,
) -> VerdictFile:
    """verdicts.json's content: every unordered pair of strategies in every group, per metric,
    the loops compared inside each case's processes, and each group's noise and resolution.
    ``control``: the sweep's control strategy (``--control``), whose processes measure the
    spread between machines where a group ran on more than one. ``looks``: the most a sweep
    could look at its data; ``taken``: this is its ``taken``-th look, an interim one (the sweep
    deciding where to add rounds) or, ``final``, the report's, which spends what the interim
    looks left (``claims.final_alpha``) and keeps what they ``decided`` (``kept``)."""
    alpha = claims.final_alpha(taken, looks) if final else claims.look_alpha(taken, looks)
    ok = [e for e in entries if e.rows]
    spreads = noise(ok, min_effect, control)
    spread_out = any(s.machines > 1 for s in spreads.values())  # RULE's machine level applies
    comparisons = strategy_comparisons(ok, spreads, min_effect)
    grad_sync = loop_verdicts(ok, spreads)
    settings = loop_verdicts(ok, spreads, "settings")  # --compare-settings, paired in-process
    family = [*comparisons, *grad_sync, *settings]
    decide_time(family, min_effect, alpha)
    kept(comparisons, decided or [], min_effect)
    paired_resolution(spreads, comparisons, min_effect)
    return VerdictFile(
        min_effect=min_effect,
        noise_floor=[s for _, s in sorted(spreads.items(), key=lambda item: value_order(item[0]))],
        noise_floor_method=NOISE_METHOD + (MACHINE_METHOD if spread_out else ""),
        # which signal called a case noisy: psi where Linux has it, else involuntary switches
        noisy_by=sorted({case_noise(r).signal or "none" for e in ok for r in e.rows}),
        rule=RULE + (MACHINE_RULE if spread_out else ""),
        error_control=ErrorControl(
            method="Benjamini-Hochberg false discovery rate (scipy.stats."
            "false_discovery_control) over the claim of every time comparison of the sweep "
            "(higher/lower: a t-test that the ratio lies beyond 1 +- min_effect; same: "
            "two one-sided tests that it lies inside)",
            alpha=stats.ALPHA,
            looks=looks,
            alpha_per_look=alpha,
            comparisons=sum(c.timed for c in family),
            looks_taken=taken,
            spending=claims.SPENDING,
        ),
        overheads=[
            CaseOverhead(e.strategy, e.k, e.n, case_fields(e), e.overhead) for e in by_case(ok)
        ],
        comparisons=comparisons,
        grad_sync=grad_sync,
        settings=settings,
        memory_growth=leaks.growth_verdicts(ok),
        leak_rule=leaks.RULE,
    )


def loop_logs(entry: Entry, kind: str = "grad_sync") -> list[float]:
    """A case's loop over another loop of the same strategy in each of its processes (log of
    the paired ratio: ``grad_sync``: its flavour over ``every``; ``settings``: its recipe over
    the ``--compare-settings`` one)."""
    return [x for _, x in paired_logs(entry, *LOOP_SAMPLES[kind])]


def loop_sides(entry: Entry, kind: str) -> tuple[str, str]:
    """What a and b of a loop comparison are: the case's flavour and ``every``, or its
    setting and the ``--compare-settings`` one (``precision=bf16``)."""
    if kind == "grad_sync":
        return entry.grad_sync, "every"
    vs = entry.rows[0].settings_vs or LoopRatio()
    return f"{vs.setting}={spell(vs.mine)}", f"{vs.setting}={spell(vs.other)}"


def loop_verdicts(entries, spreads, kind: str = "grad_sync") -> list[LoopComparison]:
    """Each case's loop against its other loop (``grad_sync``: under FSDP2/HSDP, its flavour
    against ``every``; ``settings``: its recipe against ``--compare-settings``): the mean of its
    process figures against 1, with the between-process variance of its group (two loops of
    one process differ between processes as a strategy and the plain loop do); the word is set
    with the sweep's other time comparisons (``decide_time``)."""
    out = []
    for e in by_case(entries):
        logs = loop_logs(e, kind)
        if not logs:
            continue
        spread = spreads.get(group_key(e))
        variance, df = (spread.variance, spread.df) if spread else (None, 0)
        a, b = loop_sides(e, kind)
        c = LoopComparison(
            a=a,
            b=b,
            k=e.k,
            n=e.n,
            case=case_fields(e),
            metric="window",
            strategy=e.strategy,
            pairs=sum(len(r.samples[LOOP_SAMPLES[kind][0]]) for r in e.rows),
            noisy=noisy_case(e),
        )
        out.append(c.measured(stats.contrast(logs, None, variance, df)))
    return out


def lookup(
    result: VerdictFile,
    a: str,
    b: str,
    k: int,
    n: int,
    metric: str,
    case: dict[str, Any] | None = None,
) -> Comparison | None:
    """The comparison of a against b (either order stored; the ratio inverted if needed); with
    ``case``, only one made with those settings (e.g. {"grad_sync": "last"})."""
    for c in result.comparisons:
        if (c.k, c.n, c.metric) != (k, n, metric):
            continue
        if case is not None and c.case != case:
            continue
        if (c.a, c.b) == (a, b):
            return c
        if (c.a, c.b) == (b, a):
            return c.inverted()
    return None
