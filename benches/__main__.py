"""``python -m benches run ...``: see benches/cli.py."""

if __name__ == "__main__":
    from benches.cli import main

    raise SystemExit(main())
