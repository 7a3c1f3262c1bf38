"""This process's own figures over the timed pairs, from psutil: RSS and USS (peak and final),
user and system CPU seconds, voluntary and involuntary context switches, the CPUs it may run on.

Read between pairs, never inside a window (``memory_full_info`` reads smaps_rollup: ~3 ms).
The peaks are the largest of those readings: psutil has no kernel peak on Linux (the row's
``memory.peak_rss_bytes`` is the kernel's VmHWM). Involuntary switches are the noise signal
where Linux PSI is missing: a process with a CPU of its own is rarely preempted, one that
shares it is preempted every scheduler slice (the reports' noise rule, ``NOISY_SWITCHES_PER_S``).
Under torchrun each figure is the largest over ranks (``distributed.busiest``; the
involuntary_per_s of the busiest rank), ``affinity`` rank 0's and ``rank_affinity`` every rank's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import psutil

from reports.schema.row_parts import ProcessFigures, made

MEASURE = (
    "psutil, this process (under torchrun: the largest over ranks) over the timed pairs: CPU "
    "seconds and "
    "context switches from their start to their end; RSS and USS read after each pair "
    "(peak: the largest reading)"
)


class TimedPairsProcess:
    """``start()`` before the first timed pair, ``sample()`` after each, ``figures()`` at the
    end."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.rss: list[int] = []
        self.uss: list[int] = []

    def start(self) -> None:
        self.stamps = (time.time(), None)  # the pairs' wall-clock start and end (placement)
        self.cpu = self.proc.cpu_times()
        self.switches = self.proc.num_ctx_switches()
        self.started = time.perf_counter()

    def sample(self) -> None:
        try:
            memory = self.proc.memory_full_info()
        except psutil.AccessDenied:  # smaps hidden (some containers): RSS only, no USS
            self.rss.append(self.proc.memory_info().rss)
            return
        self.rss.append(memory.rss)
        self.uss.append(memory.uss)

    def figures(self) -> ProcessFigures:
        seconds = time.perf_counter() - self.started
        self.stamps = (self.stamps[0], time.time())
        cpu, switches = self.proc.cpu_times(), self.proc.num_ctx_switches()
        involuntary = switches.involuntary - self.switches.involuntary
        return made(
            ProcessFigures,
            seconds=seconds,
            user_s=cpu.user - self.cpu.user,
            system_s=cpu.system - self.cpu.system,
            voluntary_switches=switches.voluntary - self.switches.voluntary,
            involuntary_switches=involuntary,
            involuntary_per_s=involuntary / seconds if seconds > 0 else None,
            rss_peak_bytes=max(self.rss, default=None),
            rss_final_bytes=self.rss[-1] if self.rss else None,
            uss_peak_bytes=max(self.uss, default=None),
            uss_final_bytes=self.uss[-1] if self.uss else None,
            affinity=affinity(),
            measure=MEASURE,
        )


def allowed_cores() -> list[int] | None:
    """The CPUs this process may use, or None where psutil cannot pin (macOS)."""
    if not hasattr(psutil.Process, "cpu_affinity"):
        return None
    return affinity()


def pin_cores(threads: int) -> list[int]:
    """Pin this process and its threads to cores of its own, early (torch's intra-op threads
    and gloo's, started later, inherit them): local rank r of a node's ranks takes
    ``threads`` cores, counted from the end of the allowed set (the sweep and its fork server,
    idle while a case runs, keep the whole set); on a cluster, after the blocks of the
    processes in lower slots of its host (``ZEROGRAD_PIN_SLOT``). The cores it took."""
    cores = allowed_cores()
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    # on a cluster, the process's slot on its host (benches.sweep.cluster): slot s takes the
    # s-th block of threads x ranks cores from the end, so concurrent processes never share one
    slot = int(os.environ.get("ZEROGRAD_PIN_SLOT", "0"))
    need = threads * world * (slot + 1)
    if cores is None or need > len(cores):
        raise ValueError(
            f"--pin: {world} rank(s) x {threads} thread(s) in slot {slot} need {need} cores; "
            f"this process may use {len(cores or [])}"
        )
    block = cores[len(cores) - need : len(cores) - threads * world * slot]
    mine = block[rank * threads : (rank + 1) * threads]
    me = psutil.Process()
    me.cpu_affinity(mine)
    for thread in me.threads():  # a thread that started already (Linux: a thread is a task)
        with contextlib.suppress(psutil.Error, OSError):
            psutil.Process(thread.id).cpu_affinity(mine)
    return mine


def affinity() -> list[int] | None:
    """The CPUs this process may run on (None where psutil cannot say, e.g. macOS)."""
    try:
        return sorted(psutil.Process().cpu_affinity())
    except (AttributeError, psutil.Error):
        return None


def rss_bytes() -> int:
    return psutil.Process().memory_info().rss


def die_with_parent() -> None:
    """On Linux, SIGKILL this process when its parent dies (``PR_SET_PDEATHSIG``): a sweep
    killed outright (SIGKILL, an OOM killer) takes its fork server and the case in progress
    with it, instead of leaving them running with no parent. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)
