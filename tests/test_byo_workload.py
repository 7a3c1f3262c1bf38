"""Bring your own workload (benches/workloads/protocol.py), memory over time, and the cost model."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import conftest
import pytest
import torch
from synthetic import rows_of

import strategies
from benches.engine import bound, costmodel, memory
from benches.engine.runner import PairedRunner
from benches.sweep import cli
from benches.workloads import protocol
from reports.judge import summaries

ROOT = Path(__file__).resolve().parent.parent
CONVNET = "examples.workloads.convnet:workload"
GPT2 = "examples.workloads.gpt2:workload"
LORA = "examples.workloads.lora:workload"
QUICK = [*conftest.QUICK, "--accumulate", "2"]


@pytest.fixture
def bad_workloads(tmp_path, monkeypatch):
    (tmp_path / "zg_bad_workloads.py").write_text(
        textwrap.dedent(
            """
            import torch

            class NoLoss:
                def __init__(self):
                    self.model = torch.nn.Linear(2, 2)
                def batches(self, window):
                    return [torch.zeros(1, 2)]
                def normaliser(self, batches):
                    return 1

            def raises(settings):
                raise RuntimeError("no GPU for this one")

            def lacks_loss(settings):
                return NoLoss()

            def all_frozen(settings):
                from benches.workloads.transformer import Workload

                made = Workload(settings)
                made.model.requires_grad_(False)
                return made

            not_callable = 3
            """
        )
    )
    (tmp_path / "zg_broken_workload.py").write_text("def workload(settings:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("examples.workloads.convnet", "MODULE:FACTORY"),
        ("zg_no_such_module:workload", "'zg_no_such_module'"),
        ("examples.workloads.convnet:nothing_here", "'nothing_here'"),
        ("zg_bad_workloads:not_callable", "not callable"),
        ("zg_bad_workloads:raises", "RuntimeError: no GPU for this one"),
        ("zg_bad_workloads:lacks_loss", "without loss"),
        ("zg_broken_workload:workload", "SyntaxError"),
        ("zg_bad_workloads:all_frozen", "no parameter that requires grad"),
    ],
)
def test_a_bad_workload_is_a_usage_error_of_one_line(spec, named, bad_workloads, capsys, tmp_path):
    code = cli.main(["run", *QUICK, "--workload", spec, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert named in err and spec.split(":")[0] in err, err
    assert not (tmp_path / "out").exists()


def test_the_protocol_checks_the_number_of_micro_batches():
    made = bound.build(CONVNET, protocol.Settings(device="cpu", accumulate=3))
    assert len(made.batches(0)) == 3
    made.settings = protocol.Settings(device="cpu", accumulate=2)
    with pytest.raises(protocol.WorkloadError, match="gave 3 micro-batches; valid: K = 2"):
        made.batches(0)


def test_the_engine_makes_the_ballast_of_a_workload_without_one():
    made = bound.build(CONVNET, protocol.Settings(device="cpu", live_tensors=5))
    assert len(made.ballast) == 5 and all(t.grad is not None for t in made.ballast)


def _sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benches", "run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "names"), [(CONVNET, ["lazy", "native"]), (GPT2, ["native"])])
def test_a_tiny_sweep_of_an_example_workload_checks_gradients(spec, names, tmp_path):
    # the GPT-2 one is what CI runs of transformers (the hf extra): its import is not skipped
    out = tmp_path / "run"
    done = _sweep(*QUICK, "--workload", spec, "--strategies", ",".join(names), "--memray",
                  "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(out)
    assert sorted(r["strategy"] for r in rows) == sorted(names)
    for row in rows:
        assert row["status"] == "ok" and row["workload"] == spec
        assert row["grad_check"]["ok"] and row["grad_check"]["windows"] == 3
        assert row["memory"]["held_bytes"] == (0 if row["strategy"] == "native" else
                                               row["memory"]["param_bytes"])  # fmt: skip
        assert row["memory"]["memray_flamegraph"] and row["memory"]["timeline"]["points"]
        assert row["cost_model"]["counts"]["windows"] == 1
    judged = json.loads((out / "verdicts.json").read_text())
    assert len(judged["comparisons"]) == 3 * (len(names) - 1)  # a pair per metric
    html = (out / "index.html").read_text()
    assert spec in html and 'id="chart-timeline"' in html


# -- memory over one window -------------------------------------------------------------------
@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_native_frees_gradients_between_windows_and_lazy_keeps_them(tmp_path):
    pytest.importorskip("memray")
    settings = protocol.Settings(device="cpu", accumulate=1, preset="tiny")
    made = bound.build(protocol.DEFAULT, settings)
    data = [(b, made.window_tokens(b)) for b in (made.batches(0), made.batches(1))]
    grads = sum(p.numel() * 4 for p in made.model.parameters())
    dip = {}
    for name in ("native", "lazy"):
        result = memory.memory_pass(made, name, data, tmp_path / f"{name}.bin")
        timeline = result["timeline"]
        labels = [label for label, _ in timeline["phases"]]
        assert labels == ["start", "reset", "forward 1", "backward 1", "update", "end"]
        points = timeline["points"]
        assert points[0][0] == 0.0 and all(0 <= t <= timeline["window_ms"] for t, _ in points)
        dip[name] = points[0][1] - min(level for _, level in points)  # below the start level
    # native drops the last window's gradients at its reset; lazy keeps them
    assert dip["native"] == pytest.approx(grads, rel=0.02), (dip, grads)
    assert dip["lazy"] < 0.02 * grads, (dip, grads)


# -- the cost model -----------------------------------------------------------------------------
def _counts(name: str, live: int = 0) -> tuple[dict, int, int]:
    made = bound.build(
        protocol.DEFAULT, protocol.Settings(device="cpu", accumulate=2, live_tensors=live)
    )
    runner = PairedRunner(made, name)
    batches = made.batches(0)
    tokens = made.window_tokens(batches)
    runner.strategy.window(batches, tokens)  # gradients exist: the next reset has work
    try:
        counts = costmodel.count(runner.strategy, batches, tokens)
    finally:
        runner.close()
    params = list(made.model.parameters())
    return counts, len(params), sum(p.numel() * p.element_size() for p in params)


def test_the_counts_are_what_each_strategy_does():
    block, params, nbytes = _counts("block")
    assert (block["launches"], block["bytes"], block["objects"]) == (params, nbytes, 0)
    foreach, _, _ = _counts("foreach")
    # one fused call, which the CPU runs as a loop of per-tensor kernels (CUDA: 1 per 110)
    assert (foreach["launches"], foreach["bytes"]) == (params, nbytes)
    native, _, _ = _counts("native")
    assert (native["launches"], native["bytes"], native["drops"]) == (0, 0, params)
    lazy, _, _ = _counts("lazy")
    assert (lazy["launches"], lazy["hook_calls"]) == (0, 2 * params)  # a hook per param, K=2
    # the suite freezes what it loaded (conftest: gc.freeze), which gc.get_objects no longer
    # lists: global's walk sees every object of the process only unfrozen, whatever ran before
    gc.unfreeze()
    try:
        scan, _, _ = _counts("global", live=300)
    finally:
        gc.freeze()
    # global zeroes the ballast too, and walks every object of the process
    assert scan["launches"] == params + 300 and scan["objects"] > 10_000


def test_the_model_explains_a_reset_it_counts_and_flags_one_it_does_not():
    coefficients = {
        "per_window_s": 0.0,
        "per_launch_s": 1e-6,
        "memset_bytes_per_s": 1e9,
        "per_object_s": 1e-7,
        "per_visit_s": 1e-8,
        "per_hook_call_s": 1e-6,
    }
    counts = {"launches": 100, "bytes": 0, "objects": 0, "visits": 0, "hook_calls": 0}
    predicted = costmodel.predict(counts, coefficients)
    assert predicted["reset_s"] == pytest.approx(1e-4)

    def summary(median):
        return {"median_s": median, "ci_low_s": median * 0.9, "ci_high_s": median * 1.1}

    assert summaries.judge_cost(predicted, summary(1.5e-4), summary(1.5e-4), counts)["explained"]
    judged = summaries.judge_cost(predicted, summary(1e-3), summary(1e-3), {**counts, "drops": 7})
    assert not judged["explained"] and "7 gradients dropped" in judged["flags"][0]


def test_calibration_gives_positive_coefficients():
    c = costmodel.calibrate(torch.device("cpu"))
    assert set(c) == {
        "per_launch_s",
        "memset_bytes_per_s",
        "per_object_s",
        "per_visit_s",
        "per_drop_s",
        "per_hook_call_s",
    }
    assert all(v >= 0 for v in c.values()) and c["per_launch_s"] > 0


def _mta_launches(numels, max_tensors, max_blocks):
    """multi_tensor_apply's loop (MultiTensorApply.cuh), chunk by chunk, counting its launches."""
    launches = tensors = blocks = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        chunks = -(-numel // costmodel.CHUNK_ELEMENTS)
        for chunk in range(chunks):
            blocks += 1
            last = chunk == chunks - 1
            if (tensors == max_tensors and last) or blocks == max_blocks:
                launches, blocks, tensors = launches + 1, 0, 0 if last else 1
    return launches + (blocks != 0)


def test_foreach_launches_hold_at_most_110_tensors_and_320_chunks():
    launches, chunk = costmodel.foreach_launches, costmodel.CHUNK_ELEMENTS
    assert launches([]) == 0 and launches([0, 0]) == 0  # empty tensors are skipped
    assert launches([1] * 110) == 1 and launches([1] * 111) == 2 and launches([1] * 221) == 3
    assert launches([1] * 110 + [0]) == 1 and launches([0] + [1] * 110) == 1
    assert launches([320 * chunk]) == 1 and launches([320 * chunk + 1]) == 2
    assert launches([1000 * chunk]) == 4  # 320 + 320 + 320 + 40 blocks
    # the first fills a launch's blocks exactly and is done; the second starts the next
    assert launches([319 * chunk, 1]) == 1 and launches([320 * chunk, 1]) == 2
    # the second is cut: one chunk in the first launch, one in the second
    assert launches([319 * chunk, 2 * chunk]) == 2
    # 106 tensors of 3 chunks fill 318 blocks; the 107th fills the rest and goes on, then 3 more
    assert launches([3 * chunk] * 110) == 2
    # 32 KB kernel arguments (torch built with CUDA 13): 770 tensors, 2240 blocks
    assert launches([1] * 771, 770, 2240) == 2 and launches([1] * 770, 770, 2240) == 1
    assert launches([2240 * chunk] * 2, 770, 2240) == 2
    assert launches([2240 * chunk + 1], 770, 2240) == 2


def test_foreach_launches_are_multi_tensor_apply_loops():
    import random

    rng = random.Random(0)
    chunk = costmodel.CHUNK_ELEMENTS
    for _ in range(2000):
        numels = [rng.choice([0, 1, chunk, chunk + 1, rng.randrange(1, 9 * chunk)])
                  for _ in range(rng.randrange(0, 12))]  # fmt: skip
        limits = rng.randrange(1, 5), rng.randrange(1, 7)
        assert costmodel.foreach_launches(numels, *limits) == _mta_launches(numels, *limits)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_foreach_zero_launches_are_the_kernels_cuda_runs():
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    chunk = costmodel.CHUNK_ELEMENTS
    sizes = [1] * 800 + [2241 * chunk + 5, 7, 321 * chunk, 0, 3]
    grads = [torch.ones(n, device="cuda", dtype=torch.bfloat16) for n in sizes]
    ops = costmodel._Ops()
    with ops:
        torch._foreach_zero_(grads)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch._foreach_zero_(grads)
        torch.cuda.synchronize()
    kernels = [
        e
        for e in prof.events()
        if e.device_type == DeviceType.CUDA and "multi_tensor_apply_kernel" in e.name
    ]
    assert ops.launches == len(kernels) > 1
    assert all(g.count_nonzero() == 0 for g in grads)


@pytest.fixture
def undeclared(tmp_path, monkeypatch):
    """The convnet example's factory without its ``honours``, and one whose declaration is a
    string (a name, not a tuple of names)."""
    (tmp_path / "zg_undeclared.py").write_text(
        textwrap.dedent(
            """
            from examples.workloads.convnet import ConvWorkload

            def workload(settings):
                return ConvWorkload(settings)

            def as_text(settings):
                return ConvWorkload(settings)

            as_text.honours = "preset"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("zg_undeclared:workload", "--preset tiny: the workload 'zg_undeclared:workload' does "
         "not honour preset (it declares honours = ()"),
        ("zg_undeclared:as_text", "honours = 'preset'; valid: a tuple of setting names"),
    ],
)  # fmt: skip
def test_a_setting_the_workload_does_not_declare_is_refused(spec, named, undeclared, capsys):
    out = undeclared / "out"
    code = cli.main(["run", *QUICK, "--workload", spec, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and named in err, err
    assert not out.exists()
    # not given, the setting is the workload's business: the sweep takes it
    argv = [a for a in QUICK if a not in ("--preset", "tiny")]
    again = ["run", *argv, "--workload", spec, "--out", str(undeclared / "again")]
    sweep = cli.resolve(cli.build_parser().parse_args(again))
    assert sweep.workload == spec


def test_the_reference_and_the_examples_declare_what_they_honour():
    from benches.workloads import protocol

    both = ("preset", "checkpointing")
    for spec, honours in (
        (protocol.DEFAULT, both),
        (GPT2, both),
        (CONVNET, ("preset",)),
        ("examples.workloads.mixtral:workload", ("preset",)),
    ):
        assert protocol.honoured(protocol.load(spec), spec) == honours


@pytest.mark.slow  # a real sweep of every strategy, about 30 s: nox -s slow (CI) runs it
def test_a_lora_fine_tune_with_checkpointing_runs_every_strategy_with_its_gradient_check(tmp_path):
    """A fine-tune as people run one, code no one here wrote: peft's LoRA adapters on a
    transformers Llama (examples/workloads/lora.py), its base frozen by peft (requires_grad
    False), transformers' own activation checkpointing on, K=2. Every built-in strategy's case
    is ok, its gradient check passed against the trainable parameters' reference, a frozen
    weight is never held, and the rows and the page say how many parameters are trainable."""
    pytest.importorskip("peft")
    out = tmp_path / "out"
    done = _sweep(*QUICK, "--workload", LORA, "--checkpointing", "on", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(out)
    assert {r["strategy"] for r in rows} == set(strategies.BUILTIN)
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["grad_check"]["ok"] and r["checkpointing"] == "on"
        assert 0 < r["trainable_params"] < r["params"] / 50
        # a strategy holds at most two copies of the adapters' gradients, never the base's
        assert r["memory"]["held_bytes"] <= 2 * 4 * r["trainable_params"]
    assert "trainable: the rest frozen" in (out / "index.html").read_text()


def test_checkpointing_a_workload_does_not_declare_is_refused(capsys, tmp_path):
    code = cli.main(
        ["run", *QUICK, "--workload", CONVNET, "--checkpointing", "off,on", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "--checkpointing off,on: the workload" in err and "does not honour checkpointing" in err
    assert not any(tmp_path.iterdir())


def test_an_unknown_checkpointing_value_is_refused_naming_the_valid_ones(capsys, tmp_path):
    code = cli.main(["run", *QUICK, "--checkpointing", "maybe", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "'maybe'" in err and "off" in err, err


def test_a_checkpointed_layer_keeps_less_and_gives_the_same_gradient():
    """The reference transformer with checkpointing on: the same window gradient (its layers'
    forward recomputed in the backward, the same arithmetic), and fewer bytes held for the
    backward (torch.autograd.graph.saved_tensors_hooks counts what autograd keeps)."""
    from benches.engine import gradients
    from benches.workloads.transformer import Workload

    def window(checkpointing: str):
        made = Workload(preset="tiny", device="cpu", accumulate=2, checkpointing=checkpointing)
        batches = made.batches(0)
        tokens = made.window_tokens(batches)
        kept = []

        def pack(t):
            kept.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            grads = gradients.reference_grads(made, batches, tokens, sum_dtype=None)
        return grads, sum(kept)

    off, kept_off = window("off")
    on, kept_on = window("on")
    assert set(off) == set(on)
    for name in off:
        torch.testing.assert_close(on[name], off[name], rtol=1e-5, atol=1e-7)
    assert kept_on < kept_off / 2, (kept_on, kept_off)
