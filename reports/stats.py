"""The statistics every figure of a sweep is stated with: robust, distribution-free, seeded.

Medians with a 95% CI from binomial order statistics (no normality assumed: timings are skewed),
ratios of medians with a seeded bootstrap CI, and a difference called significant only when that
CI excludes 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000


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
    """median, IQR, min, max, mean, n, a 95% CI of the median and the CV, in seconds."""
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
        "cv": float(xs.std(ddof=1) / mean) if xs.size > 1 and mean > 0 else 0.0,
    }


def ratio_of_medians(
    numerator: Sequence[float],
    denominator: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    paired: bool = False,
) -> dict[str, float | bool]:
    """median(a) / median(b) with a seeded percentile-bootstrap CI; significant if it excludes 1.

    ``paired``: a[i] and b[i] were measured side by side (interleaved in one process), so pairs
    are resampled together and the drift they share cancels out of the CI.
    """
    a, b = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if a.size == 0 or b.size == 0 or np.median(b) == 0:
        return {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan, "significant": False}
    if paired and a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} and {b.size}")
    rng = np.random.default_rng(seed)
    index_a = rng.integers(0, a.size, size=(resamples, a.size))
    index_b = index_a if paired else rng.integers(0, b.size, size=(resamples, b.size))
    boot_a = np.median(a[index_a], axis=1)
    boot_b = np.median(b[index_b], axis=1)
    ratios = boot_a / np.where(boot_b == 0, np.nan, boot_b)
    tail = (1 - confidence) / 2 * 100
    low, high = np.nanpercentile(ratios, [tail, 100 - tail])
    return {
        "ratio": float(np.median(a) / np.median(b)),
        "ci_low": float(low),
        "ci_high": float(high),
        "significant": bool(low > 1 or high < 1),
        "test": "paired bootstrap" if paired else "bootstrap",
    }


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (nan with fewer than two distinct xs)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])
