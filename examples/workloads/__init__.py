"""Example workloads for ``--workload MODULE:FACTORY`` (the protocol: benches/protocol.py)."""
