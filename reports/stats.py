"""The statistics every figure of a sweep is stated with: robust, distribution-free, seeded.

Two kinds of figure:

- a phase's time in one case: median with a 95% CI from binomial order statistics (no
  normality assumed: timings are skewed);
- a **paired ratio**: each window of a strategy against the plain-loop window beside it in the
  same process. Per pair the log ratio; the estimate is the 20%-trimmed mean of the log ratios
  (robust to a window that a neighbour hit, on either side), exponentiated. Its CI is a
  hierarchical percentile bootstrap: processes (rounds) resampled first, then pairs inside each,
  so the variance between processes is in the interval whenever there are several processes.

Below ``MIN_CI_PAIRS`` pairs no bootstrap interval covers 95%: the interval falls back to the
range of the paired ratios and says so (``confidence`` is None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
TRIM = 0.2  # fraction cut from each end of the log ratios before averaging
MIN_CI_PAIRS = 6  # fewer pairs: no bootstrap CI, the range instead

ESTIMATE = "20%-trimmed mean of per-pair log ratios (strategy window / plain-loop window)"


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """CI of the median from order statistics, no distribution assumed.

    [x_(j), x_(n-j+1)] (1-based) covers the median with probability P(j <= B <= n-j),
    B ~ Binomial(n, 1/2); the largest j that still covers ``confidence`` gives the narrowest
    interval. Below 6 samples no j does, and the CI is [min, max].
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan)
    best = 1
    for j in range(1, n // 2 + 1):
        coverage = sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2**n
        if coverage < confidence:
            break
        best = j
    return (xs[best - 1], xs[n - best])


def summarize(samples: Sequence[float]) -> dict[str, float | int]:
    """median, IQR, min, max, mean, n, a CI of the median and the CV, in seconds."""
    xs = np.asarray(samples, dtype=float)
    if xs.size == 0:
        return {"n": 0}
    low, high = median_ci(xs.tolist())
    mean = float(xs.mean())
    q1, q3 = np.percentile(xs, [25, 75])
    return {
        "median_s": float(np.median(xs)),
        "iqr_s": float(q3 - q1),
        "min_s": float(xs.min()),
        "max_s": float(xs.max()),
        "mean_s": mean,
        "n": int(xs.size),
        "ci_low_s": float(low),
        "ci_high_s": float(high),
        # order statistics reach 95% from 6 samples; below that [min, max], no stated level
        "ci_confidence": CONFIDENCE if xs.size >= 6 else None,
        "cv": float(xs.std(ddof=1) / mean) if xs.size > 1 and mean > 0 else 0.0,
    }


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    xs = np.sort(np.asarray(values, dtype=float))
    cut = int(xs.size * trim)
    kept = xs[cut : xs.size - cut] if xs.size > 2 * cut else xs
    return float(kept.mean()) if kept.size else math.nan


def log_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> np.ndarray:
    """Per pair log(a / b); pairs with a non-positive side are dropped."""
    a, b = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} and {b.size}")
    keep = (a > 0) & (b > 0)
    return np.log(a[keep] / b[keep])


def bootstrap_draws(
    groups: Sequence[np.ndarray], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """Hierarchical bootstrap of the trimmed mean: processes first, then pairs inside each."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    for i in range(resamples):
        chosen = rng.integers(0, len(groups), size=len(groups)) if len(groups) > 1 else [0]
        parts = [groups[j][rng.integers(0, groups[j].size, size=groups[j].size)] for j in chosen]
        out[i] = trimmed_mean(np.concatenate(parts))
    return out


def paired(
    groups: Sequence[Sequence[float]], seed: int = 0, confidence: float = CONFIDENCE
) -> dict[str, object]:
    """A paired ratio from per-process log ratios: estimate, CI, method, and its draws.

    ``draws`` (log scale, not JSON) lets two paired ratios be compared with both uncertainties.
    """
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    n = sum(g.size for g in groups)
    if n == 0:
        return {"ratio": None, "ci_low": None, "ci_high": None, "pairs": 0, "processes": 0}
    every = np.concatenate(groups)
    estimate = trimmed_mean(every)
    out: dict[str, object] = {
        "ratio": math.exp(estimate),
        "pairs": int(n),
        "processes": len(groups),
        "estimate": ESTIMATE,
        "log": estimate,
    }
    if n < MIN_CI_PAIRS:
        out.update(
            ci_low=math.exp(every.min()),
            ci_high=math.exp(every.max()),
            confidence=None,
            method=f"range of {n} paired ratios (fewer than {MIN_CI_PAIRS} pairs: no 95% CI)",
            draws=None,
        )
        return out
    draws = bootstrap_draws(groups, seed=seed)
    low, high = _percentiles(draws, confidence)
    how = (
        f"hierarchical percentile bootstrap, {len(groups)} processes resampled, then pairs"
        if len(groups) > 1
        else "percentile bootstrap of the pairs of one process (between-process variance: "
        "see the noise floor)"
    )
    out.update(
        ci_low=math.exp(low),
        ci_high=math.exp(high),
        confidence=confidence,
        method=f"{how} ({BOOTSTRAP_RESAMPLES} resamples, seeded)",
        draws=draws,
    )
    return out


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap draws (percentile method)."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def public(result: dict[str, object]) -> dict[str, object]:
    """A paired result without its draws and log estimate: what goes into JSON."""
    return {k: v for k, v in result.items() if k not in ("draws", "log")}


def ratio_between(
    a: dict[str, object], b: dict[str, object], confidence: float = CONFIDENCE
) -> dict[str, object]:
    """a / b of two paired ratios measured in different processes, both uncertainties carried.

    The bootstrap draws of the two are independent, so their difference on the log scale is a
    draw of the log of a / b. Where either side has too few pairs, the interval is the widest
    one the two ranges allow.
    """
    if a.get("ratio") is None or b.get("ratio") is None:
        return {"ratio": None, "ci_low": None, "ci_high": None, "confidence": None, "method": None}
    ratio = math.exp(a["log"] - b["log"])  # type: ignore[operator]
    if a.get("draws") is None or b.get("draws") is None:
        return {
            "ratio": ratio,
            "ci_low": a["ci_low"] / b["ci_high"],  # type: ignore[operator]
            "ci_high": a["ci_high"] / b["ci_low"],  # type: ignore[operator]
            "confidence": None,
            "method": "bounds from the ranges of the paired ratios (too few pairs for a CI)",
        }
    # the two sides' draws are independent: permuting one breaks any alignment of their seeds
    other = np.random.default_rng(1).permutation(np.asarray(b["draws"]))
    low, high = _percentiles(np.asarray(a["draws"]) - other, confidence)
    return {
        "ratio": ratio,
        "ci_low": math.exp(low),
        "ci_high": math.exp(high),
        "confidence": confidence,
        "method": "difference of independent bootstrap draws of the two paired ratios",
    }


def split_half(values: Sequence[float]) -> float | None:
    """How far a series disagrees with itself: |log| of the median of its odd windows over
    its even ones (the plain loop against itself, in one process)."""
    xs = np.asarray(values, dtype=float)
    if xs.size < 4:
        return None
    even, odd = np.median(xs[0::2]), np.median(xs[1::2])
    return abs(math.log(odd / even)) if even > 0 and odd > 0 else None


def between_processes(
    groups: Sequence[Sequence[float]], level: float = 0.99
) -> dict[str, float | int | None]:
    """How far single-process figures of one and the same thing differ between processes.

    ``groups``: log figures, one group per thing measured in several processes (a strategy at
    one K and N; a benchmark's parameter set at one commit); groups of one tell nothing.
    ``observed``: the largest max - min inside a group. ``bound``: the pooled SD times sqrt(2)
    (the SD of a difference of two processes) times a Student-t quantile at ``level`` with the
    pooled degrees of freedom ``df``: a prediction bound on |log ratio| between two processes
    that is honest about how few processes estimated it (None without any df).
    """
    squares, df, observed = 0.0, 0, None
    for group in groups:
        xs = list(group)
        if len(xs) < 2:
            continue
        mean = sum(xs) / len(xs)
        squares += sum((x - mean) ** 2 for x in xs)
        df += len(xs) - 1
        spread = max(xs) - min(xs)
        observed = spread if observed is None else max(observed, spread)
    bound = None
    if df:
        bound = t_quantile(1 - (1 - level) / 2, df) * math.sqrt(2) * math.sqrt(squares / df)
    return {"observed": observed, "bound": bound, "df": df}


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile (p > 0.5): bisection on the CDF, the density integrated numerically."""
    if df <= 0:
        return math.inf
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(t: float) -> float:
        x = np.linspace(0.0, t, 20001)
        y = norm * (1 + x * x / df) ** (-(df + 1) / 2)
        h = t / 20000  # Simpson's rule
        return 0.5 + h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())

    low, high = 0.0, 1e3
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (nan with fewer than two distinct xs)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])
