"""Workloads: the reference transformer (``transformer``) and the protocol any workload follows."""
