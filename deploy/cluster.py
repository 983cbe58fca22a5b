"""Local multi-process clusters: the plan (which processes, ports, files), the state file, and
process control for ``pocketmq cluster up|down|status`` (:mod:`pocketmq.deploy.launcher`).

Layout under the cluster directory::

    <dir>/cluster.json            state: every process started (pid, start time, argv, address)
    <dir>/logs/<name>.log         each process's stdout + stderr
    <dir>/namesrv-<i>/            kvConfig.json, namesrv.properties
    <dir>/<broker>[-s<j>]/        broker store (commitlog, consumequeue, index, config/)

Name servers are ``namesrv-0..K-1`` on ``namesrvPort + i``; master ``i`` is broker group
``broker-a``, ``broker-b``... (brokerId 0) on ``brokerPort + 10*i``; its slave ``j`` has brokerId
``j+1`` and port ``brokerPort + 10*i + 100*(j+1)``. A broker also uses ``port - 2`` (fast
channel) and ``port + 1`` (HA). Port 0 means "pick free ports".

Only processes recorded in the state file are ever signalled, and only while their
``/proc/<pid>/stat`` start time still matches the recorded one, so a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "STATE_FILE",
    "ClusterError",
    "Proc",
    "broker_name",
    "free_broker_port",
    "free_port",
    "is_alive",
    "plan",
    "read_state",
    "start_proc",
    "stop_procs",
    "write_state",
]

STATE_FILE = "cluster.json"
#: Store sizes for a local cluster (RocketMQ's 1 GiB CommitLog segments are much for a dev box).
LOCAL_STORE_DEFAULTS = {
    "mappedFileSizeCommitLog": str(128 << 20),
    "maxHashSlotNum": "500000",
    "maxIndexNum": "2000000",
}


class ClusterError(Exception):
    """A cluster operation that cannot go on; the message is meant for the user."""


@dataclass(slots=True)
class Proc:
    """One server process of the cluster (as planned, then as started)."""

    role: str  # "namesrv" | "broker"
    name: str  # namesrv-0, broker-a, broker-a-s1
    port: int
    argv: list[str]
    log: str
    broker_name: str | None = None
    broker_id: int | None = None
    pid: int | None = None
    start_time: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def broker_name(i: int) -> str:
    return f"broker-{chr(ord('a') + i)}" if i < 26 else f"broker-{i}"


# ------------------------------------------------------------------------------------- ports
def _bindable(port: int) -> bool:
    if not 0 < port < 65536:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_broker_port(taken: set[int]) -> int:
    """A free port ``p`` whose fast channel ``p-2`` and HA port ``p+1`` are free too."""
    for _ in range(200):
        p = free_port()
        group = {p - 2, p, p + 1}
        if not group & taken and all(_bindable(x) for x in (p - 2, p + 1)):
            return p
    raise ClusterError("could not find three free ports for a broker")


# -------------------------------------------------------------------------------------- plan
def plan(
    root: Path,
    *,
    masters: int,
    slaves: int = 0,
    namesrvs: int = 1,
    namesrv_port: int = 9876,
    broker_port: int = 10911,
    host: str = "127.0.0.1",
    namesrv_conf: str | None = None,
    master_conf: str | None = None,
    slave_conf: str | None = None,
    overrides: Sequence[str] = (),
    log_level: str = "INFO",
    python: str = sys.executable,
    pick_namesrv_port: Callable[[], int] = free_port,
    pick_broker_port: Callable[[set[int]], int] = free_broker_port,
) -> list[Proc]:
    """Every process of the cluster, name servers first. Pure apart from picking free ports
    (injected) when a base port is 0."""
    if masters < 1:
        raise ClusterError("--masters must be at least 1")
    if slaves < 0 or namesrvs < 1:
        raise ClusterError("--slaves must be >= 0 and --namesrvs >= 1")
    logs = root / "logs"
    procs: list[Proc] = []
    taken: set[int] = set()
    for i in range(namesrvs):
        port = pick_namesrv_port() if namesrv_port == 0 else namesrv_port + i
        taken.add(port)
        d = root / f"namesrv-{i}"
        argv = [python, "-m", "pocketmq.namesrv", "--log-level", log_level]
        if namesrv_conf:
            argv += ["-c", namesrv_conf]
        for kv in (f"listenPort={port}", f"bindAddress={host}", f"kvConfigPath={d / 'kvConfig.json'}",
                   f"configStorePath={d / 'namesrv.properties'}"):  # fmt: skip
            argv += ["--set", kv]
        procs.append(Proc("namesrv", f"namesrv-{i}", port, argv, str(logs / f"namesrv-{i}.log")))
    ns_list = ";".join(f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{p.port}" for p in procs)
    for i in range(masters):
        for j in range(slaves + 1):  # j = 0: the master
            name = broker_name(i)
            proc_name = name if j == 0 else f"{name}-s{j}"
            if broker_port == 0:
                port = pick_broker_port(taken)
            else:
                port = broker_port + 10 * i + 100 * j
            taken.update({port - 2, port, port + 1})
            conf = master_conf if j == 0 else slave_conf
            role = ("ASYNC_MASTER" if j == 0 else "SLAVE") if slaves else "ASYNC_MASTER"
            keys = {
                **LOCAL_STORE_DEFAULTS,
                "brokerClusterName": "DefaultCluster",
                "brokerName": name,
                "brokerId": str(j),
                "brokerRole": role,
                "namesrvAddr": ns_list,
                "brokerIP1": "127.0.0.1" if host in ("0.0.0.0", "") else host,
                "listenHost": host,
                "listenPort": str(port),
                "haListenPort": str(port + 1),
                "storePathRootDir": str(root / proc_name),
            }
            argv = [python, "-m", "pocketmq.broker", "--log-level", log_level]
            if conf:
                argv += ["-c", conf]
            for k, v in keys.items():
                argv += ["--set", f"{k}={v}"]
            for kv in overrides:
                argv += ["--set", kv]
            procs.append(Proc("broker", proc_name, port, argv, str(logs / f"{proc_name}.log"), name, j))
    return procs


# ------------------------------------------------------------------------------------- state
def write_state(root: Path, procs: Sequence[Proc], meta: dict[str, Any]) -> None:
    """Atomically (temp + rename) record the processes started so far."""
    path = root / STATE_FILE
    tmp = path.with_suffix(".tmp")
    doc = {**meta, "processes": [asdict(p) for p in procs]}
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def read_state(root: Path) -> tuple[list[Proc], dict[str, Any]] | None:
    """The recorded processes and metadata; None when there is no state file.

    Raises:
        ClusterError: the state file is unreadable.
    """
    path = root / STATE_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from exc
    procs = [Proc(**p) for p in doc.pop("processes", [])]
    return procs, doc


# ---------------------------------------------------------------------------------- processes
def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` fields after the command name (field 3 = state, 22 = start time)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def is_alive(proc: Proc) -> bool:
    """Running (not a zombie) and still the process that was started (same start time)."""
    if proc.pid is None:
        return False
    fields = _stat(proc.pid)
    if fields is None:
        if Path("/proc").is_dir():
            return False
        try:  # no /proc (not Linux): existence only
            os.kill(proc.pid, 0)
        except OSError:
            return False
        return True
    if fields[0] in ("Z", "X"):
        return False
    return proc.start_time is None or fields[19] == proc.start_time


def start_proc(proc: Proc) -> None:
    """Spawn ``proc`` in its own session (it outlives the launcher), output to its log file."""
    Path(proc.log).parent.mkdir(parents=True, exist_ok=True)
    with open(proc.log, "ab") as out:
        child = subprocess.Popen(
            proc.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    proc.pid = child.pid
    proc.start_time = start_time(child.pid)


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def log_tail(proc: Proc, lines: int = 5) -> str:
    try:
        text = Path(proc.log).read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def stop_procs(procs: Sequence[Proc], timeout: float = 30.0) -> list[Proc]:
    """SIGTERM every live recorded process (brokers first, so they unregister from running name
    servers), wait for them, SIGKILL what is left after ``timeout``. Returns the ones signalled."""
    ordered = [p for p in procs if p.role == "broker"][::-1] + [p for p in procs if p.role != "broker"][::-1]
    signalled: list[Proc] = []
    for group in ([p for p in ordered if p.role == "broker"], [p for p in ordered if p.role != "broker"]):
        live = [p for p in group if is_alive(p)]
        for p in live:
            assert p.pid is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
            signalled.append(p)
        deadline = time.monotonic() + timeout
        while any(is_alive(p) for p in live) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in live:
            if is_alive(p):
                assert p.pid is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
    return signalled
