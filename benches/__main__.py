"""``python -m benches run | case | mfu | reset-speed | clip-speed | spread``.

``run`` is the sweep and ``case`` one case by hand (benches/sweep/); the others are the
stand-alone micro-benchmarks (benches/micro/), each with its own ``--help``.
"""

if __name__ == "__main__":
    import importlib
    import sys

    MICRO = {
        "mfu": "mfu",
        "reset-speed": "reset_speed",
        "clip-speed": "clip_speed",
        "spread": "spread",
    }
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command in MICRO:
        micro = importlib.import_module(f"benches.micro.{MICRO[command]}")
        raise SystemExit(micro.main(sys.argv[2:]))
    from benches.sweep.cli import main

    raise SystemExit(main())
