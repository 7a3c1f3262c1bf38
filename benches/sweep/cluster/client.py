"""The sweep's connection to Ray, in a process of its own: ``python -m benches.sweep.cluster.client
ADDRESS``.

A process connected to a Ray cluster ends itself (``_Exit``) about a minute after it loses the
head's control service (ray#45570): the connection lives here, so that its death cannot take
the sweep, the one writer of the rows, with it. The sweep sees this process's end as the
cluster's, keeps every row it wrote and writes its report.

It dies with the sweep (``PR_SET_PDEATHSIG``); Ray then ends this driver's tasks, and each
task's case dies with its worker.

Protocol: JSON lines. In (stdin): ``{"op": "submit", "key", "spec", "attempt", "node",
"num_cpus", "num_gpus", "timeout", "submitted", "slot"}``, ``{"op": "cancel", "key"}``; end of
input: cancel everything and leave. Out (stdout): ``{"op": "ready", "nodes": [...], "ray":
VERSION}`` once, then per task ``{"op": "done", "key", "result"}`` (its rows and files),
``{"op": "lost", "key", "cause", "nodes"}`` (the cluster lost it: worker, node or object) or
``{"op": "failed", "key", "cause"}`` (anything else the task raised, an OOM kill by Ray's
memory monitor or a cancel included); ``{"op": "fatal", "error"}`` when Ray cannot start.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import sys
import threading
from typing import Any

from benches.engine.process import die_with_parent
from benches.sweep.cluster.address import LOCAL

# what the cluster lost (retried once elsewhere by the sweep); every other error is the case's
LOST = ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
        "ObjectFetchTimedOutError", "LocalRayletDiedError", "RaySystemError")  # fmt: skip
# what a worker must not take with it (shipped with runtime_env's working_dir)
EXCLUDES = [".git", ".nox", ".asv", ".benchmarks", "reports/runs", "**/__pycache__", "*.bin"]
LOCAL_OBJECT_STORE = 200 * 2**20  # rows are small: --cluster local asks for little


OUT = sys.stdout  # the protocol's own stream: Ray's prints go to stderr (``protocol_only``)


def protocol_only() -> None:
    """Keep stdout for the protocol: what Ray (or anything else) prints goes to stderr."""
    global OUT
    OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def say(message: dict[str, Any]) -> None:
    OUT.write(json.dumps(message) + "\n")
    OUT.flush()


def nodes() -> list[dict[str, Any]]:
    """The cluster's live nodes: id, host, address and resources (CPU, GPU, ...)."""
    import ray

    return [
        {
            "node_id": n["NodeID"],
            "host": n.get("NodeManagerHostname") or n.get("NodeManagerAddress"),
            "address": n.get("NodeManagerAddress"),
            "resources": n.get("Resources", {}),
        }
        for n in ray.nodes()
        if n.get("Alive")
    ]


def connect(address: str, root: str) -> None:
    import ray

    if address == LOCAL:  # Ray on this machine, for this command: the checkout is shared
        os.environ.setdefault("RAY_task_oom_retries", "0")  # an OOM kill is the case's: no retry
        ray.init(
            address="local",  # a new Ray, never one `ray start` left running here
            include_dashboard=False,
            object_store_memory=LOCAL_OBJECT_STORE,
            runtime_env={"env_vars": {"PYTHONPATH": root}},
            log_to_driver=False,
        )
    else:  # the code travels to the workers (they may have no shared filesystem)
        ray.init(
            address=address,
            runtime_env={"working_dir": root, "excludes": EXCLUDES},
            log_to_driver=False,
        )


def serve(address: str, root: str) -> int:
    die_with_parent()
    protocol_only()
    try:
        connect(address, root)
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from benches.sweep.cluster.task import run_process

        say({"op": "ready", "nodes": nodes(), "ray": ray.__version__})
    except Exception as err:
        say({"op": "fatal", "error": f"{type(err).__name__}: {err}".splitlines()[0]})
        return 3
    task = ray.remote(run_process)
    requests: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            requests.put(json.loads(line))
        requests.put(None)  # the sweep closed its end

    threading.Thread(target=read, daemon=True).start()
    running: dict[Any, str] = {}  # object ref -> key
    keys: dict[str, Any] = {}
    while True:
        while True:  # every request waiting
            try:
                request = requests.get(timeout=0 if running else 0.2)
            except queue.Empty:
                break
            if request is None:
                for ref in running:
                    ray.cancel(ref, force=True)
                return 0
            if request["op"] == "submit":
                ref = task.options(
                    num_cpus=request["num_cpus"],
                    num_gpus=request["num_gpus"],
                    max_retries=0,  # the sweep retries a lost process once, itself
                    retry_exceptions=False,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(request["node"], soft=False),
                ).remote(
                    request["spec"],
                    request["attempt"],
                    request["timeout"],
                    request["expected"],
                    request["submitted"],
                    request.get("slot"),
                )
                running[ref] = request["key"]
                keys[request["key"]] = ref
            elif request["op"] == "cancel" and request["key"] in keys:
                ray.cancel(keys[request["key"]])  # the task kills its case's tree itself
        if not running:
            continue
        done, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
        for ref in done:
            key = running.pop(ref)
            keys.pop(key, None)
            say(finished(key, ref))


def finished(key: str, ref: Any) -> dict[str, Any]:
    """The reply for a finished task: its result, or what ended it."""
    import ray

    try:
        result = ray.get(ref)
    except Exception as err:
        kind = type(err).__name__
        cause = f"{kind}: {first_line(err)}"
        if any(lost in kind for lost in LOST):
            return {"op": "lost", "key": key, "cause": cause, "nodes": nodes()}
        return {"op": "failed", "key": key, "cause": cause}
    files = {
        name: base64.b64encode(data).decode() for name, data in result.get("files", {}).items()
    }
    return {"op": "done", "key": key, "result": {**result, "files": files}}


def first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1], sys.argv[2]))
