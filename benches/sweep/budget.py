"""The budget's plan: which groups still have an ``unclear`` comparison on time, the
time-only processes of an added round (a group's strategies rotated in one process,
``engine.rotation``), and how long each kind of process is expected to take. The sweep
(``run.SweepRun.spend_budget``) runs them."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

from benches.engine import frameworks
from benches.engine.rotation import LEAST_ROUNDS
from benches.engine.spec import PAIRS_FACTOR, CaseSpec
from benches.sweep.record import Sweep
from reports.schema.settings import group_of, group_of_record, head_of
from reports.schema.verdict_records import Verdict
from strategies.registry import BUILTIN


def process_started() -> float:
    """When this process started, on the ``time.monotonic`` clock (psutil's create time)."""
    import psutil

    age = time.time() - psutil.Process().create_time()
    return time.monotonic() - max(0.0, age)


def wall_kind(spec: CaseSpec) -> tuple:
    """What a process's wall time depends on: its group (K, N, the loop), how many strategies
    it holds (a rotated process of six at K=4 took 25-49 s here, global alone 2-7 s), whether
    it runs the checks, and its pairs."""
    return (*group_of(spec), len(spec.rotation), spec.time_only, spec.pairs_planned)


@dataclasses.dataclass
class Spent:
    """What the sweep's processes cost so far, from their rows: each process's wall by its kind
    (``wall_kind``), and per group the parts of a time-only process (``OVERHEAD_STEPS`` per
    strategy, a timed pair of one strategy: a pair and its plain loop's window), from which a
    time-only process of a kind not run yet is expected (on small a checked process of six
    strategies took 234 s, 26 s of it timed: a time-only one of 8 pairs is about 60 s)."""

    walls: dict[tuple, list[float]] = dataclasses.field(default_factory=dict)
    overhead: dict[tuple, list[float]] = dataclasses.field(default_factory=dict)
    pair: dict[tuple, list[float]] = dataclasses.field(default_factory=dict)

    def add(self, spec: CaseSpec, rows: list[dict]) -> None:
        """A finished process's rows (a rotated process's rows share its steps out)."""
        walls = [r.get("wall_s") or {} for r in rows]
        if walls[0].get("total"):
            self.walls.setdefault(wall_kind(spec), []).append(walls[0]["total"] * len(rows))
        group = group_of(spec)
        for r, wall in zip(rows, walls, strict=True):
            if r.get("status") != "ok":
                continue
            spent = sum(wall.get(step) or 0.0 for step in OVERHEAD_STEPS)
            self.overhead.setdefault(group, []).append(spent)
            windows = len((r.get("samples") or {}).get("window") or [])
            if windows and wall.get("timed_pairs"):
                self.pair.setdefault(group, []).append(wall["timed_pairs"] / windows)

    def _from_parts(self, spec: CaseSpec, rounds: int) -> float | None:
        """A time-only process of ``spec``'s strategies and ``rounds`` pairs each, from its
        group's parts (its strategies' overhead, their pairs); None where they are not known
        yet or ``spec`` runs the checks."""
        group = group_of(spec)
        if not (spec.time_only and self.overhead.get(group) and self.pair.get(group)):
            return None
        overhead = statistics.median(self.overhead[group])
        pair = statistics.median(self.pair[group])
        return max(1, len(spec.rotation)) * (overhead + rounds * pair)

    def expected(self, spec: CaseSpec) -> float:
        """How long a process like ``spec`` should take: the median of its kind's so far; a
        time-only one of a kind not run yet, its group's parts (its strategies' overhead and
        planned pairs); else the longest of any kind per strategy it measured, times the
        strategies of ``spec`` (global alone on small took about 90 s, not the 234 s of a
        process six strategies shared); 0 before the first."""
        mine = self.walls.get(wall_kind(spec))
        if mine:
            return statistics.median(mine)
        parts = self._from_parts(spec, spec.pairs_planned)
        if parts is not None:
            return parts
        strategies = max(1, len(spec.rotation))
        return max(
            (max(w) / max(1, kind[-3]) * strategies for kind, w in self.walls.items()),
            default=0.0,
        )

    def least(self, spec: CaseSpec) -> float:
        """The least a process like ``spec`` can take once started: a time-only one keeps to
        its deadline (a rotated one runs the rounds that fit, ``rotation.LEAST_ROUNDS`` at the
        least; one alone stops adding pairs past it once it has ``--repeat``), so its start-up
        and those rounds; a checked one, what it is expected to take (``expected``)."""
        rounds = LEAST_ROUNDS if spec.rotation else spec.repeat
        parts = self._from_parts(spec, rounds)
        return self.expected(spec) if parts is None else parts


@dataclasses.dataclass
class Look:
    """What an interim look found: per group (``settings.group_of``) the strategies with a
    time comparison still ``unclear`` (a strategy whose comparisons are all decided is not
    among them: nothing more is spent on it), how many such comparisons, and the pooled cases
    it judged."""

    open: dict[tuple, set[str]]
    unclear: int
    entries: list
    # the unclear comparisons themselves, and how many of them no round left could decide
    comparisons: list = dataclasses.field(default_factory=list)
    futile: int = 0
    # the time comparisons it decided, as run.json keeps them (``verdicts.decision_of``)
    decided: list = dataclasses.field(default_factory=list)

    def decidable(self, added: int, min_effect: float) -> Look:
        """This look without the comparisons that ``added`` more rounds could not decide
        (``verdicts.decidable``: a futility stop): a strategy stays open only for a comparison
        that more processes could still decide."""
        from reports.judge import verdicts

        keep = [c for c in self.comparisons if verdicts.decidable(c, added, min_effect)]
        found = open_groups(keep)
        futile = len(self.comparisons) - len(keep)
        return Look(found, self.unclear, self.entries, keep, self.futile + futile, self.decided)


FUTILITY_RULE = (
    "a comparison still unclear keeps its strategies open only while its conditional power "
    "under its current estimate (Lan, Simon & Halperin 1982) is at least 10% for the rounds "
    "left (the looks' schedule, or what the time to the deadline holds, the fewer): its SE "
    "shrunk by sqrt(n / (n + rounds left)), the estimate clearing the margin (95%) or falling "
    "inside it (90%)"
)


def open_groups(unclear: list) -> dict[tuple, set[str]]:
    """Per group, the strategies of the ``unclear`` comparisons."""
    found: dict[tuple, set[str]] = {}
    for c in unclear:
        found.setdefault(group_of_record(c.k, c.n, c.case), set()).update((c.a, c.b))
    return found


def look(sweep: Sweep, taken: int) -> Look:
    """The verdicts of the ``taken``-th look so far, held to that look's share of alpha
    (``claims.look_alpha``), and what is still open."""
    from reports.judge import verdicts
    from reports.judge.rows import pooled, read

    # a look's verdicts read process figures only: no case's headline ratio (its bootstrap was
    # 85% of a look, 4.3 s of 5 at a default sweep's end here; the verdicts are the same)
    entries = list(pooled(read(sweep.out), summarised=False).values())
    control = sweep.control if sweep.control != "none" else None
    judged = verdicts.verdicts(
        entries, sweep.min_effect, sweep.looks, control, taken=taken, final=False
    )
    unclear = [c for c in judged.comparisons if c.timed and c.verdict == Verdict.UNCLEAR]
    decided = [
        verdicts.decision_of(c, taken)
        for c in judged.comparisons
        if c.timed and c.verdict != Verdict.UNCLEAR
    ]
    return Look(open_groups(unclear), len(unclear), entries, unclear, 0, decided)


def still_open(first: list[CaseSpec], found: Look) -> list[CaseSpec]:
    """The first round's cases whose strategy still has an ``unclear`` time comparison in its
    group: the only ones a look adds processes for (``global`` too, once decided, gets none)."""
    return [c for c in first if c.label in found.open.get(group_of(c), ())]


# -- how many pairs a time-only process runs (Kalibera & Jones, ISMM 2013) -----------------------
# a process's own cost besides its timed pairs, as a time-only process pays it (no checks)
OVERHEAD_STEPS = ("process_start", "setup", "compile", "warmup", "teardown")
PLAN_RULE = (
    "pairs per time-only process: with the time left to the deadline known, the count whose "
    "95% half-width t(0.975, df) x sqrt((s2_process + s2_pair / n) / m) is least, m the "
    "group's processes so far and those the time left holds at c_process + n x c_pair each, "
    "df = m - 1 (fewer, longer processes leave fewer df: the t quantile counts them), and of "
    "the counts within 5% of that half-width the most (more of the time timed); without it, "
    "n* = sqrt((c_process / c_pair) x (s2_pair / s2_process)) (Kalibera & Jones, ISMM 2013) "
    "and the most pairs whose variance for the time spent is within 10% of n*'s; from the "
    "group's processes so far: c_process its start, setup, warm-up and teardown, c_pair a "
    "timed pair (a rotated process's round: one pair of each of its strategies), s2_pair the "
    "variance of one pair's log ratio in a process, s2_process the variance between processes "
    "beyond what their pairs explain; between --repeat and PAIRS_FACTOR x --repeat; --repeat "
    "given: that"
)
NEAR_INTERVAL = 1.05  # the half-width a longer process may cost, over the least one's
NEAR_BEST = 1.10  # the variance for the time spent that a longer process may cost, over n*'s


@dataclasses.dataclass(frozen=True)
class PairsPlan:
    """One group's planned pairs per time-only process and the measurements behind it."""

    pairs: int
    c_process: float | None = None
    c_pair: float | None = None
    s2_pair: float | None = None
    s2_process: float | None = None
    why: str = ""
    # warm-up pairs each process runs untested: what the group's checked processes needed
    # (``learned_warmup``; 0: until steady, ``engine.warmup.RULE``)
    warm_pairs: int = 0

    def record(self) -> dict:
        return dataclasses.asdict(self)


def plan_pairs(
    entries: list, group: tuple, repeat: int, planned: bool, left_s: float | None = None
) -> PairsPlan:
    """How many timed pairs the group's next time-only processes run (``PLAN_RULE``), from its
    ok rows so far and, where known, the seconds left for its processes (``left_s``:
    ``interval_plan``); ``repeat`` where the sweep may not plan (``--repeat`` given) or nothing
    is measured yet."""
    from reports.judge import stats
    from reports.judge.noise import case_fields, process_figures
    from reports.judge.rows import process_of

    warm = learned_warmup(entries, group)
    if not planned:
        return PairsPlan(repeat, why="--repeat given", warm_pairs=warm)
    here = [e for e in entries if group_of_record(e.k, e.n, case_fields(e)) == group]
    rows = [r for e in here for r in e.rows]
    # per process (a rotated one's rows share its steps out): its overhead, its timed seconds
    # and its pairs (rounds: every strategy of a rotated process has one pair a round)
    overhead: dict[str, float] = {}
    timed: dict[str, float] = {}
    rounds: dict[str, int] = {}
    s2_pairs = []
    for r in rows:
        wall, process = r.wall_s or {}, process_of(r)
        overhead[process] = overhead.get(process, 0.0) + sum(
            wall.get(step) or 0.0 for step in OVERHEAD_STEPS
        )
        mine, plain = r.samples.get("window") or [], r.samples.get("plain_window") or []
        if mine and plain and wall.get("timed_pairs"):
            timed[process] = timed.get(process, 0.0) + wall["timed_pairs"]
            rounds[process] = len(mine)
            logs = stats.log_ratios(mine, plain)
            if logs.size >= 2:
                s2_pairs.append(float(logs.var(ddof=1)))
    timed_s, pairs = sum(timed.values()), sum(rounds.values())
    between, df = stats.pooled_variance([process_figures(e) for e in here])
    if not (pairs and s2_pairs and overhead and between is not None and df):
        return PairsPlan(repeat, why="not measured yet", warm_pairs=warm)
    c_process = statistics.median(overhead.values())
    c_pair = timed_s / pairs
    s2_pair = statistics.fmean(s2_pairs)
    # what the pairs of a process contribute to the variance between processes is not the
    # processes' own: s2_process is the rest (a floor of 1% of s2_pair / repeat: never zero)
    s2_process = max(between - s2_pair / max(1, pairs / len(rounds)), s2_pair / repeat / 100)
    low, high = repeat, PAIRS_FACTOR * repeat
    if left_s is not None and left_s > 0:
        planned_pairs, why = interval_plan(
            c_process, c_pair, s2_pair, s2_process, len(rounds), left_s, low, high
        )
        return PairsPlan(planned_pairs, c_process, c_pair, s2_pair, s2_process, why, warm)
    best, longest = longest_near_best(c_process / c_pair, s2_pair / s2_process)
    planned_pairs = int(min(high, max(low, round(longest))))
    why = f"n* = {best:.1f}, the longest within {NEAR_BEST - 1:.0%} of its variance: {longest:.1f}"
    return PairsPlan(planned_pairs, c_process, c_pair, s2_pair, s2_process, why, warm)


def interval_plan(
    c_process: float,
    c_pair: float,
    s2_pair: float,
    s2_process: float,
    processes: int,
    left_s: float,
    low: int,
    high: int,
) -> tuple[int, str]:
    """The pairs per process (``low``-``high``) whose 95% half-width is least once the
    ``left_s`` seconds are spent on processes of ``c_process + n c_pair`` seconds each, beside
    the ``processes`` the group has: t(0.975, m - 1) x sqrt((s2_process + s2_pair / n) / m);
    of those within ``NEAR_INTERVAL`` of it, the most. (A fixed 160 pairs' time at a process
    cost of 30 pairs: Kalibera & Jones's n* leaves 2.6 processes and an interval 71% wider than
    6 would give; the t quantile counts the df it leaves.)"""
    from scipy import stats as scipy_stats

    def half_width(n: int) -> float:
        m = processes + left_s / (c_process + n * c_pair)
        t = scipy_stats.t.ppf(0.975, max(m - 1, 0.5))
        return float(t * math.sqrt((s2_process + s2_pair / n) / m))

    widths = {n: half_width(n) for n in range(low, high + 1)}
    least = min(widths.values())
    chosen = max(n for n, h in widths.items() if h <= NEAR_INTERVAL * least)
    best = min(widths, key=widths.__getitem__)
    why = (
        f"least half-width at {best} pairs ({widths[best]:.2%}); the most within "
        f"{NEAR_INTERVAL - 1:.0%} of it: {chosen} ({left_s:.0f} s left, {processes} processes)"
    )
    return chosen, why


def learned_warmup(entries: list, group: tuple) -> int:
    """The warm-up pairs a time-only process of ``group`` runs untested (``CaseSpec.
    warm_pairs``): what its group's first time-only process needed before its windows were
    steady (``engine.warmup.needed``: a fresh process of the same strategies, as the later ones
    are; a checked one was warmed by its gradient check); 0 (warm up until steady, by the test)
    before one finished."""
    from benches.engine import warmup
    from reports.judge.noise import case_fields

    found = [
        r
        for e in entries
        if group_of_record(e.k, e.n, case_fields(e)) == group
        for r in e.rows
        if r.time_only and r.status == "ok" and r.samples.get("warmup")
    ]
    if not found:
        return 0
    first = min(found, key=lambda r: (r.round, r.case_id or ""))  # tested: none ran before it
    return warmup.needed(first.samples["warmup"], first.warmup)


def longest_near_best(r: float, q: float) -> tuple[float, float]:
    """Kalibera & Jones's n* = sqrt(r q) (r = c_process / c_pair, q = s2_pair / s2_process) and
    the most pairs whose variance for the time spent is within ``NEAR_BEST`` of n*'s. A mean of
    processes of n pairs each has, for the time T spent, variance proportional to
    f(n) = (r + n) (1 + q / n), least at n* (f* = (sqrt r + sqrt q)^2) and flat around it; the
    larger root of f(n) = NEAR_BEST f* is n_hi = (b + sqrt(b^2 - 4 r q)) / 2, b = NEAR_BEST f* -
    r - q. Fewer, longer processes: the same interval within sqrt(NEAR_BEST) (5% wider at the
    most), more of the sweep's time in timed windows (the frameworks sample's processes: n* 41,
    n_hi 79 pairs, a process's timed share from 40% to about 55%)."""
    best = math.sqrt(r * q)
    b = NEAR_BEST * (math.sqrt(r) + math.sqrt(q)) ** 2 - r - q
    return best, (b + math.sqrt(max(b * b - 4 * r * q, 0.0))) / 2


# the report at the end: about 15x one look's verdicts, which read no headline ratio (the
# report: 7.1 s as a process of its own against 0.47 s a look, at 294 rows of a default sweep on
# a quiet machine here), and its tables and charts
REPORT_LOOKS, REPORT_S = 15.0, 10.0
SOLO = ("global",)  # searches every live tensor of its process: never shares one


def shares(spec: CaseSpec) -> bool:
    """Whether a case can share a process with its group's other strategies: not ``SOLO``, not
    a framework's path (its framework's process-wide state), not under ranks or compile, nor
    with --compare-settings (one replica per loop there), nor a checked case with --profile
    (its profiled pair is one strategy's against the plain loop) or of a plugin's strategy."""
    solo = spec.strategy in SOLO or frameworks.name_of(spec.strategy)
    profiled = spec.profile and not spec.time_only
    # a plugin's strategy is checked in a process of its own: one that crashes it (a segfault,
    # an abort, an OOM kill) must not take the built-in strategies' first rows with it
    plugin = head_of(spec.strategy) not in BUILTIN and not spec.time_only
    return not (solo or profiled or plugin or spec.parallel != "none" or spec.compile) and not (
        spec.compare_settings
    )


def share_processes(specs: list[CaseSpec], rotate: bool) -> list[CaseSpec]:
    """``specs`` as processes: per group (``settings.group_of``) one process of the strategies
    that can share one (``shares``: a lead whose ``rotation`` names them, in the place of the
    first), the others each in a process of their own; each alone where ``rotate`` is off or a
    group has one such strategy."""
    by_group: dict[tuple, list[CaseSpec]] = {}
    for c in specs:
        if rotate and shares(c):
            by_group.setdefault(group_of(c), []).append(c)
    rotated = {id(cs[0]): cs for cs in by_group.values() if len(cs) >= 2}
    members = {id(c) for cs in rotated.values() for c in cs}
    out = []
    for c in specs:
        if id(c) in rotated:
            cs = rotated[id(c)]
            out.append(
                dataclasses.replace(
                    c,
                    rotation=[m.label for m in cs],
                    plain_timeline=any(m.plain_timeline for m in cs),
                )
            )
        elif id(c) not in members:
            out.append(c)
    return out


def round_specs(
    group_cases: list[CaseSpec],
    round_: int,
    rotate: bool,
    pairs: dict[tuple, int] | None = None,
    warm: dict[tuple, int] | None = None,
) -> list[CaseSpec]:
    """The time-only processes of one added round: per group one process of its strategies
    rotated with the plain loop (``engine.rotation``), the others alone (``share_processes``),
    the processes that share one first; ``pairs`` and ``warm`` per group (``PairsPlan``)."""
    pairs, warm = pairs or {}, warm or {}
    added = [
        dataclasses.replace(
            c,
            round=round_,
            time_only=True,
            plain_timeline=False,
            pairs=pairs.get(group_of(c), 0),
            warm_pairs=warm.get(group_of(c), 0),
            rotation=[],
            process_id="",  # a process of its own (a first-round member's was its lead's)
        )
        for c in group_cases
    ]
    processes = share_processes(added, rotate)
    return [p for p in processes if p.rotation] + [p for p in processes if not p.rotation]
