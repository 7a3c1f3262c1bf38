"""The A/A test by simulation: twins made of a sweep's real pairs, judged by the verdict rule.

    python scripts/aa_simulate.py DIR [--sweeps 200] [--between SD ...] [--seed 0]

DIR is a sweep's folder (a committed sample: ``reports/samples/base-cuda``). In every group of
its rows (K, N and the loop's settings), every strategy gets an exact twin; each simulated
process of a strategy or its twin is one of that strategy's real processes, its pairs drawn
again with replacement (their noise as measured), its log ratios shifted by one offset per
process drawn from N(0, SD^2): the variance between processes, which a sample with one process
per strategy cannot show by itself (``--between``: one or more SDs, as fractions; default the
group's measured ``between_sd``, 0.5% where none). A simulated sweep then runs as the real one
spends its budget: one process per strategy and the control's 3 first; at each look the verdicts
at that look's alpha (``verdicts.verdicts(final=False)``), and one more process (then 2, 4, 8,
16) for each strategy with a comparison still ``unclear``; the final verdicts at the alpha the
looks taken left, as the report judges. Every strategy against its twin is a comparison whose
truth is "no difference": prints, per SD, how often the twins were called ``lower``/``higher``
(the A/A false-verdict rate per twin pair), ``same`` and ``unclear``, and how many of the
strategies' own comparisons were decided. Exits 1 if any rate is above 1%.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from msgspec import structs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benches.sweep.record import MAX_LOOKS  # noqa: E402
from reports.judge import noise, verdicts  # noqa: E402
from reports.judge.rows import pooled, read  # noqa: E402
from reports.schema.records import Entry  # noqa: E402

TWIN = "_twin"
LIMIT = 0.01  # the most a twin pair may be called different, per the contract


def processes_of(entry: Entry) -> list[np.ndarray]:
    """Each real process's pairs: its (window, plain_window) as an array of two columns."""
    out = []
    for r in entry.rows:
        mine, plain = r.samples.get("window"), r.samples.get("plain_window")
        if mine and plain and len(mine) == len(plain):
            out.append(np.column_stack([mine, plain]))
    return out


def simulated(template, pairs: np.ndarray, offset: float, name: str, index: int, rng):
    """A row of one simulated process: ``pairs`` drawn again, its window shifted by ``offset``
    on the log scale."""
    drawn = pairs[rng.integers(0, len(pairs), len(pairs))]
    process = f"{name}-sim{index}"
    return structs.replace(
        template,
        strategy=name,
        case_id=process,
        process_id=process,
        round=index,
        control=False,
        time_only=index > 0,
        cpu_pressure=None,
        samples={
            "window": (drawn[:, 0] * math.exp(offset)).tolist(),
            "plain_window": drawn[:, 1].tolist(),
        },
    )


def sweep_once(groups: dict, between: dict, rng, min_effect: float) -> list:
    """One simulated sweep: the final comparisons of every group."""
    made: dict[tuple, list] = defaultdict(list)  # (group, name) -> rows

    def add(group, name, count):
        real = groups[group][name.removesuffix(TWIN)]
        template = real.rows[0]
        pairs = processes_of(real)
        for _ in range(count):
            index = len(made[(group, name)])
            chosen = pairs[rng.integers(0, len(pairs))]
            offset = rng.normal(0.0, between[group])
            made[(group, name)].append(simulated(template, chosen, offset, name, index, rng))

    names = {g: [n for s in here for n in (s, s + TWIN)] for g, here in groups.items()}
    for g in groups:
        for name in names[g]:
            add(g, name, 3 if name == "native" else 1)  # the control's three processes

    def entries():
        out = []
        for (g, name), rows in made.items():
            real = groups[g][name.removesuffix(TWIN)]
            out.append(structs.replace(real, strategy=name, rows=rows))
        return out

    taken, decided = 1, []
    while taken < MAX_LOOKS:
        judged = verdicts.verdicts(entries(), min_effect, MAX_LOOKS, None, taken, final=False)
        decided += [  # each look's decisions, kept by the report as the sweep's run.json keeps them
            verdicts.decision_of(c, taken)
            for c in judged.comparisons
            if c.timed and c.verdict != "unclear"
        ]
        open_ = defaultdict(set)
        for c in judged.comparisons:
            if c.timed and c.verdict == "unclear":
                open_[group_of(c)].update((c.a, c.b))
        if not open_:
            break
        for g, names_open in open_.items():
            for name in names_open:
                add(g, name, 2 ** (taken - 1))
        taken += 1
    final = verdicts.verdicts(
        entries(), min_effect, MAX_LOOKS, None, taken, final=True, decided=decided
    )
    return [c for c in final.comparisons if c.timed]


def group_of(c) -> tuple:
    return (c.k, c.n, tuple(sorted(c.case.items())))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--sweeps", type=int, default=200)
    p.add_argument("--between", type=float, nargs="*", help="SDs between processes (fractions)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-effect", type=float, default=verdicts.DEFAULT_MIN_EFFECT)
    args = p.parse_args()
    entries = [e for e in pooled(read(args.directory)).values() if e.rows and processes_of(e)]
    groups: dict[tuple, dict[str, Entry]] = defaultdict(dict)
    for e in entries:
        if not e.rows[0].control:
            key = (e.k, e.n, tuple(sorted(noise.case_fields(e).items())))
            groups[key][e.strategy] = e
    measured = noise.noise(entries, args.min_effect)
    sds = {group_of(s): s.between_sd for s in measured.values()}
    rng = np.random.default_rng(args.seed)
    worst = 0.0
    for sd in args.between or [None]:
        between = {g: math.log1p(sd if sd is not None else (sds.get(g) or 0.005)) for g in groups}
        twins: Counter = Counter()
        others: Counter = Counter()
        for _ in range(args.sweeps):
            for c in sweep_once(groups, between, rng, args.min_effect):
                if c.a.removesuffix(TWIN) == c.b.removesuffix(TWIN):
                    twins[c.verdict] += 1
                elif TWIN not in c.a and TWIN not in c.b:
                    others[c.verdict] += 1
        pairs = sum(twins.values())
        false = twins["lower"] + twins["higher"]
        worst = max(worst, false / pairs if pairs else 0.0)
        decided = sum(v for w, v in others.items() if w != "unclear")
        label = f"{sd:.2%}" if sd is not None else "measured"
        print(
            f"between-process SD {label}: {args.sweeps} sweeps, {pairs} twin comparisons: "
            f"lower/higher {false} ({false / max(1, pairs):.2%}), same {twins['same']}, "
            f"unclear {twins['unclear']}; the strategies' own comparisons decided "
            f"{decided} of {sum(others.values())} ({decided / max(1, sum(others.values())):.0%})"
        )
    return 1 if worst > LIMIT else 0


if __name__ == "__main__":
    raise SystemExit(main())
