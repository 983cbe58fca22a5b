"""In-process broker fixtures for the broker tests: a real BrokerController on an ephemeral port
(no name server), a tiny store on tmp_path, and a RemotingClient speaking the wire protocol."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.topics import SCHEDULE_TOPIC_XXXX as SCHEDULE
from pocketmq.store.config import MessageStoreConfig
from pocketmq.testing.wire import Wire

__all__ = [
    "SCHEDULE",
    "SHORT_DELAYS",
    "SHORT_DELAY_STORE",
    "Wire",
    "broker_and_wire",
    "broker_config",
    "pull_until",
    "query_by_key",
    "running_broker",
    "stat_value",
    "tiny_store",
    "wait_query",
]


def tiny_store(root: str, **kw: Any) -> MessageStoreConfig:
    base: dict[str, Any] = {
        "storePathRootDir": root,
        "mappedFileSizeCommitLog": 1 << 20,
        "mappedFileSizeConsumeQueue": 20 * 1000,
        "maxHashSlotNum": 1000,
        "maxIndexNum": 4000,
    }
    base.update(kw)
    return MessageStoreConfig.model_validate(base)


def broker_config(root: str, store: dict[str, Any] | None = None, **kw: Any) -> BrokerConfig:
    data: dict[str, Any] = {
        "brokerName": "broker-a",
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "listenHost": "127.0.0.1",
        "namesrvAddr": None,
        "store": tiny_store(root, **(store or {})),
    }
    data.update(kw)
    return BrokerConfig.model_validate(data)


@contextlib.asynccontextmanager
async def running_broker(
    root: str, store: dict[str, Any] | None = None, **kw: Any
) -> AsyncIterator[BrokerController]:
    controller = BrokerController(broker_config(root, store, **kw), fsync=False)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown()


@contextlib.asynccontextmanager
async def broker_and_wire(
    root: str, store: dict[str, Any] | None = None, **kw: Any
) -> AsyncIterator[tuple[BrokerController, Wire]]:
    """:func:`running_broker` plus a :class:`Wire` to it, closed before the broker shuts down."""
    async with running_broker(root, store, **kw) as controller:
        wire = Wire(controller.broker_addr)
        try:
            yield controller, wire
        finally:
            await wire.close()


def stat_value(broker: BrokerController, name: str, key: str) -> int | None:
    """The value of the broker's stats item ``name``/``key``; None when there is no such item."""
    stats = broker.broker_stats_manager
    assert stats is not None
    item = stats.get_stats_item(name, key)
    return None if item is None else item.value


# ---------------------------------------------------------------- delayed / retried messages

#: 18 levels, all short (tests never wait for RocketMQ's real 10 s .. 2 h delays).
SHORT_DELAYS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
#: store settings for a broker with :data:`SHORT_DELAYS` (the delayed/retry tests).
SHORT_DELAY_STORE: dict[str, Any] = {"messageDelayLevel": SHORT_DELAYS}


async def pull_until(
    wire: Wire,
    topic: str,
    queue_id: int = 0,
    offset: int = 0,
    *,
    group: str = "CG",
    timeout: float = 15.0,
    count: int = 1,
) -> list[Any]:
    """Pull (no long polling) until at least ``count`` messages from ``offset`` are there."""
    import asyncio
    import time

    from pocketmq.remoting.protocol.codes import ResponseCode
    from pocketmq.remoting.protocol.message import decode_messages

    deadline = time.monotonic() + timeout
    out: list[Any] = []
    while True:
        r = await wire.pull(topic, queue_id, offset + len(out), group=group, sys_flag=0x4)
        if r.code == ResponseCode.SUCCESS:
            out.extend(decode_messages(r.body or b""))
            if len(out) >= count:
                return out
            continue
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(out)} of {count} messages in {topic}:{queue_id} after {timeout}s")
        await asyncio.sleep(0.05)


async def query_by_key(wire: Wire, topic: str, key: str) -> list[Any]:
    """QUERY_MESSAGE (the admin lookup that works on a write-only DLQ); [] when not found."""
    from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
    from pocketmq.remoting.protocol.message import decode_messages

    ext = {"topic": topic, "key": key, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)}
    r = await wire.call(RequestCode.QUERY_MESSAGE, ext)
    if r.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return decode_messages(r.body or b"")


async def wait_query(wire: Wire, topic: str, key: str, count: int = 1) -> list[Any]:
    """:func:`query_by_key` until ``count`` messages are found (the index lags the put a little)."""
    import asyncio

    for _ in range(300):
        found = await query_by_key(wire, topic, key)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"{key} not in {topic}")
