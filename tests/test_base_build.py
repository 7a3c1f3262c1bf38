"""``--base REF``: the base build's strategies beside the working tree's in one sweep
(benches/sweep/base.py, benches/engine/builds.py), their verdicts head against base, and the gate.

The slow tests are real sweeps in a scratch clone of this repository, with a slowdown committed
on top of the commit they compare against: in ``block``'s reset alone, then in the collector's
core (every strategy alike), and none (an A/A)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benches.engine import builds
from benches.sweep import base
from benches.sweep.outdir import UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_the_base_package_imports_itself_under_its_own_name():
    source = (
        "from strategies.base import Strategy\n"
        "from strategies import _hooks\n"
        "import strategies\n"
        "    from strategies.registry import get\n"
        "import strategies_other\n"
        "x = 'strategies.block'\n"
    )
    assert builds.renamed(source) == (
        f"from {builds.PACKAGE}.base import Strategy\n"
        f"from {builds.PACKAGE} import _hooks\n"
        f"import {builds.PACKAGE} as strategies\n"
        f"    from {builds.PACKAGE}.registry import get\n"
        "import strategies_other\n"
        "x = 'strategies.block'\n"
    )


def test_a_ref_that_is_no_commit_is_one_line_naming_it():
    with pytest.raises(UsageError, match=r"--base 'no-such-ref' is not a commit of .*; valid: a"):
        base.commit_of("no-such-ref")
    with pytest.raises(UsageError, match="is not a git ref"):
        base.commit_of("--help")
    assert base.commit_of("HEAD") == base.git("rev-parse", "HEAD").stdout.strip()


def test_head_as_the_base_gives_every_strategy_a_twin_and_a_new_one_runs_at_head_only(tmp_path):
    sha, labels, missing = base.prepare("HEAD", tmp_path, ["block", "native:set_to_none=false"])
    assert labels == ["block", "block@base", "native:set_to_none=false",
                      "native@base:set_to_none=false"]  # fmt: skip
    assert missing == []
    package = builds.folder(tmp_path, sha) / builds.PACKAGE
    assert (package / "collector.py").exists() and (package / "native.py").exists()
    _, labels, missing = base.prepare("HEAD", tmp_path, ["block", "brand_new"])
    assert labels == ["block", "block@base", "brand_new"]
    assert missing == [f"brand_new: not at the base {sha[:12]} (a new strategy)"]


def test_a_base_whose_strategies_cannot_be_imported_is_one_line(tmp_path):
    (tmp_path / builds.PACKAGE).mkdir()
    (tmp_path / builds.PACKAGE / "__init__.py").write_text("raise ImportError('broken at base')\n")
    with pytest.raises(UsageError, match="cannot be imported: ImportError: broken at base"):
        base.available(tmp_path, "0" * 40)


@pytest.mark.slow  # a fresh interpreter importing torch and both builds, about 5 s
def test_a_base_label_runs_the_base_packages_strategy_and_collector(tmp_path):
    sha, _, _ = base.prepare("HEAD", tmp_path, ["lazy"])
    code = (
        "import sys; from benches.engine import builds, runner\n"
        f"builds.activate({str(tmp_path)!r}, {sha!r})\n"
        "s = runner.make_strategy('lazy@base'); h = runner.make_strategy('lazy')\n"
        "p = builds.package_of('lazy@base')\n"
        "print(type(s).__module__, type(h).__module__, p.GradientCollector.__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [
        f"{builds.PACKAGE}.lazy",
        "strategies.lazy",
        f"{builds.PACKAGE}.collector",
    ]


# -- real sweeps in a scratch clone: a slowdown committed on top of the base -----------------------
SLOW_BLOCK = (
    "strategies/block.py",
    "    def reset(self, collector) -> None:\n",
    "    def reset(self, collector) -> None:\n"
    "        import time\n\n"
    "        time.sleep(0.004)  # planted: the working tree's block is slower\n",
)
# the shared core: every strategy's window opens here; a busy wait (the CPU held, as real work)
SLOW_CORE = (
    "strategies/collector.py",
    "        self.strategy.reset(self)\n        self._in_window = True\n",
    "        import time\n\n"
    "        until = time.perf_counter() + 0.0015  # planted: about 5% of a tiny K=1 window\n"
    "        while time.perf_counter() < until:\n"
    "            pass\n"
    "        self.strategy.reset(self)\n        self._in_window = True\n",
)
SWEEP = [
    *("--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--threads", "1"),
    *("--strategies", "block,native", "--control", "none", "--repeat", "8", "--budget", "150"),
]


def scratch(tmp_path: Path, plant: tuple[str, str, str] | None) -> Path:
    """A clone of this repository's HEAD with the working tree's benches/ and reports/ (the
    yardstick) and, when ``plant`` is given, one more commit that plants it."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(repo)], check=True)
    for part in ("benches", "reports", "strategies"):
        subprocess.run(["rm", "-rf", str(repo / part)], check=True)
        subprocess.run(["cp", "-r", str(ROOT / part), str(repo / part)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the working tree"], check=True)
    if plant is not None:
        path, old, new = plant
        text = (repo / path).read_text()
        assert text.count(old) == 1, f"the plant's anchor moved in {path}"
        (repo / path).write_text(text.replace(old, new))
        subprocess.run([*git, "commit", "-q", "-am", "planted slowdown"], check=True)
    return repo


def based_sweep(repo: Path, out: Path, ref: str) -> tuple[dict, int, str]:
    """The sweep of the scratch clone against ``ref``: its verdicts, the gate's exit, its output."""
    done = subprocess.run(
        [sys.executable, "-m", "benches", "run", *SWEEP, "--base", ref, "--out", str(out)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    gate = subprocess.run(
        [sys.executable, "-m", "reports", "gate", str(out / "verdicts.json")],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    return json.loads((out / "verdicts.json").read_text()), gate.returncode, done.stdout


def words(verdicts: dict) -> dict[str, str]:
    return {
        c["a"]: c["verdict"]
        for c in verdicts["comparisons"]
        if c["metric"] == "window" and c["b"] == c["a"] + "@base"
    }


@pytest.mark.slow
def test_a_slowdown_planted_in_block_is_block_higher_and_fails_the_gate(tmp_path):
    verdicts, gate, stdout = based_sweep(scratch(tmp_path, SLOW_BLOCK), tmp_path / "run", "HEAD~1")
    found = words(verdicts)
    assert found["block"] == "higher", found
    assert found["native"] in ("same", "unclear"), found
    assert gate == 1
    assert "working tree against base" in stdout


@pytest.mark.slow
def test_a_slowdown_planted_in_the_shared_core_is_higher_for_every_strategy(tmp_path):
    verdicts, gate, _ = based_sweep(scratch(tmp_path, SLOW_CORE), tmp_path / "run", "HEAD~1")
    assert words(verdicts) == {"block": "higher", "native": "higher"}
    assert gate == 1


@pytest.mark.slow
def test_the_working_tree_against_itself_is_never_lower_or_higher(tmp_path):
    """The A/A: no plant, the working tree against its own HEAD."""
    verdicts, gate, _ = based_sweep(scratch(tmp_path, None), tmp_path / "run", "HEAD")
    found = words(verdicts)
    assert set(found) == {"block", "native"}
    assert set(found.values()) <= {"same", "unclear"}, found
    assert gate == 0
