"""The report's charts, drawn by matplotlib and returned as inline SVG text.

No pyplot: each chart is its own ``Figure``, so nothing global changes in the process that builds
the report (the sweep). Text stays text in the SVG (``svg.fonttype: none``), which keeps the page
small and searchable. Every series has a marker, a line style or a hatch besides its colour, so
the charts still read when printed in grey.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from reports.page.records import CaseLine, ErrorLine, Slope, TimelineLine
from reports.schema.verdict_records import Comparison

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", "-.", ":")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo")
COLOURS = matplotlib.colormaps["tab10"].colors
STACKED = ("reset", "forward", "backward", "update")  # DDP's sync is inside backward: not stacked
RATIO_TICKS = (0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
WIDTH = 10.8  # inches: the page's content column (SVG points are 4/3 px)


def style(index: int) -> dict[str, Any]:
    """Colour, marker and line style of the index-th series: distinct in grey too."""
    return {
        "color": COLOURS[index % len(COLOURS)],
        "marker": MARKERS[index % len(MARKERS)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
    }


def to_svg(fig: Figure, name: str) -> str:
    """The figure as an <svg> element to inline; ids made unique per chart (one page, many)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"zerograd-{name}"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    # matplotlib names clip paths and glyphs by content; prefix them so two charts never share one
    svg = re.sub(r'id="([^"]+)"', rf'id="{name}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{name}-\1)", svg)
    svg = re.sub(r'xlink:href="#([^"]+)"', rf'xlink:href="#{name}-\1"', svg)
    return svg.replace("<svg ", f'<svg role="img" class="chart" data-chart="{name}" ', 1)


def _ms(seconds: float | None) -> float:
    return math.nan if seconds is None else seconds * 1e3


def _fit_y(ax, medians: list[float], log_ok: bool) -> bool:
    """Scale the y axis to the medians, so one wild CI bar on a noisy machine cannot flatten
    every line (bars reaching beyond are clipped); log scale where medians span > 20x."""
    values = [m for m in medians if not math.isnan(m) and m > 0]
    if not values:
        return False
    low, high = min(values), max(values)
    if log_ok and high / low > 20:  # one slow strategy would flatten all the others
        ax.set_yscale("log")
        ax.set_ylim(low / 2, high * 2)
        return True
    ax.set_ylim(0, high * 1.3)
    return False


def phases(cases: list[CaseLine], k: int, n: int) -> str:
    """Horizontal stacked bars: the median of each phase per strategy, window median marked."""
    ok = [c for c in cases if c.phases]
    names = [c.strategy for c in ok]
    fig = Figure(figsize=(WIDTH, 0.45 * len(ok) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    left = [0.0] * len(ok)
    stacked = [p for p in STACKED if any(c.phases.get(p) for c in ok)]
    for i, phase in enumerate(stacked):
        widths = [_ms(c.phases[phase].median_s if phase in c.phases else None) for c in ok]
        widths = [0.0 if math.isnan(w) else w for w in widths]
        ax.barh(
            names,
            widths,
            left=left,
            label=phase,
            color=COLOURS[i],
            hatch=HATCHES[i],
            edgecolor="black",
            linewidth=0.5,
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    window = [_ms(c.phases["window"].median_s) for c in ok]
    ax.plot(window, names, "k|", markersize=16, markeredgewidth=2, label="window (median)")
    ax.invert_yaxis()
    ax.set_xlabel("time per window (ms), medians")
    ax.set_ylabel("strategy")
    ax.set_title(f"Where a window's time goes, per strategy (K={k}, live tensors={n:,})")
    fig.legend(loc="outside lower center", fontsize="small", ncols=len(stacked) + 1)
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, "phases")


def answer(cases: list[CaseLine], k: int, n: int, name: str = "answer") -> str | None:
    """The answer at a glance: each strategy's time overhead over the plain loop, with its
    interval, against its peak memory (exact, so no interval); the plain loop at 1.0."""
    shown = [
        c
        for c in cases
        if c.overhead and c.overhead.ratio is not None and c.memory and c.memory.peak_bytes
    ]
    if not shown:
        return None
    fig = Figure(figsize=(WIDTH, 3.3), layout="constrained")
    ax = fig.add_subplot()
    # a strategy far slower than the rest (global's search) would flatten every other point:
    # the axis spans the others, and the far one sits on its top edge with its figure written
    near = [c for c in shown if c.overhead.ratio <= FAR] or shown
    top = max(max(_reach(c, "high") for c in near), 1.0)
    bottom = min(min(_reach(c, "low") for c in near), 1.0)
    pad = (top - bottom) * 0.12 or 0.01
    for i, c in enumerate(shown):
        o = c.overhead
        look = style(i)
        x = c.memory.peak_bytes / 2**20
        if c not in near:
            ax.plot(x, top + pad, marker="^", color=look["color"], markersize=9, label=c.strategy)
            ax.annotate(f"{c.strategy} {o.ratio:.2f}× (off the scale)", (x, top + pad),
                        xytext=(6, -4), textcoords="offset points", fontsize="small")  # fmt: skip
            continue
        low, high = o.ratio - _reach(c, "low"), _reach(c, "high") - o.ratio
        ax.errorbar(x, o.ratio, yerr=[[low], [high]], fmt=look["marker"], color=look["color"],
                    markersize=8, capsize=4, label=c.strategy)  # fmt: skip
    ax.set_ylim(bottom - pad, top + 2 * pad)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="plain loop")
    ax.set_xlabel("peak memory during a window (MiB, exact)")
    ax.set_ylabel("window time / plain loop")
    bounds = any(c.overhead.confidence is None for c in shown)
    ax.set_title(
        f"Every strategy at K={k}, live tensors={n:,}: time overhead "
        f"({'95% CI; bounds where fewer than 6 pairs' if bounds else '95% CI'}) "
        "against peak memory; lower left is better",
        fontsize="medium",
    )
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)
    ax.grid(alpha=0.3)
    return to_svg(fig, name)


FAR = 1.5  # an overhead beyond this is drawn on the answer chart's top edge, its figure written


def _reach(c: CaseLine, side: str) -> float:
    """A case's interval end (its ratio where it has no interval)."""
    o = c.overhead
    end = o.ci_low if side == "low" else o.ci_high
    return o.ratio if end is None else end


def memory(cases: list[CaseLine], k: int, n: int) -> str:
    """Grouped horizontal bars per strategy, in MiB: gradient memory held between windows and
    the peak of the memory pass; the plain loop's peak (same process) as the reference."""
    ok = [c for c in cases if c.memory]
    series = [
        ("held_bytes", "held between windows (exact)"),
        ("peak_bytes", "peak during a window (memory pass)"),
    ]

    def mib(c, key):
        value = getattr(c.memory, key)
        return math.nan if value is None else value / 2**20

    present = [
        (key, label) for key, label in series if any(getattr(c.memory, key) is not None for c in ok)
    ]
    fig = Figure(figsize=(WIDTH, 0.22 * len(ok) * max(1, len(present)) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(present))
    for i, (key, label) in enumerate(present):
        ys = [j + (i - (len(present) - 1) / 2) * height for j in range(len(ok))]
        ax.barh(
            ys,
            [0.0 if math.isnan(v) else v for v in (mib(c, key) for c in ok)],
            height=height,
            label=label,
            color=COLOURS[i + 4],
            hatch=HATCHES[i + 1],
            edgecolor="black",
            linewidth=0.5,
        )
    plain = [v for v in (mib(c, "plain_peak_bytes") for c in ok) if not math.isnan(v)]
    if plain and max(plain) - min(plain) <= 0.01 * max(plain):  # one plain loop, one line
        ax.axvline(
            sorted(plain)[len(plain) // 2],
            color="black",
            linestyle="--",
            linewidth=1.2,
            label="plain loop peak (same processes)",
        )
    elif plain:  # the plain loops differ between cases: each case's own, beside its bars
        ax.plot(
            [mib(c, "plain_peak_bytes") for c in ok],
            range(len(ok)),
            "k|",
            markersize=16,
            markeredgewidth=2,
            label="plain loop peak (same process)",
        )
    ax.set_yticks(range(len(ok)), [c.strategy for c in ok])
    ax.invert_yaxis()
    ax.set_xlabel("memory (MiB)")
    ax.set_ylabel("strategy")
    ax.set_title(f"Memory per strategy (K={k}, live tensors={n:,})")
    if present or plain:
        fig.legend(loc="outside lower center", fontsize="small", ncols=len(present) + 1)
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, "memory")


def reset_vs_live(slopes: list[Slope], k: int) -> str:
    """Reset time against unrelated live tensors, one line per strategy, its slope in the legend."""
    fig = Figure(figsize=(WIDTH, 4.4), layout="constrained")
    ax = fig.add_subplot()
    for i, s in enumerate(slopes):
        xs = [p.live for p in s.points]
        ys = [_ms(p.reset.median_s) for p in s.points]
        low = [y - _ms(p.reset.ci_low_s) for y, p in zip(ys, s.points, strict=True)]
        high = [_ms(p.reset.ci_high_s) - y for y, p in zip(ys, s.points, strict=True)]
        slope = s.per_10k_s
        label = s.strategy + ("" if slope is None else f": {slope * 1e3:+.3g} ms per 10k tensors")
        ax.errorbar(xs, ys, yerr=[low, high], label=label, capsize=3, linewidth=1.4, **style(i))
    # linear on purpose: the global search's cost is a straight line in N (djl #2210)
    _fit_y(ax, [_ms(p.reset.median_s) for s in slopes for p in s.points], log_ok=False)
    ax.set_xlabel("unrelated live tensors in the process (count)")
    ax.set_ylabel("reset time per window (ms, median)")
    ax.set_title(
        f"Reset time against live tensors (K={k}); bars: CI of the median "
        "(95%, or min-max below 6 windows)"
    )
    fig.legend(loc="outside lower center", fontsize="small", ncols=min(4, len(slopes)))
    ax.grid(alpha=0.3)
    return to_svg(fig, "reset-vs-live")


def window_vs_k(cases: list[CaseLine], n: int) -> str:
    """Window time against accumulation steps K, one line per strategy."""
    fig = Figure(figsize=(WIDTH, 4.4), layout="constrained")
    ax = fig.add_subplot()
    names: list[str] = []
    for c in cases:
        if c.phases and c.n == n and c.strategy not in names:
            names.append(c.strategy)
    ks: set[int] = set()
    for i, name in enumerate(names):
        points = sorted(
            ((c.k, c.phases["window"]) for c in cases
             if c.strategy == name and c.n == n and c.phases),
            key=lambda point: point[0],
        )  # fmt: skip
        xs = [k for k, _ in points]
        ks.update(xs)
        ys = [_ms(w.median_s) for _, w in points]
        low = [y - _ms(w.ci_low_s) for y, (_, w) in zip(ys, points, strict=True)]
        high = [_ms(w.ci_high_s) - y for y, (_, w) in zip(ys, points, strict=True)]
        ax.errorbar(xs, ys, yerr=[low, high], label=name, capsize=3, linewidth=1.4, **style(i))
    ax.set_xticks(sorted(ks))
    ax.set_xlabel("micro-batches per window, K (count)")
    medians = [_ms(c.phases["window"].median_s) for c in cases if c.phases]
    log = _fit_y(ax, medians, log_ok=True)
    ax.set_ylabel(f"window time (ms, median{', log scale' if log else ''})")
    ax.set_title(
        f"Window time against K (live tensors={n:,}); bars: CI of the median "
        "(95%, or min-max below 6 windows)"
    )
    fig.legend(loc="outside lower center", fontsize="small", ncols=min(7, len(names)))
    ax.grid(alpha=0.3)
    return to_svg(fig, "window-vs-k")


VERDICT_MARKS = {  # marker, face colour, edge colour: the word reads in grey too
    "lower": ("v", "#12612a", "#12612a"),
    "higher": ("^", "#9d1018", "#9d1018"),
    "same": ("s", "#8a8a8a", "#555555"),
    "unclear": ("o", "white", "#b06d00"),
}


def ratios(lines: list[tuple[str, Comparison]], label_a: str, label_b: str) -> str:
    """The compare page: each case's paired overhead B / A, its interval, its verdict word.

    ``lines``: each case's label and its comparison (an interval of None: no bar); the marker
    shows the verdict, never a test of its own.
    """
    labels = [label for label, _ in lines]
    judged = [c for _, c in lines]
    fig = Figure(figsize=(WIDTH, 0.32 * len(lines) + 1.8), layout="constrained")
    ax = fig.add_subplot()

    def reach(i: int, side: str) -> float:  # no interval (too few pairs, or exact): no bar
        bound = getattr(judged[i], side)
        return 0.0 if bound is None else abs(bound - judged[i].ratio)

    for word, (marker, face, edge) in VERDICT_MARKS.items():
        pick = [i for i, c in enumerate(judged) if c.verdict == word]
        if not pick:
            continue
        ax.errorbar(
            [judged[i].ratio for i in pick],
            pick,
            xerr=[[reach(i, "ci_low") for i in pick], [reach(i, "ci_high") for i in pick]],
            fmt=marker,
            color=edge,
            mfc=face,
            mec=edge,
            markersize=7,
            capsize=3,
            label=word,
        )
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--", label="no change")
    ax.set_yticks(range(len(lines)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ticks = [t for t in RATIO_TICKS if low <= t <= high] or [1.0]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_xlabel(
        f"paired overhead, {label_b} / {label_a} (each run's window over its own plain loop; "
        "log scale; <1: B lower)"
    )
    ax.set_ylabel("case")
    ax.set_title("Window overhead, run B / run A, per case; marker: verdict, bars: CI (or bounds)")
    fig.legend(loc="outside lower center", fontsize="small", ncols=5)
    ax.grid(axis="x", alpha=0.3, which="both")
    return to_svg(fig, "compare-window")


def timelines(lines: list[TimelineLine], k: int, n: int) -> str:
    """Allocated memory over one window per strategy on one shared axis, each line's phase
    boundaries marked on it. Time 0 is the end of each line's reset, so forward, backward and
    update line up; a reset longer than the axis shows (clipped) to the left, its length noted."""
    fig = Figure(figsize=(WIDTH, 5.0), layout="constrained")
    ax = fig.add_subplot()
    after = max(_reset_end(line, end=True) for line in lines)
    left = min(max(_reset_end(line) for line in lines), 0.25 * after) or 1.0
    for i, line in enumerate(lines):
        timeline, zero = line.timeline, _reset_end(line)
        xs = [p[0] - zero for p in timeline.points]
        ys = [p[1] / 2**20 for p in timeline.points]
        look = style(i)
        label = line.label + (f" (reset {zero:.0f} ms, clipped)" if zero > left else "")
        ax.step(xs, ys, where="post", color=look["color"], linestyle=look["linestyle"],
                linewidth=1.4, label=label)  # fmt: skip
        for name, t in timeline.phases:  # the phase boundaries, on the line
            level = next(
                (y for x, y in zip(reversed(xs), reversed(ys), strict=True) if x <= t - zero),
                ys[0],
            )
            marker = {"reset": "v", "update": "s", "end": "|"}.get(name.split(" ")[0], ".")
            ax.plot([t - zero], [level], marker=marker, color=look["color"], markersize=6)
    ax.set_xlim(-1.05 * left, 1.02 * after)
    ax.axvline(0, color="black", linewidth=0.8, alpha=0.5)
    ax.set_xlabel(
        "ms from the end of the reset (left of 0: the reset); markers: \u25bc reset ends, "
        "\u2022 forward/backward boundaries, \u25a0 update starts, | window ends"
    )
    ax.set_ylabel("allocated (MiB)")
    ax.set_title(f"Memory over one window (K={k}, live tensors={n:,})")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", fontsize="small", ncols=min(4, len(lines)))
    return to_svg(fig, "timeline")


def _reset_end(line: TimelineLine, end: bool = False) -> float:
    """ms from the window's start to the end of its reset (``end``: from there to the end)."""
    timeline = line.timeline
    reset = next((t for name, t in timeline.phases if name == "reset"), 0.0)
    return timeline.window_ms - reset if end else reset


ERROR_PANELS = (
    ("accumulation", "Accumulation error: vs the float64 sum\nof the same micro-batch gradients"),
    ("total", "Total error: vs a float64 copy of the model\n(precision as a whole)"),
)


def _error_series(lines: list[ErrorLine]) -> list[dict[str, Any]]:
    """One series per (strategy, precision), in the table's order; strategies whose figures are
    identical at every K and in both panels share one series (one line, every name in its
    label): drawn apart, the later would hide the earlier exactly."""
    series: list[dict[str, Any]] = []
    for line in lines:
        key = (line.strategy, line.precision)
        found = next((s for s in series if s["key"] == key), None)
        if found is None:
            found = {"key": key, "names": [line.strategy], "precision": key[1], "points": {}}
            series.append(found)
        found["points"][line.k] = tuple(getattr(line, panel).norm_rel for panel, _ in ERROR_PANELS)
    merged: list[dict[str, Any]] = []
    for s in series:
        same = next(
            (m for m in merged if m["precision"] == s["precision"] and m["points"] == s["points"]),
            None,
        )
        if same is None:
            merged.append(s)
        else:
            same["names"].append(s["names"][0])
    return merged


def accumulation_error(lines: list[ErrorLine]) -> str | None:
    """Two log-log panels side by side, the window gradient's relative error (``norm_rel``)
    against K, one line per strategy and precision (colour: the precision); None when no figure
    is above zero. Zeros (exact: one micro-batch adds nothing) have no place on a log axis:
    each panel names the K where they were left out."""
    series = _error_series(lines)
    precisions = list(dict.fromkeys(s["precision"] for s in series))
    ks = sorted({k for s in series for k in s["points"]})
    positive = [
        v
        for s in series
        for point in s["points"].values()
        for v in point
        if v is not None and v > 0
    ]
    if not positive:
        return None
    fig = Figure(figsize=(WIDTH, 4.8), layout="constrained")
    axes = fig.subplots(1, len(ERROR_PANELS), sharey=True)
    for p, (ax, (_, title)) in enumerate(zip(axes, ERROR_PANELS, strict=True)):
        zeros: set[int] = set()
        for i, s in enumerate(series):
            points = [(k, v[p]) for k, v in sorted(s["points"].items()) if v[p] is not None]
            zeros.update(k for k, v in points if v <= 0)
            points = [(k, v) for k, v in points if v > 0]
            look = style(i)
            look["color"] = COLOURS[precisions.index(s["precision"]) % len(COLOURS)]
            label = f"{s['precision']}: {', '.join(s['names'])}"
            ax.plot(
                [k for k, _ in points],
                [v for _, v in points],
                label=label if p == 0 else None,
                linewidth=1.4,
                markersize=6,
                **look,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xticks([], minor=True)
        if len(ks) == 1:
            ax.set_xlim(ks[0] / 2, ks[0] * 2)
        ax.set_xlabel("micro-batches per window, K (count, log scale)")
        ax.set_title(title, fontsize="medium")
        if zeros:
            ax.text(
                0.02,
                0.02,
                f"0 (exact) at K={', '.join(str(k) for k in sorted(zeros))}: not drawn",
                transform=ax.transAxes,
                fontsize="small",
                color="#444444",
            )
        ax.grid(alpha=0.3)
    low, high = min(positive), max(positive)
    axes[0].set_ylim(low / 3, high * 3)
    axes[0].set_ylabel("relative error, ||g - ref|| / ||ref|| (log scale)")
    fig.suptitle("The window gradient's relative error against K, per strategy and precision")
    fig.legend(loc="outside lower center", fontsize="small", ncols=min(3, len(series)))
    return to_svg(fig, "accumulation-error")
