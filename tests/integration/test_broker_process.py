"""``mqbroker`` and ``pocketmq up`` as real processes: serve, SIGTERM = clean shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.remoting.common.sched import thread_slice_ns
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.testing.procs import free_port, servers, wait_port
from pocketmq.testing.wire import Wire
from tests.wire_calls import route_code

pytestmark = pytest.mark.integration


async def send_pull_commit(broker_addr: str) -> None:
    wire = Wire(broker_addr)
    try:
        r = await wire.send("ProcTopic", b"hello", tags="A", keys="k")
        assert r.code == ResponseCode.SUCCESS, r.remark
        for _ in range(100):
            r = await wire.pull("ProcTopic", 0, 0, sys_flag=0x4)
            if r.code == ResponseCode.SUCCESS:
                break
            await asyncio.sleep(0.02)
        assert [m.body for m in decode_messages(r.body)] == [b"hello"]
        r = await wire.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "ProcTopic", "queueId": "0", "commitOffset": "1"},
        )
        assert r.code == ResponseCode.SUCCESS
    finally:
        await wire.close()


def slices(pid: int) -> tuple[int | None, set[int]]:
    """The scheduler slice (ns) of ``pid``'s main thread, and those of its other threads."""

    def one(path: str) -> int | None:
        try:
            with open(path) as f:
                return next((int(ln.rsplit(":", 1)[1]) for ln in f if ln.startswith("se.slice")), None)
        except OSError:  # (a thread that ended meanwhile)
            return None

    others = {one(f"/proc/{pid}/task/{t}/sched") for t in os.listdir(f"/proc/{pid}/task") if t != str(pid)}
    return one(f"/proc/{pid}/sched"), {s for s in others if s is not None}


def assert_loop_slice(pid: int, micros: int) -> None:
    """``loopSchedSliceMicros=micros``: the loop thread's slice, no other thread's."""
    default = thread_slice_ns()
    loop, others = slices(pid)
    if default is None or loop is None:
        return  # (no per-thread slices here: tests/remoting/common/test_sched.py says so)
    if loop == default:
        pytest.fail(f"the loop thread kept the default slice ({default} ns): loopSchedSliceMicros ignored")
    want = micros * 1000
    assert loop == want and others and default in others and want not in others, (loop, others)


def test_mqbroker_sigterm_flushes_persists_and_unregisters(tmp_path: Path) -> None:
    with servers(tmp_path, {"loopSchedSliceMicros": "100"}) as s:
        assert s.broker.proc is not None
        assert_loop_slice(s.broker.proc.pid, 100)
        asyncio.run(send_pull_commit(s.broker.addr))
        assert (s.store_dir / "abort").exists()  # a running store
        assert s.broker.stop() == 0
        assert not (s.store_dir / "abort").exists()
        assert "ProcTopic@G" in (s.store_dir / "config" / "consumerOffset.json").read_text()
        assert "ProcTopic" in (s.store_dir / "config" / "topics.json").read_text()
        assert asyncio.run(route_code(s.namesrv.addr, "TBW102")) == ResponseCode.TOPIC_NOT_EXIST
        log = s.broker.log_tail()
        assert "boot success" in log and "127.0.0.1" in log and "unregistered broker broker-a" in log


def test_pocketmq_up_serves_and_stops_cleanly(tmp_path: Path) -> None:
    ns_port, broker_port = free_port(), free_port()
    argv = [
        sys.executable, "-m", "pocketmq.deploy", "up", "--data-dir", str(tmp_path / "data"),
        "--namesrv-port", str(ns_port), "--broker-port", str(broker_port), "--set", "fastListenEnable=false",
        "--set", "haListenPort=0",  # listenPort + 1 may be an ephemeral socket's port by now
        "--set", "loopSchedSliceMicros=250",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_port(broker_port, proc)  # type: ignore[arg-type]
        wait_port(ns_port, proc)  # type: ignore[arg-type]
        assert_loop_slice(proc.pid, 250)
        asyncio.run(send_pull_commit(f"127.0.0.1:{broker_port}"))
        assert asyncio.run(route_code(f"127.0.0.1:{ns_port}", "ProcTopic")) == ResponseCode.SUCCESS
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert (
        f"name server 127.0.0.1:{ns_port}" in out.decode()
        and f"broker-a 127.0.0.1:{broker_port}" in out.decode()
    )
    data = tmp_path / "data"
    assert (data / "broker-a" / "config" / "topics.json").exists() and not (
        data / "broker-a" / "abort"
    ).exists()


def test_mqbroker_bad_config_exits_2(tmp_path: Path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=b\nlistenPort=not-a-port\n")
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.broker", "-c", str(conf)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "listenPort" in out.stderr and f"{conf}:2" in out.stderr


def test_mqbroker_port_in_use_exits_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "pocketmq.broker", "--set", f"listenPort={port}", "--set", "listenHost=127.0.0.1",
             "--set", f"storePathRootDir={tmp_path}", "--set", "fastListenEnable=false"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert out.returncode == 1 and "address already in use" in out.stderr.lower()
    assert not (tmp_path / "abort").exists()  # the store was closed, not left "running"


#: run in a fresh interpreter: the process-level ``serve`` of each server (as ``mqnamesrv`` and
#: ``mqbroker`` run it, ``freeze_gc=True``), recording the heap's state when its remoting port
#: opens and when its boot line is printed
_GC_PROBE = """
import asyncio, gc, json, sys
from pocketmq.broker import __main__ as broker_main
from pocketmq.broker.config import load_broker_config
from pocketmq.namesrv import __main__ as namesrv_main
from pocketmq.namesrv.config import load_namesrv_config
from pocketmq.remoting.transport.server import RemotingServer

seen = []
opened = RemotingServer.start

async def start(self):
    seen.append(["listen", gc.get_freeze_count(), gc.get_stats()[2]["collections"]])
    await opened(self)

RemotingServer.start = start

def booted(real):
    def boot_done(line, *, freeze_gc):
        seen.append(["boot", gc.get_freeze_count(), gc.get_stats()[2]["collections"]])
        real(line, freeze_gc=freeze_gc)
        seen.append(["booted", gc.get_freeze_count(), gc.get_stats()[2]["collections"]])
        stop.set()
    return boot_done

broker_main.boot_done = booted(broker_main.boot_done)
namesrv_main.boot_done = booted(namesrv_main.boot_done)
root = sys.argv[1]

async def main():
    global stop
    stop = asyncio.Event()
    cfg = load_namesrv_config(None, ("listenPort=0", f"kvConfigPath={root}/kv.json"))
    await namesrv_main.serve(cfg, stop, freeze_gc=True)
    stop = asyncio.Event()
    cfg = load_broker_config(None, (f"storePathRootDir={root}/store", f"rocketmqHome={root}", "listenPort=0",
                                    "haListenPort=0", "fastListenEnable=false"))
    await broker_main.serve(cfg, stop, freeze_gc=True)
    print(json.dumps(seen))

asyncio.run(main())
"""


def test_servers_collect_their_heap_before_their_ports_open(tmp_path: Path) -> None:
    """``mqnamesrv`` and ``mqbroker`` run their one full collection and freeze the heap before
    their remoting ports open; once a port is open (clients may be connected), no full
    collection runs up to and with the boot line: one there took 10-110 ms on the broker's
    loop (issue 21)."""
    out = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    kinds = [kind for kind, _, _ in seen]
    assert kinds == ["listen", "boot", "booted"] * 2, seen
    for (_, frozen, full_at_listen), (_, _, full_at_boot), (_, _, full_after) in (seen[0:3], seen[3:6]):
        assert frozen > 0  # the heap was frozen before the port opened
        assert full_at_boot == full_at_listen == full_after  # none once the port is open
