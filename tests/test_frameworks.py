"""A framework's own accumulation path (``benches.engine.frameworks``, issue 40): the
framework's objects run the windows, paired with the plain loop like a strategy. Its gradients
are the workload's, its step is the plain loop's step, and what cannot run is a one-line usage
error before anything is written."""

from __future__ import annotations

import json

import pytest
import torch

from benches.engine import frameworks
from benches.engine.runner import PairedRunner
from benches.sweep import cli
from benches.workloads.transformer import Workload

pytest.importorskip("accelerate")  # the [frameworks] extra: nox -s tests installs it

ACCELERATE = ["accelerate", "accelerate:sync_each_batch=true", "accelerate:no_sync=backward"]
OTHERS = ["fabric", "deepspeed", "deepspeed:zero=1", "deepspeed:zero=2"]
TRAINERS = ["hf-trainer", "lightning"]  # framework-owned loops, driven window by window
# DeepSpeed last: the one-rank process group it makes in a process of one lives as long as the
# process (a case's process holds one path), and a Trainer after it would wrap DDP around it
PATHS = [*ACCELERATE, "fabric", *TRAINERS, "deepspeed", "deepspeed:zero=1", "deepspeed:zero=2"]


@pytest.fixture(autouse=True, scope="module")
def no_process_group_left():
    """DeepSpeed's one-rank process group (made in a process without one) is this module's
    only: the tests after it find none."""
    import torch.distributed as dist

    before = dist.is_initialized()
    yield
    if dist.is_initialized() and not before:
        dist.destroy_process_group()


def paired(label: str, k: int = 4) -> tuple[PairedRunner, tuple]:
    workload = Workload(preset="tiny", accumulate=k, device="cpu", dropout=0.0, threads=1)
    batches = workload.batches(0)
    runner = PairedRunner(workload, label)
    runner.add_plain()
    return runner, (batches, workload.window_tokens(batches))


@pytest.mark.parametrize("label", PATHS)
def test_a_paths_window_has_the_plain_loops_gradients_and_its_step_is_the_plain_step(label):
    """K = 4: a framework that divides the loss by K gets it multiplied by K, both exact in
    binary floating point, so the gradients are equal bit for bit, not within a tolerance, read
    where the framework keeps them (DeepSpeed's ZeRO-1/2: its partitions)."""
    runner, data = paired(label)
    path, plain = runner.strategy, runner.plain
    assert path.path is not None and path.collector is None
    for loop in (path, plain):
        loop.window(*data, update=False)  # the gradient check's window: no step yet
    got, expected = path.grads(), plain.grads()
    assert got.keys() == expected.keys()
    for name, grad in got.items():
        assert grad is not None and torch.equal(grad, expected[name]), name
    for loop in (path, plain):
        loop.update()
    # Lightning resets after the next window's first forward: until then its gradients stay
    reset = label != "lightning"
    for a, b in zip(path.model.parameters(), plain.model.parameters(), strict=True):
        assert (a.grad is None) == reset and b.grad is None  # every reset sets to None
        assert torch.equal(a, b)  # the same AdamW step
    timing = path.window(*data)  # a timed window: its phases and its own step
    assert timing["window"] > 0 and timing["forward"] > 0 and timing["backward"] > 0
    assert timing["update"] > 0
    assert all((p.grad is None) == reset for p in path.model.parameters())
    runner.close()
    if path.path is not None and hasattr(path.path, "thread"):
        assert not path.path.thread.is_alive()  # a driven Trainer's thread ended


def test_accelerates_sync_flag_is_at_the_window_boundary_only():
    """The path's counter stays aligned with the windows: a boundary every K micro-batches."""
    runner, data = paired("accelerate", k=3)
    seen = []
    original = runner.strategy.path.micro_batch

    def spy(loss_of, batch, i, last, mark):
        original(loss_of, batch, i, last, mark)
        seen.append(runner.strategy.path.accelerator.sync_gradients)

    runner.strategy.path.micro_batch = spy
    for _ in range(2):
        runner.strategy.window(*data)
    assert seen == [False, False, True] * 2
    runner.close()


def test_k_of_a_bare_and_a_bound_workload():
    assert frameworks.k_of(Workload(preset="tiny", accumulate=3, device="cpu")) == 3


QUICK = ["run", "--preset", "tiny", "--device", "cpu", "--accumulate", "2", "--budget", "0"]


@pytest.mark.parametrize(
    "extra, named",
    [
        (
            ["--frameworks", "acelerate"],
            "--frameworks 'acelerate': unknown framework; valid: accelerate, fabric, "
            "hf-trainer, lightning, deepspeed",
        ),
        (["--frameworks", "accelerate:sync_each_batch=maybe"], "is not one of false, true"),
        (["--frameworks", "accelerate:steps=2"], "unknown option 'steps' of accelerate"),
        (["--frameworks", "deepspeed:zero=3"], "deepspeed:zero=3 is not one of 0, 1, 2"),
        (["--frameworks", "fabric:zero=1"], "unknown option 'zero' of fabric; valid: none"),
        (
            ["--frameworks", "accelerate", "--world-size", "2", "--parallel", "fsdp2"],
            "with --parallel fsdp2",
        ),
        (["--frameworks", "accelerate", "--clip-norm", "1.0"], "with --clip-norm"),
        (["--frameworks", "hf-trainer", "--compile"], "with --compile"),
    ],
)
def test_a_path_that_cannot_run_is_one_line_exit_2_before_anything_is_written(
    extra, named, tmp_path, capsys
):
    out = tmp_path / "run"
    assert cli.main([*QUICK, *extra, "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], lines
    assert not out.exists()


def test_a_framework_not_installed_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(frameworks, "installed", lambda name: False)
    out = tmp_path / "run"
    assert cli.main([*QUICK, "--frameworks", "accelerate", "--out", str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert "accelerate is not installed; pip install -e '.[frameworks]'" in line
    assert "\n" not in line and not out.exists()


def test_without_the_flag_nothing_imports_a_framework(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from benches.sweep import cli; "
        "cli.resolve(cli.build_parser().parse_args(['run', '--preset', 'tiny', '--out', "
        f"{str(tmp_path / 'run')!r}]));"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('accelerate', 'lightning', 'deepspeed', 'transformers'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.slow  # DeepSpeed's op compiles on first use: 70 s here, nox -s slow (CI) runs it
def test_a_sweep_of_paths_in_one_process_and_its_frameworks_section(tmp_path):
    """One process per case, as a laptop runs it: DeepSpeed's engine and Lightning's driven
    Trainer pass the gradient check against the float64 reference (run on the model itself,
    not through the framework's engine, whose forward DeepSpeed counts and hooks), each row
    names its framework's version and what was turned off, and the report's frameworks section
    lists both paths with the cheapest named in the answer."""
    out = tmp_path / "one"
    argv = ["run", "--preset", "tiny", "--device", "cpu", "--accumulate", "4"]
    argv += ["--live-tensors", "0", "--strategies", "native"]
    argv += ["--frameworks", "lightning,deepspeed:zero=2", "--repeat", "3", "--warmup", "1"]
    argv += ["--budget", "0", "--control", "none", "--out", str(out)]
    assert cli.main(argv) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    paths = {}
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["grad_check"]["ok"] and r["grad_check"]["windows"] == 3, r["grad_check"]
        if r["strategy"] != "native":
            paths[r["strategy"]] = r["framework"]
        else:
            assert "framework" not in r  # a strategy's row keeps its keys
    assert paths["deepspeed"]["package"] == "deepspeed" and paths["deepspeed"]["version"]
    assert any("gradient_clipping 0" in t for t in paths["deepspeed"]["turned_off"])
    assert any("barebones" in t for t in paths["lightning"]["turned_off"])
    page = (out / "index.html").read_text()
    section = page[page.index('id="frameworks"') :]
    section = section[: section.index("</section>")]
    for label in ("lightning", "deepspeed:zero=2"):
        assert f"<code>{label}</code>" in section
    # a busy machine (CPU pressure in every path's process) still names one: the pressure is
    # in the intervals (issue 49)
    assert "Among the frameworks' own paths, the cheapest here is" in page


def allreduces(out) -> dict[str, set[float]]:
    """All-reduces per window of each loop of a sweep's rows, every row ok and gradient-checked."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by: dict[str, set[float]] = {}
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["grad_check"]["ok"], r["grad_check"]
        label = f"{r['strategy']}:{r['options']}" if r["options"] else r["strategy"]
        by.setdefault(label, set()).add(r["collectives_per_window"]["allreduce"])
    return by


@pytest.mark.slow  # a sweep of 2 ranks, about 2 minutes: nox -s slow (CI) runs it
def test_fabric_trainers_and_deepspeed_under_ranks_their_gradients_and_collectives(tmp_path):
    """Fabric's ``no_backward_sync`` and both Trainers' ``no_sync``: 1 all-reduce per window
    (DDP's, counted on the DDP each made); DeepSpeed ZeRO-0 1 (after the
    boundary backward), ZeRO-1 2 (its reduction at the boundary, in two buckets), ZeRO-2 5 (one
    per micro-batch, the boundary's in two): counted through DeepSpeed's own backend. Every
    path's gradients pass the check against the float64 reference on 2 ranks."""
    out = tmp_path / "ranks"
    argv = ["run", "--preset", "tiny", "--device", "cpu", "--accumulate", "4"]
    argv += ["--live-tensors", "0", "--world-size", "2", "--strategies", "native"]
    argv += ["--frameworks", ",".join(OTHERS + TRAINERS), "--repeat", "4", "--warmup", "1"]
    argv += ["--budget", "0", "--control", "none", "--out", str(out)]
    assert cli.main(argv) == 0
    by = allreduces(out)
    assert by["fabric"] == {1.0} and by["native"] == {1.0}
    assert by["hf-trainer"] == {1.0} and by["lightning"] == {1.0}
    assert by["deepspeed"] == {1.0}
    assert by["deepspeed:zero=1"] == {2.0}
    assert by["deepspeed:zero=2"] == {5.0}


@pytest.mark.slow  # a sweep of 2 ranks, about 2 minutes: nox -s slow (CI) runs it
def test_under_ddp_accumulate_syncs_once_and_the_pitfalls_every_micro_batch(tmp_path):
    """Accelerate's table, its collectives: ``accumulate`` 1 all-reduce per window,
    ``sync_each_batch`` and the backward-only ``no_sync`` K; an identically configured copy of
    ``accelerate`` (``no_sync=accumulate``, its default spelled out) is never lower or higher."""
    out = tmp_path / "ddp"
    labels = [*ACCELERATE, "accelerate:no_sync=accumulate"]
    argv = ["run", "--preset", "tiny", "--device", "cpu", "--accumulate", "4"]
    argv += ["--live-tensors", "0", "--world-size", "2", "--strategies"]
    argv += ["native", "--frameworks", ",".join(labels), "--repeat", "6", "--warmup", "1"]
    argv += ["--budget", "0", "--rounds", "2", "--control", "none", "--out", str(out)]
    assert cli.main(argv) == 0
    by = allreduces(out)
    assert by["accelerate"] == {1.0} and by["accelerate:no_sync=accumulate"] == {1.0}
    assert by["accelerate:sync_each_batch=true"] == {4.0}
    assert by["accelerate:no_sync=backward"] == {4.0}
    verdicts = json.loads((out / "verdicts.json").read_text())
    words = {
        (c["a"], c["b"]): c["verdict"] for c in verdicts["comparisons"] if c["metric"] == "window"
    }
    twin = words.get(("accelerate", "accelerate:no_sync=accumulate")) or words.get(
        ("accelerate:no_sync=accumulate", "accelerate")
    )
    assert twin in ("same", "unclear"), twin
    assert any("native" in pair for pair in words)  # judged against the strategies too
