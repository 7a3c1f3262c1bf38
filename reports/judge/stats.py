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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

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
    # coverage(j) = sum of C(n, i) for i in [j, n - j] over 2^n = (2^n - 2 * lower tail) / 2^n:
    # the tail grows by one term per j (exact integers, O(n); a sum per j was O(n^2) and took
    # a minute at the 6,000 pooled samples of a --quick sweep's rotated strategies)
    total, tail, term, best = 2**n, 0, 1, 1  # term = C(n, j - 1)
    for j in range(1, n // 2 + 1):
        tail += term
        if (total - 2 * tail) / total < confidence:
            break
        best = j
        term = term * (n - j + 1) // j
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
    """The mean with ``int(n * trim)`` of the values cut from each end: scipy's ``trim_mean``
    to the bit, without its per-call cost (the bootstrap calls it 2,000 times per case)."""
    xs = np.sort(np.asarray(values, dtype=float))
    cut = int(xs.size * trim)
    kept = xs[cut : xs.size - cut] if xs.size > 2 * cut else xs
    return float(kept.mean()) if kept.size else math.nan


def trimmed_means(rows: np.ndarray, trim: float = TRIM) -> np.ndarray:
    """``trimmed_mean`` of every row of a 2-D array at once."""
    xs = np.sort(rows, axis=1)
    cut = int(xs.shape[1] * trim)
    return xs[:, cut : xs.shape[1] - cut].mean(axis=1) if xs.shape[1] > 2 * cut else xs.mean(1)


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
    if len({g.size for g in groups}) == 1:  # every process with as many pairs: in one go
        stacked = np.stack(groups)  # (processes, pairs)
        count, size = stacked.shape
        chosen = rng.integers(0, count, size=(resamples, count, 1)) if count > 1 else 0
        picks = rng.integers(0, size, size=(resamples, count, size))
        return trimmed_means(stacked[chosen, picks].reshape(resamples, count * size))
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
    """Student-t quantile (scipy.stats); infinite without degrees of freedom."""
    return float(sps.t.ppf(p, df)) if df > 0 else math.inf


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (nan with fewer than two distinct xs)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])


# -- between processes: one figure per process, one interval per comparison ----------------------
ALPHA = 1 - CONFIDENCE  # two-sided level of every time test, controlled over a sweep (FDR)
# lower/higher (the interval clear of ratio 1) are decided at this share of a look's alpha: at
# a whole 0.05 a twin whose interval is as wide as the margin or wider is called different
# 3.8-4.9% of the time (issue 62's simulations); at a twentieth, the twins of a rotated sweep
# whose pooled variance has 2 df (tests/test_verdict_simulations.py) 0.82% of 5,000, at a
# tenth 0.90%, under the margin's rule alone 0.62%
DIRECTION_SHARE = 0.05
# ... and at this share where the comparison's 95% interval is no wider than the margin (there a
# twin's interval mostly lies inside it: ``same`` comes first). Six strategies rotated in 3
# processes (issue 62's, tests/test_verdict_simulations.py, 200 sweeps): a true 3% decided in
# 51% at the twentieth everywhere, 94% at a whole alpha with twins lower/higher in 0.7-1.0%, at
# 0.4 in 86% with twins 0.1-0.3%
NARROW_DIRECTION_SHARE = 0.4
# ... where that interval's df are this many or more: a variance on fewer comes out narrow by
# chance (df 2: a fifth of the time below a third of the truth), and the twins of a rotated
# sweep against one in processes of its own (df 2) were lower/higher in 1.2% of 5,000 at 0.4
NARROW_DF = 8
OWN_VARIANCE_PROCESSES = 4  # each side this many processes: its own variance (Welch); else pooled


def process_log(numerator: Sequence[float], denominator: Sequence[float]) -> float | None:
    """One process's figure on the log scale: the 20%-trimmed mean of its per-pair log ratios
    (scipy's ``trim_mean``); None without a pair."""
    ratios = log_ratios(numerator, denominator)
    return float(sps.trim_mean(ratios, TRIM)) if ratios.size else None


def process_within(numerator: Sequence[float], denominator: Sequence[float]) -> float | None:
    """The variance of one process's figure (``process_log``) that its own pairs show: Yuen's
    squared standard error of a trimmed mean, the winsorized variance of the log ratios times
    (n - 1) / (h (h - 1)), h the pairs the trim keeps; None below 2 kept pairs."""
    x = np.sort(log_ratios(numerator, denominator))
    cut = int(TRIM * x.size)  # as scipy's trim_mean cuts
    kept = x.size - 2 * cut
    if kept < 2:
        return None
    winsorized = np.clip(x, x[cut], x[x.size - cut - 1])
    return float(winsorized.var(ddof=1)) * (x.size - 1) / (kept * (kept - 1))


def floored(variance: float | None, within: float | None) -> float | None:
    """A variance between processes, never below what the processes' own pairs show
    (``within``: a process's figure varies from one process to the next at least as much as
    its pairs let it; with few processes the between-process estimate falls below that by
    chance, and an interval from it would be narrower than the pairs allow)."""
    if variance is None or within is None:
        return variance
    return max(variance, within)


def pooled_variance(
    groups: Sequence[Sequence[float] | Mapping[str, float]],
) -> tuple[float | None, int]:
    """The variance of one process's figure between processes of one and the same thing,
    pooled over the groups (strategies) that have two or more: (variance, degrees of freedom);
    (None, 0) without any such group. A group is its figures, or its figures keyed by the
    process each came from: where strategies shared processes (a rotation), a process's offset
    is in every figure it gave, the groups' sums of squares are not independent, and the df is
    what they are worth (``shared_df``), never more than the figures less the groups."""
    keyed = [
        dict(g) if isinstance(g, Mapping) else {(i, j): x for j, x in enumerate(g)}
        for i, g in enumerate(groups)
    ]
    keyed = [g for g in keyed if len(g) >= 2]
    squares = 0.0
    for g in keyed:
        xs = np.fromiter(g.values(), dtype=float)
        squares += float(((xs - xs.mean()) ** 2).sum())
    df = sum(len(g) - 1 for g in keyed)
    if not df:
        return None, 0
    return squares / df, shared_df(keyed, squares, df)


def shared_df(groups: Sequence[Mapping[Any, float]], squares: float, df: int) -> int:
    """The degrees of freedom of the pooled variance of ``groups`` (figures keyed by process;
    ``squares`` their pooled sum of squares about each group's mean, ``df`` its count): ``df``
    where no process gave two groups' figures. Where processes were shared, a figure is its
    group's mean, plus its process's offset (variance s2_process, in every figure of that
    process), plus its own noise (s2_own). s2_own is the residual of the least-squares fit of a
    group effect plus a process effect (0 where the fit leaves no residual df: the lowest df);
    s2_process the rest of ``squares`` (moments, never below 0). The df is
    Satterthwaite's for the quadratic form the pooled variance is: tr(A S)^2 / tr((A S)^2), S the
    figures' covariance, A the centring within groups; with M = Z'AZ (Z: figure to process),
    (s2_process tr M + s2_own df)^2 / (s2_process^2 |M|^2 + 2 s2_process s2_own tr M + s2_own^2
    df), rounded down. With no offset it is ``df``; with offsets that dominate, about the
    distinct processes less one: seven strategies sharing three processes and one with two of
    its own have 2, not 15."""
    processes = list({p: None for g in groups for p in g})
    cells = [(i, p, x) for i, g in enumerate(groups) for p, x in g.items()]
    if len(processes) == len(cells) or squares <= 0:
        return df
    column = {p: j for j, p in enumerate(processes)}
    z = np.zeros((len(cells), len(processes)))  # figure -> its process
    x = np.zeros((len(cells), len(groups)))  # figure -> its group
    for row, (i, p, _) in enumerate(cells):
        z[row, column[p]] = x[row, i] = 1.0
    y = np.array([v for _, _, v in cells])
    design = np.hstack([x, z])
    fit, *_ = np.linalg.lstsq(design, y, rcond=None)
    df_own = len(cells) - int(np.linalg.matrix_rank(design))
    s2_own = float(((y - design @ fit) ** 2).sum()) / df_own if df_own else 0.0
    centred = z - x @ (np.linalg.pinv(x) @ z)  # A Z: each group's mean taken out
    m = z.T @ centred
    # tr M = tr(A) = df: Z Z' is 1 where two figures share a process, never two of one group
    s2_process = max(squares / df - s2_own, 0.0)
    top = (s2_process + s2_own) ** 2 * df**2
    bottom = s2_process**2 * float((m**2).sum()) + (2 * s2_process * s2_own + s2_own**2) * df
    if bottom <= 0:
        return df
    return max(1, min(df, math.floor(top / bottom + 1e-9)))


METHOD = "Student-t interval of per-process figures"


def contrast(
    a: Sequence[float],
    b: Sequence[float] | None,
    variance: float | None,
    df: int,
    confidence: float = CONFIDENCE,
    within: float | None = None,
    within_b: float | None = None,
) -> dict[str, Any]:
    """mean(a) - mean(b) of per-process log figures (b None: mean(a) against 0), with one
    interval that carries every variance component between the two sides: each process's
    figure holds its pairs' uncertainty and the process's own offset, so the variance of
    process figures is both. Each side's own variance when both sides have
    ``OWN_VARIANCE_PROCESSES`` processes (Welch-Satterthwaite df); otherwise ``variance``, the
    group's pooled one, with its ``df`` (the pooled two-sample t). Each side's share is
    ``floored`` at its own side's ``within`` (b's: ``within_b``), the variance of one of its
    processes' figure that its own pairs show (df unchanged): a quiet pair of strategies is
    never judged by a noisy third's pairs. Student-t quantiles and p-values from scipy.stats.
    The 90% interval is the one two one-sided tests use (same)."""
    xa = np.asarray(list(a), dtype=float)
    xb = np.asarray(list(b), dtype=float) if b is not None else None
    out: dict[str, Any] = {"processes": [int(xa.size), int(xb.size) if xb is not None else 0]}
    if xa.size == 0 or (xb is not None and xb.size == 0):
        return {**out, "log": None, "ratio": None, "ci_low": None, "ci_high": None, "p": None}
    estimate = float(xa.mean() - (xb.mean() if xb is not None else 0.0))
    own = xa.size >= OWN_VARIANCE_PROCESSES and (xb is None or xb.size >= OWN_VARIANCE_PROCESSES)
    if own:
        parts = [(floored(float(xa.var(ddof=1)), within) / xa.size, xa.size - 1)]
        if xb is not None:
            parts.append((floored(float(xb.var(ddof=1)), within_b) / xb.size, xb.size - 1))
        se2 = sum(v for v, _ in parts)
        dof = (
            se2**2 / sum(v**2 / d for v, d in parts) if se2 > 0 else float(sum(d for _, d in parts))
        )
        how = "each side's own variance between its processes, Welch-Satterthwaite df"
    elif variance is not None and df > 0:
        se2 = floored(variance, within) / xa.size
        se2 += floored(variance, within_b) / xb.size if xb is not None else 0.0
        dof = float(df)
        how = "the group's between-process variance, pooled over its strategies, with its df"
    else:
        return {
            **out,
            "log": estimate,
            "ratio": math.exp(estimate),
            "ci_low": None,
            "ci_high": None,
            "p": None,
            "method": "no variance between processes measured: no interval",
        }
    return {**out, **interval(estimate, se2, dof, confidence), "method": f"{METHOD}: {how}"}


PAIRED_METHOD = (
    "paired Student-t interval: the two strategies' figures differenced process by process, "
    "in the processes that measured both (df = processes - 1)"
)


def paired_contrast(
    differences: Sequence[float], confidence: float = CONFIDENCE, within: float | None = None
) -> dict:
    """mean(a - b) of two strategies' log figures measured in the same processes: whatever a
    process does to both of its replicas alike drops out of each difference, and what is left
    varies between processes as it may (a t interval of the differences, df = n - 1; their
    variance ``floored`` at ``within``, what one process's difference shows inside it)."""
    d = np.asarray(list(differences), dtype=float)
    out: dict[str, Any] = {"processes": [int(d.size), int(d.size)], "paired": True}
    if d.size < 2:
        return {**out, "log": None, "ratio": None, "ci_low": None, "ci_high": None, "p": None}
    estimate = float(d.mean())
    se2 = floored(float(d.var(ddof=1)), within) / d.size
    return {**out, **interval(estimate, se2, d.size - 1, confidence), "method": PAIRED_METHOD}


TWO_WAY_METHOD = (
    "two-way fit of the rotated strategies' figures (strategy + process: each process's offset "
    "cancels; df = the fit's residual df), the wider of the residual variance of all its "
    "strategies and of the two compared, never below what the pairs inside a process show"
)


def two_way_contrast(
    table: Mapping[Any, Mapping[str, float]],
    a: Any,
    b: Any,
    confidence: float = CONFIDENCE,
    within: float | None = None,
) -> dict[str, Any] | None:
    """a - b of two strategies rotated in the same processes, judged within them: the least-
    squares fit of every strategy's log figure in those processes (``table``: strategy ->
    process -> figure) as a strategy effect plus a process effect, so that what a process does
    to all of its loops cancels and each strategy's figures lend the residual df (6 strategies
    in 3 processes: 10, where the pair's own differences have 2). Guarded against a pair
    noisier than the rest (the interaction of strategy and process is not assumed alike): the
    residual variance is the larger of all cells' and the two compared strategies' own cells'
    (their share of the df); floored at ``within``, what one process's difference shows inside
    it, over the shared processes. None where the fit leaves no residual df or a and b share
    fewer than 2 processes."""
    keys = list(table)
    shared = [p for p in table[a] if p in table[b]]
    processes = sorted({p for row in table.values() for p in row})
    if len(shared) < 2 or len(keys) < 3:
        return None
    cells = [(i, processes.index(p), x) for i, k in enumerate(keys) for p, x in table[k].items()]
    design = np.zeros((len(cells), len(keys) + len(processes) - 1))
    for row, (i, j, _) in enumerate(cells):
        design[row, i] = 1.0
        if j:  # the first process is the reference level
            design[row, len(keys) + j - 1] = 1.0
    y = np.array([x for _, _, x in cells])
    df = len(cells) - int(np.linalg.matrix_rank(design))
    if df < 1:
        return None
    fit, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ fit
    weights = np.zeros(design.shape[1])
    weights[keys.index(a)], weights[keys.index(b)] = 1.0, -1.0
    unit = float(weights @ np.linalg.pinv(design.T @ design) @ weights)
    s2 = float((residual**2).sum()) / df
    own = np.array([keys[i] in (a, b) for i, _, _ in cells])
    s2_own = float((residual[own] ** 2).sum()) / (df * own.sum() / len(cells))
    se2 = max(s2, s2_own) * unit
    if within is not None:
        se2 = max(se2, within / len(shared))
    estimate = float(weights @ fit)
    out: dict[str, Any] = {"processes": [len(shared), len(shared)], "paired": True}
    return {**out, **interval(estimate, se2, df, confidence), "method": TWO_WAY_METHOD}


def interval(estimate: float, se2: float, dof: float, confidence: float = CONFIDENCE) -> dict:
    """The t interval (95% and the 90% of two one-sided tests) and p of a log estimate whose
    squared standard error is ``se2`` with ``dof`` degrees of freedom."""
    se = math.sqrt(se2)
    t95 = float(sps.t.ppf(1 - (1 - confidence) / 2, dof))
    t90 = float(sps.t.ppf(1 - (1 - confidence), dof))
    p = float(2 * sps.t.sf(abs(estimate) / se, dof)) if se > 0 else (0.0 if estimate else 1.0)
    return {
        "log": estimate,
        "ratio": math.exp(estimate),
        "se": se,
        "df": dof,
        "ci_low": math.exp(estimate - t95 * se),
        "ci_high": math.exp(estimate + t95 * se),
        "ci90_low": math.exp(estimate - t90 * se),
        "ci90_high": math.exp(estimate + t90 * se),
        "p": p,
        "confidence": confidence,
    }


MAD_EFFICIENCY = 0.37  # of the median absolute deviation against the SD, for normal data
BETWEEN_RUNS_CASES = 2  # time comparisons two runs need in common to measure their variance
BETWEEN_RUNS = (
    "each case's interval also carries the variance of a case's figure between runs: the "
    "spread of every compared case's change (1.4826 x their median absolute change, so that "
    "the few cases a change really moved do not hide in it) less what their own standard "
    "errors explain; below two cases in common it is not measured and no time comparison is "
    "called. A change that moves every case alike cannot be told from the machine between "
    "two runs: it shows as unclear everywhere, in one direction (run both builds in one sweep "
    "to call it)"
)


def between_runs(changes: Sequence[float], ses: Sequence[float]) -> tuple[float | None, int]:
    """The variance of a case's figure from one run to another, beyond its processes'
    (variance, df), from the changes (B - A, log) of every case two runs have in common.

    Inside a run the rounds interleave every case, so the machine's state is shared; between
    two runs it is not, and a case's overhead moves with it (a CPU clocked otherwise, another
    neighbour's cache): the case's extra work against the plain loop's, often alike for
    every case. That movement shows as the cases' changes beyond what their own standard
    errors explain. Its scale is 1.4826 x the median absolute change (the normal's; robust,
    so that the cases a change really moved do not hide in it), taken around zero and not
    around the median change: a shift common to every case is the run's as likely as the
    code's. Its df is the cases' less one, times 0.37, the efficiency of the median absolute
    deviation against the standard deviation for normal data (a robust scale knows less than
    a plain one of as many cases). (None, 0) below ``BETWEEN_RUNS_CASES``: one change alone
    cannot tell the run from the code."""
    xs = np.asarray(list(changes), dtype=float)
    if xs.size < BETWEEN_RUNS_CASES:
        return None, 0
    scale = 1.4826 * float(np.median(np.abs(xs)))
    own = float(np.median(np.square(np.asarray(list(ses), dtype=float))))
    return max(0.0, scale**2 - own), max(1, round(MAD_EFFICIENCY * (xs.size - 1)))


def widened(
    c: dict[str, Any],
    variance: float | None,
    df: int,
    level: str = "the variance between runs",
    unmeasured: str | None = None,
) -> dict[str, Any]:
    """A contrast whose interval also carries ``variance`` (with ``df``: Welch-Satterthwaite
    for the sum), one more ``level`` of the hierarchy (between runs, between machines);
    without that variance it has no interval (its p is None), and its method says why
    (``unmeasured``, else "LEVEL not measured")."""
    if c.get("log") is None or c.get("se") is None:
        return c
    if variance is None or df <= 0:
        gone = ("se", "df", "ci_low", "ci_high", "ci90_low", "ci90_high", "p", "confidence")
        return {
            **{k: v for k, v in c.items() if k not in gone},
            "ci_low": None,
            "ci_high": None,
            "p": None,
            "method": f"{c['method']}; {unmeasured or f'{level} not measured'}",
        }
    own = c["se"] ** 2
    se2 = own + variance
    parts = [(own, c["df"]), (variance, df)]
    dof = se2**2 / sum(v**2 / d for v, d in parts if v > 0) if se2 > 0 else float(c["df"])
    return {
        **c,
        **interval(c["log"], se2, dof, c.get("confidence") or CONFIDENCE),
        "method": f"{c['method']}; plus {level} (its df {df})",
    }


def resolution(
    variance: float | None, df: int, processes: float, margin: float | None = None
) -> float | None:
    """The smallest difference a comparison of two strategies with ``processes`` processes
    each could call (a fraction): the half-width of its interval at the level direction is
    decided (``lower``/``higher``: the interval clear of ratio 1, ``direction_t``, before the
    adjustment over the sweep, which can only ask more); a true difference this large is called
    about half the time. None without a variance."""
    if variance is None or df <= 0 or processes <= 0:
        return None
    se = math.sqrt(variance * 2 / processes)
    return math.expm1(direction_t(df, se, margin) * se)


def half_width(low: float | None, high: float | None) -> float | None:
    """An interval's half-width on the log scale (``low``/``high`` ratios); None without one."""
    if not low or not high:
        return None
    return (math.log(high) - math.log(low)) / 2


def direction_share(half: float | None, margin: float | None, df: float | None) -> float:
    """The share of alpha direction is decided at: ``NARROW_DIRECTION_SHARE`` where the 95%
    half-width ``half`` is no wider than ``margin`` (both logs) on ``NARROW_DF`` df or more,
    else ``DIRECTION_SHARE``."""
    narrow = None not in (half, margin, df) and half <= margin and df >= NARROW_DF
    return NARROW_DIRECTION_SHARE if narrow else DIRECTION_SHARE


def direction_t(df: float, se: float | None = None, margin: float | None = None) -> float:
    """The t quantile at the level direction is decided (two-sided, ALPHA x
    ``direction_share`` of an interval of ``se`` at ``df`` against ``margin``, a log; the
    stricter share without them)."""
    half = None if se is None else float(sps.t.ppf(1 - ALPHA / 2, df)) * se
    return float(sps.t.ppf(1 - ALPHA * direction_share(half, margin, df) / 2, df))
