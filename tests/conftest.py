"""Shared fixtures: a tiny deterministic model with tied weights and an unused branch."""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import strategies
from reports.schema import verdict_records

# a sweep that tests the sweep's mechanics, not verdicts: tiny, few pairs, no extra processes
QUICK = [
    "--preset",
    "tiny",
    "--accumulate",
    "1",
    "--live-tensors",
    "0",
    "--repeat",
    "2",
    "--warmup",
    "0",
    "--threads",
    "1",
    "--control",
    "none",
    "--budget",
    "0",
]

# ZEROGRAD_PLUGINS=mod1,mod2 imports plugin modules first, so the suite covers their strategies
for _module in filter(None, os.environ.get("ZEROGRAD_PLUGINS", "").split(",")):
    importlib.import_module(_module.strip())
STRATEGIES = strategies.available()
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
        ],
    ),
]


class TinyLM(nn.Module):
    """Embedding tied to the output projection, an MLP, and a branch that only some calls use."""

    def __init__(self, vocab: int = 11, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.side = nn.Linear(dim, dim)  # used only when use_side=True

    def forward(self, tokens: torch.Tensor, use_side: bool = False) -> torch.Tensor:
        h = self.embed(tokens)  # (B, T, C)
        h = h + self.mlp(h)
        if use_side:
            h = h + self.side(h)
        return self.head(self.norm(h))  # (B, T, vocab)


def make_model(seed: int = 0, device: str = "cpu", dtype=torch.float32) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM().to(device=device, dtype=dtype)


def make_batches(k: int, seed: int = 1, device: str = "cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 11, (2, 5), generator=g).to(device) for _ in range(k)]


def loss_of(model: nn.Module, tokens: torch.Tensor, use_side: bool = False) -> torch.Tensor:
    logits = model(tokens, use_side)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten(), reduction="sum")


def reference_grads(model, batches, use_side=False) -> dict[str, torch.Tensor]:
    """Per-parameter sum of the micro-batch gradients, added in order, without any strategy
    (the trainable parameters': a frozen one has none)."""
    names, params = zip(
        *(np for np in model.named_parameters() if np[1].requires_grad), strict=True
    )
    total: list[torch.Tensor | None] = [None] * len(params)
    for tokens in batches:
        grads = torch.autograd.grad(loss_of(model, tokens, use_side), params, allow_unused=True)
        for i, g in enumerate(grads):
            if g is not None:
                total[i] = g.clone() if total[i] is None else total[i] + g
    return {n: t for n, t in zip(names, total, strict=True) if t is not None}


def pytest_sessionstart(session: pytest.Session) -> None:
    """The shuffled order's seed, said even under -q (pytest-randomly's header is not)."""
    seed = getattr(session.config.option, "randomly_seed", None)
    if seed is not None and session.config.pluginmanager.hasplugin("randomly"):
        sys.stderr.write(
            f"tests in a shuffled order: again with -p randomly --randomly-seed={seed}\n"
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every module the tests import is loaded now: its objects (250,000 with torch, scipy and
    matplotlib) go to the permanent generation, so that the collection after each test walks
    only what tests made (0.2 s each before, 2 of the suite's 7 minutes on 2 cores). A module a
    test loads itself (a framework's) goes there after that test (_free_between_tests)."""
    gc.collect()
    gc.freeze()


TESTS = Path(__file__).resolve().parent
# where installed packages live (torch, scipy, the project's own editable install's finder):
# never forgotten, wherever the environment is (a checkout under /tmp holds its .nox there)
PATHS = sysconfig.get_paths()
INSTALLED = {Path(PATHS[key]).resolve() for key in ("stdlib", "purelib", "platlib") if key in PATHS}


def _made_by_tests(name: str, basetemp: Path) -> bool:
    """A module this checkout's tests made: one of its test plugins (``tests.fault_plugin``)
    or one a test wrote under pytest's temporary folder (``tmp_path``). Never a module of an
    installed package, nor the project's own: issue 60 (a checkout and its environment under
    the system's temporary folder had torch's modules forgotten, and torch refused them)."""
    path = getattr(sys.modules.get(name), "__file__", None)
    if not path:
        return False
    file = Path(path).resolve()
    if any(file.is_relative_to(place) for place in INSTALLED):
        return False
    return file.is_relative_to(TESTS if name.startswith("tests.") else basetemp)


def _plugin_modules(before: set[str], basetemp: Path) -> list[str]:
    """The modules the tests made (``_made_by_tests``) imported since ``before``: importing one
    registers its strategies, so a later import must run it again."""
    return [name for name in set(sys.modules) - before if _made_by_tests(name, basetemp)]


@contextlib.contextmanager
def _registry_kept(basetemp: Path) -> Iterator[None]:
    """The strategy registry put back as it was, and the plugins imported since forgotten."""
    from strategies import registry

    factories, before = dict(registry._factories), set(sys.modules)
    try:
        yield
    finally:
        registry._factories.clear()
        registry._factories.update(factories)
        for name in _plugin_modules(before, basetemp):
            del sys.modules[name]


@pytest.fixture(autouse=True, scope="module")
def _no_module_state_leaks(tmp_path_factory):
    """What a module's fixtures registered (``test_row_keys``' sweep of a plugin's strategy)
    is gone when the module's tests are: its tests see it, the next module's do not."""
    with _registry_kept(tmp_path_factory.getbasetemp().resolve()):
        yield


@pytest.fixture(autouse=True)
def _no_state_leaks(tmp_path_factory):
    """A test leaves no strategy registered, no plugin imported and no intra-op thread count
    changed for the next to read (the registry is the process's: a ``faulty`` left by one test
    was in another's list of built-in strategies): the registry is put back as it was, a plugin
    imported since forgotten, so that a later import registers its strategies again, and
    torch's threads set back. ``nox -s tests`` runs in a shuffled order (pytest-randomly, its
    seed printed first) to keep it so."""
    threads = torch.get_num_threads()  # a test that sets its own gives them back
    with _registry_kept(tmp_path_factory.getbasetemp().resolve()):
        yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _free_between_tests():
    modules = len(sys.modules)
    yield
    gc.collect()  # a test's models and tensors are gone before the next one measures
    if len(sys.modules) > modules:  # DeepSpeed, Lightning, transformers: 220,000 objects
        gc.freeze()  # 0.18 s a collection after them unfrozen, 0.03 s frozen


ROOT = Path(__file__).resolve().parent.parent


def run_reports(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m reports ARGS`` from the checkout, as a user runs it; output captured."""
    return subprocess.run(
        [sys.executable, "-m", "reports", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep(*args: str, plugin_dir: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``python -m benches run ARGS`` from the checkout, as a user runs it (``plugin_dir``: on
    its PYTHONPATH, for a plugin the test wrote); output captured."""
    env = dict(os.environ)
    if plugin_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "benches", "run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        **kwargs,
    )


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
    """A folder holding ``zg_test_plugin``: strategies that fail at reset, on rank 1 only,
    sleep, or never zero (the CLI's failure tests)."""
    tmp_path = tmp_path_factory.mktemp("plugins")
    (tmp_path / "zg_test_plugin.py").write_text(
        textwrap.dedent(
            """
        import time
        import strategies
        from strategies.block import BlockStrategy

        class Boom(BlockStrategy):
            def reset(self, collector):
                # gloo's and NCCL's messages hold brackets: rich must not read them as markup
                raise RuntimeError("boom at reset [/gloo/transport/tcp/pair.cc:553] [red]")

        class RankOneFails(BlockStrategy):
            def reset(self, collector):
                import os
                if os.environ.get("RANK") == "1":
                    raise RuntimeError("rank 1 gave up")
                super().reset(collector)

        class Sleepy(BlockStrategy):
            def reset(self, collector):
                time.sleep(120)

        class Noop(BlockStrategy):
            def reset(self, collector):
                pass  # never zeroes: the second window holds two windows' gradients

        strategies.register("boom", Boom)
        strategies.register("sleepy", Sleepy)
        strategies.register("rank-one-fails", RankOneFails)
        strategies.register("noop", Noop)
        """
        )
    )
    return tmp_path


# -- what many tests read: one real sweep, one browser, per session -----------------------------
SWEEP_STRATEGIES = ("native", "lazy", "global")  # the real sweep's: every process costs ~2 s
SWEEP_PAIRS = len(SWEEP_STRATEGIES) * (len(SWEEP_STRATEGIES) - 1) // 2
BENCH_TEST = """
def test_sum(benchmark):
    benchmark.extra_info["what"] = "sum of 1000 ints"
    benchmark(sum, range(1000))
"""


def run_real_sweep(out: Path) -> subprocess.CompletedProcess:
    """The real tiny sweep into ``out`` (``real_sweep``'s; ``tests/row_keys.py`` reads its
    rows' keys)."""
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny"]
    command += ["--accumulate", "1,2", "--live-tensors", "0", "--repeat", "6"]
    command += ["--warmup", "1", "--threads", "1", "--strategies", ",".join(SWEEP_STRATEGIES)]
    command += ["--budget", "0"]  # the first round only: the suite's time is fixed
    return subprocess.run(
        [*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory) -> Path:
    """The session's real tiny sweep, for every test that only reads one (every case a fresh
    process, native's shared process in two more at every K and N as the control's), with real
    pytest-benchmark output beside it."""
    out = tmp_path_factory.mktemp("sweep")
    done = run_real_sweep(out)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "index.html").exists()  # the sweep renders its report itself
    bench_dir = tmp_path_factory.mktemp("bench")
    (bench_dir / "test_sum.py").write_text(BENCH_TEST)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(bench_dir)),
            *("--benchmark-max-time=0.05", f"--benchmark-json={out / 'pytest-benchmark.json'}"),
        ],
        cwd=bench_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    done = run_reports("build", str(out))
    assert done.returncode == 0, done.stderr
    return out


def planted_factor(sweep: Path) -> float:
    """A slowdown well beyond the sweep's resolution: 2x, or more on a machine so busy that
    its resolution hides 2x (the smallest difference the sweep can tell apart)."""
    judged = json.loads((sweep / verdict_records.VERDICTS).read_text())
    return max(2.0, 2 * (1 + max(f["resolution"] for f in judged["noise_floor"])))


@pytest.fixture(scope="session")
def slower_sweep(real_sweep: Path, tmp_path_factory) -> Path:
    """The sweep's rows with lazy's strategy windows slowed down (``planted_factor``), its
    plain windows left alone."""
    directory = tmp_path_factory.mktemp("slower")
    factor = planted_factor(real_sweep)
    with open(real_sweep / "results.jsonl") as f, open(directory / "results.jsonl", "w") as out:
        for line in f:
            row = json.loads(line)
            if row["strategy"] == "lazy" and row["status"] == "ok":
                row["samples"]["window"] = [x * factor for x in row["samples"]["window"]]
            out.write(json.dumps(row) + "\n")
    shutil.copy(real_sweep / "run.json", directory / "run.json")
    return directory


@pytest.fixture(scope="session")
def recipe_sweep(tmp_path_factory) -> tuple[Path, str]:
    """A real tiny sweep in two precisions, each case's loop paired with a bf16-autocast one
    (--compare-settings): native at K=1 and 4, four processes; its directory and its output."""
    out = tmp_path_factory.mktemp("recipe")
    command = [sys.executable, "-m", "benches", "run", "--preset", "tiny", "--strategies"]
    command += ["native", "--accumulate", "1,4", "--live-tensors", "0", "--repeat", "2"]
    command += ["--warmup", "0", "--threads", "1", "--control", "none", "--precision"]
    command += ["fp32,bf16", "--compare-settings", "precision=bf16-autocast", "--budget", "0"]
    done = subprocess.run(
        [*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out, done.stdout


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for every page of the session (tests/browser.py)."""
    import browser as chromium

    driver = chromium.start()
    yield driver
    driver.quit()
