"""How a ratio and its interval are spelled, the same on every page, table and line of text
(the verdicts themselves: ``verdicts``)."""

from __future__ import annotations

from reports.judge.noise import MEMORY_KEYS
from reports.schema.records import Paired
from reports.schema.verdict_records import Comparison


def ratio_text(c: Comparison | Paired | None) -> str:
    """A ratio and its interval, spelled one way on every table and line of text:
    ``1.023 (95% CI 0.998-1.040)``; ``bounds`` for an interval that is no confidence interval;
    the ratio alone without an interval; ``-`` without a ratio."""
    if c is None or c.ratio is None:
        return "-"
    text = f"{c.ratio:.3f}"
    if c.ci_low is None:
        return text
    return f"{text} ({interval_text(c, dash='-')})"


def interval_text(
    x: Comparison | Paired, short: bool = False, exact: bool = False, dash: str = "\u2013"
) -> str:
    """A ratio's interval, as the pages spell it: ``95% CI lo-hi`` (``lo-hi`` when
    ``short``), ``bounds lo-hi`` for an interval that is no confidence interval (fewer than 6
    pairs), ``exact`` for a memory figure, else ``no interval``."""
    if x.ci_low is not None and x.ci_high is not None:
        level = ("" if short else "95% CI ") if x.confidence else "bounds "
        return f"{level}{x.ci_low:.3f}{dash}{x.ci_high:.3f}"
    if exact or getattr(x, "metric", None) in MEMORY_KEYS:
        return "exact"
    return "no interval"


def word_text(c: Comparison, min_effect: float | None = None) -> str:
    """A comparison's word as a line of text says it: ``higher``, ``higher (beyond the 2%
    margin)`` where its interval also clears the margin, ``unclear (too few data ...)``."""
    if getattr(c, "beyond", None):
        margin = f"the {min_effect:.0%} margin" if min_effect is not None else "the margin"
        return f"{c.verdict} (beyond {margin})"
    if getattr(c, "why", None):
        return f"{c.verdict} ({c.why.split(':')[0]})"
    return str(c.verdict)
