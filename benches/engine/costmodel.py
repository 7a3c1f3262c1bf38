"""A cost model of each strategy's cost per window, calibrated in the case's own process.

    predicted reset = per window + launches x per launch + bytes / memset bandwidth
                      + objects scanned x per object + gradients visited x per visit
                      + gradients dropped x per drop
    predicted hooks = hook calls x per hook call

The coefficients come from microbenchmarks on the same device in the same process (``calibrate``):
N ``zero_`` of one element (a launch), one cold ``zero_`` of 32 MiB (bandwidth), a
``gc.get_objects()`` scan as ``global`` does it (per object), a Python loop reading ``.grad``
(per visit), freeing 64 KiB tensors (per drop), and a no-op AccumulateGrad pre-hook (per
call); the cost per window of the loop and clock around the reset is measured in place, as the
plain loop's reset phase in the same timed pairs (no strategy work). The counts come from one
instrumented window of the case's own strategy, off the clock (``count``): kernel launches of
the aten ops dispatched during reset and finish and the bytes they wrote (a TorchDispatchMode;
a ``_foreach_`` op is one launch per tensor on CPU, and on CUDA as many as
``multi_tensor_apply`` chunks its tensors into: ``foreach_launches``), ``.grad`` reads and
writes and gradients set to None (a TorchFunctionMode), the objects of a ``gc.get_objects()``
call, and the calls of pre-hooks registered through ``strategies._hooks`` during backward (each
node's hooks times the times it fired).

The row keeps the counts, the coefficients and the prediction; what the timed pairs measured
against it (the reset phase, the paired cost per window) is judged in the reports, from the
row's samples, when the row is read (ARCHITECTURE.md: the engine records, the reports
summarise).
"""

from __future__ import annotations

import functools
import gc
import statistics
import sys

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from benches.engine.replicas import local

MEMSET_BYTES = 32 * 2**20
LAUNCHES = 2000
VISITS = 2000
DROPS, DROP_BYTES = 64, 64 * 2**10  # gradients dropped to None (set_to_none): each freed
HOOK_LEAVES = 64
#: CUDA ``multi_tensor_apply`` (aten/src/ATen/native/cuda/MultiTensorApply.cuh): a launch holds
#: at most this many tensors and blocks, a block one chunk of a tensor. The limits by the number
#: of tensor lists (depth 1-5) fit the kernel's 4 KB argument, or the 32 KB argument's larger
#: ones where torch launches those (``_argument_size`` looks).
CHUNK_ELEMENTS = 65536  # kChunkSize
MAX_TENSORS = {"4KB": (110, 64, 48, 36, 30), "32KB": (770, 448, 336, 252, 210)}
MAX_BLOCKS = {"4KB": 320, "32KB": 2240}


# -- calibration ------------------------------------------------------------------------------
class _Timer:
    """Median seconds of ``fn()`` over ``repeat`` runs, on the windows' own clock (CUDA: events
    on the stream, one synchronisation per run)."""

    def __init__(self, device: torch.device) -> None:
        from benches.engine.runner import Clock

        self.clock = Clock(device)

    def __call__(self, fn, repeat: int = 5, warm: bool = True) -> float:
        clock = self.clock
        if warm:
            fn()
        out = []
        for _ in range(repeat):
            start = clock.mark()
            fn()
            end = clock.mark()
            clock.settle(end)
            out.append(clock.seconds(start, end))
        return statistics.median(out)


def calibrate(device: torch.device) -> dict[str, float]:
    """The model's coefficients on this device, now, in this process (all but ``per_window_s``:
    the case measures that in place, as the plain loop's reset phase)."""
    timer = _Timer(device)
    one = torch.zeros(1, device=device)
    big = torch.empty(MEMSET_BYTES // 4, device=device)
    evict = torch.empty(2 * MEMSET_BYTES // 4, device=device)

    def memset() -> float:
        """Seconds of one cold ``zero_`` of MEMSET_BYTES: caches evicted first, as a reset
        finds gradients after a forward and a backward have been through the caches."""
        out = []
        for _ in range(3):
            evict.fill_(1.0)
            out.append(timer(big.zero_, repeat=1, warm=False))
        return statistics.median(out)

    drops = [torch.empty(DROP_BYTES // 4, device=device) for _ in range(DROPS)]

    def drop() -> None:
        while drops:
            drops.pop()

    def launches() -> None:
        for _ in range(LAUNCHES):
            one.zero_()

    tensors = [torch.zeros(1, requires_grad=True) for _ in range(VISITS)]

    def visits() -> None:
        for t in tensors:
            if t.grad is not None:
                pass

    objects = len(gc.get_objects())

    def scan() -> None:
        for obj in gc.get_objects():
            if issubclass(type(obj), torch.Tensor) and obj.is_leaf:
                pass

    return {
        "per_launch_s": timer(launches) / LAUNCHES,
        "memset_bytes_per_s": MEMSET_BYTES / memset(),
        "per_drop_s": timer(drop, repeat=1, warm=False) / DROPS,
        "per_object_s": timer(scan, repeat=1, warm=False) / objects,  # the costliest: once
        "per_visit_s": timer(visits) / VISITS,
        "per_hook_call_s": _per_hook_call(device, timer),
    }


def _per_hook_call(device: torch.device, timer: _Timer) -> float:
    from strategies import _hooks

    leaves = [torch.zeros(4, device=device, requires_grad=True) for _ in range(HOOK_LEAVES)]

    def backward() -> None:
        sum(leaf.sum() for leaf in leaves).backward()

    without = timer(backward, repeat=9)
    handles = [_hooks.register_prehook(leaf, lambda grads: None) for leaf in leaves]
    try:
        with_hooks = timer(backward, repeat=9)
    finally:
        for _, handle in handles:
            handle.remove()
    return max(with_hooks - without, 0.0) / HOOK_LEAVES


# -- counting ---------------------------------------------------------------------------------
def foreach_launches(numels: list[int], max_tensors: int = 110, max_blocks: int = 320) -> int:
    """Kernel launches of one ``multi_tensor_apply`` over tensors of these sizes, as it chunks
    them: a launch when its blocks are full (a tensor cut there goes on into the next launch) or
    when ``max_tensors`` tensors have all their chunks in it; empty tensors are skipped."""
    launches = tensors = blocks = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        full, blocks = divmod(blocks + -(-numel // CHUNK_ELEMENTS), max_blocks)
        launches += full
        if full:  # launched with its blocks full: the tensor goes on in the next one, if unfinished
            tensors = 1 if blocks else 0
        if tensors == max_tensors:  # full of whole tensors
            launches, tensors, blocks = launches + 1, 0, 0
    return launches + (blocks > 0)


@functools.cache
def _argument_size(device: torch.device) -> str:
    """Which of multi_tensor_apply's limits torch uses on ``device``, seen rather than assumed:
    one ``_foreach_zero_`` over one tensor more than the 4 KB argument holds is one kernel with
    the 32 KB argument, two without. Which one runs is torch's choice at build and at run time
    (its release, the CUDA runtime, the driver, the GPU): torch 2.11 built with CUDA 13 launched
    the 4 KB kernels on an H200. Where the profiler cannot count, the build's guess (CUDA 13 or
    later, not ROCm: 32 KB)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    probe = [torch.zeros(1, device=device) for _ in range(MAX_TENSORS["4KB"][0] + 1)]
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch._foreach_zero_(probe)
            torch.cuda.synchronize(device)
        kernels = sum(
            e.device_type == DeviceType.CUDA and "multi_tensor_apply_kernel" in e.name
            for e in prof.events()
        )
    except RuntimeError:  # another profiler running, or none built in
        kernels = 0
    if kernels in (1, 2):
        return "32KB" if kernels == 1 else "4KB"
    cuda = torch.version.cuda
    large = cuda is not None and int(cuda.split(".")[0]) >= 13 and torch.version.hip is None
    return "32KB" if large else "4KB"


def _launches(func, args) -> int:
    """Kernel launches of one aten op: one, but a ``_foreach_`` op over n tensors is n on CPU (a
    loop of per-tensor kernels) and on CUDA as multi_tensor_apply chunks its tensor lists (its
    list arguments, and its outputs when not in place: the depth). Not modelled, as no reset
    or finish runs them: ``_foreach_norm``'s second kernel, scalar lists' 96 tensors at depth 1."""
    if not func.__name__.startswith("_foreach_") or not args or not isinstance(args[0], list):
        return 1
    tensors = [local(t) for t in args[0]]  # a DTensor shard: this rank's elements
    if not tensors or tensors[0].device.type != "cuda":
        return len(tensors)
    if len({t.dtype for t in tensors}) > 1:  # torch's slow path: a kernel per tensor
        return len(tensors)
    schema = func._schema
    depth = sum(str(a.type) == "List[Tensor]" for a in [*schema.arguments, *schema.returns])
    size = _argument_size(tensors[0].device)
    numels = [t.numel() for t in tensors]
    return foreach_launches(numels, MAX_TENSORS[size][min(depth, 5) - 1], MAX_BLOCKS[size])


class _Ops(TorchDispatchMode):
    """aten ops dispatched (a launch each on CUDA) and the bytes of the tensors they wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.launches = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.launches += _launches(func, args)
        schema = func._schema
        for argument, value in zip(schema.arguments, args, strict=False):
            if argument.alias_info is not None and argument.alias_info.is_write:
                for t in value if isinstance(value, list | tuple) else [value]:
                    if isinstance(t, torch.Tensor):
                        t = local(t)  # a DTensor shard: this rank's bytes
                        self.bytes += t.numel() * t.element_size()
        return func(*args, **(kwargs or {}))


_GRAD = torch.Tensor.grad


class _Visits(TorchFunctionMode):
    """Reads and writes of a tensor's ``.grad``: the Python objects a strategy's loop visits."""

    def __init__(self) -> None:
        super().__init__()
        self.visits = 0
        self.drops = 0  # a gradient set to None: freed now, allocated again by the next backward

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__self__", None) is _GRAD:  # Tensor.grad.__get__ / __set__
            self.visits += 1
            if func.__name__ == "__set__" and args[1] is None and args[0].grad is not None:
                self.drops += 1
        return func(*args, **(kwargs or {}))


class _Scans:
    """Whether ``gc.get_objects()`` was called (a profile hook on this thread), and how many
    objects such a call walks now."""

    def __init__(self) -> None:
        self.calls = 0

    def __enter__(self) -> _Scans:
        def profile(frame, event, arg) -> None:
            if event == "c_call" and arg is gc.get_objects:
                self.calls += 1

        self._previous = sys.getprofile()
        sys.setprofile(profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._previous)

    @property
    def objects(self) -> int:
        return self.calls * len(gc.get_objects()) if self.calls else 0


def count(loop, batches, tokens: float) -> dict[str, int]:
    """One instrumented window of ``loop``'s strategy (off the clock; no optimizer step)."""
    from strategies import _hooks

    collector = loop.collector
    ops, visits, scans = _Ops(), _Visits(), _Scans()
    with ops, visits, scans:
        collector.__enter__()
    fired: dict[int, int] = {}

    def counter(key: int):
        def fire(grads) -> None:
            fired[key] = fired.get(key, 0) + 1

        return fire

    counters = [
        _hooks.grad_accumulator(p).register_prehook(counter(id(p))) for p in collector.params
    ]
    try:
        for batch in collector.micro_batches(batches):
            collector.backward(loop.loss(batch, tokens))
    finally:
        for handle in counters:
            handle.remove()
    with ops, visits, scans:
        collector.__exit__(None, None, None)
    hooks = sum(fired.get(id(p), 0) * _hooks.live_prehooks(p) for p in collector.params)
    return {
        "windows": 1,
        "launches": ops.launches,
        "bytes": ops.bytes,
        "objects": scans.objects,
        "visits": visits.visits,
        "drops": visits.drops,
        "hook_calls": hooks,
    }


# -- the model ----------------------------------------------------------------------------------
def predict(counts: dict[str, int], c: dict[str, float]) -> dict[str, float]:
    terms = {
        "per_window": c["per_window_s"],
        "launches": counts["launches"] * c["per_launch_s"],
        "bytes": counts["bytes"] / c["memset_bytes_per_s"],
        "objects": counts["objects"] * c["per_object_s"],
        "visits": counts["visits"] * c["per_visit_s"],
        "drops": counts.get("drops", 0) * c.get("per_drop_s", 0.0),
    }
    reset = sum(terms.values())
    hooks = counts["hook_calls"] * c["per_hook_call_s"]
    return {"reset_s": reset, "hooks_s": hooks, "total_s": reset + hooks, "reset_terms_s": terms}
