"""The reference of ``total_error`` (``gradients.model_reference``): a float64 copy of the model
in chunks of each micro-batch's samples, equal to the whole micro-batch's; whole micro-batches
where the samples couple; an fp32 copy where an operator has no float64 kernel, named in the row
and on the page; a reference that cannot run is one line saying so."""

from __future__ import annotations

import collections
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from synthetic import by_id, standard_rows, write_run
from torch import nn

from benches.engine import bound, gradients
from benches.engine.replicas import replica
from benches.workloads import protocol
from benches.workloads.transformer import Batch
from reports.page import build
from reports.schema.row_parts import given

ROOT = Path(__file__).resolve().parent.parent
#: chunks add the same float64 terms in another order: a sum of n terms moves by at most
#: n u relative (u = 2^-53; n, the tokens and widths one gradient element adds, below 1e4)
REORDERED = 1e4 * 2.0**-53


def worst(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> float:
    assert set(got) == set(expected)
    return max(
        ((got[n].double() - e.double()).abs().max() / e.double().abs().max()).item()
        for n, e in expected.items()
    )


def reference_workload(accumulate: int = 2) -> bound.Bound:
    settings = protocol.Settings(device="cpu", accumulate=accumulate, preset="tiny", threads=1)
    return bound.build(protocol.DEFAULT, settings)


def test_chunks_of_each_micro_batch_add_up_to_the_whole_micro_batch():
    workload = reference_workload()
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    copy64 = replica(workload.model).to(torch.float64)
    chunked, why = gradients.reference_in_chunks(workload, batches, tokens, copy64)
    whole, _ = gradients.reference_in_chunks(workload, batches, tokens, copy64, chunks=1)
    assert why is None and all(p.grad is None for p in copy64.parameters())
    assert 0 < worst(chunked, whole) <= REORDERED  # another order, the same sum
    # and what the reference was before chunks: autograd.grad of whole micro-batches
    before = gradients.reference_grads(workload, batches, tokens, copy64, precision="fp32")
    assert worst(chunked, before) <= REORDERED
    # 4 chunks for fp32 weights; a bf16 case's window is half as wide again: 8
    assert gradients.reference_chunks(workload.model) == 4
    assert gradients.reference_chunks(replica(workload.model).bfloat16()) == 8
    named, row = gradients.model_reference(workload, batches, tokens, workload.model)
    assert row == "float64 model" and worst(named, whole) <= REORDERED
    # an fp32 copy sums its chunks' gradients in float64: fp32 rounding of the passes only
    copy32 = replica(workload.model)
    in_fp32, _ = gradients.reference_in_chunks(workload, batches, tokens, copy32)
    assert all(v.dtype == torch.float64 for v in in_fp32.values())
    assert worst(in_fp32, whole) < 1e-4


def test_split_cuts_every_tensor_by_its_samples_and_keeps_the_rest():
    batch = reference_workload(1).batches(0)[0]
    assert gradients.samples(batch) == 8
    parts = gradients.split(batch, 3)  # 8 samples: chunks of 3, 3, 2
    assert [p.src.shape[0] for p in parts] == [3, 3, 2]
    assert all(isinstance(p, Batch) and p.n_tokens == batch.n_tokens for p in parts)
    assert torch.equal(torch.cat([p.tgt_out for p in parts]), batch.tgt_out)
    ids = torch.arange(12).reshape(6, 2)
    Pair = collections.namedtuple("Pair", "ids labels")
    for kind in ({"ids": ids, "scale": 2.0}, (ids, ids[:, 0]), Pair(ids, ids[:, 0]), ids):
        parts = gradients.split(kind, 4)
        assert len(parts) == 3 and type(parts[0]) is type(kind), kind
    assert gradients.split({"ids": ids, "scale": 2.0}, 4)[1]["scale"] == 2.0
    # nothing to cut: one sample, tensors that share no first dimension, an unknown object
    assert gradients.split(ids[:1], 4) is None
    assert gradients.samples((ids, torch.zeros(3))) is None
    assert gradients.samples(object()) is None and gradients.split(object(), 4) is None


@dataclasses.dataclass
class Coupled:
    """A workload whose batch statistics couple its samples (BatchNorm in training)."""

    model: nn.Module
    settings: protocol.Settings

    def batches(self, window: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        gen = torch.Generator().manual_seed(window)
        return [
            (torch.randn(8, 4, generator=gen), torch.randint(0, 3, (8,), generator=gen))
            for _ in range(self.settings.accumulate)
        ]

    def normaliser(self, batches) -> int:
        return sum(len(y) for _, y in batches)

    def loss(self, batch, normaliser: float, module: nn.Module) -> torch.Tensor:
        x, y = batch
        x = x.to(next(module.parameters()).dtype)
        return F.cross_entropy(module(x), y, reduction="sum") / normaliser


def test_samples_that_couple_run_in_whole_micro_batches():
    settings = protocol.Settings(device="cpu", accumulate=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    workload = bound.Bound(Coupled(model, settings), settings)
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    grads, name = gradients.model_reference(workload, batches, tokens, workload.model)
    assert name.startswith("float64 model (whole micro-batches: its chunks' losses add up to")
    whole, _ = gradients.reference_in_chunks(
        workload, batches, tokens, replica(workload.model).double(), chunks=1
    )
    assert worst(grads, whole) == 0.0


class Opaque:
    """A batch the engine cannot look into (neither a tensor, a container nor a dataclass)."""

    def __init__(self, pair) -> None:
        self.pair = pair


@dataclasses.dataclass
class OpaqueBatches(Coupled):
    def batches(self, window: int) -> list[Opaque]:
        return [Opaque(pair) for pair in super().batches(window)]

    def normaliser(self, batches) -> int:
        return sum(len(b.pair[1]) for b in batches)

    def loss(self, batch, normaliser: float, module: nn.Module) -> torch.Tensor:
        return super().loss(batch.pair, normaliser, module)


def test_a_batch_that_does_not_split_runs_whole_and_says_so():
    settings = protocol.Settings(device="cpu", accumulate=2)
    torch.manual_seed(0)
    workload = bound.Bound(OpaqueBatches(nn.Linear(4, 3), settings), settings)
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    grads, name = gradients.model_reference(workload, batches, tokens, workload.model)
    why = "its micro-batch does not split into samples"
    assert name == f"float64 model (whole micro-batches: {why})"
    before = gradients.reference_grads(
        workload, batches, tokens, replica(workload.model).double(), precision="fp32"
    )
    assert worst(grads, before) == 0.0


class GroupedExperts(nn.Module):
    """Two experts through ``torch._grouped_mm``, which has no float64 kernel (torch 2.13)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 4, 4) / 2)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # each sample to an expert by its own first feature, as a router does per token
        second = x[:, 0] > 0
        order = torch.argsort(second.int(), stable=True)
        offs = torch.stack([(~second).sum(), second.new_tensor(len(x), dtype=torch.long)])
        out = torch._grouped_mm(x[order], self.weight, offs=offs.int())
        return self.head(torch.empty_like(out).index_copy(0, order, out))


class Raising(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no kernel for this one\nin any dtype")


def linear_workload(model: nn.Module) -> bound.Bound:
    settings = protocol.Settings(device="cpu", accumulate=2)
    return bound.Bound(Coupled(model, settings), settings)


def test_an_operator_without_a_float64_kernel_falls_back_to_an_fp32_model_named_so():
    torch.manual_seed(0)
    workload = linear_workload(GroupedExperts())
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    with pytest.raises(RuntimeError, match="got Double"):  # why: no float64 kernel
        workload.loss(batches[0], tokens, replica(workload.model).double())
    grads, name = gradients.model_reference(workload, batches, tokens, workload.model)
    assert name == "fp32 model (no float64 kernel: aten._grouped_mm)"
    # the plain loop's arithmetic in fp32 (whole micro-batches, summed in float64)
    plain = gradients.reference_grads(workload, batches, tokens, precision="fp32")
    assert worst(grads, plain) < 1e-5


def test_a_reference_that_cannot_run_is_one_line_saying_so():
    workload = linear_workload(Raising())
    batches = workload.batches(0)
    with pytest.raises(gradients.GradientCheckError) as raised:
        gradients.model_reference(workload, batches, 16.0, workload.model)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("the gradient check's reference failed: a float64 copy")
    assert "RuntimeError: no kernel for this one" in message and "an fp32 copy" in message


def test_the_page_says_which_model_total_error_is_against(tmp_path):
    rows = standard_rows(ns=(0,), ks=(1,))
    stood_in = "fp32 model (no float64 kernel: aten._grouped_mm)"
    for row in rows:
        if row["strategy"] == "lazy":
            row["grad_check"]["total_reference"] = stood_in
        elif row["strategy"] == "block":
            row["grad_check"]["total_reference"] = "float64 model"
        # the others: rows written before the reference was named
    html = build.build(write_run(tmp_path / "run", rows)).read_text()
    section = by_id(html, "accumulation-error")
    assert section.count(f"vs {stood_in}") == 1  # lazy's line; float64 needs no note
    assert "an fp32 copy with no\nstrategy stands in" in section


@pytest.mark.slow  # about 100 s on two cores: the big preset's model is built, for its data
def test_the_big_presets_float64_reference_peaks_below_its_fp32_window():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import reference_memory
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    found = reference_memory.estimate("big")
    assert found["chunks"] == gradients.REFERENCE_CHUNKS == 4
    total = {name: peak["Total"] for name, peak in found["peaks"].items()}
    print(json.dumps({name: round(value / 2**30, 2) for name, value in total.items()}))
    assert total["float64 reference"] <= total["fp32 window"] < total["float64 before"]


def test_strategies_sharing_a_process_share_a_windows_references_only_at_the_same_weights():
    """``gradients.References``: the second strategy's check reuses the first one's references
    wherever its replica holds bitwise the same weights (the first window at least), and its
    figures are the ones it gets alone; a replica with other weights computes its own."""
    from benches.engine import training
    from benches.engine.replicas import fresh_replica
    from benches.engine.runner import Loop

    workload = reference_workload()
    data = []
    for window in range(gradients.CHECK_WINDOWS):
        batches = workload.batches(window)
        data.append((batches, workload.window_tokens(batches)))
    tolerance = training.grad_tolerance("fp32", 2)

    def check(name: str, cache=None, nudge: bool = False):
        loop = Loop(workload, fresh_replica(workload.model, None), name)
        if nudge:  # other weights: no reference of the cache is theirs
            with torch.no_grad():
                next(loop.model.parameters()).add_(1e-3)
        try:
            return gradients.check_windows(loop, workload, data, data, tolerance, None, cache)
        finally:
            loop.close()

    cache = gradients.References()
    check("native", cache)
    assert cache.reused == 0 and set(cache.windows) == set(range(gradients.CHECK_WINDOWS))
    shared, alone = check("block", cache), check("block")
    assert 1 <= cache.reused <= gradients.CHECK_WINDOWS
    assert given(shared[0]) == given(alone[0])
    assert {k: given(v) for k, v in shared[1].items()} == {k: given(v) for k, v in alone[1].items()}
    before = cache.reused
    nudged = check("block", cache, nudge=True)
    assert cache.reused == before and nudged[0].ok
