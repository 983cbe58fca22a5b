"""A real `pocketmq cluster up --masters 2` (separate processes), used with mqadmin, then `down`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.deploy import cluster as cl

pytestmark = pytest.mark.integration

LAUNCHER = [sys.executable, "-m", "pocketmq.deploy.launcher"]
MQADMIN = str(Path(sys.executable).with_name("mqadmin"))
SMALL_STORE = [
    "--set",
    "mappedFileSizeCommitLog=4194304",
    "--set",
    "maxHashSlotNum=10000",
    "--set",
    "maxIndexNum=40000",
]


def run(argv: list[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_cluster_up_mqadmin_down(tmp_path: Path) -> None:
    root = tmp_path / "cl"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        up = run([*LAUNCHER, "up", "--masters", "2", "--dir", str(root), "--namesrv-port", "0",
                  "--broker-port", "0", *SMALL_STORE, "--json"])  # fmt: skip
        assert up.returncode == 0, up.stderr
        doc = json.loads(up.stdout)
        assert doc["healthy"] is True
        assert [(p["role"], p["name"]) for p in doc["processes"]] == [
            ("namesrv", "namesrv-0"), ("broker", "broker-a"), ("broker", "broker-b")
        ]  # fmt: skip
        assert all(p["alive"] and p["listening"] for p in doc["processes"])
        ns = doc["namesrvAddr"]

        listing = run([MQADMIN, "clusterList", "-n", ns, "--json"])
        brokers = json.loads(listing.stdout)["brokers"]
        assert sorted(b["brokerName"] for b in brokers) == ["broker-a", "broker-b"]
        assert all(b["error"] is None and "putTps" in b["stats"] for b in brokers)
        created = run([MQADMIN, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "Launched", "--json"])
        assert len(json.loads(created.stdout)["brokers"]) == 2
        sent = run([MQADMIN, "sendMessage", "-n", ns, "-t", "Launched", "-p", "hello", "--json"])
        assert json.loads(sent.stdout)["sendStatus"] == "SEND_OK", sent.stderr

        status = run([*LAUNCHER, "status", "--dir", str(root), "--json"])
        assert status.returncode == 0 and json.loads(status.stdout)["healthy"] is True
        again = run([*LAUNCHER, "up", "--masters", "1", "--dir", str(root)])
        assert again.returncode == 1 and "already running" in again.stderr

        recorded, _ = cl.read_state(root) or ([], {})
        assert len(recorded) == 3 and all(cl.is_alive(p) for p in recorded)
        down = run([*LAUNCHER, "down", "--dir", str(root), "--json"])
        assert down.returncode == 0, down.stderr
        stopped = json.loads(down.stdout)["stopped"]
        assert sorted(p["pid"] for p in stopped) == sorted(p.pid for p in recorded if p.pid is not None)
        assert not any(cl.is_alive(p) for p in recorded)
        assert bystander.poll() is None  # nothing else was touched
        assert (root / "logs" / "broker-a.log").exists() and (
            root / "broker-a"
        ).is_dir()  # data and logs stay
        assert run([*LAUNCHER, "status", "--dir", str(root)]).returncode == 1
        unreachable = run([MQADMIN, "clusterList", "-n", ns])
        assert unreachable.returncode == 3
    finally:
        bystander.kill()
        bystander.wait()
        state = cl.read_state(root)
        if state is not None:  # a failed assertion above must not leak servers
            cl.stop_procs(state[0], timeout=5)
