"""Clipping cost: one norm over a strategy's buffer against ``clip_grad_norm_`` over the
parameters: ``python -m benches.micro.clip_speed [--device cuda] [--calls 60]``.

For two parameter sets (the tensor shapes of a small transformer; 2000 small tensors) and two
dtypes, it times ``Strategy.clip_grad_norm`` of ``flat`` and ``main_grad`` (one norm over their
buffer) and of ``native`` (the default hook: ``clip_grad_norm_`` over the parameters), in the
same process, call by call in rotating order, and gives each one's paired ratio to ``native``
with its 95% CI and a verdict word. The noise floor is measured in the same run: a second
``native`` collector on other tensors of the same shapes, timed the same way (an A/A pair).
Two identical collectors differ by a few percent (memory placement), so the floor is twice the
A/A ratio's CI reach from 1: a ratio inside it is never called lower or higher.
"""

from __future__ import annotations

import time

import torch

import strategies
from benches.micro.options import Parser, count
from reports.judge import stats
from reports.judge.verdicts import DEFAULT_MIN_EFFECT, decide

NAMES = ("native", "native (A/A)", "flat", "main_grad")


def transformer_shapes(layers: int = 16, dim: int = 224, vocab: int = 4096) -> list[tuple]:
    shapes: list[tuple] = [(vocab, dim)]
    for _ in range(layers):
        shapes += [(dim,), (dim,), (3 * dim, dim), (3 * dim,), (dim, dim), (dim,)]
        shapes += [(dim,), (dim,), (4 * dim, dim), (4 * dim,), (dim, 4 * dim), (dim,)]
    return [*shapes, (dim,), (dim,)]


def small_shapes(count: int = 2000) -> list[tuple]:
    gen = torch.Generator().manual_seed(0)
    return [(int(n),) for n in torch.randint(16, 512, (count,), generator=gen)]


def collector(shapes, name: str, dtype: torch.dtype, device: str):
    params = [torch.zeros(s, dtype=dtype, device=device, requires_grad=True) for s in shapes]
    made = strategies.GradientCollector(params, strategy=name.split(" ")[0])
    gen = torch.Generator().manual_seed(2)
    for p in params:
        grad = torch.randn(p.shape, generator=gen).to(device, dtype)
        if p.grad is None:
            p.grad = grad
        else:
            p.grad.copy_(grad)  # flat, main_grad: .grad is a view of their buffer
    return made


def clocked(made, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    made.strategy.clip_grad_norm(made, 1e9)  # a norm, and a multiply by 1: values stay
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def measure(shapes, dtype: torch.dtype, device: str, calls: int) -> dict[str, list[float]]:
    made = {name: collector(shapes, name, dtype, device) for name in NAMES}
    for m in made.values():
        clocked(m, device)  # warm
    times: dict[str, list[float]] = {name: [] for name in NAMES}
    for i in range(calls):
        order = NAMES[i % len(NAMES) :] + NAMES[: i % len(NAMES)]  # rotating: no fixed order
        for name in order:
            times[name].append(clocked(made[name], device))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m benches clip-speed", description=__doc__)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--calls", type=count(2), default=60)
    parser.add_argument("--threads", type=count(1), default=1)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU here; valid: cpu")
    torch.set_num_threads(args.threads)
    sets = {"transformer shapes": transformer_shapes(), "2000 small tensors": small_shapes()}
    for label, shapes in sets.items():
        for dtype in (torch.float32, torch.bfloat16):
            times = measure(shapes, dtype, args.device, args.calls)
            base = times["native"]
            aa = stats.paired([stats.log_ratios(times["native (A/A)"], base)], seed=0)
            floor = 2 * max(aa["ci_high"] - 1, 1 - aa["ci_low"])
            numel = sum(torch.Size(s).numel() for s in shapes) / 1e6
            print(
                f"{label} ({len(shapes)} tensors, {numel:.2f}M elements, {dtype}, "
                f"{args.device}, {args.calls} calls each; floor from the A/A pair "
                f"{floor * 100:.1f}%)"
            )
            for name in NAMES:
                median = sorted(times[name])[len(times[name]) // 2]
                if name == "native":
                    print(f"  {name:13s} {median * 1e3:8.3f} ms  (clip_grad_norm_)")
                    continue
                r = stats.paired([stats.log_ratios(times[name], base)], seed=0)
                word = decide(r["ci_low"], r["ci_high"], DEFAULT_MIN_EFFECT, floor)
                print(
                    f"  {name:13s} {median * 1e3:8.3f} ms  / native {r['ratio']:.3f} "
                    f"(CI {r['ci_low']:.3f}-{r['ci_high']:.3f}): {word}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
