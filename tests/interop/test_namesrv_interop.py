"""The real C++ client (rocketmq 0.4.4 wheel) and ali-ons against a real ``mqnamesrv`` process.

1. An unknown topic: both clients ask for its route (and TBW102's), get TOPIC_NOT_EXIST and fail
   with their own error text (C++: "No route info of this topic"; ali-ons shows our remark).
2. After a REGISTER_BROKER whose ``brokerAddr`` is a raw socket this test listens on, both route
   lookups succeed: each client connects to that advertised address and sends its message there
   (SEND_MESSAGE or SEND_MESSAGE_V2 for the topic), which only happens after it parsed our route data (both
   clients ask with a version < 401 and so get fastjson's unquoted-integer-key form).

The fake broker answers every request with SYSTEM_ERROR so the producers give up quickly.
Prerequisites are checked by ``tests.interop.drivers`` and fail loudly when missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from tests.interop import drivers
from tests.interop.wire import FRAME_PREFIX, Frame, decode_frame, encode_response
from tests.namesrv.test_namesrv_process import Namesrv
from tests.namesrv.test_processor import register_request, route_request, wrapper

pytestmark = [pytest.mark.interop, pytest.mark.integration]

FAKE_REMARK = "fake broker: not storing anything"


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Namesrv]:
    drivers.cpp_available()
    drivers.node_available()
    ns = Namesrv(tmp_path_factory.mktemp("namesrv"))
    try:
        ns.wait_ready()
        yield ns
    finally:
        if ns.proc.poll() is None:
            ns.signal(15)
            with contextlib.suppress(Exception):
                ns.wait(10)
        if ns.proc.poll() is None:
            ns.signal(9)
            ns.proc.wait(5)
        if ns.proc.stdout is not None:
            ns.proc.stdout.close()


class FakeBroker(asyncio.Protocol):
    """Records every frame a client sends to the advertised broker address; answers SYSTEM_ERROR."""

    frames: list[tuple[str, Frame]]
    arrived: asyncio.Event

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.peer = "{}:{}".format(*transport.get_extra_info("peername"))
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (length,) = FRAME_PREFIX.unpack_from(self.buf, 0)[:1]
            if len(self.buf) < 4 + length:
                return
            raw, self.buf = bytes(self.buf[: 4 + length]), self.buf[4 + length :]
            frame = decode_frame(raw)
            self.frames.append((self.peer, frame))
            self.arrived.set()
            self.transport.write(encode_response(ResponseCode.SYSTEM_ERROR, frame.opaque, remark=FAKE_REMARK))


@pytest.fixture
async def fake_broker() -> AsyncIterator[tuple[str, type[FakeBroker]]]:
    class Recorder(FakeBroker):
        frames: list[tuple[str, Frame]] = []
        arrived = asyncio.Event()

    server = await asyncio.get_running_loop().create_server(Recorder, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", Recorder
    finally:
        server.close()
        await server.wait_closed()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def test_unknown_topic_is_topic_not_exist_for_both_clients(namesrv: Namesrv, tmp_path: Path) -> None:
    topic = unique("NoSuchTopic")
    probe = RemotingClient()
    try:  # what both clients receive, seen from our side of the wire
        reply = await probe.invoke(namesrv.addr, route_request(topic, version=333))
        assert reply.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await probe.close()
    cpp, js = await asyncio.gather(
        drivers.produce_async(
            "cpp", namesrv.addr, topic, 1, check=False, timeout=60, log_dir=tmp_path / "cpp"
        ),
        drivers.produce_async("js", namesrv.addr, topic, 1, check=False, timeout=60, log_dir=tmp_path / "js"),
    )
    assert not cpp.ok and not js.ok
    (cpp_error,) = cpp.of("send_error")
    assert f"No route info of this topic: {topic}" in cpp_error["error"], cpp.describe()
    cpp_log = "".join(p.read_text(errors="replace") for p in (tmp_path / "cpp").rglob("*.log*"))
    assert f"connect server with addr:{namesrv.addr} success" in cpp_log  # it did ask us
    (js_error,) = js.of("send_error")
    assert js_error["error"] == (
        f"No topic route info in name server for the topic: {topic}\n"
        "See http://rocketmq.apache.org/docs/faq/ for further details."
    ), js.describe()


async def test_registered_topic_routes_both_clients_to_the_broker(
    namesrv: Namesrv, fake_broker: tuple[str, type[FakeBroker]], tmp_path: Path
) -> None:
    broker_addr, recorder = fake_broker
    topic = unique("RoutedTopic")
    # The registering connection stays open: closing it would unregister the broker at once.
    broker = RemotingClient(RemotingClientConfig(request_timeout=5.0))
    try:
        reply = await broker.invoke(
            namesrv.addr, register_request("broker-fake", broker_addr, wrapper(topic))
        )
        assert reply.code == ResponseCode.SUCCESS
        legacy = await broker.invoke(namesrv.addr, route_request(topic, version=333))
        assert f'"brokerAddrs":{{0:"{broker_addr}"}}'.encode() in (legacy.body or b"")

        cpp, js = await asyncio.gather(
            drivers.produce_async(
                "cpp", namesrv.addr, topic, 1, check=False, timeout=60, log_dir=tmp_path / "cpp",
                extra=["--send-timeout-ms", "2000"],
            ),
            drivers.produce_async(
                "js", namesrv.addr, topic, 1, check=False, timeout=60, log_dir=tmp_path / "js",
                extra=["--send-timeout-ms", "2000"],
            ),
        )  # fmt: skip
    finally:
        await broker.close()

    # librocketmq 1.x (the wheel) sends SEND_MESSAGE with V1 names, ali-ons SEND_MESSAGE_V2.
    sends = [
        (frame.header.get("language"), frame.ext_str("topic") or frame.ext_str("b"))
        for _, frame in recorder.frames
        if frame.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
    ]
    assert ("CPP", topic) in sends, (recorder.frames, cpp.describe())
    assert ("JAVA", topic) in sends, (recorder.frames, js.describe())  # ali-ons says JAVA
    # Each client got past route resolution and failed only on our fake broker's answer.
    cpp_log = "".join(p.read_text(errors="replace") for p in (tmp_path / "cpp").rglob("*.log*"))
    assert "updateTopicRouteInfoFromNameServer changed with broker name:broker-fake" in cpp_log
    assert f"processSendResponse error remark:{FAKE_REMARK}" in cpp_log, cpp.describe()
    # (librocketmq 1.x ends every exhausted send with "No route info of this topic", even this one.)
    (js_error,) = js.of("send_error")
    assert "still failed" in js_error["error"] and 'BrokersSent: ["broker-fake"]' in js_error["error"], (
        js.describe()
    )
