"""Reset cost of every strategy over a list of tensors: ``python -m benches.micro.reset_speed``.

Prints, per size, each strategy's median reset time (the start-of-window hook) and its
end-of-window ``finish`` after a backward that reached every tensor, next to one ``zero_`` over a
buffer of the same bytes measured in the same run. Strategies are measured interleaved, round by
round, so a noisy neighbour hits all of them alike.
"""

from __future__ import annotations

import statistics
import time

import torch

import strategies
from benches.micro.options import Parser, count, sizes


def make_tensors(total: int, count: int, device: str) -> list[torch.Tensor]:
    """``count`` leaf tensors, about ``total`` elements together, each with a gradient."""
    gen = torch.Generator().manual_seed(0)
    sizes = torch.randint(1, 100, (count,), generator=gen).double()
    sizes = (sizes / sizes.sum() * total).long().clamp(min=1)
    tensors = []
    for n in sizes.tolist():
        t = torch.zeros(n, device=device, requires_grad=True)
        t.grad = torch.ones(n, device=device)
        tensors.append(t)
    return tensors


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def clocked(fn, device: str) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def measure(total: int, count: int, repeat: int, device: str) -> dict[str, dict[str, float]]:
    names = [n for n in strategies.available() if n != "global"] + ["global"]
    tensors = make_tensors(total, count, device)
    memset = torch.ones(sum(t.numel() for t in tensors), device=device)
    samples: dict[str, dict[str, list[float]]] = {n: {"reset": [], "finish": []} for n in names}
    samples["memset"] = {"reset": [], "finish": []}
    for round_ in range(repeat):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        samples["memset"]["reset"].append(clocked(memset.zero_, device))
        for name in order:
            collector = strategies.GradientCollector(tensors, strategy=name)
            strategy = collector.strategy
            with collector:  # warm: first reset after attach
                torch.autograd.backward([t.sum() for t in tensors])
            reset = strategy.reset
            samples[name]["reset"].append(clocked(lambda: reset(collector), device))  # noqa: B023
            torch.autograd.backward([t.sum() for t in tensors])  # every tensor gets a gradient
            finish = strategy.finish
            samples[name]["finish"].append(clocked(lambda: finish(collector), device))  # noqa: B023
            collector.close()
    return {
        name: {phase: statistics.median(v) for phase, v in by_phase.items() if v}
        for name, by_phase in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m benches reset-speed", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=sizes, default="1000000,60000000", help="elements, comma-separated"
    )
    parser.add_argument("--tensors", type=count(1), default=200)
    parser.add_argument("--repeat", type=count(1), default=30)
    parser.add_argument("--threads", type=count(1), default=None)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU here; valid: cpu")
    if min(args.sizes) < args.tensors:
        parser.error(
            f"--sizes {min(args.sizes)} is smaller than --tensors {args.tensors}; valid: sizes "
            ">= the number of tensors"
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, "
        f"{args.tensors} tensors, median of {args.repeat} interleaved rounds"
    )
    for total in args.sizes:
        result = measure(total, args.tensors, args.repeat, args.device)
        memset = result["memset"]["reset"]
        print(f"\n{total / 1e6:g}M elements ({total * 4 / 2**20:.0f} MiB of float32 gradients)")
        print(f"  {'strategy':<10}{'reset':>12}{'finish':>12}{'reset / memset':>16}")
        for name, phases in result.items():
            finish = f"{phases['finish'] * 1e6:10.1f}us" if "finish" in phases else " " * 12
            print(
                f"  {name:<10}{phases['reset'] * 1e6:10.1f}us{finish}"
                f"{phases['reset'] / memset:15.2f}x"
            )
        block, foreach = result["block"]["reset"], result["foreach"]["reset"]
        print(
            f"  targets: lazy reset {result['lazy']['reset'] * 1e6:.1f}us (< 20us); "
            f"flat/memset {result['flat']['reset'] / memset:.2f}x (<= 1.5x); "
            f"foreach/block {foreach / block:.2f}x (<= 1.1x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
