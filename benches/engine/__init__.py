"""The engine: one case in its own process (spec, case, runner, replicas, distributed, memory,
gradients, timeline, costmodel, envinfo, results, training). Imports workloads, never sweep."""
