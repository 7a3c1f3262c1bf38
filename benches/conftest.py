"""pytest-benchmark set-up for the in-process microbenchmarks in benches/.

The benchmarks run in a shuffled order, so that no strategy always runs first (on a cold
machine) or last: ZEROGRAD_BENCH_SEED=N repeats the order of an earlier session, whose seed and
order pytest-benchmark's machine_info records under "zerograd_order".
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from benches.engine import envinfo

HERE = Path(__file__).resolve().parent
_order = pytest.StashKey[dict]()


def _seed() -> int:
    env = os.environ.get("ZEROGRAD_BENCH_SEED", "").strip()
    if not env:
        return int.from_bytes(os.urandom(4), "big")
    try:
        return int(env)
    except ValueError:
        raise pytest.UsageError(f"invalid ZEROGRAD_BENCH_SEED {env!r}; valid: an integer") from None


def pytest_configure(config):
    """The suite's own seeded order (``ZEROGRAD_BENCH_SEED``, recorded in its JSON) is the order
    it runs: where pytest-randomly is installed (the tests' environment), it leaves it be."""
    if hasattr(config.option, "randomly_reorganize"):
        config.option.randomly_reorganize = False


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the order recorded is the one run
def pytest_collection_modifyitems(session, config, items):
    """Shuffle this directory's benchmarks in place; other tests keep their slots."""
    slots = [
        i
        for i, item in enumerate(items)
        if "benchmark" in getattr(item, "fixturenames", ())
        and HERE in Path(str(item.path)).resolve().parents
    ]
    if not slots:
        return
    seed = _seed()
    shuffled = [items[i] for i in slots]
    random.Random(seed).shuffle(shuffled)
    for i, item in zip(slots, shuffled, strict=True):
        items[i] = item
    config.stash[_order] = {"seed": seed, "order": [item.name for item in shuffled]}
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    line = f"benchmark order shuffled with seed {seed} (ZEROGRAD_BENCH_SEED={seed} to repeat)"
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line)


def pytest_benchmark_update_machine_info(config, machine_info):
    """torch, CUDA and GPU details beside pytest-benchmark's own CPU details; the run order."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = envinfo.environment(device)
    machine_info["torch"] = {
        k: env.get(k)
        for k in ("torch", "cuda", "cudnn", "device", "device_name", "threads", "load_average")
    }
    machine_info["torch"].update(envinfo.git_state())
    if device == "cuda":
        machine_info["torch"]["gpu_memory_bytes"] = env.get("gpu_memory_bytes")
    order = config.stash.get(_order, None)
    if order is not None:
        machine_info["zerograd_order"] = order
