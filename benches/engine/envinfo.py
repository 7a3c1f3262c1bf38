"""What a result was measured on: software, hardware, commit. Recorded with every row."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import torch

from reports.schema.row_parts import Placement

ROOT = Path(__file__).resolve().parents[2]  # the checkout: benches/engine/envinfo.py
NODE_ID = "ZEROGRAD_NODE_ID"  # set by a cluster's task for its case (benches/sweep/cluster)
ATTEMPT = "ZEROGRAD_ATTEMPT"  # ... and which attempt of the process it is (1, or 2: a retry)
QUEUED = "ZEROGRAD_QUEUED_S"  # ... and how long it waited between its submission and its start


def git_state(root: Path = ROOT) -> dict[str, str | bool | None]:
    """The checkout's commit and whether it has uncommitted changes (None outside git)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def psi_cpu(field: str) -> float | None:
    """A field of Linux PSI's CPU line ``some avg10=.. avg60=.. avg300=.. total=..``."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(dict(f.split("=") for f in line.split()[1:])[field])
    except (OSError, IndexError, KeyError, ValueError):
        return None


def cpu_pressure() -> float | None:
    """Share of the last 10 s in which some runnable task waited for a CPU (Linux PSI), in %.

    On a shared 2-core machine this is the figure that says a timing is suspect: when another
    tenant takes a core, torch's two threads wait on each other and small ops slow down 10-100x.
    """
    return psi_cpu("avg10")


def psi_exists() -> bool:
    """Whether Linux PSI's CPU file can be read here (a kernel without it, or a container that
    hides it, leaves the noise signal to involuntary context switches)."""
    return psi_cpu("total") is not None


def machine() -> dict[str, object]:
    """The machine from psutil: cores, CPU frequency (MHz; None where it is not reported), load
    averages, memory, and whether PSI exists."""
    freq = None
    with contextlib.suppress(Exception):  # psutil raises on some VMs and containers
        freq = psutil.cpu_freq()
    memory = psutil.virtual_memory()
    return {
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "cpu_freq_mhz": (
            {k: getattr(freq, k) or None for k in ("current", "min", "max")} if freq else None
        ),
        "load_average": list(psutil.getloadavg()),
        "memory_total_bytes": memory.total,
        "memory_available_bytes": memory.available,
        "psi": psi_exists(),
    }


def device_name(device: torch.device) -> str:
    """The GPU's name on CUDA, else the CPU model (a cluster's driver may have no GPU: its
    run.json names its own CPU)."""
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    return cpu_model()


def environment(device: str | torch.device = "cpu") -> dict[str, object]:
    """torch, CUDA, cuDNN, device and CPU model, Python, threads, and the machine (psutil)."""
    device = torch.device(device)
    cuda = torch.cuda.is_available()
    info: dict[str, object] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": str(device),
        "device_name": device_name(device),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
        "cpu_pressure_avg10": cpu_pressure(),
        **machine(),
        "argv": sys.argv,
    }
    if device.type == "cuda" and cuda:
        props = torch.cuda.get_device_properties(device)
        info["gpu_memory_bytes"] = props.total_memory
        info["gpu_capability"] = f"{props.major}.{props.minor}"
    return info


def gpu_uuid(index: int) -> str | None:
    """The UUID of CUDA device ``index`` (torch's device properties), or None."""
    return str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "") or None


def placement(
    device: str | torch.device = "cpu",
    pairs_start: float | None = None,
    pairs_end: float | None = None,
) -> Placement:
    """Where this process runs (the row's ``placement``): host, the cluster's node and attempt
    (from the task's environment: none outside a cluster), the device with its UUID on CUDA
    (with ranks, every rank's GPU), the cores it may use, and its timed pairs' wall-clock
    stamps."""
    from benches.engine.process import affinity

    device = torch.device(device)
    cuda = device.type == "cuda" and torch.cuda.is_available()
    index = uuid = ranks = None
    if cuda:
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = gpu_uuid(index)
        # every rank's GPU: local rank r on cuda:r (``distributed.local_device``)
        world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        if world > 1:
            ranks = [gpu_uuid(r) if r < torch.cuda.device_count() else None for r in range(world)]
    number = {k: os.environ.get(k) for k in (ATTEMPT, QUEUED)}
    return Placement(
        host=socket.gethostname(),
        node_id=os.environ.get(NODE_ID) or None,
        device_index=index,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        device_name=device_name(device),
        device_uuid=uuid,
        rank_devices=ranks,
        cores=affinity(),
        pairs_start=pairs_start,
        pairs_end=pairs_end,
        queued_s=float(number[QUEUED]) if number[QUEUED] else None,
        attempt=int(number[ATTEMPT]) if number[ATTEMPT] else None,
    )
