"""A fork server for the sweep's cases: each case still runs in a process of its own, forked
from one that has imported torch (and torch._dynamo, which torch.optim imports on first use)
and nothing else, so a case starts in about 1 s instead of 6-7 s of imports.

The server (``python -m benches.sweep.zygote``) never runs a torch operation, never touches
CUDA and holds no tensor: a child starts with no allocator cache, no CUDA context and no
thread pool (PyTorch's DataLoader forks the same way). Each child is the leader of its own
session, so a timeout or Ctrl-C kills its whole process group, and it writes its output to the
case's log. One JSON line per request on stdin (``{"argv": [...], "log": PATH}``); on stdout
``{"pid": N}`` when the child starts and ``{"pid": N, "code": C}`` when it ends (C < 0: killed
by signal -C), as ``subprocess`` spells return codes.

``ZEROGRAD_FRESH_PROCESSES=1`` makes the sweep spawn every case from a fresh interpreter
instead (``benches.sweep.launch.run_one``); rows say which (``env.process_start``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from benches.engine.process import die_with_parent
from benches.sweep import tree

START = "forked"  # env.process_start of a case forked from this server
FRESH = "ZEROGRAD_FRESH_PROCESSES"


def serve() -> int:
    """Read requests, fork a child per request, report its pid and then its exit code."""
    die_with_parent()
    import torch  # what every case imports: paid once
    import torch._dynamo  # noqa: F401  (torch.optim imports it at its first optimizer)

    import benches.engine.case  # noqa: F401
    import strategies  # noqa: F401

    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the case
            code = 1
            try:
                os.setsid()
                die_with_parent()  # the server's death ends the case (not inherited by fork)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ["ZEROGRAD_PROCESS_START"] = START
                from benches.engine import case

                code = case.main(request["argv"])
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()
    return 0


class Zygote:
    """The sweep's side: start the server once, run a case in a forked child with a timeout."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benches.sweep.zygote"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the sweep, which ends the case itself
        )

    def _read(self, deadline: float | None) -> dict | None:
        """The server's next line, or None at the deadline; EOFError if the server is gone."""
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], wait)
            if not ready:
                return None
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the fork server ended")
            return json.loads(line)

    def run(self, argv: list[str], log: Path, timeout: float) -> int | None:
        """The case's exit code (as subprocess spells it), or None when it timed out (its
        process group killed). EOFError or OSError if the server is gone."""
        self.proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        pid = self._read(None)["pid"]
        try:
            done = self._read(time.monotonic() + timeout)
        except BaseException:
            kill_group(pid)
            self._read(None)
            raise
        if done is None:
            kill_group(pid)
            self._read(None)
            return None
        return done["code"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def kill_group(pid: int) -> None:
    """The forked case, its process group and everything under it (``tree.kill_tree``)."""
    tree.kill_tree(pid)


if __name__ == "__main__":
    raise SystemExit(serve())
