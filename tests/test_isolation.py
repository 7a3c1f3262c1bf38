"""The suite's isolation (``tests/conftest.py``: the registry put back, the tests' plugins
forgotten) holds wherever a checkout and its environment live, the temporary folder included
(issue 60: a clone under /tmp had torch's own modules forgotten, and torch refused them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import strategies
from strategies.block import BlockStrategy

ROOT = Path(__file__).resolve().parent.parent
REGISTERED = "module_fixture_strategy"
# a test that imports torch._dynamo (AdamW) twice over, a module fixture's registration, and a
# test that reads the registry after it: in this order, in one pytest process
SELECTED = [
    "tests/test_strategies.py",
    "tests/test_isolation.py",
    "tests/test_docs.py",
    "-k",
    "step_clips_the_full_batch_gradient or module_fixture_registers "
    "or readme_strategies_table_names_every",
]


@pytest.fixture(scope="module")
def module_registered() -> str:
    """A strategy registered by a module-scoped fixture, as ``test_row_keys``' sweep does."""
    strategies.register(REGISTERED, BlockStrategy)
    return REGISTERED


def test_a_module_fixture_registers_for_its_own_tests(module_registered):
    assert module_registered in strategies.available()


def temp_above_everything() -> Path:
    """A temporary folder holding both the checkout and torch's installed files (with the
    tests' environment in the checkout, as ``nox -s tests`` makes it, the checkout itself)."""
    return Path(os.path.commonpath([ROOT, Path(torch.__file__).resolve().parent]))


def test_the_isolation_holds_with_the_checkout_and_torch_under_the_temp_folder(tmp_path):
    temp = temp_above_everything()
    if not os.access(temp, os.W_OK):
        pytest.skip(f"{temp} (above the checkout and torch) is not writable")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "--basetemp", str(tmp_path / "base"), *SELECTED],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # the selection ran (the two tests of test_strategies, this module's and the README's)
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 3, summary
