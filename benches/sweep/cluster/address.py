"""``--cluster ADDRESS`` checked before anything is written: Ray installed, the address well
formed and something listening there. A TCP probe answers in milliseconds where
``ray.init(address=...)`` would retry for minutes against a dead address."""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path

from benches.sweep.outdir import UsageError

LOCAL = "local"  # start Ray inside the command, on this machine
AUTO = "auto"  # the cluster this machine is part of (RAY_ADDRESS, else `ray start`'s file)
VALID = "local, auto, HOST:PORT"
PROBE_S = 3.0
# where `ray start` on this machine leaves its head's address (what ray.init("auto") reads)
CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")
INSTALL = "pip install -e '.[cluster]' (ray==2.60.0), or nox -s bench -- --cluster ..."


def check(address: str) -> None:
    """``--cluster ADDRESS`` as ``ray.init`` will take it, or a UsageError naming the value and
    the fix: Ray missing, a malformed address, nothing listening there."""
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--cluster {address}: Ray is not installed here; {INSTALL}")
    if address == LOCAL:
        return
    if address.startswith("ray://"):
        raise UsageError(
            f"--cluster {address!r}: Ray Client addresses are not supported; run the sweep on a "
            f"node of the cluster with --cluster auto, or give its head's HOST:PORT"
        )
    given = address
    if address == AUTO:
        address = found_head()
    host, port = host_port(address, given)
    probe(host, port, given)


def found_head() -> str:
    """``auto``: RAY_ADDRESS, else the head that ``ray start`` on this machine recorded."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if not address and CURRENT_CLUSTER.exists():
        address = CURRENT_CLUSTER.read_text().strip()
    if not address or address == AUTO:
        raise UsageError(
            "--cluster auto: no Ray cluster found on this machine (RAY_ADDRESS unset, no "
            f"{CURRENT_CLUSTER}); start one with `ray start --head`, or valid: local, HOST:PORT"
        )
    return address


def host_port(address: str, given: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--cluster {given!r} is not an address; valid: {VALID}")
    return host.strip("[]"), int(port)


def probe(host: str, port: int, given: str) -> None:
    """Something listens at host:port, or a UsageError saying what the probe met."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_S):
            return
    except TimeoutError:
        why = f"no answer within {PROBE_S:g} s"
    except OSError as err:
        why = err.strerror or str(err)
    where = f"{given!r} ({host}:{port})" if given != f"{host}:{port}" else repr(given)
    raise UsageError(
        f"--cluster {where}: nothing answers there ({why}); start the head with "
        f"`ray start --head --port {port}`, or valid: {VALID}"
    )
