"""A row's summaries, derived from its samples when asked: the engine records what it measured
(a row's ``samples``, one figure per timed pair), and every summary, interval and split-half is
computed here, in the reports, as ``torch.utils.benchmark``'s ``Measurement`` keeps its times and
derives its statistics on demand. Nothing is computed while rows are read (``rows.read`` stays a
typed decode); each function below computes its figure when a reader asks for it.

A row written before the engine stopped summarising (every row file up to 2026-12-07) carries
these figures stored; they are returned as stored, so such files read as they always did.

- ``phases``: per phase, the row's windows summarised (``stats.summarize``);
- ``overhead``: the process's paired ratio, the strategy's window over the plain loop's
  (``stats.paired``, seeded by the row's round), the plain loop's summary and its split half;
- ``loop_ratio``: the paired ratio of the case's loop over another loop of its strategy in the
  same process (``grad_sync``: its flavour over ``every``; ``settings``: over the
  ``--compare-settings`` loop); the engine writes which loops they are;
- ``cost_model``: the cost model's prediction (the engine's) against what the timed pairs
  measured: the reset phase and the paired cost per window, judged (``FACTOR``).
"""

from __future__ import annotations

from typing import Any

from msgspec import structs

from reports.judge import stats
from reports.judge.rows import phase_summaries
from reports.schema.records import LOOP_SAMPLES, Row
from reports.schema.row_parts import CostMeasured, CostModel, LoopRatio, Summary

FACTOR = 2.0  # the cost model: a measured figure within FACTOR of its prediction either way
SETTING_ESTIMATE = "the case's window / the same strategy's window with the other setting"


def summary(values) -> Summary:
    """A series of seconds summarised (``stats.summarize``), as a record."""
    return Summary(**stats.summarize(values))


def phases(row: Row) -> dict[str, Summary]:
    """Per phase (``rows.PHASES``), the row's timed windows summarised."""
    return row.phases or phase_summaries(row.samples)


def overhead(row: Row) -> LoopRatio | None:
    """The process's paired ratio, the strategy's window over the plain loop's, pair by pair
    (None: a failed row, or one without pairs)."""
    if row.overhead is not None:
        return row.overhead
    window, plain = row.samples.get("window"), row.samples.get("plain_window")
    if not window or not plain:
        return None
    pairs = stats.log_ratios(window, plain)
    return LoopRatio(
        **stats.public(stats.paired([pairs], seed=row.round)),
        plain=summary(plain),
        split_half=stats.split_half(plain),
    )


def loop_ratio(row: Row, kind: str) -> LoopRatio | None:
    """The case's loop over its other loop in the process (``kind``: ``grad_sync`` or
    ``settings``, ``LOOP_SAMPLES``), with which loops they are (the engine's); None where the
    process did not measure one."""
    written = row.grad_sync_vs_every if kind == "grad_sync" else row.settings_vs
    mine, other = LOOP_SAMPLES[kind]
    if written is None or written.ratio is not None or not row.samples.get(mine):
        return written
    pairs = stats.log_ratios(row.samples[mine], row.samples[other])
    paired = stats.public(stats.paired([pairs], seed=row.round))
    if kind == "settings":
        paired["estimate"] = SETTING_ESTIMATE
    return structs.replace(written, **paired)


def cost_model(row: Row) -> CostModel | None:
    """The cost model's prediction against the reset phase and the paired cost per window the
    row's timed pairs measured (each a summary with its CI), judged: ``explained``, or
    ``flags`` saying where they part."""
    model = row.cost_model
    if model is None or model.measured is not None:
        return model
    samples = row.samples
    reset = stats.summarize(samples["reset"])
    paired = stats.summarize(
        [a - b for a, b in zip(samples["window"], samples["plain_window"], strict=True)]
    )
    judged = judge_cost(model.predicted, reset, paired, model.counts)
    return structs.replace(
        model,
        measured=CostMeasured(reset=Summary(**reset), paired_cost=Summary(**paired)),
        **judged,
    )


def judge_cost(
    predicted: dict[str, Any],
    reset: dict[str, Any],
    paired: dict[str, Any],
    counts: dict[str, int],
) -> dict[str, Any]:
    """Measured against predicted: the reset (its median and CI), and the paired cost per
    window (median of strategy minus plain-loop windows, and its CI). A figure whose whole CI is
    more than FACTOR off its prediction is flagged with what the model left unexplained."""
    flags = []
    expected = predicted["reset_s"]
    if expected > 0 and _off(reset, expected):
        terms = predicted["reset_terms_s"]
        largest = max(terms, key=terms.get)
        measured = reset["median_s"]
        flags.append(
            f"reset measured {measured * 1e3:.3f} ms against {expected * 1e3:.3f} ms predicted "
            f"({measured / expected:.1f}x): "
            + (
                f"{(measured - expected) * 1e3:.3f} ms the model does not count"
                + (
                    f": {counts['drops']} gradients dropped to None (the model charges a "
                    "64 KiB free each: the real ones differ in size, and the module's own "
                    "parameter walk is not counted)"
                    if counts.get("drops")
                    else " (it counts launches, bytes, scanned objects, .grad visits and "
                    f"drops; largest term: {largest})"
                )
                if measured > expected
                else f"the model over-counts (largest term: {largest}, "
                f"{terms[largest] * 1e3:.3f} ms): its calibration is not like this work"
            )
        )
    total = predicted["total_s"]
    if total > 0 and _off(paired, total):
        flags.append(
            f"paired cost per window {paired['median_s'] * 1e3:.3f} ms (CI "
            f"{paired['ci_low_s'] * 1e3:.3f}-{paired['ci_high_s'] * 1e3:.3f}) against "
            f"{total * 1e3:.3f} ms predicted: "
            + (
                "the strategy slows something the model does not count (forward, backward or "
                "the update: memory traffic, the allocator, caches)"
                if paired["ci_low_s"] > total
                else "cheaper than predicted: part of the predicted work the plain loop does too"
            )
        )
    return {"explained": not flags, "flags": flags}


def _off(figure: dict[str, Any], expected: float) -> bool:
    """Whether the whole CI of a measured figure lies beyond FACTOR of ``expected``."""
    low, high = figure.get("ci_low_s"), figure.get("ci_high_s")
    if low is None or high is None:
        return False
    return low > FACTOR * expected or high < expected / FACTOR
