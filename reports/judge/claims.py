"""A comparison's claim and its error control: the p-value of ``lower``/``higher`` (the ratio
beyond the margin) and of ``same`` (inside it, two one-sided tests), Benjamini-Hochberg over a
sweep's claims, and the alpha each look of a sweep that adds rounds spends (Lan-DeMets).
``stats`` gives the figures these test; ``verdicts`` decides with them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from reports.judge.stats import ALPHA

# -- looks: a sweep that adds rounds until decided tests its data more than once -------------------
SPENDING = (
    "Lan-DeMets alpha spending, O'Brien-Fleming type: by look i of at most M a sweep has spent "
    "2 - 2 Phi(z_(1 - alpha/2) / sqrt(i / M)); an interim look tests at what that adds, the "
    "final one at all that the looks actually taken left (Bonferroni over looks)"
)


def spent(look: int, looks: int, alpha: float = ALPHA) -> float:
    """The alpha spent by the end of look ``look`` of at most ``looks`` (Lan & DeMets 1983,
    O'Brien-Fleming-type spending function 2 - 2 Phi(z_(1-alpha/2) / sqrt(t)), t = look /
    looks): all of it by the last look, little early. A sweep looks early only to stop
    spending on what is already plain (a strategy far slower than the rest); its gray
    comparisons are decided at its last look, which keeps most of alpha."""
    t = min(1.0, max(0.0, look / max(1, looks)))
    if t == 0:
        return 0.0
    return float(2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(t)))


def look_alpha(look: int, looks: int, alpha: float = ALPHA) -> float:
    """The level of interim look ``look`` (1-based): what it adds to the alpha spent."""
    return spent(look, looks, alpha) - spent(look - 1, looks, alpha)


def final_alpha(taken: int, looks: int, alpha: float = ALPHA) -> float:
    """The level of the final look, the ``taken``-th: the alpha the interim looks before it
    left (a sweep that looked once tests at ``alpha``; the sum over the looks taken is
    ``alpha``, so that stopping when decided keeps the error rate at ``alpha``)."""
    return alpha - spent(max(1, taken) - 1, looks, alpha)


def equivalence_p(
    log: float | None, se: float | None, df: float | None, margin: float
) -> float | None:
    """The p-value of two one-sided tests that a log ratio lies inside +-``margin`` (TOST,
    Schuirmann 1987): the larger of the two one-sided t-tests' p; None without a test. Below
    0.05 it is the 90% interval inside the margin, the old ``same``; adjusted over a sweep's
    comparisons and held to a look's alpha, ``same`` is controlled as ``lower``/``higher`` are."""
    if log is None or se is None or df is None or df <= 0:
        return None
    if se <= 0:
        return 0.0 if abs(log) < margin else 1.0
    below = float(sps.t.sf((log + margin) / se, df))  # H0: log <= -margin
    above = float(sps.t.sf((margin - log) / se, df))  # H0: log >= +margin
    return max(below, above)


def beyond_p(log: float | None, se: float | None, df: float | None, margin: float) -> float | None:
    """The p-value of the t-test that a log ratio lies beyond +-``margin`` (H0: ``|log| <=
    margin``): twice the one-sided p on its estimate's side, since either side would make the
    claim, so below alpha it is the 1 - alpha interval clear of the margin, as ``decide``'s rule
    asks of a CI (the mirror of ``equivalence_p``, whose claim needs both sides). A twin's true
    ratio 1 lies a whole margin inside that null, so an A/A claims a difference far less often
    than alpha while its interval is about as wide as the margin (where a t-test of ratio 1
    claims one at alpha); only an interval many margins wide approaches alpha. None without a
    test."""
    if log is None or se is None or df is None or df <= 0:
        return None
    if se <= 0:
        return 0.0 if abs(log) > margin else 1.0
    return min(1.0, 2 * float(sps.t.sf((abs(log) - margin) / se, df)))


def adjusted(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (scipy's ``false_discovery_control``) over a
    sweep's comparisons: calling those with q < ALPHA keeps the expected share of false calls
    among all calls at ALPHA. None stays None."""
    known = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if known:
        qs = sps.false_discovery_control([pvalues[i] for i in known], method="bh")
        for i, q in zip(known, np.atleast_1d(qs), strict=True):
            out[i] = float(q)
    return out
