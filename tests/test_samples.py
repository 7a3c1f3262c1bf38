"""The docs' measured figures come from the committed samples (scripts/samples.py): every
generated block of README.md, docs/method.md and docs/sweep.md is what the samples' files give,
a changed figure is found, and ``measure`` re-runs a sample's recorded sweep (slow)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import sample_docs  # noqa: E402  (scripts/ is not a package)
import samples  # noqa: E402


def test_every_block_of_the_docs_is_what_the_committed_samples_say():
    assert sample_docs.stale_blocks() == [], "run: python scripts/samples.py docs"


def test_every_generated_block_appears_in_a_document():
    text = "".join((ROOT / d).read_text() for d in sample_docs.DOCUMENTS)
    found = {m["name"] for m in sample_docs.START.finditer(text)}
    assert found == set(sample_docs.BLOCKS)


def test_the_samples_record_the_command_that_made_them():
    for name in ("tiny-cpu", "tiny-cpu-bf16", "quick-cpu"):
        directory = samples.SAMPLES / name
        recorded = json.loads((directory / samples.SAMPLE).read_text())
        argv = samples.recorded_argv(directory)
        assert recorded["command"].split()[4:] == argv, name
        assert recorded["wall_s"] > 0


@pytest.fixture
def copied(tmp_path, monkeypatch) -> Path:
    """The committed samples in a folder of their own, read by the script instead."""
    shutil.copytree(samples.SAMPLES, tmp_path / "samples", ignore=shutil.ignore_patterns("*.html"))
    monkeypatch.setattr(sample_docs, "SAMPLES", tmp_path / "samples")
    return tmp_path / "samples"


def test_a_verdict_that_changed_makes_its_blocks_stale(copied):
    path = copied / "quick-cpu" / "verdicts.json"
    verdicts = json.loads(path.read_text())
    window = [c for c in verdicts["comparisons"] if c["metric"] == "window"]
    window[0]["verdict"] = "unclear" if window[0]["verdict"] != "unclear" else "same"
    path.write_text(json.dumps(verdicts))
    stale = sample_docs.stale_blocks()
    assert "docs/sweep.md: quick-table" in stale
    assert "README.md: quick-sentence" in stale


def test_a_wall_time_that_changed_makes_its_block_stale(copied):
    path = copied / "tiny-cpu" / samples.SAMPLE
    recorded = json.loads(path.read_text())
    recorded["wall_s"] += 120
    path.write_text(json.dumps(recorded))
    assert sample_docs.stale_blocks() == ["docs/method.md: default-sweeps"]


def test_a_cuda_sample_is_kept_without_a_gpu_and_an_unknown_name_is_refused():
    todo, kept = samples.plan([], has_gpu=False)
    assert "base-cuda" not in todo and any(k.startswith("base-cuda kept") for k in kept)
    assert {"tiny-cpu", "tiny-cpu-bf16", "quick-cpu"} <= set(todo)
    todo, kept = samples.plan([], has_gpu=True)
    assert "base-cuda" in todo and not kept
    with pytest.raises(samples.UsageError, match="unknown sample 'nope'; valid: base-cuda"):
        samples.plan(["nope"], has_gpu=False)


def test_an_unknown_sample_exits_2_with_one_line():
    done = subprocess.run(
        [sys.executable, "scripts/samples.py", "measure", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python scripts/samples.py: error: unknown sample 'nope'; valid: base-cuda, "
        "frameworks-cpu, quick-cpu, tiny-cpu, "
        "tiny-cpu-bf16 (a new one needs --flags)"
    ]


@pytest.mark.slow
def test_measure_reruns_a_samples_recorded_sweep_and_its_figures_follow(tmp_path, monkeypatch):
    """The quick sample's own sweep, shortened (no added rounds, two pairs), into a folder of its
    own: the files a sample keeps, and the docs' blocks made from them."""
    command = ["scripts/samples.py", "measure", "quick-cpu", "--smoke", "--into", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("re-measuring quick-cpu (")
    made = tmp_path / "quick-cpu"
    assert {p.name for p in made.iterdir()} == {*samples.KEPT, samples.SAMPLE}
    monkeypatch.setattr(sample_docs, "SAMPLES", tmp_path)  # the docs' blocks read it there
    table = sample_docs.quick_table()
    recorded = json.loads((made / samples.SAMPLE).read_text())
    assert "--budget 0 --repeat 2" in recorded["command"]
    assert samples.clock(recorded["wall_s"]) in table
