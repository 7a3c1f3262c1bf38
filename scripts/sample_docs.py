"""The docs' measured figures, made from the committed samples' files: each block between
``<!-- samples: NAME -->`` and ``<!-- /samples -->`` in README.md, docs/method.md, docs/sweep.md
and docs/frameworks.md (``stale_blocks``), and the readers of a sample's files, each failure one
line naming the file (``scripts/samples.py docs`` runs it; ``measure`` re-measures the samples).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "reports" / "samples"
SAMPLE = "sample.json"
#: the documents whose generated blocks come from the samples
DOCUMENTS = ("README.md", "docs/method.md", "docs/sweep.md", "docs/frameworks.md")
START = re.compile(r"<!-- samples: (?P<name>[\w-]+) -->\n")
END = "<!-- /samples -->"
MARKER = re.compile(r"<!-- samples: (?P<name>[\w-]+) -->\n|<!-- /samples -->")

sys.path.insert(0, str(ROOT))


class UsageError(Exception):
    """A bad command line: one line, exit 2."""


def load(path: Path):
    """A sample's JSON file; one that is missing or cannot be read is a ``UsageError`` naming
    its path."""
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise UsageError(f"cannot read {path}: not JSON ({err})") from None


def load_lines(path: Path) -> list:
    """A sample's JSON-lines file, each line read as ``load`` reads a file."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from None
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(json.loads(line))
        except ValueError as err:
            raise UsageError(f"cannot read {path}:{number}: not JSON ({err})") from None
    return out


def field(data, path: Path, *keys: str):
    """``data[keys[0]][keys[1]]...``, a missing or mistyped one a ``UsageError`` naming the
    file and the key."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            raise UsageError(f"cannot read {path}: it has no {'.'.join(keys)!r}")
        data = data[key]
    return data


def clock(seconds: float) -> str:
    minutes, sec = divmod(round(seconds), 60)
    return f"{minutes}:{sec:02d}"


# -- the figures ----------------------------------------------------------------------------------


def _verdicts(directory: Path) -> dict:
    return load(directory / "verdicts.json")


def _run(directory: Path) -> dict:
    return load(directory / "run.json")


def _sample(directory: Path) -> dict:
    return load(directory / SAMPLE)


def groups(verdicts: dict) -> list[tuple]:
    """The sweep's groups, in verdicts.json's order of decisions: (k, n, settings)."""
    return [(d["k"], d["n"], d["case"]) for d in verdicts["decisions"]]


def group_label(group: tuple, every: list[tuple]) -> str:
    """K and N, and the settings that differ between the sweep's groups."""
    k, n, case = group
    varies = [a for a in case if len({json.dumps(g[2].get(a)) for g in every}) > 1]
    return f"K={k}, N={n:,}" + "".join(f", {a} {case[a]}" for a in varies)


def decided(verdicts: dict, group: tuple) -> tuple[int, int]:
    """(time comparisons decided: lower, higher or same; time comparisons) in a group."""
    k, n, case = group
    found = [
        c
        for c in verdicts["comparisons"]
        if c["metric"] == "window" and (c["k"], c["n"]) == (k, n) and _same_case(c, case)
    ]
    return sum(c["verdict"] != "unclear" for c in found), len(found)


def _same_case(record: dict, case: dict) -> bool:
    return all(record.get("case", {}).get(a) == v for a, v in case.items())


def resolution(verdicts: dict, group: tuple) -> float:
    k, n, case = group
    (floor,) = [
        f for f in verdicts["noise_floor"] if (f["k"], f["n"]) == (k, n) and f["case"] == case
    ]
    return floor["resolution"]


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def where_time_went(directory: Path, top: int = 3) -> str:
    """The steps that took most of the cases' processes' time (the report's own sum)."""
    from reports.judge.rows import read
    from reports.page.runinfo import wall_time

    wall = wall_time(read(directory))
    return ", ".join(
        f"{step.step.replace('_', ' ')} {percent(step.share)}" for step in wall.steps[:top]
    )


def processes(directory: Path) -> tuple[int, int]:
    from reports.judge.rows import read
    from reports.page.runinfo import wall_time

    wall = wall_time(read(directory))
    return wall.processes, wall.time_only


def machine(directory: Path) -> str:
    env = _run(directory)["env"]
    commit = (env.get("git_commit") or "?")[:7] + ("+dirty" if env.get("git_dirty") else "")
    return f"{env.get('cpu_count')} cores, torch {env.get('torch')}, commit {commit}"


# -- the generated blocks -------------------------------------------------------------------------


def default_sweep_table() -> str:
    """docs/method.md: what the sample sweeps decide, per group."""
    lines = [
        "| sample | command | wall time | processes (time-only) | time comparisons decided "
        "| resolution | where the processes' time went |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("tiny-cpu", "tiny-cpu-bf16"):
        d = SAMPLES / name
        v, s = _verdicts(d), _sample(d)
        every = groups(v)
        counts = [decided(v, g) for g in every]
        shares = "; ".join(
            f"{group_label(g, every)}: {a} of {b}" for g, (a, b) in zip(every, counts, strict=True)
        )
        total = f"{sum(a for a, _ in counts)} of {sum(b for _, b in counts)} ({shares})"
        res = sorted({resolution(v, g) for g in every})
        span = percent(res[0]) + (f" to {percent(res[-1])}" if len(res) > 1 else "")
        proc, time_only = processes(d)
        lines.append(
            f"| [{name}](../reports/samples/{name}/index.html) ({machine(d)}) | `{s['command']}` "
            f"| {clock(s['wall_s'])} | {proc} ({time_only}) | {total} | {span} "
            f"| {where_time_went(d)} |"
        )
    return "\n".join(lines) + "\n"


def quick_table() -> str:
    """docs/sweep.md: what the --quick sample measured."""
    d = SAMPLES / "quick-cpu"
    v, s = _verdicts(d), _sample(d)
    (group,) = groups(v)
    a, b = decided(v, group)
    proc, _ = processes(d)
    rows = [
        ("command", f"`{s['command']}`"),
        ("machine", machine(d)),
        ("wall time of the sweep and its report", clock(s["wall_s"])),
        (f"resolution at {group_label(group, [group])}", percent(resolution(v, group))),
        ("time comparisons decided (not `unclear`)", f"{a} of {b}"),
        ("processes", str(proc)),
        ("where the processes' time went", where_time_went(d)),
    ]
    lines = ["| figure | [quick-cpu](../reports/samples/quick-cpu/) |", "|---|---|"]
    return "\n".join(lines + [f"| {k} | {val} |" for k, val in rows]) + "\n"


def quick_sentence() -> str:
    """README.md: one sentence of the --quick sample's figures."""
    d = SAMPLES / "quick-cpu"
    v, s = _verdicts(d), _sample(d)
    (group,) = groups(v)
    a, b = decided(v, group)
    cores = _run(d)["env"].get("cpu_count")
    return (
        f"On a {cores}-core CPU its sweep took {clock(s['wall_s'])} and decided {a} of its {b} "
        f"time comparisons at a {percent(resolution(v, group))} resolution "
        "([docs/sweep.md](docs/sweep.md#a-first-answer---quick) has the figures, from the "
        "committed sample `reports/samples/quick-cpu`).\n"
    )


def answer_excerpt() -> str:
    """README.md: the tiny-cpu sample's answer, as its page opens, and two of its records."""
    v = _verdicts(SAMPLES / "tiny-cpu")
    every = groups(v)
    ds = v["decisions"]
    uses = {d["use"] for d in ds}
    if len(uses) == 1 and None not in uses:
        ks = ", ".join(str(k) for k in sorted({d["k"] for d in ds}))
        ns = ", ".join(f"{n:,}" for n in sorted({d["n"] for d in ds}))
        head = f"> **Use `{ds[0]['use']}` at every setting this sweep measured"
        head += f" ({len(ds)} groups: K={ks}, N={ns}).**" if len(ds) > 1 else ".**"
    else:
        head = "> **The strategy to use differs between the settings measured:** " + "; ".join(
            f"{group_label(g, every)}: {d['use'] or 'none'}" for g, d in zip(every, ds, strict=True)
        )
    lines = [head, ">"]
    opened = [(g, d) for g, d in zip(every, ds, strict=True) if d["open"]]
    if opened:
        text = "; ".join(f"{group_label(g, every)}: {'; '.join(d['open'])}" for g, d in opened)
        lines += [f"> Open: {text}.", ">"]
    lines.append(f"> Why, per group: ... {group_label(every[0], every)}: {ds[0]['why']} ...")
    first = {k: ds[0][k] for k in ("k", "n", "use", "fastest", "ties", "slower", "by", "open")}
    window = [c for c in v["comparisons"] if c["metric"] == "window" and c["b"] == ds[0]["use"]]
    widest = max(window, key=lambda c: c["ratio"])
    shown = {k: widest[k] for k in ("a", "b", "k", "n", "metric", "verdict")}
    shown.update({k: round(widest[k], 3) for k in ("ratio", "ci_low", "ci_high")})
    lines += ["", "and its `verdicts.json` holds the same answer per group, beside one record per"]
    lines += ["comparison:", "", "```json", json.dumps(first), json.dumps(shown), "```"]
    return "\n".join(lines) + "\n"


def gpu_sentence() -> str:
    """docs/sweep.md: the MFU of ``base`` (the base-cuda sample's bf16 rows) and of ``big``
    (its mfu.jsonl, what scripts/gpu_check.sh printed), on the GPU that measured them."""
    d = SAMPLES / "base-cuda"
    rows = load_lines(d / "results.jsonl")
    base = statistics.median(
        r["mfu"]["value"] for r in rows if r.get("precision") == "bf16-autocast" and r.get("mfu")
    )
    big = load_lines(d / "mfu.jsonl")
    widest = max(r["batch_size"] for r in big)
    eager, compiled = (
        next(r for r in big if r["batch_size"] == widest and r["compile"] is c)
        for c in (False, True)
    )
    gpu = eager["gpu"].removeprefix("NVIDIA ")
    return (
        "On CUDA each phase is timed with CUDA events on the stream and one synchronisation per "
        "window, so\na window runs as a real training loop does. `base` is launch-bound on a "
        f"large GPU ({percent(base)} MFU\nin bf16 on an {gpu}), so a reset is a larger share of "
        "its window than in a busy loop; the `big`\npreset has training-sized micro-batches for "
        "that. `python -m benches mfu --preset big` prints\nits MFU: on an "
        f"{gpu} in bf16-autocast {percent(eager['mfu'])} eager, {percent(compiled['mfu'])} with "
        f"`--compile`\n({widest} sequences per micro-batch; the committed sample "
        "`reports/samples/base-cuda`).\n"
    )


FRAMEWORKS, SYNCED = "frameworks-cpu", "accelerate:sync_each_batch=true"


def frameworks_table() -> str:
    """The frameworks' sample: each loop's overhead on the plain loop, its verdicts against
    syncing every micro-batch (Accelerate's question) and against ``native``, its all-reduces
    per window and its memory (medians over its processes)."""
    from reports.judge.rows import label, read

    d = SAMPLES / FRAMEWORKS
    v = _verdicts(d)
    overheads = {o["strategy"]: o for o in v["overheads"]}
    words = {(c["a"], c["b"]): c for c in v["comparisons"] if c["metric"] == "window"}
    rows: dict[str, list] = {}
    for r in read(d):
        if r.ok and not r.time_only:
            rows.setdefault(label(r.strategy, r.options), []).append(r)

    def against(name: str, other: str) -> str:
        if name == other:
            return "-"
        if (c := words.get((name, other))) is not None:
            return f"{c['ratio']:.3f} {c['verdict']}"
        if (c := words.get((other, name))) is None:
            return "-"
        mirrored = {"lower": "higher", "higher": "lower"}.get(c["verdict"], c["verdict"])
        return f"{1 / c['ratio']:.3f} {mirrored}"

    def median(values: list) -> str:
        values = sorted(x for x in values if x is not None)
        return "-" if not values else f"{values[len(values) // 2]:g}"

    lines = [
        "| loop | × plain loop (95% CI) | vs `sync_each_batch` | vs `native` "
        "| all-reduces / window | held MiB | peak MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in sorted(overheads, key=lambda n: (not n.startswith("accelerate"), n)):
        o, here = overheads[name], rows.get(name, [])
        calls = [r.collectives_per_window.allreduce for r in here if r.collectives_per_window]
        held = [r.memory.held_bytes / 2**20 for r in here if r.memory.held_bytes is not None]
        peak = [r.memory.peak_bytes / 2**20 for r in here if r.memory.peak_bytes is not None]
        lines.append(
            f"| `{name}` | {o['ratio']:.3f} ({o['ci_low']:.3f}-{o['ci_high']:.3f}) "
            f"| {against(name, SYNCED)} | {against(name, 'native')} | {median(calls)} "
            f"| {median([round(x, 2) for x in held])} | {median([round(x, 2) for x in peak])} |"
        )
    sample = _sample(d)
    return (
        "\n".join(lines)
        + f"\n\nFrom `reports/samples/{FRAMEWORKS}` ({clock(sample['wall_s'])}; "
        + f"{machine(d)}): `{sample['command']}`.\n"
    )


def efficiency_table() -> str:
    """docs/method.md: each sample's efficiency per group (``reports.judge.efficiency``),
    judged from its rows and verdicts.json as the report judges them."""
    from reports.judge.efficiency import efficiency
    from reports.judge.rows import pooled, read
    from reports.schema.verdict_records import VerdictFile

    lines = [
        "| sample | group | efficiency | half-width reached | the noise allows | wall (s) "
        "| timed share |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("tiny-cpu", "quick-cpu", "frameworks-cpu", "base-cuda", "tiny-cpu-bf16"):
        d = SAMPLES / name
        wall = _run(d).get("wall") or {}
        judged = VerdictFile.from_json(_verdicts(d))
        found = efficiency(
            list(pooled(read(d), summarised=False).values()),
            judged.comparisons,
            wall.get("sweep_s"),
        )
        every = [(e.k, e.n, e.case) for e in found]
        share = percent(wall["timed_share"]) if wall.get("timed_share") else "not recorded"
        for e in found:
            got = f"{e.efficiency:.2f}" if e.efficiency is not None else "-"
            reached = f"+-{e.reached:.2%}" if e.reached is not None else "-"
            lines.append(
                f"| {name} | {group_label((e.k, e.n, e.case), every)} | {got} | {reached} "
                f"| +-{e.ideal:.2%} | {e.wall_s:.0f} | {share} |"
            )
    return "\n".join(lines) + "\n"


BLOCKS: dict[str, Callable[[], str]] = {
    "efficiency": efficiency_table,
    "frameworks": frameworks_table,
    "gpu-mfu": gpu_sentence,
    "default-sweeps": default_sweep_table,
    "quick-table": quick_table,
    "quick-sentence": quick_sentence,
    "answer": answer_excerpt,
}


def blocks(document: str, text: str) -> list[tuple[str, int, int]]:
    """The generated blocks of ``document`` (its ``text``): each one's name and the span of its
    body. Markers that do not pair up (a start without its end before the next start or the
    end of the file, an end without a start) are a ``UsageError`` naming the file, the block
    and the missing marker: such a document is never rewritten (the body up to a later block's
    end would take the prose between them with it)."""
    out: list[tuple[str, int, int]] = []
    opened: re.Match | None = None
    for marker in MARKER.finditer(text):
        line = text.count("\n", 0, marker.start()) + 1
        if marker["name"] is not None:  # a start
            if opened is not None:
                raise UsageError(
                    f"{document}: block {opened['name']!r} has no end marker {END!r} before "
                    f"the next block starts (line {line}); nothing was rewritten"
                )
            opened = marker
        elif opened is None:
            raise UsageError(
                f"{document}:{line}: an end marker {END!r} with no block started before it "
                "(a '<!-- samples: NAME -->' line); nothing was rewritten"
            )
        else:
            out.append((opened["name"], opened.end(), marker.start()))
            opened = None
    if opened is not None:
        raise UsageError(
            f"{document}: block {opened['name']!r} has no end marker {END!r}; nothing was rewritten"
        )
    return out


def stale_blocks(write: bool = False) -> list[str]:
    """Each generated block of the documents that differs from what the samples' files give
    ("FILE: NAME"); ``write`` rewrites them. An unknown block name is stale too. Every document
    is checked (``blocks``) and every block made before any file is written: a refusal leaves
    every document as it was."""
    stale, rewritten = [], {}
    for document in DOCUMENTS:
        path = ROOT / document
        text = path.read_text()
        pieces, last = [], 0
        for name, start, end in blocks(document, text):
            make = BLOCKS.get(name)
            body = make() if make else None
            if body != text[start:end]:
                stale.append(f"{document}: {name}" + ("" if make else " (no such block)"))
            pieces += [text[last:start], body if body is not None else text[start:end]]
            last = end
        new = "".join(pieces) + text[last:]
        if new != text:
            rewritten[path] = new
    if write:
        for path, new in rewritten.items():
            path.write_text(new)
    return stale


def readable(make: Callable):
    """``make()``, with a sample whose files lack what the docs read (a key, a list cut short)
    a ``UsageError`` (a file that cannot be read at all is one already: ``load``)."""
    from reports.judge.rows import SchemaError
    from reports.schema.records import RecordError

    try:
        return make()
    except (SchemaError, RecordError) as err:  # they name the file, its line and the field
        raise UsageError(str(err)) from None
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise UsageError(
            f"a sample's files lack what the docs read ({type(err).__name__}: {err}); "
            "re-measure it (nox -s samples -- NAME)"
        ) from None
