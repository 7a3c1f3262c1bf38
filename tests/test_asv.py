"""asv over commits: the config, the suite's fixed strategy list, and a suite asv can import.

asv imports every module under benches/ (DESIGN.md, Layout), so each one is imported here in a
fresh process that must print nothing and create no file. The asv runs use the current
environment (``existing``) and ``--dry-run``: in asv 0.6.6 ``--quick`` alone saves its results
over real ones.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import strategies
from benches import asv_common

ROOT = Path(__file__).resolve().parents[1]
# every module asv imports, the wings' included: "sweep.cli", "asv_common", ...
BENCHES = sorted(
    ".".join(p.relative_to(ROOT / "benches").with_suffix("").parts).removesuffix(".__init__")
    for p in (ROOT / "benches").rglob("*.py")
    if p.name != "__init__.py" or p.parent != ROOT / "benches"
)
BENCHMARK_PREFIXES = ("time_", "peakmem_", "mem_", "track_", "timeraw_")


def load_conf() -> dict:
    asv_util = pytest.importorskip("asv.util")
    return asv_util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)


def asv_env(tmp_path: Path) -> dict[str, str]:
    # asv's benchmark process sees only the installed packages; benches/ imports `reports` from
    # the checkout, which asv.conf.json links into the envs asv builds. Here the existing
    # environment has this checkout installed editable, so the checkout root is the same code.
    return {**os.environ, "ASV_PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}


def asv(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    pytest.importorskip("asv")
    pytest.importorskip("asv_runner")  # the existing environment runs asv's benchmark script
    return subprocess.run(
        [sys.executable, "-m", "asv", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def scratch_asv(repo: Path, tmp: Path, out: Path) -> tuple[Path, dict[str, str]]:
    """The project's asv config over ``repo``, with envs, results and html under ``out``, and
    asv's machine file written (HOME=tmp): the config's path and the environment to run in."""
    conf = load_conf()
    conf.update(
        repo=str(repo),
        benchmark_dir=str(ROOT / "benches"),
        env_dir=str(out / "env"),
        results_dir=str(out / "results"),
        html_dir=str(out / "html"),
    )
    config = tmp / "asv.conf.json"
    config.write_text(json.dumps(conf))
    env = asv_env(tmp)  # HOME=tmp: `asv machine` writes ~/.asv-machine.json there
    machine = asv("machine", "--yes", "--config", str(config), cwd=ROOT, env=env)
    assert machine.returncode == 0, machine.stdout + machine.stderr
    return config, env


def test_conf_installs_each_commit_with_the_bench_extra():
    conf = load_conf()
    assert conf["project"] == "zerograd"
    assert conf["repo"] == "."
    assert conf["branches"] == ["main"]
    assert conf["environment_type"] == "virtualenv"
    assert conf["pythons"] == ["3.11"]
    assert conf["matrix"]["req"]["torch"] == ["2.13.0"]
    assert "numpy" in conf["matrix"]["req"]
    assert conf["benchmark_dir"] == "benches"
    for key in ("env_dir", "results_dir", "html_dir"):
        assert conf[key].startswith(".asv/")
    assert "--no-build-isolation" in " ".join(conf["build_command"])
    assert any("{wheel_file}[bench]" in c for c in conf["install_command"])
    assert conf["install_timeout"] >= 1200
    assert conf["launch_method"] == "spawn"


def test_fixed_strategy_list_covers_every_registered_strategy():
    missing = set(strategies.available()) - set(asv_common.STRATEGIES)
    assert not missing, f"add {sorted(missing)} to benches/asv_common.py STRATEGIES"
    assert len(set(asv_common.STRATEGIES)) == len(asv_common.STRATEGIES)


# asv collects every module-level function named time_* etc.: one imported from elsewhere, or a
# helper so named, would become a benchmark (twice, or by accident). One probe process imports
# torch once, then forks a child per module: each child imports its module into a fresh
# interpreter state (torch loaded, nothing of ours), with its own cwd and its stdout and stderr
# in files, and records what its module holds.
_IMPORT_PROBE = """
import importlib, inspect, os, sys, traceback
import torch  # what every benches module imports: paid once, before the forks
names, prefixes, root = sys.argv[1].split(","), tuple(sys.argv[2].split(",")), sys.argv[3]
children = []
for name in names:
    pid = os.fork()
    if pid:
        children.append(pid)
        continue
    code = 1
    try:
        out = os.path.join(root, "out", name.replace(".", "-"))
        for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
            os.dup2(os.open(out + suffix, os.O_WRONLY | os.O_CREAT), fd)
        os.chdir(os.path.join(root, "cwd", name.replace(".", "-")))
        module = importlib.import_module("benches." + name)
        odd = [
            n for n, obj in vars(module).items()
            if n.startswith(prefixes)
            and not (inspect.isfunction(obj) and obj.__module__ == module.__name__)
        ]
        with open(out + ".odd", "w") as f:
            f.write(",".join(odd))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
failed = [pid for pid in children if os.waitpid(pid, 0)[1] != 0]
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_every_benches_module_imports_without_side_effects(tmp_path):
    assert {"asv_common", "asv_strategies", "engine.case", "sweep.cli"} <= set(BENCHES)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "ZEROGRAD_ASV_PRESET": "tiny",
    }
    before = sorted(str(p) for p in (ROOT / "benches").rglob("*") if "__pycache__" not in str(p))
    (tmp_path / "out").mkdir()
    for name in BENCHES:
        (tmp_path / "cwd" / name.replace(".", "-")).mkdir(parents=True)
    done = subprocess.run(
        [
            *(sys.executable, "-c", _IMPORT_PROBE),
            *(",".join(BENCHES), ",".join(BENCHMARK_PREFIXES), str(tmp_path)),
        ],
        cwd=tmp_path / "cwd",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for name in BENCHES:
        out = tmp_path / "out" / name.replace(".", "-")
        err = out.with_suffix(".stderr").read_text()
        assert out.with_suffix(".odd").exists(), f"benches.{name} failed to import:\n{err}"
        printed = out.with_suffix(".stdout").read_text()
        assert printed == "" and err == "", f"benches.{name} printed at import:\n{printed}{err}"
        not_benchmarks = out.with_suffix(".odd").read_text()
        assert not_benchmarks == "", f"benches.{name} has non-benchmark {not_benchmarks}"
        assert list((tmp_path / "cwd" / name.replace(".", "-")).iterdir()) == [], (
            f"benches.{name} wrote files"
        )
    assert done.returncode == 0, done.stdout + done.stderr
    after = sorted(str(p) for p in (ROOT / "benches").rglob("*") if "__pycache__" not in str(p))
    assert after == before


@pytest.mark.slow
def test_asv_check_passes_in_the_current_environment(tmp_path):
    done = asv("check", "-E", f"existing:{sys.executable}", cwd=ROOT, env=asv_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No problems found" in done.stdout


@pytest.mark.slow
def test_asv_dry_run_runs_the_track_suites(tmp_path):
    """A smoke run of the quick suites; results, machine file and html stay in tmp_path."""
    config, env = scratch_asv(ROOT, tmp_path, tmp_path)
    done = asv(
        *("run", "--config", str(config), "-E", f"existing:{sys.executable}"),
        *("--quick", "--dry-run", "--show-stderr", "-b", "CoreOverhead|ResetVsMemset"),
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "track_core_overhead" in done.stdout and "track_reset_vs_memset" in done.stdout
    assert "failed" not in done.stdout.lower(), done.stdout


def test_smoke_selects_every_benchmark_at_its_smallest_parameters():
    """`nox -s asv -- --smoke` (CI) runs, through asv's own filter, each benchmark once, at the
    first (smallest) value of every parameter: a new axis whose first value the smoke's regex
    does not know fails here."""
    asv_benchmarks = pytest.importorskip("asv.benchmarks")
    noxfile = pytest.importorskip("noxfile")
    from benches import asv_strategies

    found, wanted = [], {}
    for cls in vars(asv_strategies).values():
        if not (isinstance(cls, type) and cls.__module__ == asv_strategies.__name__):
            continue
        for method in (m for m in dir(cls) if m.startswith(BENCHMARK_PREFIXES)):
            name = f"asv_strategies.{cls.__name__}.{method}"
            params = [[repr(v) for v in values] for values in getattr(cls, "params", [])]
            found.append({"name": name, "params": params})
            names = list(getattr(cls, "param_names", []))
            assert len(names) == len(params), name
            smallest = [values[0] for values in params]
            combos = list(itertools.product(*params))
            wanted[name] = [combos.index(tuple(smallest))] if params else None
    conf = type("Conf", (), {"benchmark_dir": str(ROOT / "benches")})()
    chosen = asv_benchmarks.Benchmarks(conf, found, regex=list(noxfile.ASV_SMOKE_BENCH))
    assert sorted(chosen) == sorted(wanted), "a benchmark the smoke leaves out"
    assert {n: chosen.benchmark_selection[n] for n in wanted} == wanted
