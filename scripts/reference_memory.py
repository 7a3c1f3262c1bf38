"""The gradient check's float64 reference against the case's own fp32 window: peak memory,
estimated on the CPU with FakeTensors (shapes only: nothing is allocated or computed) and torch's
``MemTracker``, for the reference transformer at a preset.

    python scripts/reference_memory.py --preset big [--accumulate 1] [--chunks 4] [--precision P]

Prints, in GiB, the peak of each (the tracker's total: weights, buffers, gradient, activations
and temporaries of the passes it watched):

- ``fp32 window``: one window of the model in fp32 (``--precision``: another) without any
  strategy, ``loss.backward()`` per micro-batch into ``.grad``, as the plain loop runs it (no
  optimizer state: the bound is conservative);
- ``float64 reference``: what ``benches.engine.gradients.reference_in_chunks`` runs for
  ``total_error``: a float64 copy, each micro-batch in ``--chunks`` chunks of its samples, and
  the first micro-batch's whole loss without autograd that its chunks are held to;
- ``float64 before``: the reference as it ran before chunks, ``reference_grads`` of whole
  micro-batches of the float64 copy (``torch.autograd.grad``, summed in float64).

The models are built at their dtype under the fake mode (``Module.to`` cannot convert fake
parameters); the data and the loss are the workload's own (``benches.engine.bound``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.engine import bound, gradients, training  # noqa: E402
from benches.workloads import protocol  # noqa: E402
from benches.workloads.transformer import PRESETS, Seq2SeqTransformer  # noqa: E402

GIB = 2**30


def _fake_model(workload, dtype: torch.dtype) -> torch.nn.Module:
    """The workload's model, fresh, with ``dtype`` weights, under the active fake mode."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = Seq2SeqTransformer(workload.made.model_config)
    finally:
        torch.set_default_dtype(default)
    return model.train()


def _peak(run, model: torch.nn.Module) -> dict[str, int]:
    """The tracker's peak of ``run()`` with ``model``'s weights tracked: bytes by kind
    (``Total``, ``Parameter``, ``Gradient``, ``Activation``, ``Temp``, ...) at that peak."""
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(model)

    def forget(module, args) -> None:
        # the tracker refuses a module called twice (chunks, micro-batches) unless its
        # per-module figures are cleared; its peak, the one figure used here, is kept
        if module is model:
            tracker.reset_mod_stats()

    # a global hook registered before the tracker's own, so it runs first
    handle = torch.nn.modules.module.register_module_forward_pre_hook(forget)
    try:
        with tracker:
            run()
    finally:
        handle.remove()
    out: dict[str, int] = {}
    for device in tracker.get_tracker_snapshot("peak").values():
        for kind, value in device.items():
            out[kind] = out.get(kind, 0) + value
    return out


def estimate(
    preset: str,
    accumulate: int = 1,
    chunks: int | None = None,
    precision: str = "fp32",
) -> dict:
    """``chunks`` and ``peaks``, the peaks (``_peak``) of the case's window at ``precision``,
    of the float64 reference as the check runs it in ``chunks`` (None: as many as the check
    takes for the case's model, ``gradients.reference_chunks``), and as it ran before
    (``reference_grads`` of whole micro-batches)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    # the workload's data and loss at the preset (its own model is built for real, once: about
    # 15 s and 1 GiB for big; only its config is used here)
    settings = protocol.Settings(device="cpu", preset=preset, accumulate=accumulate)
    workload = bound.build(protocol.DEFAULT, settings)
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    out = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = _fake_model(workload, training.parameter_dtype(precision))
        chunks = chunks or gradients.reference_chunks(model)

        def window(model=model) -> None:
            for batch in batches:  # under the precision's autocast (bound.Bound.loss)
                workload.loss(batch, tokens, model, precision).backward()

        out[f"{precision} window"] = _peak(window, model)
        del model
        model = _fake_model(workload, torch.float64)

        def reference(model=model) -> None:
            # the forward without autograd that the chunks are held to, then the chunks
            gradients.whole_loss(workload, batches[0], tokens, model)
            gradients.reference_in_chunks(
                workload, batches, tokens, model, chunks=chunks, check_split=False
            )

        out["float64 reference"] = _peak(reference, model)

        def before(model=model) -> None:
            gradients.reference_grads(workload, batches, tokens, model, precision="fp32")

        out["float64 before"] = _peak(before, model)
        del model
    return {"chunks": chunks, "peaks": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="big", choices=sorted(PRESETS))
    parser.add_argument("--accumulate", type=int, default=1, help="K micro-batches per window")
    parser.add_argument("--chunks", type=int, help="per micro-batch (default: the check's)")
    parser.add_argument(
        "--precision", default="fp32", choices=training.PRECISIONS, help="the window's"
    )
    args = parser.parse_args(argv)
    peaks = estimate(args.preset, args.accumulate, args.chunks, args.precision)
    print(
        f"preset {args.preset}, K={args.accumulate}, {peaks['chunks']} chunks per micro-batch"
        "; GiB at each peak:"
    )
    kinds = ("Parameter", "Gradient", "Activation", "Temp")
    print(f"{'':<20}{'total':>8}" + "".join(f"{k.lower():>12}" for k in kinds))
    for name, peak in peaks["peaks"].items():
        figures = "".join(f"{peak.get(k, 0) / GIB:12.2f}" for k in kinds)
        print(f"{name:<20}{peak['Total'] / GIB:8.2f}{figures}")
    window = peaks["peaks"][f"{args.precision} window"]["Total"]
    fits = peaks["peaks"]["float64 reference"]["Total"] <= window
    print(f"the float64 reference {'fits within' if fits else 'exceeds'} the window")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
