"""Model FLOPs utilisation of the reference workload's window on a GPU, eager or compiled.

    python -m benches.micro.mfu --preset big --precision bf16-autocast [--compile] [--batch-size B]

Runs ``native``'s loop (the case's loop: reset, K forward+backward, clip/step) for a few
windows and prints the median window, tokens per second and MFU (6 N tokens per window over the
GPU's bf16 dense peak, ``training.PEAK_BF16_FLOPS``; null on CPU and for a GPU not in it).
Attention runs through ``scaled_dot_product_attention`` (torch's ``nn.MultiheadAttention`` calls
it); with ``--fused-only`` the math fallback is switched off, so a window that would not use a
fused kernel fails instead of running slowly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys

import torch

from benches.engine import bound, training
from benches.engine.runner import Loop
from benches.micro.options import Parser, count
from benches.workloads import protocol
from benches.workloads.transformer import PRESETS, Workload


def measure(args: argparse.Namespace) -> dict:
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if args.device == "cuda"
        else torch.device("cpu")  # a dry run of the code path: no peak, so no MFU
    )
    settings = protocol.Settings(
        device=str(device), precision=args.precision, accumulate=args.accumulate, preset=args.preset
    )
    overrides = {
        k: v
        for k, v in (("batch_size", args.batch_size), ("min_len", args.min_len))
        if v is not None
    }
    if args.max_len is not None:
        overrides["max_len"] = args.max_len
    made = Workload(settings, **overrides)  # the one record; deterministic: no dropout
    workload = bound.Bound(made, settings)
    workload.recipe = training.Recipe(args.precision, args.compile, args.optimizer)
    loop = Loop(workload, workload.model, "native")
    batches = workload.batches(0)
    tokens = workload.window_tokens(batches)
    kernels = contextlib.nullcontext()
    if args.fused_only and device.type == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        kernels = sdpa_kernel(
            [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
        )
    with kernels:
        compile_s = loop.warm([(batches, tokens)]) if args.compile else None
        for _ in range(args.warmup):
            loop.window(batches, tokens)
        windows = [loop.window(batches, tokens)["window"] for _ in range(args.windows)]
    median = statistics.median(windows)
    peak = training.peak_flops(device, "bf16-autocast")  # None: a GPU the table lacks
    flops = workload.flops_per_window()
    return {
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "preset": args.preset,
        "precision": args.precision,
        "compile": args.compile,
        "compile_s": compile_s,
        "batch_size": made.batch_size,
        "lengths": [made.min_len, made.max_len],
        "params": workload.num_params(),
        "tokens_per_window": workload.tokens_per_window(),
        "window_ms": median * 1e3,
        "tokens_per_s": workload.tokens_per_window() / median,
        "peak_flops": peak,
        "mfu": flops / median / peak if peak else None,  # not reported without a peak
        "fused_only": args.fused_only,
    }


def main(argv: list[str]) -> int:
    parser = Parser(prog="python -m benches mfu", description=__doc__)
    parser.add_argument("--preset", default="big", choices=PRESETS)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--precision", default="bf16-autocast", choices=training.PRECISIONS)
    parser.add_argument("--optimizer", default="adamw-fused", choices=training.OPTIMIZERS)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--accumulate", type=count(1), default=1)
    parser.add_argument("--batch-size", type=count(1))
    parser.add_argument("--min-len", type=count(1))
    parser.add_argument("--max-len", type=count(1))
    parser.add_argument("--warmup", type=count(0), default=2)
    parser.add_argument("--windows", type=count(1), default=5)
    parser.add_argument("--fused-only", action="store_true")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU here; valid: --device cpu (a dry run)")
    try:
        figures = measure(args)
    except ValueError as err:  # a bad preset or length range: the workload's one line
        parser.error(str(err))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
