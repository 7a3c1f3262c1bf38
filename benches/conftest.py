"""pytest-benchmark set-up for the in-process microbenchmarks in benches/."""

from __future__ import annotations

import torch

from benches import envinfo


def pytest_benchmark_update_machine_info(config, machine_info):
    """torch, CUDA and GPU details beside pytest-benchmark's own CPU details."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = envinfo.environment(device)
    machine_info["torch"] = {
        k: env.get(k)
        for k in ("torch", "cuda", "cudnn", "device", "device_name", "threads", "load_average")
    }
    machine_info["torch"].update(envinfo.git_state())
    if device == "cuda":
        machine_info["torch"]["gpu_memory_bytes"] = env.get("gpu_memory_bytes")
