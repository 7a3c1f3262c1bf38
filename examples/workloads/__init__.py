"""Example workloads for ``--workload MODULE:FACTORY`` (benches/workloads/protocol.py)."""
