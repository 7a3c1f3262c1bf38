"""Gradient collection on torch.distributed: 2 gloo ranks on the CPU, unequal tokens per rank."""

from __future__ import annotations

import json
import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

import strategies
from benches.engine.distributed import GRAD_SYNC

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
    pytest.mark.slow,  # gloo ranks in processes of their own
]
WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """Each rank's results: the strategies' windows, and a case's paired loops (``pair``)."""
    import dist_worker

    out = tmp_path_factory.mktemp("dist") / "rank"
    mp.spawn(
        dist_worker.run,
        args=(WORLD, free_port(), str(out), strategies.available()),
        nprocs=WORLD,
    )
    return per_rank(out, WORLD), per_rank(out, WORLD, ".pair")


def per_rank(out, world: int, part: str = "") -> list:
    return [json.loads(out.with_suffix(f"{part}.{rank}").read_text()) for rank in range(world)]


@pytest.fixture(scope="module")
def results(ddp_run):
    return ddp_run[0]


def cases(results, name, frozen: bool = False, checkpointing: str = "off"):
    return [
        c
        for per_rank in results
        for c in per_rank
        if c["strategy"] == name
        and c.get("frozen", False) == frozen
        and c.get("checkpointing", "off") == checkpointing
    ]


@pytest.mark.parametrize("name", strategies.available())
def test_every_strategy_gives_the_global_batch_gradient_or_refuses(results, name):
    found = cases(results, name)
    assert len(found) == 2 * WORLD  # with and without gradient_as_bucket_view, on each rank
    for case in found:
        assert "error" not in case, case.get("error")
        if "refused" in case:
            message = case["refused"]
            assert "\n" not in message and f"'{name}'" in message
            assert "gradient_as_bucket_view" in message
            continue
        # each rank's window equals the single-process gradient of the whole global batch
        assert case["max_rel_diff"] < 1e-5, case


@pytest.mark.parametrize("name", strategies.available())
def test_with_a_frozen_base_under_ddp_no_frozen_parameter_gets_a_gradient(results, name):
    """A fine-tune's shape under DDP (``dist_worker.freeze``: mixed requires_grad in one
    module): the trainable parameters get the global batch's gradient, a frozen one none."""
    found = cases(results, name, frozen=True)
    assert len(found) == WORLD
    for case in found:
        assert "error" not in case, case.get("error")
        if "refused" in case:  # main_grad refuses DDP whatever the parameters
            assert name == "main_grad", case["refused"]
            continue
        assert case["max_rel_diff"] < 1e-5, case
        assert case["frozen_with_grad"] == [], case


@pytest.mark.parametrize("name", strategies.available())
def test_with_checkpointing_on_under_ddp_every_strategy_gives_the_global_batch_gradient(
    results, name
):
    """Each layer's forward recomputed in the backward (--checkpointing on): the gradient hooks
    fire in another order; every strategy that runs under DDP still gives the global batch's
    gradient on each of the two ranks."""
    found = cases(results, name, checkpointing="on")
    assert len(found) == WORLD
    for case in found:
        assert "error" not in case, case.get("error")
        if "refused" in case:
            assert name == "main_grad", case["refused"]
            continue
        assert case["max_rel_diff"] < 1e-5, case


def test_only_flat_with_bucket_views_and_main_grad_refuse(results):
    refused = {(c["strategy"], c["bucket_view"]) for r in results for c in r if "refused" in c}
    # main_grad refuses DDP whatever the bucket views: the reducer reads .grad in backward
    assert refused == {("flat", True), ("main_grad", False), ("main_grad", True)}


def test_ranks_hold_unequal_tokens_and_local_normalisation_is_wrong(results):
    block = cases(results, "block")
    assert len({c["local_tokens"] for c in block}) == WORLD  # the pitfall needs unequal counts
    # dividing by each rank's own tokens (then DDP's average) is not the global-batch gradient
    assert all(c["local_norm_rel_diff"] > 1e-3 for c in block)


def test_no_sync_skips_the_all_reduce_until_the_last_micro_batch(results):
    import dist_worker

    for per_rank in results:
        for case in per_rank:
            if "allreduce_per_micro" not in case:
                continue
            counts = case["allreduce_per_micro"]
            k = dist_worker.K
            for window in range(len(counts) // k):
                micro = counts[window * k : (window + 1) * k]
                assert micro[:-1] == [0] * (k - 1) and micro[-1] >= 1, (case["strategy"], counts)


# -- FSDP2 and HSDP -------------------------------------------------------------------------------
SHARDED = {"fsdp2": (2,), "hsdp": (2, 2)}  # 2 ranks; 4 ranks as 2 replicas x 2 shards
# every strategy on FSDP2; on HSDP (4 ranks on CI's 2 cores) one in-place, the native and one
# that refuses: the flavours and their collectives are what HSDP adds
HSDP_STRATEGIES = ["block", "native", "lazy"]


@pytest.fixture(scope="module", params=sorted(SHARDED))
def sharded(request, tmp_path_factory):
    import dist_worker

    mesh = SHARDED[request.param]
    world = 1
    for size in mesh:
        world *= size
    out = tmp_path_factory.mktemp(request.param) / "rank"
    names = HSDP_STRATEGIES if request.param == "hsdp" else strategies.available()
    mp.spawn(
        dist_worker.run_sharded,
        args=(world, free_port(), str(out), names, mesh),
        nprocs=world,
    )
    return request.param, per_rank(out, world), per_rank(out, world, ".pair")


def test_under_fsdp2_every_strategy_gives_the_global_batch_gradient_or_refuses(sharded):
    kind, results_of, _ = sharded
    refused = set()
    for results in results_of:
        for case in results:
            if case["strategy"] is None:
                continue
            assert "error" not in case, case.get("error")
            if "refused" in case:
                message = case["refused"]
                assert "\n" not in message and f"'{case['strategy']}'" in message
                assert "FSDP2" in message
                refused.add(case["strategy"])
                continue
            # each rank's shard, gathered, equals the single-process global-batch gradient
            assert case["max_rel_diff"] < 1e-5, (kind, case)
    # lazy's and main_grad's hooks never run on sharded parameters; flat's views cannot be
    # DTensor shards
    assert refused == ({"lazy", "flat", "main_grad"} if kind == "fsdp2" else {"lazy"})


def test_under_fsdp2_with_mixed_requires_grad_no_frozen_parameter_gets_a_gradient(sharded):
    """FSDP2 and HSDP with a frozen base, trainable and frozen parameters in one FSDP group
    (``dist_worker.freeze``): every strategy that runs there gives the trainable parameters the
    global batch's gradient and a frozen one none."""
    kind, results_of, _ = sharded
    ran = set()
    for results in results_of:
        for case in results:
            if not case.get("frozen") or "refused" in case:
                continue
            assert "error" not in case, (kind, case.get("error"))
            assert case["max_rel_diff"] < 1e-5 and case["frozen_with_grad"] == [], (kind, case)
            ran.add(case["strategy"])
    assert ran >= {"native", "block"}, (kind, ran)


def test_reduce_scatters_per_window_and_group_are_k_for_every_and_one_for_last(sharded):
    import dist_worker

    kind, results_of, _ = sharded
    k = dist_worker.K
    # per FSDP group and window: (reduce-scatters, HSDP all-reduces across replicas)
    expected = {"every": (k, k), "scatter": (k, 1), "last": (1, 1)}
    seen = set()
    for results in results_of:
        for case in results:
            if not case.get("windows") or case["frozen"]:  # a frozen group scatters nothing
                continue
            scatters, allreduces = expected[case["grad_sync"]]
            seen.add(case["grad_sync"])
            for window in case["windows"]:
                # a silent no-op (deferring nothing, or never syncing) would break these
                assert window["reduce_scatter_per_group"] == [scatters], (kind, case)
                assert window["reduce_scatter"] == scatters * case["groups"], (kind, case)
                hsdp_allreduces = allreduces * case["groups"] if kind == "hsdp" else 0
                assert window["allreduce"] == hsdp_allreduces, (kind, case)
    assert seen == ({"every", "scatter", "last"} if kind == "hsdp" else {"every", "last"})


def test_a_sharded_target_refuses_grad_req_write_and_scatter_on_a_1d_mesh(sharded):
    kind, results_of, _ = sharded
    for results in results_of:
        refusals = next(c for c in results if c["strategy"] is None)
        assert "'write'" in refusals["write"] and "valid under FSDP2: add" in refusals["write"]
        if kind == "fsdp2":
            assert (
                "'scatter'" in refusals["scatter"]
                and "valid here: every, last" in (refusals["scatter"])
            )
        else:
            assert refusals["scatter"] is None


# -- both sides of a pair instrumented alike ---------------------------------------------------
def check_alike(kind: str, pairs_per_rank: list) -> None:
    """Every case's loops (the strategy's, the plain loop's, --compare-settings' other) carry
    the same hooks, each counting into its own tally, and count the same collectives."""
    for pairs in (p["pairs"] for p in pairs_per_rank):
        assert {(p["strategy"], p["grad_sync"]) for p in pairs} == {
            (name, flavour) for name in ("native",) for flavour in GRAD_SYNC[kind]
        }
        for pair in pairs:
            carried = pair["instrumentation"]
            assert carried["strategy"], (kind, pair)  # instrumented at all
            assert carried["plain"] == carried["strategy"] == carried["other"], (kind, pair)
            assert pair["same_code"], (kind, pair)
            # each loop its own tally: its own windows' collectives, the same on every side
            counts = {
                role: [(w["allreduce"], w["reduce_scatter"]) for w in windows]
                for role, windows in pair["windows"].items()
            }
            assert counts["plain"] == counts["strategy"] == counts["other"], (kind, pair)
            assert len(counts["plain"]) == 4 and min(map(sum, counts["plain"])) > 0, (kind, pair)


def test_under_ddp_both_replicas_of_a_pair_carry_the_same_comm_hook(ddp_run):
    _, pairs_per_rank = ddp_run
    check_alike("ddp", pairs_per_rank)
    hooks = pairs_per_rank[0]["pairs"][0]["instrumentation"]["plain"]
    # the counting hook on the plain loop's replica too, not DDP's built-in C++ all-reduce
    assert hooks == [
        {"comm_hook": "benches.engine.distributed.counted_allreduce", "state": "CollectiveCounter"}
    ]


def test_under_fsdp2_and_hsdp_both_replicas_carry_the_same_reduce_scatter(sharded):
    kind, _, pairs_per_rank = sharded
    check_alike(kind, pairs_per_rank)
    groups = pairs_per_rank[0]["pairs"][0]["instrumentation"]["plain"]
    assert len(groups) > 1  # every block and the root
    for group in groups:
        assert group["reduce_scatter"].endswith("CountedReduceScatter"), group
        hook = group["all_reduce_hook"]  # HSDP's all-reduces across replicas, counted
        counted = "benches.engine.distributed.CollectiveCounter.after_allreduce"
        assert hook == (counted if kind == "hsdp" else None), group


def test_a_case_refuses_a_pair_instrumented_differently(ddp_run):
    _, pairs_per_rank = ddp_run
    for pairs in pairs_per_rank:
        message = pairs["mismatch"]  # a strategy's loop beside a DDP replica without the hook
        assert message is not None and "\n" not in message
        assert "instrumented differently" in message and "counted_allreduce" in message


# -- each rank on its own device --------------------------------------------------------------
def test_each_rank_picks_its_own_local_device(monkeypatch):
    import torch

    from benches.engine import distributed

    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.local_device("cuda") == torch.device("cuda", 1)  # no GPU needed
    assert distributed.local_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed.local_device("cuda") == torch.device("cuda", 0)


def test_a_rank_without_its_gpu_is_one_line_naming_what_it_sees(monkeypatch):
    import torch

    from benches.engine import distributed

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    line = distributed.gpu_missing(torch.device("cuda", 3), 2)
    assert line and "\n" not in line
    assert "rank 3 of 4 needs GPU 3" in line and "sees 2 (CUDA_VISIBLE_DEVICES=4,5)" in line
    assert distributed.gpu_missing(torch.device("cuda", 1), 2) is None
    if not torch.cuda.is_available():  # a CPU build: init says so before torch's AttributeError
        with pytest.raises(ValueError, match="sees 0"):
            distributed.init(torch.device("cuda", 3))


@pytest.mark.cuda
def test_ddp_on_cuda_names_the_ranks_own_device():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from benches.workloads.transformer import Workload

    index = torch.cuda.device_count() - 1
    workload = Workload(preset="tiny", device=f"cuda:{index}")
    assert workload.device == torch.device("cuda", index)
    torch.cuda.set_device(index)
    assert Workload(preset="tiny", device="cuda").device.index == index  # the current device
