"""``python -m reports compare DIR_A DIR_B``: one page and ``compare.json``, case by case.

Before and after a change, on the same machine: for every strategy, K and N that both runs
have, run B's process figures (each process's paired overhead) against run A's
(``verdicts.compare_time``: one Student-t interval, with the between-process variance of the
case's group pooled over both runs, widened by the variance between runs that the spread of
all the cases' changes shows: ``stats.between_runs``), and a verdict word by the rule of
``reports.judge.verdicts``, the error rate controlled over every case compared. Raw windows of the
two runs are never compared for a verdict: they ran in different processes, often minutes
apart, where identical code differs by 1.5-4x. Absolute medians are shown as context only
(a change that slows the plain loop and the strategy alike, a torch upgrade say, shows there).
Memory (held and peak bytes) is exact: same, lower or higher beyond min_effect.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from reports.judge import leaks, noise, stats, verdicts
from reports.judge.rows import PHASES, SWEEP_IDENTITY, first_row, pooled, read, strategy_order
from reports.page import charts, runinfo
from reports.page.build import environment
from reports.page.records import CompareLine, ComparePage, PhasePair, Side, shallow
from reports.schema.records import Entry
from reports.schema.settings import variant
from reports.schema.verdict_records import (
    WORDS,
    BetweenRuns,
    CompareFile,
    GroupNoise,
    Resolution,
    RunComparison,
    RunRef,
)


class CompareError(ValueError):
    """Two runs that cannot be compared (no case in common): one line, exit 2."""


def _cases_text(cases) -> str:
    shown = sorted(f"{name} K={k} N={n}" for name, k, n, _ in cases)
    return (
        ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "") or "none"
    )


def side(directory: Path) -> Side:
    """One run of a comparison: its cases, keyed as the page matches them, and its facts."""
    rows = read(directory)
    run = runinfo.run_info(directory)
    ok = [r for r in rows if r.ok]
    first = first_row(rows)
    env = runinfo.environment(run, first)
    cases: dict[tuple, Entry] = {}
    failed = []
    for entry in pooled(rows).values():
        # a swept setting's value other than its default (a precision other than fp32, ...) is
        # part of the strategy's name here: another case
        key = (entry.strategy + variant(entry, "grad_sync"), entry.k, entry.n, entry.grad_sync)
        # one run normally holds one setting of each; keep the first if it holds more
        if entry.rows:
            cases.setdefault(key, entry)
        else:
            failed.append(key)
    return Side(
        directory=directory,
        name=directory.resolve().name,
        run_id=run.run_id or first.run_id or "-",
        created=run.created or "-",
        preset=first.preset or "-",
        device=env.get("device", first.device or "-"),
        device_name=env.get("device_name") or env.get("cpu_model") or "-",
        torch=env.get("torch", "-"),
        threads=env.get("threads", first.threads or "-"),
        commit=(env.get("git_commit") or "-")[:12],
        dirty=bool(env.get("git_dirty")),
        rows=len(rows),
        ok_rows=len(ok),
        cases=cases,
        failed=failed,
        min_effect=runinfo.min_effect_of(run),
    )


def _metrics(
    ea, eb, key: tuple, spread: GroupNoise | None, min_effect: float
) -> dict[str, RunComparison]:
    """B's case against A's on every metric (a time comparison's word comes later)."""
    strategy, k, n, flavour = key
    differ = [name for name in SWEEP_IDENTITY if getattr(ea, name) != getattr(eb, name)]
    metrics = {}
    for metric in verdicts.METRICS:
        c = verdicts.comparison(
            eb,
            ea,
            metric,
            min_effect,
            spread,
            RunComparison,
            strategy=strategy,
            a=f"B:{strategy}",
            b=f"A:{strategy}",
            k=k,
            n=n,
            case={"grad_sync": flavour, **({"settings_differ": differ} if differ else {})},
            resolution=spread.resolution if spread else None,
        )
        metrics[metric] = c
    return metrics


def line(ea, eb, key: tuple, metrics: dict[str, RunComparison]) -> CompareLine:
    """One case of the page: its settings, both overheads, its verdicts, its phases."""
    strategy, k, n, flavour = key
    settings = {name: getattr(eb, name) for name in SWEEP_IDENTITY if name != "preset"}
    ranks = f" grad_sync={flavour}" if settings.get("parallel") not in (None, "none") else ""
    return CompareLine(
        strategy=strategy,
        k=k,
        n=n,
        grad_sync=flavour,
        label=f"{strategy}  K={k} N={n:,}{ranks}",
        settings=settings,
        settings_differ=metrics["window"].case.get("settings_differ", []),
        overhead_a=ea.overhead,
        overhead_b=eb.overhead,
        metrics=metrics,
        window=metrics["window"],
        phases=[
            PhasePair(phase, ea.phases[phase], eb.phases[phase])
            for phase in PHASES
            if phase in ea.phases and phase in eb.phases
        ],
    )


def comparison(dir_a: str | Path, dir_b: str | Path) -> ComparePage:
    """Per common case: B's paired overhead against A's, verdicts per metric; what is unmatched."""
    a, b = side(Path(dir_a)), side(Path(dir_b))
    min_effect = max(a.min_effect, b.min_effect)
    common = sorted(
        set(a.cases) & set(b.cases),
        key=lambda k: (strategy_order(k[0]), k[1], k[2]),
    )
    if not common:
        raise CompareError(
            f"runs {str(dir_a)!r} and {str(dir_b)!r} have no ok case in common (strategy, K, N, "
            f"grad_sync); A has {_cases_text(a.cases)}; B has {_cases_text(b.cases)}"
        )
    # the noise between processes of both runs, per group: each run's processes of a case
    # differ by the same kind of process offset, so the variance pools over both
    spreads = noise.noise([*a.cases.values(), *b.cases.values()], min_effect)
    lines, judged = [], []
    for key in common:
        ea, eb = a.cases[key], b.cases[key]
        metrics = _metrics(ea, eb, key, spreads.get(noise.group_key(eb)), min_effect)
        judged += metrics.values()
        lines.append(line(ea, eb, key, metrics))
    drift = between_runs(judged)
    verdicts.decide_time(judged, min_effect)  # the error rate over every case compared
    windows = [x.window for x in lines]
    return ComparePage(
        a=a,
        b=b,
        lines=lines,
        comparisons=judged,
        min_effect=min_effect,
        rule=verdicts.RULE,
        between_runs=drift,
        counts={word: sum(w.verdict == word for w in windows) for word in WORDS},
        growth=leaks.growth_verdicts(list(b.cases.values())),
        only_a=[k for k in a.cases if k not in b.cases],
        only_b=[k for k in b.cases if k not in a.cases],
        failed=[(name, key) for name, s in (("A", a), ("B", b)) for key in s.failed],
    )


def between_runs(judged: list[RunComparison]) -> BetweenRuns:
    """Widen every time comparison (in place) by the variance between runs
    (``stats.between_runs``, from the changes of all the cases compared), and say what it was.
    Without it, B's processes against A's would be judged as if both ran in one sweep, and a
    machine that drifted between the runs would be called a change of the code."""
    timed = [c for c in judged if c.timed and c.se is not None]
    variance, df = stats.between_runs([c.log for c in timed], [c.se for c in timed])
    why = None if variance is not None else unmeasured_why(len(timed))
    for c in timed:
        alone = (c.ci_low, c.ci_high)  # the processes' own interval, before the runs' level
        c.measured(stats.widened(c.to_json(), variance, df, unmeasured=why))
        if why is not None:
            c.unjudged, (c.processes_low, c.processes_high) = why, alone
    return BetweenRuns(
        variance=variance,
        sd=math.expm1(math.sqrt(variance)) if variance is not None else None,
        df=df,
        cases=len(timed),
        rule=stats.BETWEEN_RUNS,
        needs=stats.BETWEEN_RUNS_CASES,
        why=why,
    )


def unmeasured_why(cases: int) -> str:
    """Why no time comparison of two runs has an interval: one sentence, with the way out."""
    return (
        f"the variance between runs could not be measured from {cases} "
        f"case{'s' if cases != 1 else ''} in common (it needs {stats.BETWEEN_RUNS_CASES} or "
        "more): run both builds in one sweep with --base, or compare runs of more cases"
    )


def compare_json(result: ComparePage) -> CompareFile:
    """compare.json: what the page says, as data (the fields of verdicts.json, plus strategy)."""
    at = {(x.k, x.n): x.window.resolution for x in result.lines}
    return CompareFile(
        a=run_ref(result.a),
        b=run_ref(result.b),
        min_effect=result.min_effect,
        resolution=[Resolution(k, n, resolution) for (k, n), resolution in sorted(at.items())],
        rule=result.rule,
        between_runs=result.between_runs,
        comparisons=result.comparisons,
        # run B's cases that keep memory window after window: a leak fails the gate
        leaks=[c for c in result.growth if c.leaks],
        leak_rule=leaks.RULE,
    )


def run_ref(run: Side) -> RunRef:
    return RunRef(str(run.directory), str(run.run_id), str(run.commit))


def compare(dir_a: str | Path, dir_b: str | Path, out: str | Path | None = None) -> Path:
    """Write the comparison page (default DIR_B/compare.html) and return its path."""
    result = comparison(dir_a, dir_b)
    out = Path(out) if out else Path(dir_b) / "compare.html"
    compare_json(result).write(out.parent)  # the page shows what this says
    chart_lines = [(x.label, x.window) for x in result.lines if x.window.ratio is not None]
    chart = charts.ratios(chart_lines, "A", "B") if chart_lines else None
    html = (
        environment()
        .get_template("compare.html.j2")
        .render(
            title=f"zerograd: run {result.b.run_id} against run {result.a.run_id}",
            c=result,
            chart=chart,
            details=json.dumps(
                {
                    name: {k: v for k, v in shallow(run).items() if k != "cases"}
                    for name, run in (("a", result.a), ("b", result.b))
                },
                indent=1,
                default=str,
            ),
        )
    )
    out.write_text(html, encoding="utf-8")
    return out
