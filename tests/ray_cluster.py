"""Real Ray clusters on this machine for the cluster tests (tests/test_cluster.py) and the
dispatch figures, each inside a network namespace of its own.

Ray binds its nodes to the host's outward address even when told 127.0.0.1; inside a fresh
network namespace (``unshare -n``, loopback up) the only address is 127.0.0.1, so nothing a
test starts can send anything beyond this machine. ``in_namespace`` runs this file there:
``python tests/ray_cluster.py SCENARIO OUT`` starts a cluster (``ray.cluster_utils.Cluster``: a
head with no CPUs for processes and two nodes of one CPU each), runs one scenario against it
(a real sweep, ``python -m benches run --cluster ADDRESS``, faults injected by handles),
writes what it saw to ``OUT/scenario.json`` and stops what it started by its handles
(``remove_node``, ``shutdown``), never ``ray stop``.

``python tests/ray_cluster.py figures OUT`` (as root, the [cluster] extra installed) prints
the dispatch figures of docs/cluster.md: per process, submit to start and end to row written,
on a 2-node cluster against the fork server; a sweep's wall time on both.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SWEEP = [
    *("--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--warmup", "1"),
    *("--threads", "1", "--budget", "0", "--timeout", "120"),
]
# the threads, the preset and the pinning left to the nodes to decide
NODES_DECIDE = [
    *("--accumulate", "1", "--live-tensors", "0", "--warmup", "1"),
    *("--budget", "0", "--timeout", "120"),
]


# -- outside: the namespace -----------------------------------------------------------------------
def namespace_error() -> str | None:
    """Why this machine cannot make a network namespace for a test, or None."""
    if os.geteuid() != 0:
        return "needs root (unshare -n)"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def in_namespace(scenario: str, out: Path, timeout: float = 400) -> dict[str, Any]:
    """Run ``scenario`` in a network namespace of its own; what it saw."""
    out.mkdir(parents=True, exist_ok=True)
    script = f"ip link set lo up && exec {sys.executable} {Path(__file__)} {scenario} {out}"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result = out / "scenario.json"
    if not result.exists():
        raise AssertionError(
            f"scenario {scenario} wrote nothing (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    return json.loads(result.read_text())


# -- inside: the cluster --------------------------------------------------------------------------
def environment() -> dict[str, str]:
    """What every Ray process here runs with: a private home and temp dir, short enough for
    Ray's sockets (a Unix socket's path holds 107 bytes), no usage stats."""
    home = Path(tempfile.mkdtemp(prefix="zr-", dir="/tmp"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return {
        "HOME": str(home),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "TMPDIR": str(home),
    }


def start(out: Path, nodes: int = 2, **node_args: Any):
    """A head with no CPUs for processes and ``nodes`` nodes of one CPU each (``node_args``
    override, e.g. fake GPUs); connected, so that the harness sees the nodes."""
    import ray
    from ray.cluster_utils import Cluster

    assert [name for _, name in socket.if_nameindex()] == ["lo"], "not in a namespace of our own"
    os.environ.update(environment())
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20},
    )
    args = {"num_cpus": 1, "object_store_memory": 80 << 20, **node_args}
    workers = [cluster.add_node(**args) for _ in range(nodes)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster, workers


def stop(cluster) -> None:
    import ray

    ray.shutdown()
    cluster.shutdown()


# a driver as a login node is: 64 cores (what ``os.cpu_count`` says), no GPU (none here), and a
# torch wheel labelled otherwise than the workers' (``+cpu`` where theirs is not, else ``+cu128``)
LOGIN_NODE = (
    "import os, runpy, sys; os.cpu_count = lambda: 64; "
    "from benches.sweep.cluster import task; v = task.torch_version(); "
    "task.torch_version = lambda: task.public(v) + ('+cu128' if v.endswith('+cpu') else '+cpu'); "
    "sys.argv[0] = 'benches'; runpy.run_module('benches', run_name='__main__', alter_sys=True)"
)


def sweep(
    out: Path,
    address: str,
    *args: str,
    wait: bool = True,
    driver: str | None = None,
    base: list[str] = SWEEP,
) -> subprocess.Popen:
    """``python -m benches run --cluster ADDRESS BASE ARGS`` into ``out``: finished, or
    running. ``driver``: Python code run in its place (``python -c DRIVER run ...``)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            *(["-c", driver] if driver else ["-m", "benches"]),
            "run",
            "--cluster",
            address,
            *base,
            *args,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if wait:
        proc.output, _ = proc.communicate(timeout=300)
    return proc


def rows(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cases_running(out: Path) -> list[int]:
    """The pids of case processes of the sweep writing to ``out`` (their spec is under it)."""
    import psutil

    mine = str(out / "cases")
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(mine in part for part in p.info["cmdline"] or []):
            found.append(p.info["pid"])
    return found


def wait_for(what, timeout: float = 120.0, every: float = 0.1):
    """``what()``'s first truthy value, or AssertionError at the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what.__name__}")


def gone(pids: list[int], timeout: float = 20.0) -> bool:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
            return True
        time.sleep(0.2)
    return False


def node_of(pid: int) -> str | None:
    """The Ray node a case process runs on (its task's ``ZEROGRAD_NODE_ID``)."""
    import psutil

    return psutil.Process(pid).environ().get("ZEROGRAD_NODE_ID")


def summary(out: Path, proc: subprocess.Popen | None = None) -> dict[str, Any]:
    found = rows(out)
    verdicts = out / "verdicts.json"
    return {
        "exit": proc.returncode if proc else None,
        "output": getattr(proc, "output", ""),
        "rows": found,
        "verdicts": json.loads(verdicts.read_text()) if verdicts.exists() else None,
        "report": (out / "index.html").exists(),
    }


# -- scenarios -----------------------------------------------------------------------------------
def refused(out: Path, *args: str, target: Path | None = None) -> dict[str, Any]:
    """A sweep refused before anything is written: its exit, its stderr, whether --out exists
    (``target``: an existing one, e.g. to resume)."""
    target = target or out / "refused"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "benches", "run", *args, "--out", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return {
        "exit": done.returncode,
        "stderr": done.stderr,
        "seconds": time.monotonic() - started,
        "written": target.exists() and target.name == "refused",
    }


def dead_address(out: Path) -> dict[str, Any]:
    """An address nothing listens at, given and found by ``auto``: one line, exit 2, at once."""
    port = free_port()
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    return {
        "given": refused(out, "--cluster", f"127.0.0.1:{port}", *SWEEP),
        "auto": refused(out, "--cluster", "auto", *SWEEP),
    }


def two_nodes(out: Path) -> dict[str, Any]:
    """A/A twins and their control on two nodes, one process at a time on each; before them,
    requests no node can satisfy (CPUs, GPUs) refused."""
    cluster, workers = start(out)
    try:
        too_many = refused(out, "--cluster", cluster.address, *SWEEP, "--threads", "2")
        no_gpu = refused(out, "--cluster", cluster.address, *SWEEP, "--device", "cuda")
        run = out / "run"
        proc = sweep(
            run, cluster.address, "--plugin", "tests.aa_plugin", "--strategies", "block,block_twin",
            "--control", "block", "--repeat", "6",
        )  # fmt: skip
        return {
            **summary(run, proc),
            "nodes": [w.node_id for w in workers],
            "threads": too_many,
            "cuda": no_gpu,
        }
    finally:
        stop(cluster)


def fault(out: Path, kill) -> dict[str, Any]:
    """A sweep whose first case process meets ``kill(cluster, workers, pid)`` mid-process."""
    cluster, workers = start(out)
    try:
        run = out / "run"
        # pairs enough that the process outlives the kill on a fast machine too
        proc = sweep(
            run, cluster.address, "--strategies", "native,lazy", "--control", "none",
            "--repeat", "500", wait=False,
        )  # fmt: skip
        (pid, *_) = wait_for(lambda: cases_running(run))
        time.sleep(1.0)  # inside the process: its imports, or its pairs, running
        node = node_of(pid)
        kill(cluster, workers, pid, node)
        proc.output, _ = proc.communicate(timeout=300)
        return {
            **summary(run, proc),
            "killed_node": node,
            "case_gone": gone([pid]),
            "nodes": [w.node_id for w in workers],
        }
    finally:
        stop(cluster)


def worker_killed(out: Path) -> dict[str, Any]:
    """The worker running a case SIGKILLed: the case dies with it, the driver retries it."""
    import psutil

    def kill(cluster, workers, pid, node):
        os.kill(psutil.Process(pid).ppid(), signal.SIGKILL)

    return fault(out, kill)


def node_removed(out: Path) -> dict[str, Any]:
    """The node running a case removed: retried on the other node."""

    def kill(cluster, workers, pid, node):
        (victim,) = [w for w in workers if w.node_id == node]
        cluster.remove_node(victim, allow_graceful=False)

    return fault(out, kill)


def hung_case(out: Path) -> dict[str, Any]:
    """A case that hangs: killed at --timeout with its tree, never retried; then a sweep
    interrupted (SIGTERM) while another hangs: nothing left on the workers."""
    cluster, _ = start(out)
    try:
        run = out / "run"
        proc = sweep(
            run, cluster.address, "--plugin", "tests.fault_plugin", "--strategies",
            "native,faulty:fault=hang", "--control", "none", "--repeat", "4", "--timeout", "15",
        )  # fmt: skip
        timed_out = {**summary(run, proc), "left": cases_running(run)}
        run2 = out / "interrupted"
        proc = sweep(
            run2, cluster.address, "--plugin", "tests.fault_plugin", "--strategies",
            "faulty:fault=hang", "--control", "none", "--repeat", "4", "--timeout", "300",
            wait=False,
        )  # fmt: skip
        pids = wait_for(lambda: cases_running(run2))
        time.sleep(3.0)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
        return {
            "timed_out": timed_out,
            "interrupted": {
                "exit": proc.returncode,
                "output": output,
                "seconds": time.monotonic() - started,
                "case_gone": gone(pids),
                "left": cases_running(run2),
            },
        }
    finally:
        stop(cluster)


def driver_killed(out: Path) -> dict[str, Any]:
    """The sweep SIGKILLed after its first row: its cases die; --resume finishes it with no
    row written twice."""
    cluster, _ = start(out)
    try:
        run = out / "run"
        args = ["--strategies", "native,lazy,global", "--control", "none", "--rounds", "2"]
        proc = sweep(run, cluster.address, *args, "--repeat", "30", wait=False)
        wait_for(lambda: rows(run), timeout=200)
        pids = cases_running(run)
        proc.kill()
        proc.wait()
        before = len(rows(run))
        case_gone = gone(pids)
        other = refused(out, "--cluster", cluster.address, *SWEEP, *args, "--repeat", "30",
                        "--resume", "--per-node", "2", target=run)  # fmt: skip
        # --resume may change where: here the same cluster, named by another address
        elsewhere = cluster.address.replace("127.0.0.1", "localhost")
        resumed = sweep(run, elsewhere, *args, "--repeat", "30", "--resume")
        return {
            **summary(run, resumed),
            "before": before,
            "case_gone": case_gone,
            "other_per_node": other,
        }
    finally:
        stop(cluster)


def cluster_lost(out: Path) -> dict[str, Any]:
    """The whole cluster gone mid-sweep: every finished row kept, a report, exit 1."""
    cluster, _ = start(out)
    run = out / "run"
    # rounds enough that the sweep is still running when the cluster is gone: with 3 (6
    # processes, 2 at once) it once finished them all while the cluster stopped, and exited 0
    proc = sweep(
        run, cluster.address, "--strategies", "native,lazy,global", "--control", "none",
        "--rounds", "10", "--repeat", "30", wait=False,
    )  # fmt: skip
    wait_for(lambda: rows(run), timeout=200)
    stop(cluster)
    started = time.monotonic()
    proc.output, _ = proc.communicate(timeout=240)
    return {**summary(run, proc), "seconds": time.monotonic() - started}


def ray_start(out: Path) -> dict[str, Any]:
    """A cluster started as users start one (``ray start --head --block``, its handle kept):
    a sweep given its HOST:PORT, two processes at once on its one node; then the head
    stopped by its handle (SIGTERM), nothing of it left."""
    import psutil

    os.environ.update(environment())
    port = free_port()
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--block",
         f"--temp-dir={os.environ['TMPDIR']}/ray"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: probe_ok(port), timeout=120, every=0.5)
        run = out / "run"
        proc = sweep(
            run, f"127.0.0.1:{port}", "--strategies", "native,lazy", "--control", "none",
            "--repeat", "20", "--per-node", "2", "--no-rotate",  # a process per strategy
        )  # fmt: skip
        started = {p.pid for p in psutil.Process(head.pid).children(recursive=True)}
    finally:
        head.terminate()
        head.wait(timeout=120)
    return {**summary(run, proc), "left": [p for p in started if psutil.pid_exists(p)]}


def probe_ok(port: int) -> bool:
    """Something listens at 127.0.0.1:PORT (the sweep's own probe, ``address.probe``)."""
    from benches.sweep.cluster.address import probe
    from benches.sweep.outdir import UsageError

    try:
        probe("127.0.0.1", port, f"127.0.0.1:{port}")
    except UsageError:
        return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_shared_files(out: Path) -> dict[str, Any]:
    """Workers that cannot see the driver's --out (forced: ``task.SCRATCH``): each process
    writes to a scratch folder and its files come back with its rows, their paths the
    driver's."""
    os.environ["ZEROGRAD_CLUSTER_SCRATCH"] = "1"  # the nodes' workers inherit it
    cluster, _ = start(out)
    try:
        run = out / "run"
        proc = sweep(
            run, cluster.address, "--strategies", "native,lazy", "--control", "none",
            "--repeat", "2", "--memray",
        )  # fmt: skip
        files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
        return {**summary(run, proc), "files": files, "out": str(run)}
    finally:
        stop(cluster)


def hold_cases(seconds: int = 8) -> list[str]:
    """The sweep's arguments that hold each case process ``seconds`` before its device or
    workload can fail (``tests.fault_plugin``'s ``ZEROGRAD_HOLD``, which the nodes' workers
    inherit: call it before ``start``), so that processes dispatched together overlap."""
    os.environ["ZEROGRAD_HOLD"] = str(seconds)
    return ["--plugin", "tests.fault_plugin"]


def fake_gpus(out: Path) -> dict[str, Any]:
    """One node with two fake GPUs: two processes at once, each on a GPU of its own (Ray's
    CUDA_VISIBLE_DEVICES); the cases fail (no CUDA here) but say where they ran, each held
    first (``hold_cases``)."""
    held = hold_cases()
    cluster, _ = start(out, nodes=1, num_gpus=2, num_cpus=2)
    try:
        run = out / "run"
        proc = sweep(
            run, cluster.address, "--device", "cuda", "--strategies", "native,lazy",
            "--control", "none", "--repeat", "2", "--no-pin", "--no-rotate", *held,
        )  # fmt: skip
        return summary(run, proc)
    finally:
        stop(cluster)


def gpu_nodes(out: Path) -> dict[str, Any]:
    """Two nodes of 16 CPUs and 8 fake GPUs each, driven from a login node (``LOGIN_NODE``: 64
    cores, no GPU, another torch label): per world size (1, 4) and device (cuda, auto), a sweep
    whose plan (run.json's cluster: slots per node) and processes (each its own GPUs,
    ``CUDA_VISIBLE_DEVICES``) it reports; the cases fail (no CUDA here) but say where they ran,
    each held first (``hold_cases``: a failure takes ~2 s, and starts on a busy machine can be
    further apart)."""
    held = hold_cases()
    cluster, workers = start(out, nodes=2, num_cpus=16, num_gpus=8)
    seen: dict[str, Any] = {"nodes": [w.node_id for w in workers]}
    try:
        for ranks in ("1", "4"):  # 4 processes: 2 at once on each node
            for device in ("cuda", "auto"):
                run = out / f"w{ranks}-{device}"
                proc = sweep(
                    run, cluster.address, "--device", device, "--world-size", ranks,
                    "--strategies", "native,lazy,global,block", "--control", "none",
                    "--repeat", "2", "--no-rotate", *held,  # a process per strategy
                    driver=LOGIN_NODE, base=NODES_DECIDE,
                )  # fmt: skip
                made = json.loads((run / "run.json").read_text()) if proc.returncode != 2 else {}
                seen[f"{ranks}-{device}"] = {
                    **summary(run, proc),
                    "cluster": made.get("cluster"),
                    "sweep": made.get("sweep"),
                    "case_settings": made.get("case_settings"),
                }
        return seen
    finally:
        stop(cluster)


def figures(out: Path) -> dict[str, Any]:
    """Dispatch per process and a sweep's wall time: a 2-node cluster against the fork
    server, one sweep of each on this machine (printed, and in ``OUT/scenario.json``); and
    the spread between processes of each (two processes side by side on this machine's two
    cores against one at a time)."""
    args = ["--strategies", "native,lazy,global,block", "--control", "native", "--repeat", "10"]
    out_local = out / "local"
    started = time.monotonic()
    local = watch(subprocess.Popen(
        [sys.executable, "-m", "benches", "run", *SWEEP, *args, "--out", str(out_local)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ), out_local)  # fmt: skip
    local_s = time.monotonic() - started
    cluster, _ = start(out)
    try:
        run = out / "cluster"
        started = time.monotonic()
        remote = watch(sweep(run, cluster.address, *args, wait=False), run)
        cluster_s = time.monotonic() - started
    finally:
        stop(cluster)
    result = {"local": {**local, "wall_s": local_s}, "cluster": {**remote, "wall_s": cluster_s}}
    print(json.dumps(result, indent=1))
    return result


def watch(proc: subprocess.Popen, out: Path) -> dict[str, Any]:
    """Per process of a running sweep: its start (fork, or submit to task start and the
    interpreter's start) and the end of its process to its row in results.jsonl (polled
    every 20 ms), medians over the sweep's processes."""
    seen: dict[str, float] = {}
    while proc.poll() is None:
        for row in rows(out):
            seen.setdefault(row["case_id"], time.time())
        time.sleep(0.02)
    found = [r for r in rows(out) if r["status"] == "ok"]
    late = [seen[r["case_id"]] - r["placement"]["ended"] for r in found if r["case_id"] in seen]
    queued = [r["placement"].get("queued_s") or 0.0 for r in found]
    start = [r["wall_s"]["process_start"] for r in found]
    verdicts = json.loads((out / "verdicts.json").read_text())
    return {
        "processes": len(found),
        "spread_between_processes": [g["sd"] for g in verdicts["noise_floor"]],
        "resolution": [g["resolution"] for g in verdicts["noise_floor"]],
        "submit_to_start_s": statistics.median(queued) if queued else None,
        "process_start_s": statistics.median(start) if start else None,
        "end_to_row_s": statistics.median(late) if late else None,
        "process_start": sorted({r["env"]["process_start"] for r in found}),
    }


SCENARIOS = {
    f.__name__: f
    for f in (
        dead_address,
        two_nodes,
        worker_killed,
        node_removed,
        hung_case,
        driver_killed,
        cluster_lost,
        ray_start,
        no_shared_files,
        fake_gpus,
        gpu_nodes,
        figures,
    )
}

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # benches/, as the sweep imports it (run as a script)
    name, target = sys.argv[1], Path(sys.argv[2])
    if name == "figures" and [n for _, n in socket.if_nameindex()] != ["lo"]:
        print(json.dumps(in_namespace("figures", target, timeout=1800), indent=1))
        raise SystemExit(0)
    saw = SCENARIOS[name](target)
    (target / "scenario.json").write_text(json.dumps(saw, default=str))
