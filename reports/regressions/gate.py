"""``python -m reports gate FILE``: a CI verdict from ``compare.json`` or ``verdicts.json``.

Exit 1 when any selected comparison has the ``--fail-on`` verdict (default ``higher``), or a
strategy gated ``leaks`` (``reports.judge.leaks``), one line per offender; 3 (``UNJUDGED``) when
none does but a comparison of a ``compare.json`` could not be judged (no interval: the variance
between runs not measured) while its runs' processes alone put it beyond the margin in the
``--fail-on`` direction (``unjudged``), unless ``--accept-unjudged``; 0 otherwise, also when no
comparison of the asked metric matched (said in one line); 2 on a bad or malformed file, a
``--pair`` name absent from the file, a file with no comparison (two runs with no case in
common), or a bad argument (``reports.__main__`` turns ``GateError`` into that).

A ``compare.json`` holds one comparison per case of run B against the same case of run A, so it
is gated as it is. A ``verdicts.json`` compares the strategies of one sweep with each other, and
one sweep always holds real differences (``global`` against ``block``), so ``--pair A,B`` must
say which comparison matters; it is read as A against B whichever order it was stored in. A
sweep with ``--base REF`` holds each strategy at the working tree against itself at REF: without
``--pair`` those are gated (the working tree ``higher`` than its base fails).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.judge import leaks
from reports.judge.verdicts import METRICS, head_against_base
from reports.judge.wording import ratio_text
from reports.schema.records import RecordError
from reports.schema.settings import is_base
from reports.schema.verdict_records import (
    COMPARE,
    VERDICTS,
    WORDS,
    CompareFile,
    Comparison,
    Growth,
    VerdictFile,
    held_to_version,
)


class GateError(ValueError):
    """A bad file or argument: one line, exit 2."""


FAILED, UNJUDGED = 1, 3  # exit codes: a regression or leak; a change the gate could not judge


def load(path: Path) -> CompareFile | VerdictFile:
    """The file's record (compare.json's or verdicts.json's), or a GateError naming what is
    wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise GateError(f"cannot read {str(path)!r}: {err.strerror or err}") from None
    except ValueError as err:
        raise GateError(f"{str(path)!r} is not JSON ({err})") from None
    if isinstance(data, dict):  # another version's file is named as such, before its parts
        try:
            held_to_version(data, str(path))
        except RecordError as err:
            raise GateError(str(err)) from None
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list):
        raise GateError(
            f"{str(path)!r} has no 'comparisons' list; valid files: compare.json "
            "(python -m reports compare) or verdicts.json (a sweep's)"
        )
    for number, c in enumerate(data["comparisons"]):
        if not isinstance(c, dict) or not isinstance(c.get("verdict"), str):
            raise GateError(
                f"{str(path)!r}: comparisons[{number}] has no 'verdict' word "
                f"({json.dumps(c)[:80]}); valid files: compare.json or verdicts.json"
            )
        if c["verdict"] not in WORDS:
            raise GateError(
                f"{str(path)!r}: comparisons[{number}] has verdict {c['verdict']!r}; "
                f"valid: {', '.join(WORDS)}"
            )
    if not data["comparisons"]:
        raise GateError(
            f"{str(path)!r} holds no comparison (two runs with no case in common?): nothing to gate"
        )
    check_leaks(path, data)
    compare = all("strategy" in c for c in data["comparisons"])
    try:
        return CompareFile.from_json(data) if compare else VerdictFile.from_json(data)
    except RecordError as err:
        name = COMPARE if compare else VERDICTS
        raise GateError(
            f"{str(path)!r} is no {name}: {str(err).removeprefix(f'{name}: ')}"
        ) from None


def check_leaks(path: Path, data: dict[str, Any]) -> None:
    """The file's ``leaks`` is a list of growth verdicts, or a GateError."""
    found = data.get("leaks") or []
    if not isinstance(found, list) or not all(
        isinstance(c, dict)
        and isinstance(c.get("strategy"), str)
        and all(
            isinstance(c.get(key), int | float)
            for key in ("strategy_growth_bytes_per_window", "plain_growth_bytes_per_window")
        )
        for c in found
    ):
        raise GateError(f"{str(path)!r}: 'leaks' is not a list of growth verdicts")


def check_pair(path: Path, data: VerdictFile, pair: tuple[str, str]) -> None:
    """Both names of --pair are strategies of the file, or a GateError naming the absent one."""
    names = sorted({name for c in data.comparisons for name in (c.a, c.b)})
    for name in pair:
        if name not in names:
            raise GateError(
                f"--pair name {name!r} is not a strategy of {str(path)!r}; "
                f"valid: {', '.join(names)}"
            )
    if pair[0] == pair[1]:
        raise GateError(f"--pair {pair[0]},{pair[1]} names one strategy twice; valid: A,B")


def select(
    data: CompareFile | VerdictFile, metrics: list[str], pair: tuple[str, str] | None
) -> list[Comparison]:
    """The comparisons the gate looks at, oriented as asked."""
    out: list[Comparison] = []
    for c in data.comparisons:
        if c.metric not in metrics:
            continue
        if isinstance(data, VerdictFile):
            assert pair is not None
            if (c.a, c.b) == pair:
                out.append(c)
            elif (c.b, c.a) == pair:
                out.append(c.inverted())
        else:
            out.append(c)
    return out


def describe(c: Comparison) -> str:
    """strategy, K, N, metric, ratio and CI: one line."""
    who = getattr(c, "strategy", None) or f"{c.a} / {c.b}"
    ratio = ratio_text(c)
    if c.ci_low is None and c.ratio is not None:
        ratio += " (no CI)" if c.timed else " (exact)"
    return f"{c.verdict}: {who} K={c.k} N={c.n} {c.metric} ratio {ratio}"


def unjudged(c: Comparison, fail_on: str, min_effect: float) -> bool:
    """A comparison the gate could not judge (no interval: ``RunComparison.unjudged``) whose
    runs' processes alone, their 95% interval without the variance between runs, lie beyond
    the margin in the ``fail_on`` direction: what a sweep of both builds would most likely
    call so. A change inside the margin, or one the processes themselves cannot place, is
    not one (an A/A of two identical runs passes)."""
    low, high = getattr(c, "processes_low", None), getattr(c, "processes_high", None)
    if getattr(c, "unjudged", None) is None or low is None or high is None:
        return False
    if fail_on == "higher":
        return low > 1 + min_effect
    if fail_on == "lower":
        return high < 1 / (1 + min_effect)
    return False  # an unjudged comparison is unclear already; never same


def describe_unjudged(c: Comparison, min_effect: float) -> str:
    """One line: which comparison, its processes' interval, and why it has no verdict."""
    return (
        f"unjudged: {c.strategy} K={c.k} N={c.n} {c.metric} ratio {c.ratio:.3f} (its runs' "
        f"processes alone: {c.processes_low:.3f}-{c.processes_high:.3f}, beyond the "
        f"{min_effect:.0%} margin): {c.unjudged}; --accept-unjudged passes it"
    )


def gate(
    path: Path,
    fail_on: str = "higher",
    metrics: list[str] | None = None,
    pair: tuple[str, str] | None = None,
    accept_unjudged: bool = False,
) -> tuple[int, list[str]]:
    """(exit code, lines to print)."""
    if fail_on not in WORDS:
        raise GateError(f"--fail-on {fail_on!r} is not a verdict; valid: {', '.join(WORDS)}")
    metrics = metrics or ["window"]
    for metric in metrics:
        if metric not in METRICS:
            raise GateError(f"--metric {metric!r} is unknown; valid: {', '.join(METRICS)}")
    data = load(path)
    builds = isinstance(data, VerdictFile) and pair is None and head_against_base(data)
    if isinstance(data, VerdictFile) and pair is None and not builds:
        raise GateError(
            f"{str(path)!r} is a sweep's verdicts.json, which compares strategies with each "
            "other: name the comparison that matters with --pair A,B"
        )
    if isinstance(data, CompareFile) and pair is not None:
        raise GateError(
            f"--pair applies to a verdicts.json; {str(path)!r} is a compare.json "
            "(run B's cases against run A's)"
        )
    if pair is not None:
        check_pair(path, data, pair)
    if builds:  # --base: every strategy at the working tree against itself at the base
        chosen = [c for c in builds if c.metric in metrics]
        what = f"metric {', '.join(metrics)}, working tree against base"
        gated = None
    else:
        chosen = select(data, metrics, pair)
        what = f"metric {', '.join(metrics)}" + (f", pair {pair[0]},{pair[1]}" if pair else "")
        gated = pair
    if not chosen:
        return 0, [f"gate: no comparison matched ({what}) in {path}; nothing to gate"]
    bad = [describe(c) for c in chosen if c.verdict == fail_on]
    grown = [g for g in data.leaks if not is_base(g.strategy)] if builds else leaks_of(data, gated)
    leaking = [leaks.describe(g) for g in grown]
    if bad or leaking:
        return FAILED, bad + leaking
    passed = f"{len(chosen)} comparisons ({what}), none {fail_on}, no leak"
    if isinstance(data, CompareFile):
        beyond = [c for c in chosen if unjudged(c, fail_on, data.min_effect)]
        if beyond and not accept_unjudged:
            return UNJUDGED, [describe_unjudged(c, data.min_effect) for c in beyond]
        if beyond:
            return 0, [f"gate passed: {passed}; {len(beyond)} unjudged, accepted"]
    return 0, [f"gate passed: {passed}"]


def leaks_of(data: CompareFile | VerdictFile, pair: tuple[str, str] | None) -> list[Growth]:
    """The cases the file calls ``leaks`` (run B's in a compare.json; the pair's strategies'
    in a verdicts.json): a leak fails the gate whatever --fail-on says."""
    if isinstance(data, VerdictFile):
        assert pair is not None
        return [c for c in data.leaks if c.strategy in pair]
    return data.leaks


def parse_pair(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise GateError(f"--pair {text!r} is not two strategy names; valid: --pair A,B")
    return names[0], names[1]
