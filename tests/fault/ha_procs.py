"""A name server and a master/slave pair of real ``mqbroker`` processes on loopback (issue 16),
and what the HA process tests read from them: the runtime table, routes, CommitLog bytes.

Shared by ``tests/fault/test_ha_process.py`` and the HA interop tests (``tests/interop``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pocketmq.deploy.cluster import free_broker_port
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.testing.procs import STORE_KEYS, ServerProcess, free_port
from pocketmq.testing.wire import Wire

__all__ = [
    "SEGMENT",
    "broker",
    "caught_up",
    "commitlog",
    "ha_processes",
    "managed",
    "namesrv_process",
    "precreate",
    "route",
    "runtime",
]

SEGMENT = int(STORE_KEYS["mappedFileSizeCommitLog"])


def precreate(store: Path, topics: dict[str, int]) -> None:
    path = store / "config" / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = {
        topic: {"order": False, "perm": 6, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
                "topicName": topic, "topicSysFlag": 0, "writeQueueNums": queues}
        for topic, queues in topics.items()
    }  # fmt: skip
    path.write_text(json.dumps({"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table}))


def broker(
    root: Path, name: str, port: int, namesrv: str, topics: dict[str, int], **keys: str
) -> ServerProcess:
    """An ``mqbroker`` of ``broker-a`` with its store in ``root / name`` (not started)."""
    store = root / name
    precreate(store, topics)
    all_keys = {
        "brokerName": "broker-a", "listenPort": str(port), "listenHost": "127.0.0.1", "brokerIP1": "127.0.0.1",
        "fastListenEnable": "false", "haListenPort": "0", "namesrvAddr": namesrv, "storePathRootDir": str(store), **STORE_KEYS, **keys,
    }  # fmt: skip
    argv = [sys.executable, "-m", "pocketmq.broker"]
    for k, v in all_keys.items():
        argv += ["--set", f"{k}={v}"]
    return ServerProcess(argv, port, root / f"{name}.log")


def namesrv_process(root: Path) -> ServerProcess:
    ns_port = free_port()
    ns_dir = root / "namesrv"
    return ServerProcess(
        [sys.executable, "-m", "pocketmq.namesrv", "--set", f"listenPort={ns_port}", "--set", "bindAddress=127.0.0.1",
         "--set", f"kvConfigPath={ns_dir / 'kv.json'}", "--set", f"configStorePath={ns_dir / 'ns.properties'}"],
        ns_port, root / "namesrv.log",
    )  # fmt: skip


def ha_processes(
    root: Path, topics: dict[str, int], role: str = "SYNC_MASTER"
) -> tuple[ServerProcess, ServerProcess, ServerProcess]:
    """A name server, a master (``role``) and its slave (not started), on free ports under ``root``."""
    namesrv = namesrv_process(root)
    mport = free_broker_port(set())
    sport = free_broker_port({mport - 2, mport, mport + 1})
    master = broker(root, "master", mport, namesrv.addr, topics, brokerRole=role)
    slave = broker(root, "slave", sport, namesrv.addr, topics, brokerRole="SLAVE", brokerId="1")
    return namesrv, master, slave


def commitlog(store: Path, start: int, end: int, segment: int = SEGMENT) -> bytes:
    """CommitLog bytes [start, end) read from the segment files."""
    out = bytearray()
    off = start
    while off < end:
        base = off - off % segment
        with open(store / "commitlog" / f"{base:020d}", "rb") as f:
            f.seek(off - base)
            chunk = f.read(min(end, base + segment) - off)
        assert chunk, off
        out += chunk
        off += len(chunk)
    return bytes(out)


async def runtime(addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table."""
    w = Wire(addr)
    try:
        r = await w.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        assert r.code == ResponseCode.SUCCESS
        return dict(json.loads(r.body or b"{}")["table"])
    finally:
        await w.close()


async def route(namesrv: str, topic: str) -> TopicRouteData | None:
    w = Wire(namesrv)
    try:
        r = await w.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return TopicRouteData.decode(r.body or b"") if r.code == ResponseCode.SUCCESS else None
    finally:
        await w.close()


@contextlib.contextmanager
def managed(procs: list[ServerProcess], stop_timeout: float = 30.0) -> Iterator[list[ServerProcess]]:
    """Stops every process at the end (last first); prints each one's log tail if the body fails."""
    try:
        yield procs
    except BaseException:
        for p in procs:
            print(f"--- {p.log.name}:\n{p.log_tail(40)}")
        raise
    finally:
        for p in reversed(procs):
            p.stop(stop_timeout)


async def caught_up(master: str, slave: str, timeout: float = 60.0) -> int:
    """The master's CommitLog end, once the slave's has reached it."""
    end = int((await runtime(master))["commitLogMaxOffset"])
    deadline = time.monotonic() + timeout
    while int((await runtime(slave))["commitLogMaxOffset"]) != end:
        assert time.monotonic() < deadline, f"the slave {slave} did not reach the master's end {end}"
        await asyncio.sleep(0.05)
    return end
