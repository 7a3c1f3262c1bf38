"""Paired ratios into verdict words: ``lower``, ``higher``, ``same`` or ``unclear``.

Time. Every case's process pairs each strategy window with a plain-loop window; its figure is
the paired ratio ``overhead`` (``stats.paired``: processes resampled, then pairs). Strategy
against strategy is the ratio of two overheads with both uncertainties carried
(``stats.ratio_between``); windows of two processes are never compared directly.

The verdict of a / b at (K, N), with ``t = max(min_effect, noise floor at (K, N))``:

- ``higher``: the whole CI above 1 + t (a is slower or heavier);
- ``lower``: the whole CI below 1 / (1 + t) (the mirror on a log scale: b / a is higher);
- ``same``: the whole CI inside [1 / (1 + min_effect), 1 + min_effect];
- ``unclear``: anything else.

The noise floor at (K, N) is measured in the sweep, never assumed: the largest of (a) the plain
loop against itself inside one process (odd against even windows, median over the cases),
(b) the spread seen between processes of one strategy at (K, N) (the control runs in two), and
(c) a 95% prediction bound for two processes of one strategy, from the between-process SD
pooled over every strategy with several processes at that (K, N), with a Student-t quantile
for the few degrees of freedom it has. The verdict then also needs the whole CI of a / b (the
within-process uncertainty of both sides) beyond that floor, so the two margins add up.
Without several processes of any strategy at (K, N) the floor is unknown (null) and no time
comparison there can be ``lower`` or ``higher``.

Memory figures are exact (bytes counted from storages, or a tracker's peak), so they have no CI:
equal is ``same``, a difference within min_effect of the larger is ``same``, one beyond both
min_effect and the memory floor is ``lower``/``higher``, one in between ``unclear``. The memory
floor at (K, N) is measured too: the largest relative spread of one figure between processes
that ran the same loop (the plain loop beside every case, and each case run in several
processes). On one CPU process it is 0 (memray's peak repeats to the byte); with ranks, gloo's
threads allocate on their own schedule and a peak can move between identical processes.
"""

from __future__ import annotations

import json
import math
import statistics
import zlib
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

from reports import stats
from reports.rows import finite, spell

VERDICTS_SCHEMA_VERSION = 1  # verdicts.json and compare.json (rows: reports.rows.SCHEMA_VERSION)
VERDICTS = "verdicts.json"
METRICS = ("window", "peak_memory", "held_memory")
MEMORY_KEYS = {"peak_memory": "peak_bytes", "held_memory": "held_bytes"}
DEFAULT_MIN_EFFECT = 0.02
NOISY_PRESSURE = 0.10  # median over pairs of the share of a window in which a task waited for a CPU
PREDICTION_LEVEL = 0.95
FLOOR_METHOD = (
    "max of: the plain loop against itself in one process (odd vs even windows, median over "
    "cases); the largest spread between processes of one strategy here; a "
    f"{PREDICTION_LEVEL:.0%} Student-t prediction bound for two processes of one strategy, from "
    "the between-process SD pooled over every strategy with several processes at that (K, N)"
)
RULE = (
    "higher: the whole CI above 1 + t, lower: below 1 / (1 + t), t = max(min_effect, noise "
    "floor); same: the whole CI inside [1 / (1 + min_effect), 1 + min_effect]; otherwise "
    "unclear; memory: exact, beyond "
    "min_effect of the larger is lower/higher, else same"
)
MEMORY_METHOD = (
    "exact bytes: no CI; a difference beyond max(min_effect, memory floor) of the larger decides"
)


def decide(low: float | None, high: float | None, min_effect: float, floor: float) -> str:
    """The verdict word of a ratio's CI."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "unclear"
    # symmetric on the log scale, so a / b and b / a always get mirrored words
    threshold = max(min_effect, floor)
    if low > 1 + threshold:
        return "higher"
    if high < 1 / (1 + threshold):
        return "lower"
    if low >= 1 / (1 + min_effect) and high <= 1 + min_effect:
        return "same"
    return "unclear"


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
            "verdict": "unclear",
            "method": MEMORY_METHOD,
        }
    ratio = a / b if b else None
    larger = max(a, b)
    if a == b or abs(a - b) <= min_effect * larger:
        verdict = "same"
    elif abs(a - b) <= floor * larger:
        verdict = "unclear"
    else:
        verdict = "higher" if a > b else "lower"
    return {
        "ratio": ratio,
        "ci_low": None,
        "ci_high": None,
        "significant": a != b,
        "verdict": verdict,
        "method": MEMORY_METHOD,
    }


# -- per case ---------------------------------------------------------------------------------
def noisy(row: dict[str, Any]) -> bool:
    pressure = (row.get("cpu_pressure") or {}).get("median")
    return pressure is not None and pressure > NOISY_PRESSURE


def overhead(entry: dict[str, Any]) -> dict[str, Any]:
    """A case's paired ratio pooled over its processes (cached on the entry)."""
    if "paired" not in entry:
        groups = [
            stats.log_ratios(r["samples"]["window"], r["samples"]["plain_window"])
            for r in entry.get("rows", [])
            if r.get("samples", {}).get("plain_window")
        ]
        seed = zlib.crc32(
            repr((entry["strategy"], entry["accumulate"], entry["live_tensors"])).encode()
        )
        entry["paired"] = stats.paired(groups, seed=seed)
    return entry["paired"]


def memory_figure(entry: dict[str, Any], key: str) -> float | None:
    """An exact memory figure of a case: its median over processes (they agree when exact)."""
    values = [
        (r.get("memory") or {}).get(key)
        for r in entry.get("rows", [])
        if (r.get("memory") or {}).get(key) is not None
    ]
    return statistics.median(values) if values else None


def _log_overhead(row: dict[str, Any]) -> float | None:
    ratio = (row.get("overhead") or {}).get("ratio")
    return math.log(ratio) if ratio else None


def noise_floors(entries: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The noise floor at every (K, N), with its parts (fractions)."""
    by_group: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        by_group[(e["accumulate"], e["live_tensors"])].append(e)
    out = {}
    for group, here in by_group.items():
        spread = stats.between_processes(
            [[x for r in e.get("rows", []) if (x := _log_overhead(r)) is not None] for e in here],
            PREDICTION_LEVEL,
        )
        bound, observed, df = spread["bound"], spread["observed"], spread["df"]
        halves = [
            h
            for e in here
            for r in e.get("rows", [])
            if (h := (r.get("overhead") or {}).get("split_half")) is not None
        ]
        parts = {
            "in_process": math.expm1(statistics.median(halves)) if halves else None,
            "between_processes_observed": math.expm1(observed) if observed is not None else None,
            "between_processes_bound": math.expm1(bound) if bound is not None else None,
        }
        known = [v for v in parts.values() if v is not None]
        out[group] = {
            # without a between-process figure the floor is unknown: no lower/higher on time
            "floor": max(known) if bound is not None else None,
            **parts,
            "df": df,
            "measured": bound is not None,
            "memory": memory_floors(here),
        }
    return out


# -- comparisons ---------------------------------------------------------------------------------
def compare_time(ea, eb, min_effect: float, floor: float | None) -> dict[str, Any]:
    result = stats.ratio_between(overhead(ea), overhead(eb))
    low, high = result["ci_low"], result["ci_high"]
    if floor is None:  # no measured noise floor: nothing beyond "same" or "unclear"
        floor = math.inf
    significant = low is not None and (low > 1 or high < 1)
    return {
        **result,
        "significant": significant,
        "verdict": decide(low, high, min_effect, floor),
    }


def compare_memory(ea, eb, metric: str, min_effect: float, floor: float = 0.0) -> dict[str, Any]:
    key = MEMORY_KEYS[metric]
    return decide_exact(memory_figure(ea, key), memory_figure(eb, key), min_effect, floor)


def memory_floors(entries: list[dict[str, Any]]) -> dict[str, float]:
    """Per memory metric, the largest relative spread (max - min) / max of the figure between
    processes that ran the same loop: the plain loop of every process with the same swept
    settings, and each case's own processes."""
    out = {}
    for metric, key in MEMORY_KEYS.items():
        plain: dict[tuple, list[float]] = defaultdict(list)
        samples = []
        for e in entries:
            rows = [r.get("memory") or {} for r in e.get("rows", [])]
            plain[tuple(sorted(case_fields(e).items()))] += [
                m[f"plain_{key}"] for m in rows if m.get(f"plain_{key}") is not None
            ]
            samples.append([m[key] for m in rows if m.get(key) is not None])
        samples += list(plain.values())
        spreads = [(max(v) - min(v)) / max(v) for v in samples if len(v) > 1 and max(v) > 0]
        out[metric] = max(spreads, default=0.0)
    return out


def comparison(
    ea,
    eb,
    metric: str,
    min_effect: float,
    floor: float | None,
    memory_floor: float = 0.0,
    **fields: Any,
) -> dict[str, Any]:
    measured = (
        compare_time(ea, eb, min_effect, floor)
        if metric == "window"
        else compare_memory(ea, eb, metric, min_effect, memory_floor)
    )
    return {
        **fields,
        "metric": metric,
        **{k: measured.get(k) for k in ("ratio", "ci_low", "ci_high", "significant", "verdict")},
        "confidence": measured.get("confidence"),
        "method": measured.get("method"),
        "noisy": any(noisy(r) for e in (ea, eb) for r in e.get("rows", [])),
    }


def ratio_text(c: dict[str, Any]) -> str:
    """A ratio and its interval, spelled one way on every page, table and line:
    ``1.023 (95% CI 0.998-1.040)``; ``bounds`` for an interval that is no confidence interval;
    the ratio alone without an interval; ``-`` without a ratio."""
    if c.get("ratio") is None:
        return "-"
    text = f"{c['ratio']:.3f}"
    if c.get("ci_low") is None:
        return text
    level = "bounds" if c.get("confidence") is False else "95% CI"
    return f"{text} ({level} {c['ci_low']:.3f}-{c['ci_high']:.3f})"


RECIPE = ("optimizer", "clip_norm", "compile", "compare_settings")


def case_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The case's swept settings other than strategy, K and N: strategies are compared only
    with the same ones (a later axis lands here)."""
    return {
        "grad_sync": entry["grad_sync"],
        "precision": entry["precision"],
        # the sweep's training loop (the same for every case of a sweep): what was judged
        **{key: entry[key] for key in RECIPE},
    }


def verdicts(entries: list[dict[str, Any]], min_effect: float) -> dict[str, Any]:
    """verdicts.json's content: every unordered pair of strategies at every (K, N), per metric."""
    ok = [e for e in entries if e.get("rows")]
    floors = noise_floors(ok)
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for e in ok:
        fields = tuple(sorted(case_fields(e).items()))
        groups[(e["accumulate"], e["live_tensors"], fields)].append(e)
    comparisons = []
    for (k, n, _), here in sorted(groups.items()):
        here = sorted(here, key=lambda e: e["strategy"])
        floor = floors[(k, n)]["floor"]
        for ea, eb in combinations(here, 2):
            for metric in METRICS:
                comparisons.append(
                    comparison(
                        ea,
                        eb,
                        metric,
                        min_effect,
                        floor,
                        floors[(k, n)]["memory"].get(metric, 0.0),
                        a=ea["strategy"],
                        b=eb["strategy"],
                        k=k,
                        n=n,
                        case=case_fields(ea),
                    )
                )
    return {
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "min_effect": min_effect,
        "noise_floor": [{"k": k, "n": n, **floors[(k, n)]} for (k, n) in sorted(floors)],
        "noise_floor_method": FLOOR_METHOD,
        "rule": RULE,
        "overheads": [
            {
                "strategy": e["strategy"],
                "k": e["accumulate"],
                "n": e["live_tensors"],
                "case": case_fields(e),
                **stats.public(overhead(e)),
            }
            for e in sorted(ok, key=lambda e: (e["accumulate"], e["live_tensors"], e["strategy"]))
        ],
        "comparisons": comparisons,
        "grad_sync": loop_verdicts(ok, floors, min_effect),
        # --compare-settings: each case's recipe against the other, paired in its process
        "settings": loop_verdicts(ok, floors, min_effect, "settings"),
    }


# paired samples of a case's own loop against another loop of the same strategy in one process:
# (row field, this side's samples, the other side's, what verdicts.json names the other side)
AGAINST = {
    "grad_sync": ("flavour_window", "reference_flavour_window"),
    "settings": ("setting_window", "other_setting_window"),
}


def loop_ratio(entry: dict[str, Any], kind: str = "grad_sync") -> dict[str, Any] | None:
    """A case's loop over another loop of the same strategy, paired per window in each process
    (``grad_sync``: its flavour over ``every``; ``settings``: its recipe over the
    ``--compare-settings`` one), pooled over its processes."""
    mine, other = AGAINST[kind]
    groups = [
        stats.log_ratios(r["samples"][mine], r["samples"][other])
        for r in entry.get("rows", [])
        if r.get("samples", {}).get(mine)
    ]
    if not groups:
        return None
    seed = zlib.crc32(repr((entry["strategy"], entry["accumulate"], entry["grad_sync"])).encode())
    return stats.paired(groups, seed=seed)


def loop_verdicts(
    entries, floors, min_effect: float, kind: str = "grad_sync"
) -> list[dict[str, Any]]:
    """Each case's loop against its other loop (``grad_sync``: under FSDP2/HSDP, its flavour
    against ``every``; ``settings``: its recipe against ``--compare-settings``), with its verdict
    word (the rule and noise floor of strategy comparisons at that K, N)."""
    out = []
    for e in sorted(entries, key=lambda e: (e["accumulate"], e["live_tensors"], e["strategy"])):
        result = loop_ratio(e, kind)
        if result is None:
            continue
        floor = floors[(e["accumulate"], e["live_tensors"])]["floor"]
        low, high = result["ci_low"], result["ci_high"]
        if kind == "grad_sync":
            sides = {"a": e["grad_sync"], "b": "every", "case": case_fields(e)}
        else:
            vs = e["rows"][0].get("settings_vs") or {}
            setting = vs.get("setting")
            sides = {
                "a": f"{setting}={spell(vs.get('mine'))}",
                "b": f"{setting}={spell(vs.get('other'))}",
                "case": case_fields(e),
            }
        out.append(
            {
                "strategy": e["strategy"],
                "k": e["accumulate"],
                "n": e["live_tensors"],
                **sides,
                "metric": "window",
                **{key: result.get(key) for key in ("ratio", "ci_low", "ci_high", "confidence")},
                "method": result.get("method"),
                "pairs": result.get("pairs"),
                "verdict": decide(low, high, min_effect, floor if floor is not None else math.inf),
                "noisy": any(noisy(r) for r in e.get("rows", [])),
            }
        )
    return out


def lookup(
    result: dict[str, Any],
    a: str,
    b: str,
    k: int,
    n: int,
    metric: str,
    case: dict[str, Any] | None = None,
) -> dict | None:
    """The comparison of a against b (either order stored; the ratio inverted if needed); with
    ``case``, only one made with those settings (e.g. {"grad_sync": "last"})."""
    for c in result["comparisons"]:
        if (c["k"], c["n"], c["metric"]) != (k, n, metric):
            continue
        if case is not None and c.get("case", {}) != case:
            continue
        if (c["a"], c["b"]) == (a, b):
            return c
        if (c["a"], c["b"]) == (b, a):
            return invert(c)
    return None


FLIP = {"lower": "higher", "higher": "lower", "same": "same", "unclear": "unclear"}


def invert(c: dict[str, Any]) -> dict[str, Any]:
    def inv(x):
        return 1 / x if x else None

    return {
        **c,
        "a": c["b"],
        "b": c["a"],
        "ratio": inv(c["ratio"]),
        "ci_low": inv(c["ci_high"]),
        "ci_high": inv(c["ci_low"]),
        "verdict": FLIP[c["verdict"]],
    }


def write(directory: str | Path, result: dict[str, Any], name: str = VERDICTS) -> Path:
    path = Path(directory) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(finite(result), indent=1, allow_nan=False))
    tmp.replace(path)
    return path
