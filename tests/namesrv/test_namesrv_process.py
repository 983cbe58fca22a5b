"""The real ``mqnamesrv`` console script, run as a subprocess on ephemeral ports."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.remoting.common import properties
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import ClusterInfo, TopicRouteData
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from tests.namesrv.test_processor import register_request, request, route_request, wrapper

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MQNAMESRV = Path(sys.executable).parent / "mqnamesrv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Namesrv:
    """One ``mqnamesrv`` child process (own session; killed at teardown if still running)."""

    def __init__(self, tmp: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.stderr_path = tmp / f"mqnamesrv-{self.port}.stderr"
        self.kv_path = tmp / f"kv-{self.port}.json"
        argv = [
            str(MQNAMESRV),
            *args,
            "--set",
            f"listenPort={self.port}",
            "--set",
            "bindAddress=127.0.0.1",
            "--set",
            f"kvConfigPath={self.kv_path}",
            "--set",
            f"configStorePath={tmp / f'namesrv-{self.port}.properties'}",
        ]
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, start_new_session=True, cwd=tmp
            )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"mqnamesrv exited {self.proc.returncode}:\n{self.stderr}"
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        raise AssertionError(f"mqnamesrv not listening after {timeout}s:\n{self.stderr}")

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[list[Namesrv]]:
    started: list[Namesrv] = []
    yield started
    for ns in started:
        if ns.proc.poll() is None:
            ns.signal(signal.SIGKILL)
            ns.proc.wait(5)
        if ns.proc.stdout is not None:
            ns.proc.stdout.close()


def start(spawn: list[Namesrv], tmp_path: Path, *args: str) -> Namesrv:
    ns = Namesrv(tmp_path, *args)
    spawn.append(ns)
    ns.wait_ready()
    return ns


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MQNAMESRV), *args], capture_output=True, text=True, timeout=30, check=False)


# ---- command line ------------------------------------------------------------------------------


def test_print_config_and_exit() -> None:
    proc = run_cli("-c", str(REPO / "conf" / "namesrv.conf"), "-p", "--set", "listenPort=1234")
    assert proc.returncode == 0, proc.stderr
    props = properties.loads(proc.stdout)
    assert props["listenPort"] == "1234"
    assert props["scanNotActiveBrokerInterval"] == "10000" and props["brokerChannelExpiredTime"] == "120000"
    assert props["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    default = properties.loads(run_cli("-p").stdout)
    assert default["listenPort"] == "9876"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--set", "listenPort=abc"), "listenPort"),
        (("--set", "listenPort=70000"), "listenPort"),
        (("--set", "noSuchKey=1"), "noSuchKey"),
        (("--set", "brokerChannelExpiredTime"), "brokerChannelExpiredTime"),
        (("-c", "/nonexistent/namesrv.conf"), "/nonexistent/namesrv.conf"),
    ],
)
def test_bad_config_is_one_clear_line(args: tuple[str, ...], named: str) -> None:
    proc = run_cli(*args, "-p")
    assert proc.returncode != 0 and proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mqnamesrv: ") and named in lines[0], proc.stderr


def test_bad_conf_file_names_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=9876\norderMessageEnable=perhaps\n")
    proc = run_cli("-c", str(conf), "-p")
    assert proc.returncode == 2
    assert f"{conf}:2" in proc.stderr and "orderMessageEnable" in proc.stderr


def test_port_in_use_is_a_startup_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ns = Namesrv(tmp_path, port=port)
        try:
            assert ns.wait(15) == 1
        finally:
            if ns.proc.stdout is not None:
                ns.proc.stdout.close()
    assert f"cannot listen on 127.0.0.1:{port}" in ns.stderr


# ---- serving -----------------------------------------------------------------------------------


async def test_serves_and_shuts_down_cleanly_on_sigterm(spawn: list[Namesrv], tmp_path: Path) -> None:
    ns = start(spawn, tmp_path)
    client = RemotingClient(RemotingClientConfig(request_timeout=5.0))
    try:
        unknown = await client.invoke(ns.addr, route_request("T1"))
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
        reply = await client.invoke(ns.addr, register_request("broker-a", "10.0.0.1:10911", wrapper("T1")))
        assert reply.code == ResponseCode.SUCCESS
        routed = await client.invoke(ns.addr, route_request("T1"))
        assert (
            routed.code == 0
            and TopicRouteData.decode(routed.body or b"").broker_datas[0].broker_name == "broker-a"
        )
        put = request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
        assert (await client.invoke(ns.addr, put)).code == 0
        unknown_code = await client.invoke(ns.addr, request(4242))
        assert unknown_code.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        await client.close()
    ns.signal(signal.SIGTERM)
    assert await asyncio.to_thread(ns.wait, 10) == 0
    assert ns.proc.stdout is not None
    assert "The Name Server boot success. serializeType=JSON" in ns.proc.stdout.read().decode()
    assert json.loads(ns.kv_path.read_text()) == {"configTable": {"ns": {"k": "v"}}}
    log = ns.stderr
    assert "broker registered cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911" in log
    assert "name server stopped" in log and "Traceback" not in log


async def test_two_name_servers_side_by_side(spawn: list[Namesrv], tmp_path: Path) -> None:
    first, second = start(spawn, tmp_path), start(spawn, tmp_path)
    broker = RemotingClient(RemotingClientConfig(request_timeout=5.0))
    client = RemotingClient(RemotingClientConfig(request_timeout=5.0, connect_timeout=1.0))
    try:
        # A broker registers with every name server it knows (BrokerOuterAPI.registerBrokerAll).
        for ns in (first, second):
            cmd = register_request("broker-a", "10.0.0.1:10911", wrapper("T1", "T2"))
            assert (await broker.invoke(ns.addr, cmd)).code == 0
        for ns in (first, second):
            routed = await client.invoke(ns.addr, route_request("T2"))
            assert routed.code == 0
            info = await client.invoke(ns.addr, request(RequestCode.GET_BROKER_CLUSTER_INFO))
            assert ClusterInfo.decode(info.body or b"").cluster_addr_table == {"DefaultCluster": ["broker-a"]}

        first.signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
        with pytest.raises(ConnectionError):
            await client.invoke(first.addr, route_request("T2"))
        # The survivor is unaffected: same routes, and the broker keeps registering with it.
        routed = await client.invoke(second.addr, route_request("T2"))
        assert routed.code == 0
        assert TopicRouteData.decode(routed.body or b"").broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
        again = register_request("broker-a", "10.0.0.1:10911", wrapper("T1", "T2", "T3", version=2))
        assert (await broker.invoke(second.addr, again)).code == 0
        assert (await client.invoke(second.addr, route_request("T3"))).code == 0
    finally:
        await broker.close()
        await client.close()


def test_corrupt_kv_file_is_a_startup_error(tmp_path: Path) -> None:
    kv = tmp_path / "kvConfig.json"
    kv.write_text("{not json")
    proc = run_cli(
        "--set", f"listenPort={free_port()}", "--set", "bindAddress=127.0.0.1", "--set", f"kvConfigPath={kv}",
    )  # fmt: skip
    assert proc.returncode == 1
    assert f"mqnamesrv: kvConfigPath {kv}" in proc.stderr and "Traceback" not in proc.stderr
