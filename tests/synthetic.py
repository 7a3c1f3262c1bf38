"""Rows made here, and ways to read the pages built from them (no test in this module).

Rows made here are schema-2 rows as the engine writes them (the identity through
``benches.engine.spec.CaseSpec``, the rest shaped like ``benches.engine.figures.row_for``'s):
paired samples (each strategy window beside a plain-loop window of the same process; their
summaries derived when read, ``reports.judge.summaries``), exact memory figures and CPU
pressure. Their figures are planted, not measured: they check the arithmetic of
what a report says.
"""

from __future__ import annotations

import copy
import json
import re
import zlib
from pathlib import Path

import numpy as np

from benches.engine.spec import CaseSpec
from reports.judge.rows import SCHEMA_VERSION, read
from reports.schema.records import Entry, Row
from reports.schema.row_parts import Summary
from reports.schema.settings import ENTRY_IDENTITY

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (  # index.html's sections, in the page's order: the answer first
    "answer",
    "run",
    "strategies",
    "profiles",
    "verdicts",
    "method",
    "overhead",
    "charts",
    "accumulation-error",
    "timeline",
    "cost-model",
    "flamegraphs",
    "failed",
    "pytest-benchmark",
    "environment",
    "raw",
)
CHARTS = [
    "answer",
    "phases",
    "memory",
    "reset-vs-live",
    "window-vs-k",
    "accumulation-error",
    "timeline",
]
COMPARE_SECTIONS = ("runs", "verdict", "chart", "phases", "environment")
WORDS = ("lower", "higher", "same", "unclear")
MIB = 2**20


# -- rows made here -------------------------------------------------------------------------------
def spread(median: float, width: float = 0.01, n: int = 10) -> list[float]:
    """n samples evenly spread around median (+-width, relative): the median is exact."""
    return [median * (1 + width * (2 * i / (n - 1) - 1)) for i in range(n)]


def measured(row: dict) -> dict:
    """The row's figures from its samples, as the engine's ``figures.measured_part`` writes them
    (its summaries are the reports', derived when the row is read: ``summaries``)."""
    samples = row["samples"]
    pressure = samples["cpu_pressure"]
    row["cpu_pressure"] = {
        "median": float(np.median(pressure)),
        "max": max(pressure),
        "measure": "share of each pair's wall time in which some task waited for a CPU",
    }
    return row


def make_row(
    strategy: str,
    k: int = 1,
    n: int = 0,
    overhead: float = 1.0,
    plain: float = 0.010,
    reset: float = 1e-4,
    peak: int = 9 * MIB,
    held: int = MIB,
    pressure: float = 0.0,
    noise: float = 0.01,
    repeat: int = 10,
    round: int = 0,  # the row's field: its process
    control: bool = False,
    seed: int = 0,
    status: str = "ok",
    error: str | None = None,
    flamegraph: bool = False,
) -> dict:
    """A schema-2 row: ``repeat`` pairs, the strategy's window ``overhead`` times the plain
    loop's beside it, each side with its own +-``noise`` jitter (seeded by the case)."""
    # the case's identity as the engine writes it (benches.engine.case.row_for)
    spec = CaseSpec(
        strategy=strategy,
        preset="tiny",
        device="cpu",
        accumulate=k,
        live_tensors=n,
        repeat=repeat,
        warmup=1,
        threads=1,
        round=round,
        run_id="testrun",
    )
    case_id = spec.case_id
    row = {
        "schema_version": SCHEMA_VERSION,
        "run_id": spec.run_id,
        "case_id": case_id,
        "process_id": case_id,  # a process of its own (a rotated one shares it: engine.rotation)
        **spec.identity(),
        "round": round,
        "time_only": False,  # a process the sweep added for time alone: its timed pairs only
        "status": status,
        "error": error,
        "control": control,
        "params": 297472,
        "tokens_per_window": 72 * k,
        "env": {"torch": "2.13.0+cpu", "device": "cpu", "threads": 1, "git_commit": "abc" * 10},
    }
    if status != "ok":
        return {**row, "samples": {}, "memory": {}, "grad_check": None}
    rng = np.random.default_rng(zlib.crc32(repr((strategy, k, n, round, seed)).encode()))
    plain_w = plain * (1 + noise * rng.uniform(-1, 1, repeat))
    window = plain_w * overhead * (1 + noise * rng.uniform(-1, 1, repeat))
    resets = np.asarray(spread(reset, n=repeat))
    rest = (window - resets) / 3
    row["samples"] = {
        "reset": resets.tolist(),
        "forward": rest.tolist(),
        "backward": rest.tolist(),
        "update": rest.tolist(),
        "window": window.tolist(),
        "plain_window": plain_w.tolist(),
        "cpu_pressure": [pressure] * repeat,
    }
    row["memory"] = {
        "held_bytes": held,
        "peak_bytes": peak,
        "peak_method": "memray peak heap since before attach (aggregated capture)",
        "plain_held_bytes": 0,
        "plain_peak_bytes": 8 * MIB,
        "param_bytes": MIB,
        "memory_windows": 2,
        "memray_flamegraph": f"memray/{case_id}.html" if flamegraph else None,
        "rss_after_setup_bytes": 300 * MIB,
        "peak_rss_bytes": 302 * MIB,
        "peak_rss_is_since_setup": True,
        "growth_bytes_per_window": 0.0,
        "growth_measure": "rss",
        "timeline": {  # a window's allocated bytes: gradients freed (or not) at the reset
            "method": "fabricated",
            "start_bytes": peak // 2,
            "window_ms": plain * 1e3,
            "points": [[0.0, peak // 2], [plain * 100, peak // 2 - held], [plain * 900, peak]],
            "phases": [["start", 0.0], ["reset", plain * 50], ["end", plain * 1e3]],
        },
    }
    row["grad_check"] = {
        "max_abs_diff": 0.0,
        "max_rel_diff": 0.0,
        "tolerance": 1e-5,
        "ok": True,
        "worst_parameter": None,
        "accepted_by": "float64 sum",
        "same_order_max_rel_diff": 0.0,
        "same_order_tolerance": 1e-5,
        "window": 1,
        "windows": 3,
    }
    row["allreduce_per_window"] = None
    # the first window's error figures: one micro-batch adds nothing, so K=1 sums exactly
    row["accumulation_error"] = {"max_rel": 1e-7 * (k - 1), "norm_rel": 4e-8 * (k - 1)}
    row["total_error"] = {"max_rel": 8e-7 * k**0.5, "norm_rel": 5e-7 * k**0.5}
    return measured(row)


def entry(strategy: str, rows: list[dict], k: int = 1, n: int = 0, **settings) -> Entry:
    """A pooled case of hand-made ``rows``, its identity as the engine writes it
    (``CaseSpec.identity``, with ``settings`` changed), as ``judge.rows.pooled`` builds it."""
    spec = CaseSpec(
        strategy=strategy, preset="tiny", device="cpu", accumulate=k, live_tensors=n, **settings
    )
    identity = {**spec.identity(), **settings}
    return Entry(
        strategy=strategy,
        name=strategy,
        options=identity["options"],
        k=k,
        n=n,
        **{name: identity[name] for name in ENTRY_IDENTITY},
        rows=[
            as_row(r, **{**identity, "strategy": strategy, "accumulate": k, "live_tensors": n})
            for r in rows
        ],
    )


def window_row(
    strategy: str, k: int, ratio: float, split: float = 0.01, pressure: float = 0.0, rnd: int = 0
) -> dict:
    """A process's row of ``strategy`` at K ``k`` in round ``rnd``: 8 pairs whose windows are
    ``ratio`` x the plain loop's, exact memory figures (the verdict rules' tests)."""
    case_id = f"{strategy}-k{k}-n0-tiny-cpu-r{rnd}"  # as the engine writes it: one per process
    return {
        "run_id": "testrun",
        "case_id": case_id,
        "process_id": case_id,
        "strategy": strategy,
        "accumulate": k,
        "live_tensors": 0,
        "round": rnd,
        "overhead": {"ratio": ratio, "split_half": split},
        "cpu_pressure": {"median": pressure},
        "samples": {"window": [ratio] * 8, "plain_window": [1.0] * 8},
        "memory": {"held_bytes": 10, "peak_bytes": 100},
    }


def window_entry(rows: list[dict]) -> Entry:
    """The pooled case of ``window_row``-shaped ``rows`` (one strategy, one K), its window phase
    summarised."""
    first = rows[0]
    case = entry(first["strategy"], rows, k=first["accumulate"])
    case.phases = {"window": Summary()}
    return case


def pairs_row(strategy: str, rnd: int, logs) -> dict:
    """A process of ``strategy`` whose pairs' log ratios are ``logs`` (its plain windows 10 ms)."""
    plain = np.full(len(logs), 0.01)
    return {**window_row(strategy, 1, 1.0, rnd=rnd), "samples": {
        "window": (plain * np.exp(logs)).tolist(), "plain_window": plain.tolist()}}  # fmt: skip


def as_row(row: dict, **identity) -> Row:
    """A hand-made row as ``reports.judge.rows.read`` would give it: its identity (``identity``, or
    what it says itself) and figures, every key checked against ``Row``."""
    return Row.from_json({**identity, **row})


def rescale(row: dict, window: float = 1.0, plain: float = 1.0) -> dict:
    """A copy of the row with its strategy's times times ``window`` and its plain loop's times
    ``plain``; the figures recomputed from the samples, as the case would have."""
    row = copy.deepcopy(row)
    if row.get("status") != "ok":
        return row
    samples = row["samples"]
    for phase in ("reset", "forward", "backward", "update", "window"):
        samples[phase] = [x * window for x in samples[phase]]
    samples["plain_window"] = [x * plain for x in samples["plain_window"]]
    return measured(row)


def write_run(
    directory: Path, rows: list[dict], accumulate: list[int] | None = None, **sweep
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "results.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    ks = accumulate or sorted({r["accumulate"] for r in rows})
    run = {
        "run_id": directory.name,
        "created": "2026-01-01T00:00:00+00:00",
        "sweep": {"accumulate": ks, "repeat": 10, "warmup": 1, "rounds": 1, **sweep},
        "env": {"torch": "2.13.0+cpu", "device": "cpu"},
    }
    (directory / "run.json").write_text(json.dumps(run))
    return directory


OVERHEADS = {"native": 1.0, "lazy": 0.7, "block": 1.1, "global": 1.3, "flat": 1.2}
PEAKS = {"native": 9.5, "lazy": 10.0, "block": 9.0, "global": 9.5, "flat": 10.5}  # MiB


def standard_rows(seed: int = 0, plain: float = 0.010, ks=(1, 2), ns=(0, 10_000)) -> list[dict]:
    """lazy fastest (planted 0.7 of native), block leanest, global's reset grows with N; flat
    ran under CPU pressure (stated beside the answer, never left out of it); native in three
    processes (two controls), so the noise floor is measured at every K and N."""
    rows = []
    for k in ks:
        for n in ns:
            extra = 0.01 * n / 10_000  # global's reset: 1 ms + 10 ms per 10,000 live tensors
            for name, ratio in OVERHEADS.items():
                rows.append(
                    make_row(
                        name,
                        k,
                        n,
                        overhead=ratio,
                        plain=plain * k,
                        reset=0.001 + extra if name == "global" else 1e-4,
                        peak=int(PEAKS[name] * MIB),
                        pressure=0.3 if name == "flat" else 0.01,
                        seed=seed,
                        flamegraph=name == "lazy",
                    )
                )
            for r in (1, 2):  # the control's two extra processes
                peak = int(PEAKS["native"] * MIB)
                rows.append(
                    make_row(
                        "native", k, n, plain=plain * k, peak=peak, round=r, control=True, seed=seed
                    )
                )
    return rows


def by_id(html: str, section: str) -> str:
    start = html.index(f'<section id="{section}">')
    return html[start : html.index("</section>", start)]


def verdict_rows(html: str) -> list[tuple[str, str, str, str, str]]:
    """(a, b, metric, ratio, verdict) of each line of the verdicts section's first table."""
    table = by_id(html, "verdicts").split("</table>")[0]
    return re.findall(
        r'<code>([^<]+)</code></td><td class="text"><code>([^<]+)</code></td>\s*'
        r'<td class="text">(\w+)</td><td>([^<]+)</td>.*?verdict-(\w+)">',
        table,
        flags=re.S,
    )


def rows_of(directory) -> list[dict]:
    """DIR's rows as ``reports.judge.rows.read`` reads them (schema, identity and every field's name
    checked), each as the JSON object it writes back (``Row.to_json``): what the tests assert
    about the engine's output."""
    return [row.to_json() for row in read(directory)]
