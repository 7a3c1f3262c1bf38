"""The public API of ``strategies``: registry, collector protocol, and every error it names."""

from __future__ import annotations

import sys
import textwrap
import warnings

import pytest
import torch
from conftest import loss_of, make_batches, make_model

import strategies
from strategies import registry

REQUIRED = {"global", "block", "native", "lazy", "foreach", "flat"}


def one_line(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_available_lists_the_required_strategies():
    assert set(strategies.available()) >= REQUIRED
    assert strategies.available() == sorted(strategies.available())


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_get_returns_a_fresh_strategy(name):
    first, second = strategies.get(name), strategies.get(name)
    assert isinstance(first, strategies.Strategy) and first is not second
    assert first.name == name


def test_get_unknown_names_the_valid_ones():
    with pytest.raises(ValueError) as excinfo:
        strategies.get("nope")
    message = one_line(excinfo)
    assert "'nope'" in message and all(name in message for name in REQUIRED)


def test_get_unknown_option_names_the_valid_ones():
    with pytest.raises(ValueError) as excinfo:
        strategies.get("native", set_to_nothing=True)
    assert "'set_to_nothing'" in one_line(excinfo) and "set_to_none" in str(excinfo.value)


def test_native_set_to_none_option():
    model = make_model()
    for set_to_none in (True, False):
        collector = strategies.GradientCollector(
            model, strategy=strategies.get("native", set_to_none=set_to_none)
        )
        with collector:
            collector.backward(loss_of(model, make_batches(1)[0]))
        with collector:  # reset only
            grads = [p.grad for n, p in model.named_parameters() if "side" not in n]
        if set_to_none:
            assert all(g is None for g in grads)
        else:
            assert all(g is not None and not g.any() for g in grads)
        collector.close()


class Doubling(strategies.Strategy):
    """A test strategy: zeroes like block, counts its hooks."""

    def __init__(self, label: str = "x") -> None:
        self.label = label
        self.calls: list[str] = []

    def attach(self, collector):
        self.calls.append("attach")

    def reset(self, collector):
        self.calls.append("reset")
        for p in collector.params:
            if p.grad is not None:
                p.grad.zero_()

    def finish(self, collector):
        self.calls.append("finish")

    def detach(self, collector):
        self.calls.append("detach")


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made by a test vanish after it: later tests see the real registry."""
    monkeypatch.setattr(registry, "_factories", dict(registry._factories))
    monkeypatch.setattr(registry, "_entry_points", dict(registry._entry_points))


def test_register_a_subclass_and_a_factory(scratch_registry):
    strategies.register("test-subclass", Doubling)
    strategies.register("test-factory", lambda **options: Doubling(**options))
    assert {"test-subclass", "test-factory"} <= set(strategies.available())
    strategy = strategies.get("test-subclass", label="y")
    assert strategy.label == "y" and strategy.name == "test-subclass"
    assert strategies.get("test-factory").name == "test-factory"
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=strategy)
    for _ in range(2):
        with collector:
            collector.backward(loss_of(model, make_batches(1)[0]))
    collector.close()
    assert strategy.calls == ["attach", "reset", "finish", "reset", "finish", "detach"]


def test_register_rejects_bad_names(scratch_registry):
    with pytest.raises(ValueError):
        strategies.register("", Doubling)
    with pytest.raises(ValueError):
        strategies.register("a,b", Doubling)
    with pytest.raises(ValueError):
        strategies.register("ok", 42)


def test_entry_point_group_is_discovered(tmp_path, monkeypatch, scratch_registry):
    (tmp_path / "zg_ep_plugin.py").write_text(
        textwrap.dedent(
            """
            from strategies.block import BlockStrategy

            class PluginStrategy(BlockStrategy):
                name = ""
            """
        )
    )
    dist = tmp_path / "zg_ep_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zg-ep-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[zerograd.strategies]\nfrom-entry-point = zg_ep_plugin:PluginStrategy\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    assert "from-entry-point" in strategies.available()
    assert "zg_ep_plugin" not in sys.modules  # loaded only when asked for
    strategy = strategies.get("from-entry-point")
    assert type(strategy).__name__ == "PluginStrategy" and strategy.name == "from-entry-point"


# -- errors of the collector ------------------------------------------------------------------
def test_unknown_strategy_in_collector():
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector(make_model(), strategy="zeroish")
    assert "'zeroish'" in one_line(excinfo) and "lazy" in str(excinfo.value)


def test_unknown_grad_req_mode():
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector(make_model(), grad_req="accumulate")
    message = one_line(excinfo)
    assert "'accumulate'" in message and "add, write, null" in message


def test_unknown_grad_req_name_and_mode_in_dict():
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector(make_model(), grad_req={"mlp.9.weight": "add"})
    message = one_line(excinfo)
    assert "'mlp.9.weight'" in message and "mlp.0.weight" in message
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector(make_model(), grad_req={"mlp.0.weight": "sum"})
    assert "'sum'" in one_line(excinfo) and "add, write, null" in str(excinfo.value)


def test_no_parameter_requiring_grad():
    model = make_model().requires_grad_(False)
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector(model)
    assert "requir" in one_line(excinfo)
    with pytest.raises(ValueError):
        strategies.GradientCollector([torch.zeros(3)])
    with pytest.raises(ValueError):
        strategies.GradientCollector([])


def test_bad_targets():
    leaf = torch.zeros(3, requires_grad=True)
    with pytest.raises(ValueError) as excinfo:
        strategies.GradientCollector([leaf * 2])
    assert "leaf" in one_line(excinfo)
    with pytest.raises(ValueError):
        strategies.GradientCollector([leaf, "weights"])
    with pytest.raises(ValueError):
        strategies.GradientCollector(42)


def test_backward_outside_a_window():
    model = make_model()
    collector = strategies.GradientCollector(model)
    with pytest.raises(RuntimeError) as excinfo:
        collector.backward(loss_of(model, make_batches(1)[0]))
    assert "window" in one_line(excinfo)


def test_step_inside_a_window():
    model = make_model()
    collector = strategies.GradientCollector(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with collector, pytest.raises(RuntimeError) as excinfo:
        collector.step(optimizer)
    assert "inside a window" in one_line(excinfo)


def test_nested_window():
    collector = strategies.GradientCollector(make_model())
    with collector, pytest.raises(RuntimeError) as excinfo, collector:
        pass
    assert "nest" in one_line(excinfo)
    with collector:  # the failed attempt left the collector usable
        pass


def test_second_backward_through_a_freed_graph():
    model = make_model()
    collector = strategies.GradientCollector(model)
    with collector:
        loss = loss_of(model, make_batches(1)[0])
        collector.backward(loss)
        with pytest.raises(RuntimeError) as excinfo:
            collector.backward(loss)
    assert "retain_graph=True" in one_line(excinfo)


def test_closed_collector_refuses_and_restores_null_parameters():
    model = make_model()
    collector = strategies.GradientCollector(model, grad_req={"norm.bias": "null"})
    assert not model.norm.bias.requires_grad
    collector.close()
    collector.close()  # idempotent
    assert model.norm.bias.requires_grad
    with pytest.raises(RuntimeError) as excinfo, collector:
        pass
    assert "closed" in one_line(excinfo)
    with pytest.raises(RuntimeError):
        collector.step(torch.optim.SGD(model.parameters(), lr=0.1))


def test_a_strategy_instance_is_adopted_once():
    strategy = strategies.get("block")
    first = strategies.GradientCollector(make_model(), strategy=strategy)
    with pytest.raises(ValueError):
        strategies.GradientCollector(make_model(), strategy=strategy)
    first.close()
    strategies.GradientCollector(make_model(), strategy=strategy).close()


def test_clip_norm_must_be_positive():
    model = make_model()
    collector = strategies.GradientCollector(model)
    with pytest.raises(ValueError) as excinfo:
        collector.step(torch.optim.SGD(model.parameters(), lr=0.1), clip_norm=-1)
    assert "-1" in one_line(excinfo)


def test_step_clips_through_the_strategy_hook():
    class Clips(Doubling):
        def clip_grad_norm(self, collector, max_norm):
            self.calls.append(("clip", collector, max_norm))
            return super().clip_grad_norm(collector, max_norm)  # the default: clip_grad_norm_

    model, strategy = make_model(), Clips()
    collector = strategies.GradientCollector(model, strategy=strategy)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with collector:
        collector.backward(loss_of(model, make_batches(1)[0]))
    assert collector.step(optimizer) is None and strategy.calls[-1] == "finish"
    grads = [p.grad.clone() for p in collector.params if p.grad is not None]
    expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    norm = collector.step(optimizer, clip_norm=0.25)
    assert strategy.calls[-1] == ("clip", collector, 0.25)
    torch.testing.assert_close(norm, expected)
    clipped = [p.grad for p in collector.params if p.grad is not None]
    torch.testing.assert_close(
        torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in clipped])),
        torch.tensor(0.25),
    )


# -- what each strategy does at reset ----------------------------------------------------------
def one_window(collector, model, seed=1):
    with collector:
        collector.backward(loss_of(model, make_batches(1, seed=seed)[0], use_side=True))


def test_lazy_reset_touches_no_gradient_memory():
    model = make_model()
    collector = strategies.GradientCollector(model, strategy="lazy")
    one_window(collector, model)
    kept = {n: (p.grad.data_ptr(), p.grad.clone()) for n, p in model.named_parameters()}
    with collector:  # reset only: the old values are still there, nothing was zeroed
        for n, p in model.named_parameters():
            assert p.grad.data_ptr() == kept[n][0] and torch.equal(p.grad, kept[n][1])
        collector.backward(loss_of(model, make_batches(1, seed=2)[0]))
    for n, p in model.named_parameters():  # persistent storage: the same buffers
        assert p.grad.data_ptr() == kept[n][0]


def test_lazy_recovers_when_someone_drops_the_gradients():
    model = make_model()
    collector = strategies.GradientCollector(model, strategy="lazy")
    one_window(collector, model)
    model.zero_grad(set_to_none=True)  # user code outside the collector
    tokens = make_batches(1, seed=3)[0]
    expected = torch.autograd.grad(loss_of(model, tokens), model.embed.weight)[0]
    with collector:
        collector.backward(loss_of(model, tokens))
    assert torch.equal(model.embed.weight.grad, expected)


def test_flat_gradients_share_one_buffer_and_survive_zero_grad():
    model = make_model()
    collector = strategies.GradientCollector(model, strategy="flat")
    storages = {p.grad.untyped_storage().data_ptr() for p in model.parameters()}
    assert len(storages) == 1
    (buffer,) = collector.strategy.buffers
    assert buffer.numel() == sum(p.numel() for p in model.parameters())
    one_window(collector, model)
    model.zero_grad(set_to_none=True)  # user code outside the collector drops the views
    one_window(collector, model, seed=2)
    assert {p.grad.untyped_storage().data_ptr() for p in model.parameters()} == storages
    assert buffer.abs().sum() > 0


def test_global_reaches_tensors_outside_any_collector_without_warnings():
    stray = torch.ones(4, requires_grad=True)
    stray.grad = torch.full((4,), 3.0)
    nonleaf = stray * 2  # reading .grad of a live non-leaf would warn
    model = make_model()
    collector = strategies.GradientCollector(model, strategy="global")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with collector:
            pass
    assert not caught, [str(w.message) for w in caught]
    assert torch.equal(stray.grad, torch.zeros(4)) and nonleaf.requires_grad


@pytest.mark.parametrize("name", ["block", "foreach", "global"])
def test_in_place_strategies_keep_gradient_storage(name):
    model = make_model()
    collector = strategies.GradientCollector(model, strategy=name)
    one_window(collector, model)
    pointers = [p.grad.data_ptr() for p in model.parameters()]
    with collector:
        assert all(not p.grad.any() for p in model.parameters())
    assert [p.grad.data_ptr() for p in model.parameters()] == pointers


def test_micro_batches_pass_through_without_ddp():
    collector = strategies.GradientCollector(make_model())
    assert collector.ddp is None and collector.fsdp == [] and collector.grad_sync == "last"
    assert list(collector.micro_batches(iter([1, 2, 3]))) == [1, 2, 3]
    collector.grad_sync = "every"  # no ranks: every flavour is the same
    assert list(collector.micro_batches(iter([1, 2, 3]))) == [1, 2, 3]


@pytest.mark.parametrize("flavour", ["scatter", "sometimes"])
def test_grad_sync_a_target_cannot_run_is_a_one_line_error(flavour):
    with pytest.raises(ValueError, match=f"'{flavour}'.*valid here: every, last") as info:
        strategies.GradientCollector(make_model(), grad_sync=flavour)
    assert "\n" not in str(info.value)
    assert ("HSDP" in str(info.value)) == (flavour == "scatter")


def test_grad_sync_cannot_change_inside_a_window():
    collector = strategies.GradientCollector(make_model())
    with collector, pytest.raises(RuntimeError, match="between windows"):
        collector.grad_sync = "every"
    assert collector.grad_sync == "last"


def test_a_refusing_strategy_leaves_the_target_untouched():
    class Refuses(strategies.Strategy):
        def attach(self, collector):
            raise ValueError("strategy 'refuses' cannot run here")

        def reset(self, collector):
            pass

    model = make_model()
    with pytest.raises(ValueError, match="refuses"):
        strategies.GradientCollector(model, strategy=Refuses(), grad_req={"norm.bias": "null"})
    assert model.norm.bias.requires_grad


def test_a_collector_dropped_without_close_leaves_no_prehook_count():
    """The cost model counts live pre-hooks by id(param): a dropped collector's count must go
    with it, or a new tensor that reuses the id inherits it."""
    import gc

    from strategies import _hooks

    before = dict(_hooks._LIVE)
    for _ in range(3):
        model = torch.nn.Linear(4, 4)
        collector = strategies.GradientCollector(model, strategy="lazy")
        assert _hooks.live_prehooks(model.weight) == 1
        del collector, model
        gc.collect()
    assert before == _hooks._LIVE


def test_a_collector_has_all_that_a_strategy_reads_of_it():
    """strategies.base.Collected names what a strategy may read; the collector has each."""
    from strategies.base import Collected

    collector = strategies.GradientCollector(torch.nn.Linear(2, 2), grad_req={"bias": "null"})
    assert set(Collected.__annotations__) == {
        "params", "named_params", "null_params", "grad_req", "module", "ddp", "fsdp",
    }  # fmt: skip
    for name in Collected.__annotations__:
        assert hasattr(collector, name), name
    assert [n for n, _ in collector.named_params] == ["weight"]
    assert collector.null_params[0] is collector.module.bias
    collector.close()
