"""The fault matrix: for each fault a real run meets, the sweep goes on, the failing case is one
row with its status and a one-line error, every other row and the report are written, no
process of the sweep is left behind and no case outlives its timeout.

Faults come from ``tests/fault_plugin.py`` (real exceptions, real signals, real hangs, under
real torchrun ranks). "No process left behind" is checked twice with psutil: every descendant
the sweep ever had (polled while it runs) is gone afterwards, and no process on the machine
carries the sweep's token in its environment. (g), a workload factory that raises or returns
the wrong thing, is ``test_a_bad_workload_is_a_usage_error_of_one_line`` in
``tests/test_byo_workload.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from synthetic import rows_of

from benches.sweep import cli

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    *("--preset", "tiny", "--accumulate", "1", "--live-tensors", "0", "--threads", "1"),
    *("--budget", "0", "--rounds", "1", "--repeat", "2", "--warmup", "0", "--control", "none"),
    *("--plugin", "tests.fault_plugin"),
]


@dataclass
class Swept:
    code: int
    stderr: str
    seconds: float
    token: str
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create_time
    cmdlines: dict[int, str] = field(default_factory=dict)

    def ranks(self, case: str) -> list[int]:
        """The ranks of ``case`` the sweep had (torchrun starts them with ``python -u``)."""
        return [
            pid
            for pid, line in self.cmdlines.items()
            if "-u -m benches.engine.case" in line and f"/{case}" in line
        ]

    def survivors(self) -> list[str]:
        """Processes of the sweep still alive: descendants it had, or any process carrying its
        token (a rank reparented to init before the poll saw it)."""
        alive = []
        for pid, created in self.seen.items():
            with_token = _alive(pid, created)
            if with_token:
                alive.append(with_token)
        for proc in psutil.process_iter(["pid", "environ", "cmdline", "status"]):
            env = proc.info["environ"] or {}
            if env.get("ZEROGRAD_FAULT_TOKEN") == self.token and not _zombie(proc):
                alive.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
        return sorted(set(alive))


def _zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _alive(pid: int, created: float) -> str | None:
    try:
        proc = psutil.Process(pid)
        if proc.create_time() != created or _zombie(proc):
            return None
        return f"{pid} {' '.join(proc.cmdline())}"
    except psutil.NoSuchProcess:
        return None


def run_sweep(
    args: list[str], env: dict[str, str] | None = None, interrupt=None, signum=signal.SIGINT
) -> Swept:
    """The sweep in a process of its own, its descendants polled until it ends; ``interrupt``
    (a function of the sweep's psutil process and its out dir) decides when to send
    ``signum`` (SIGINT: Ctrl-C)."""
    token = uuid.uuid4().hex
    full_env = {**os.environ, **(env or {}), "ZEROGRAD_FAULT_TOKEN": token}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "benches", "run", *args],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a background job starts with SIGINT ignored: give the sweep the default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    swept = Swept(0, "", 0.0, token)
    me = psutil.Process(proc.pid)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
    reader.start()
    sent = False
    while proc.poll() is None and time.monotonic() - started < 900:
        try:
            for child in me.children(recursive=True):
                swept.seen.setdefault(child.pid, child.create_time())
                # read again at every poll: a process seen between fork and exec changes it;
                # a zombie's is empty (a rank killed, not yet reaped): what it ran is kept
                line = " ".join(child.cmdline())
                if line or child.pid not in swept.cmdlines:
                    swept.cmdlines[child.pid] = line
        except psutil.Error:  # a child that ended while it was read
            pass
        if interrupt is not None and not sent and interrupt(swept):
            proc.send_signal(signum)
            sent = True
        time.sleep(0.1)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    swept.code, swept.stderr = proc.returncode, "".join(stderr)
    swept.seconds = time.monotonic() - started
    return swept


def failure_lines(swept: Swept) -> list[str]:
    return [line for line in swept.stderr.splitlines() if line.startswith("failed ")]


def check_the_rest(out: Path, swept: Swept, failing: dict[str, str], ok: set[str]) -> None:
    """The failing cases (label -> text in its error) are failed rows with one-line errors,
    each printed as one line; the others are ok; the report is written; nothing survives."""
    rows = {r["strategy"] + (f":{r['options']}" if r["options"] else ""): r for r in rows_of(out)}
    assert set(rows) == set(failing) | ok, (sorted(rows), swept.stderr[-3000:])
    for label, text in failing.items():
        row = rows[label]
        assert row["status"] == "failed" and text in row["error"], (label, row["error"])
        assert "\n" not in row["error"] and len(row["error"]) <= 1000
    for label in ok:
        assert rows[label]["status"] == "ok", rows[label]["error"]
    printed = failure_lines(swept)
    assert len(printed) == len(failing), swept.stderr[-3000:]
    assert (out / "index.html").exists() and (out / "verdicts.json").exists()
    assert "Traceback" not in swept.stderr, swept.stderr[-3000:]
    assert swept.survivors() == []


@pytest.mark.slow  # a real sweep or subprocess of 7-60 s: nox -s slow (CI) runs it
def test_oom_and_signals_in_one_process_are_failed_rows(tmp_path):
    # (b) OutOfMemoryError in a reset and in a backward; (c) SIGKILL, SIGABRT (os.abort()) and
    # SIGSEGV (a read of address 0): all forked from the fork server
    out = tmp_path / "run"
    faults = ["sigkill", "abort", "segfault", "oom-reset", "oom-backward"]
    labels = [f"faulty:fault={f}" for f in faults]
    swept = run_sweep([*TINY, "--strategies", ",".join([*labels, "block"]), "--out", str(out)])
    assert swept.code == 1, swept.stderr[-3000:]
    check_the_rest(
        out,
        swept,
        {
            labels[0]: "process killed by SIGKILL",
            labels[1]: "process killed by SIGABRT",
            labels[2]: "process killed by SIGSEGV",
            labels[3]: "OutOfMemoryError: planted out of memory in reset",
            labels[4]: "OutOfMemoryError: planted out of memory in backward",
        },
        {"block"},
    )
    # the ok row carries psutil's figures of its timed pairs and, with --threads 1, its pinning
    (ok,) = [r for r in rows_of(out) if r["status"] == "ok"]
    figures = ok["process"]
    assert figures["user_s"] > 0 and figures["seconds"] > 0
    assert figures["uss_peak_bytes"] <= figures["rss_peak_bytes"]
    assert figures["uss_final_bytes"] <= figures["uss_peak_bytes"]
    assert figures["involuntary_switches"] >= 0 and figures["voluntary_switches"] >= 0
    assert ok["pin"] is True and figures["affinity"] == psutil.Process().cpu_affinity()[-1:]
    assert {"physical_cores", "logical_cores", "cpu_freq_mhz", "psi"} <= set(ok["env"])
    page = (out / "index.html").read_text()
    assert "context<br>switches/s" in page and "pinned<br>to cores" in page
    # the noise signal that judged the rows: PSI where Linux has it, else involuntary switches
    judged = json.loads((out / "verdicts.json").read_text())
    assert judged["noisy_by"] == (["psi"] if ok["env"]["psi"] else ["involuntary_switches"])


@pytest.mark.slow  # a fresh interpreter per case (no fork server): ~25 s
def test_a_spawned_case_killed_by_a_signal(tmp_path):
    out = tmp_path / "run"
    swept = run_sweep(
        [*TINY, "--strategies", "faulty,block", "--out", str(out)],
        env={"ZEROGRAD_FAULT": "abort", "ZEROGRAD_FRESH_PROCESSES": "1"},
    )
    assert swept.code == 1, swept.stderr[-3000:]
    # Python's fault handler names the frame it died in (the case's log holds the stack)
    killed = "process killed by SIGABRT: Fatal Python error: Aborted in _commit (tests/fault_plugin"
    check_the_rest(out, swept, {"faulty": killed}, {"block"})


@pytest.mark.slow  # two ranks under torchrun, two cases: ~60 s each
@pytest.mark.parametrize("parallel", ["ddp", "fsdp2"])
def test_one_rank_raises(parallel, tmp_path):
    # (a) rank 1 raises in its second reset; rank 0 only sees a peer hang up
    out = tmp_path / "run"
    swept = run_sweep(
        [
            *TINY,
            *("--world-size", "2", "--parallel", parallel, "--grad-sync", "last"),
            *("--strategies", "faulty,block", "--out", str(out)),
        ],
        env={"ZEROGRAD_FAULT": "raise", "ZEROGRAD_FAULT_RANK": "1", "ZEROGRAD_FAULT_AT": "2"},
    )
    assert swept.code == 1, swept.stderr[-3000:]
    check_the_rest(out, swept, {"faulty": "rank 1 failed in reset"}, {"block"})
    # the rank's text holds brackets: printed as it came, on one line
    assert any("[/gloo/transport/tcp/pair.cc:553]" in line for line in failure_lines(swept))
    # the ok case's ranks ran pinned, each on a core of its own, and their figures merged
    (ok,) = [r for r in rows_of(out) if r["status"] == "ok"]
    ranks = ok["process"]["rank_affinity"]
    assert ok["pin"] and len(ranks) == 2 and all(len(c) == 1 for c in ranks), ok["process"]
    assert ranks[0] != ranks[1] and ok["process"]["over_ranks"] == "max"


def test_a_ranks_own_exception_comes_before_what_its_peer_saw_whichever_printed_first():
    # rank 0 saw its peer leave and printed first (as in a CI log); rank 1's cause goes first
    from benches.sweep.launch import _exception_lines

    peer = (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [127.0.0.1]:29500"
    )
    lines = ["[rank0]: Traceback", peer, "RuntimeError: rank 1 gave up", peer, "ValueError: x"]
    assert _exception_lines(lines) == ["RuntimeError: rank 1 gave up", "ValueError: x", peer]


@pytest.mark.slow  # two ranks under torchrun, three cases: ~45 s
def test_a_rank_killed_by_a_signal_is_named_not_its_peer(tmp_path):
    # a rank that segfaults prints no exception; its peer raises "Connection closed by peer".
    # The row names the rank and the signal first, whichever rank it was (rank 0: no row is
    # written; rank 1: rank 0 writes a failed row), and says where its stack is
    out = tmp_path / "run"
    labels = [f"faulty:fault=segfault:rank={rank}" for rank in (0, 1)]
    swept = run_sweep(
        [
            *TINY,
            *("--world-size", "2", "--grad-sync", "last"),
            *("--strategies", ",".join([*labels, "block"]), "--out", str(out)),
        ]
    )
    assert swept.code == 1, swept.stderr[-3000:]
    failing = {
        label: f"rank {rank} died by SIGSEGV (its stack: the case's log)"
        for rank, label in enumerate(labels)
    }
    check_the_rest(out, swept, failing, {"block"})
    for row in rows_of(out):
        if row["status"] == "failed":  # the cause comes first, before what the peer saw
            assert row["error"].removeprefix("process exited with code 1: ").startswith("rank ")


@pytest.mark.slow  # a rank that hangs until the case's timeout
def test_one_rank_hangs_and_the_timeout_kills_the_whole_tree(tmp_path):
    # (d) rank 1 sleeps for an hour in its first reset; rank 0 waits in a collective. The
    # timeout kills torchrun and both ranks (each in a session of its own)
    out = tmp_path / "run"
    timeout = 45
    swept = run_sweep(
        [
            *TINY,
            *("--world-size", "2", "--strategies", "faulty,block"),
            *("--timeout", str(timeout), "--out", str(out)),
        ],
        env={"ZEROGRAD_FAULT": "hang", "ZEROGRAD_FAULT_RANK": "1"},
    )
    assert swept.code == 1, swept.stderr[-3000:]
    check_the_rest(out, swept, {"faulty": f"timed out after {timeout} s"}, {"block"})
    assert len(swept.ranks("faulty-k1-n0-tiny-cpu-w2")) == 2, swept.cmdlines  # both gone now
    rows = {r["strategy"]: r for r in rows_of(out)}
    # no case outlived its timeout: the hung one ended within a few seconds of it
    assert rows["faulty"]["wall_s"]["total"] < timeout + 10, rows["faulty"]["wall_s"]


@pytest.mark.slow  # a distributed case interrupted while its ranks run
def test_ctrl_c_in_a_distributed_case_keeps_rows_and_leaves_no_rank(tmp_path):
    # (e) block finishes; while native's ranks run, Ctrl-C: exit 130, block's row kept
    out = tmp_path / "run"

    def ranks_of_the_second_case_run(swept: Swept) -> bool:
        if not (out / "results.jsonl").exists():
            return False
        ranks = [
            p
            for p in psutil.process_iter(["environ", "cmdline"])
            if (p.info["environ"] or {}).get("ZEROGRAD_FAULT_TOKEN") == swept.token
            and "RANK" in (p.info["environ"] or {})
        ]
        return len(ranks) >= 2

    swept = run_sweep(
        [*TINY, "--world-size", "2", "--strategies", "block,native", "--out", str(out)],
        interrupt=ranks_of_the_second_case_run,
    )
    assert swept.code == 130, swept.stderr[-3000:]
    rows = rows_of(out)
    assert [r["strategy"] for r in rows] == ["block"] and rows[0]["status"] == "ok"
    assert (out / "index.html").exists()
    assert "interrupted" in swept.stderr
    assert swept.survivors() == []


def _a_row_and_a_case_running(out: Path):
    """True once one row is written and the next case's process (a child of the fork server)
    has been seen alive for a second."""
    since: list[float] = []

    def running(swept: Swept) -> bool:
        if not (out / "results.jsonl").exists() or not rows_of(out):
            return False
        cases = [
            pid for pid, cmd in swept.cmdlines.items() if "zygote" in cmd and psutil.pid_exists(pid)
        ]
        if len(cases) < 2:  # the server and a case
            return False
        since.append(time.monotonic())
        return since[-1] - since[0] > 1.0

    return running


@pytest.mark.slow  # two tiny sweeps, each stopped in its second case
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_sweep_killed_leaves_no_fork_server_and_no_case(signum, tmp_path):
    """A `kill` (SIGTERM) ends the sweep as Ctrl-C does: exit 130, the first case's row and
    the report kept (each case runs 400 pairs: a few seconds). Even SIGKILL, which the sweep
    cannot catch, leaves neither its fork server nor the forked case running: they die with
    their parent (PR_SET_PDEATHSIG)."""
    out = tmp_path / "run"
    swept = run_sweep(
        [
            *TINY,
            "--strategies",
            "block,native",
            "--no-rotate",
            "--repeat",
            "400",
            "--out",
            str(out),
        ],
        interrupt=_a_row_and_a_case_running(out),
        signum=signum,
    )
    rows = rows_of(out)  # the first case's row, whichever ran first; none of the second
    assert len(rows) == 1 and rows[0]["status"] == "ok", rows
    if signum == signal.SIGTERM:
        assert swept.code == 130, swept.stderr[-3000:]
        assert (out / "index.html").exists()
    else:
        assert swept.code == -signal.SIGKILL
    deadline = time.monotonic() + 10  # a parent's death reaches its children at once
    while swept.survivors() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert swept.survivors() == []


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory no one may create in: a mode-0500 one, or for root (whom modes do not stop)
    sysfs's root, which refuses mkdir to everyone."""
    if os.geteuid() == 0:
        return Path("/sys")
    here = tmp_path / "read-only"
    here.mkdir()
    here.chmod(0o500)
    return here


@pytest.mark.parametrize("where", ["read-only", "under-a-file"])
def test_out_not_writable_is_one_line_before_any_case(where, tmp_path, capsys):
    # (f) nothing runs, nothing is written, one line and exit 2 (in this process: it ends
    # before the fork server or any case starts)
    if where == "read-only":
        out = _read_only_dir(tmp_path) / f"zerograd-{uuid.uuid4().hex[:8]}" / "run"
    else:
        (tmp_path / "a-file").write_text("x")
        out = tmp_path / "a-file" / "run"
    before = psutil.Process().children(recursive=True)
    code = cli.main(["run", *TINY, "--strategies", "block", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "Traceback" not in err
    if where == "read-only":  # found when the sweep makes its folder
        assert "cannot write to --out" in lines[0] and "before the first case" in lines[0]
    else:  # found where --out is parsed
        assert "is a file, not a folder" in lines[0]
    assert not out.exists()
    assert psutil.Process().children(recursive=True) == before


@pytest.mark.slow  # one case runs, then its row meets a full disk
def test_disk_full_at_the_first_row_stops_the_sweep_in_one_line(tmp_path):
    # (f) /dev/full answers every write with ENOSPC, as a full disk does
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").symlink_to("/dev/full")
    swept = run_sweep([*TINY, "--strategies", "block,native", "--out", str(out)])
    assert swept.code == 2, swept.stderr[-3000:]
    error = [line for line in swept.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and "No space left on device" in error[0], swept.stderr[-3000:]
    assert "at case rot2-block-k1-n0-tiny-cpu-r0" in error[0] and "Traceback" not in swept.stderr
    assert json.loads((out / "run.json").read_text())["run_id"]  # whole, from before
    assert not (out / "index.html").exists() and not list(out.glob(".*.tmp"))
    assert not (out / "logs" / "native-k1-n0-tiny-cpu-r0.log").exists()  # the sweep stopped
    assert swept.survivors() == []
