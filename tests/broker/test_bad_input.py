"""Malformed headers and bodies never take the broker down; other clients keep working."""

from __future__ import annotations

import asyncio
import struct

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from tests.broker.helpers import Wire

SEND_V2_OK = {"a": "P", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
PULL_OK = {
    "consumerGroup": "G", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
    "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
}  # fmt: skip


@pytest.mark.parametrize(
    ("code", "ext", "needle"),
    [
        (RequestCode.SEND_MESSAGE_V2, {k: v for k, v in SEND_V2_OK.items() if k != "b"}, "b"),
        (RequestCode.SEND_MESSAGE_V2, {**SEND_V2_OK, "e": "zero"}, "e"),
        (RequestCode.SEND_MESSAGE_V2, {**SEND_V2_OK, "e": "99999999999"}, "e"),
        (RequestCode.SEND_MESSAGE, {"topic": "T"}, "producerGroup"),
        (RequestCode.PULL_MESSAGE, {**PULL_OK, "queueOffset": "-x"}, "queueOffset"),
        (RequestCode.PULL_MESSAGE, {k: v for k, v in PULL_OK.items() if k != "topic"}, "topic"),
        (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G"}, "topic"),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "0"},
            "commitOffset",
        ),
        (RequestCode.GET_MAX_OFFSET, None, "topic"),
        (RequestCode.UNREGISTER_CLIENT, {}, "clientID"),
    ],
)
async def test_bad_headers_get_system_error_naming_the_field(wire, code, ext, needle):
    r = await wire.call(code, ext, b"body")
    assert r.code == ResponseCode.SYSTEM_ERROR and needle in r.remark


async def test_unknown_code_is_not_supported(wire):
    r = await wire.call(9999, None)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_framing_garbage_closes_only_that_connection(broker, wire):
    host, port = broker.broker_addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(struct.pack(">i", 0x7FFFFFF0) + b"junk")  # a length far above the 16 MiB limit
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    assert data == b""  # closed
    writer.close()
    # a header that is not JSON in an intact frame: the connection answers or closes, no crash
    reader, writer = await asyncio.open_connection(host, int(port))
    header = b"{not json"
    writer.write(struct.pack(">ii", 4 + len(header), len(header)) + header)
    await writer.drain()
    await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert (await wire.send("StillAlive", b"ok")).code == ResponseCode.SUCCESS


async def test_many_bad_requests_interleaved_with_good_ones(broker):
    good, bad = Wire(broker.broker_addr), Wire(broker.broker_addr)
    try:
        results = await asyncio.gather(
            *[bad.call(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"x") for _ in range(50)],
            *[good.send("Mixed", f"{i}".encode()) for i in range(50)],
        )
        assert all(r.code == ResponseCode.SYSTEM_ERROR for r in results[:50])
        assert all(r.code == ResponseCode.SUCCESS for r in results[50:])
        assert sorted(int(r.ext_fields["queueOffset"]) for r in results[50:]) == list(range(50))
    finally:
        await good.close()
        await bad.close()
