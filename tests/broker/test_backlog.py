"""Oneway sends written in a burst and followed by a close are all stored (issue 25, defect A):
RocketMQ serves every request that arrived before the FIN."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import properties_to_string
from pocketmq.remoting.transport import dispatch
from pocketmq.remoting.transport.client import RemotingClient

N = 1000


def oneway_send(topic: str, i: int) -> RemotingCommand:
    ext = {
        "a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
        "h": "0", "i": properties_to_string({"WAIT": "true"}), "j": "0", "k": "false",
    }  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"m%d" % i)
    cmd.flag |= int(RPC_ONEWAY)
    return cmd


async def stored(broker: BrokerController, topic: str, n: int) -> int:
    for _ in range(250):
        if broker.store.get_max_offset_in_queue(topic, 0) >= n:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    return broker.store.get_max_offset_in_queue(topic, 0)


async def burst_then_close(broker: BrokerController, topic: str) -> None:
    """N oneway sends to ``topic`` written in one sendall, then the connection closed."""
    data = b""
    for i in range(N):
        cmd = oneway_send(topic, i)
        cmd.opaque = i
        data += cmd.encode()
    host, port = broker.broker_addr.rsplit(":", 1)
    _reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(data)  # one sendall
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def test_raw_burst_of_oneway_sends_then_close_is_all_stored(broker: BrokerController) -> None:
    await burst_then_close(broker, "Burst")
    assert await stored(broker, "Burst", N) == N


async def test_pipelined_oneway_sends_then_client_close_are_all_stored(broker: BrokerController) -> None:
    client = RemotingClient()
    try:
        for i in range(N):
            await client.invoke_oneway(broker.broker_addr, oneway_send("Piped", i))
    finally:
        await client.close()
    assert await stored(broker, "Piped", N) == N


async def test_burst_then_close_is_all_stored_when_every_turn_runs_out_of_time(
    broker: BrokerController, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request past its turn's time (``TURN_BUDGET``): what is left of a read waits for the
    next turn, and once the connection is lost ``_serve_lost`` handles all of it (a cut there
    once skipped the rest of its slice: 997 of 1,000 stored on a loaded machine)."""
    monkeypatch.setattr(dispatch, "TURN_BUDGET", -1.0)
    await burst_then_close(broker, "BurstCut")
    assert await stored(broker, "BurstCut", N) == N
