"""Write a store through one broker, read it back through another (pocketmq ⇄ Apache 4.9.7).

Both brokers speak the same requests, so one writer and one checker serve both directions:
:func:`write` sends messages (keys, tags, a user property, a UNIQ_KEY) to a topic's 4 queues and
commits a consumer group's offsets; after a clean stop the other broker opens the same store
directory and :func:`check` reads everything back: pull by offset on every queue (bodies,
properties, queue offsets), QUERY_MESSAGE by key, VIEW_MESSAGE_BY_ID by CommitLog offset and
QUERY_CONSUMER_OFFSET.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages, decode_offset_msg_id
from pocketmq.testing.wire import Wire

TOPIC = "ExchangeTopic"
GROUP = "ExchangeGroup"
QUEUES = 4


@dataclass(frozen=True)
class Sent:
    index: int
    key: str
    uniq: str
    body: bytes
    queue_id: int
    queue_offset: int
    msg_id: str  # the broker's offset msgId


async def _write(broker: str, n: int) -> list[Sent]:
    wire = Wire(broker)
    sent: list[Sent] = []
    try:
        for i in range(n):
            uniq = uuid.uuid4().hex.upper()
            key = f"key-{i % 5}"
            body = f"exchange-{i}".encode() * (1 + i % 7)
            r = await wire.send(
                TOPIC, body, tags=f"Tag{i % 3}", keys=key, queue_id=i % QUEUES,
                props={"UNIQ_KEY": uniq, "origin": "exchange"},
            )  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            ext = r.ext_fields or {}
            sent.append(Sent(i, key, uniq, body, int(ext["queueId"]), int(ext["queueOffset"]), ext["msgId"]))
        for q in range(QUEUES):
            mine = [s for s in sent if s.queue_id == q]
            ext = {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": str(q),
                "commitOffset": str(len(mine) - 1),
            }
            r = await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    finally:
        await wire.close()
    return sent


def write(broker: str, n: int = 40) -> list[Sent]:
    return asyncio.run(_write(broker, n))


async def _check(broker: str, sent: list[Sent]) -> None:
    wire = Wire(broker)
    try:
        # pull by offset, every queue from 0, with the subscription in the request, no long polling
        for q in range(QUEUES):
            want = sorted((s for s in sent if s.queue_id == q), key=lambda s: s.queue_offset)
            got = []
            offset = 0
            while len(got) < len(want):
                r = await wire.pull(TOPIC, q, offset, group="ExchangeReader", sys_flag=4, suspend_ms=0)
                assert r.code == ResponseCode.SUCCESS, (q, offset, r.code, r.remark)
                msgs = decode_messages(r.body or b"")
                assert msgs, (q, offset)
                got += msgs
                offset = int((r.ext_fields or {})["nextBeginOffset"])
            assert [m.body for m in got] == [s.body for s in want], f"queue {q} bodies"
            assert [m.queue_offset for m in got] == [s.queue_offset for s in want], f"queue {q} offsets"
            for m, s in zip(got, want, strict=True):
                assert m.topic == TOPIC and m.keys == s.key and m.get_property("UNIQ_KEY") == s.uniq
                assert m.get_property("origin") == "exchange" and m.tags == f"Tag{s.index % 3}"
        # by key (the IndexFile)
        for key in {s.key for s in sent}:
            ext = {"topic": TOPIC, "key": key, "maxNum": "64", "beginTimestamp": "0",
                   "endTimestamp": str(int(time.time() * 1000) + 3_600_000)}  # fmt: skip
            r = await wire.call(RequestCode.QUERY_MESSAGE, ext, timeout=10)
            assert r.code == ResponseCode.SUCCESS, (key, r.code, r.remark)
            found = sorted(m.get_property("UNIQ_KEY") or "" for m in decode_messages(r.body or b""))
            assert found == sorted(s.uniq for s in sent if s.key == key), f"query by key {key}"
        # by offset msgId (its CommitLog offset)
        for s in sent[:: max(1, len(sent) // 8)]:
            _, _, offset = decode_offset_msg_id(s.msg_id)
            r = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
            assert r.code == ResponseCode.SUCCESS, (s.msg_id, r.code, r.remark)
            (m,) = decode_messages(r.body or b"")
            assert m.body == s.body and m.get_property("UNIQ_KEY") == s.uniq
        # consumer offsets
        for q in range(QUEUES):
            mine = [s for s in sent if s.queue_id == q]
            ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(q)}
            r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, ext)
            assert r.code == ResponseCode.SUCCESS, (q, r.code, r.remark)
            assert int((r.ext_fields or {})["offset"]) == len(mine) - 1, f"offset of queue {q}"
    finally:
        await wire.close()


def check(broker: str, sent: list[Sent]) -> None:
    asyncio.run(_check(broker, sent))
