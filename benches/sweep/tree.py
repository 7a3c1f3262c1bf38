"""A case's whole process tree, ended through psutil: the case, and every process under it.

A case is the leader of its own session, but torchrun starts each rank in a session of its own
too (``start_new_session`` in torch.distributed.elastic), so killing the case's process group
kills the launcher and leaves its ranks running, holding a core and a port. The tree is read
from psutil (children, recursively) *before* anything is killed: once a parent dies its
children move to init and can no longer be found from it.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

WAIT_S = 10.0  # SIGKILL cannot be caught: a process that outlives this is stuck in the kernel


def descendants(pid: int) -> list[psutil.Process]:
    """``pid`` and every process under it (empty when ``pid`` is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid``, its process group and every descendant; wait until they are gone.
    The pids it found (the caller still reaps ``pid`` itself if it is its child)."""
    tree = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the group too: a child that has just been forked
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    # reparented ranks are reaped by init; the caller's own child stays a zombie until it waits
    psutil.wait_procs([p for p in tree if p.pid != pid], timeout=WAIT_S)
    return [p.pid for p in tree]
