"""Server-initiated requests (broker → client) handled by MQClientInstance, and heartbeat data."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.heartbeat import ConsumerData
from pocketmq.remoting.protocol.message import encode_message

MQ = MessageQueue("T", "broker-a", 1)


class FakeConsumer:
    group = "CG"
    rebalance_interval = 20.0

    def __init__(self) -> None:
        self.resets: list[tuple[str, dict[MessageQueue, int]]] = []
        self.direct: list[Any] = []
        self.rebalances = 0

    def subscriptions(self):
        return []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group)  # push, clustering, from last offset, no subscriptions

    def subscribe_info_needs_update(self, topic: str) -> bool:
        return False

    def update_subscribe_info(self, topic, mqs) -> None:
        pass

    async def do_rebalance(self) -> None:
        self.rebalances += 1

    async def persist_consumer_offset(self) -> None:
        pass

    async def reset_offset(self, topic: str, table) -> None:
        self.resets.append((topic, table))

    def offset_table(self, topic: str):
        return {MQ: 42}

    def running_info(self) -> dict[str, Any]:
        return {"mqTable": {MQ: {"cachedMsgCount": 3}}, "properties": {"consumerGroup": "CG"}}

    async def consume_message_directly(self, msg, broker_name):
        self.direct.append((msg.body, broker_name))
        return {"consumeResult": "CR_SUCCESS", "order": False, "autoCommit": True, "spentTimeMills": 0}


class FakeConn:
    remote_addr = "127.0.0.1:10911"


def req(code: int, ext: dict[str, str], body: bytes | None = None) -> RemotingCommand:
    r = RemotingCommand(code, 5, 0, None, ext, body)
    return r


async def test_handlers() -> None:
    inst = MQClientInstance(
        ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="10.0.0.1", instance_name="t"), "10.0.0.1@t"
    )
    consumer = FakeConsumer()
    inst.register_consumer(consumer)  # type: ignore[arg-type]
    handlers = inst.remoting.dispatcher.handlers
    conn: Any = FakeConn()

    reply = handlers[RequestCode.GET_CONSUMER_RUNNING_INFO](
        conn, req(307, {"consumerGroup": "CG", "clientId": "x"})
    )
    info = fastjson.loads(reply.body)
    ((key, value),) = info["mqTable"].items()
    assert MessageQueue.from_json(key) == MQ and value == {"cachedMsgCount": 3}
    missing = handlers[RequestCode.GET_CONSUMER_RUNNING_INFO](
        conn, req(307, {"consumerGroup": "nope", "clientId": "x"})
    )
    assert missing.code == ResponseCode.SYSTEM_ERROR and "nope" in missing.remark

    status = handlers[RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT](
        conn, req(221, {"topic": "T", "group": "CG"})
    )
    table = fastjson.loads(status.body)["messageQueueTable"]
    assert {MessageQueue.from_json(k): v for k, v in table.items()} == {MQ: 42}

    body = fastjson.dumpb({"offsetTable": {MQ: 7}})
    assert (
        handlers[RequestCode.RESET_CONSUMER_CLIENT_OFFSET](
            conn, req(220, {"topic": "T", "group": "CG", "timestamp": "0", "isForce": "true"}, body)
        )
        is None
    )
    await asyncio.sleep(0.01)
    assert consumer.resets == [("T", {MQ: 7})]

    direct = await handlers[RequestCode.CONSUME_MESSAGE_DIRECTLY](
        conn,
        req(
            309,
            {"consumerGroup": "CG", "msgId": "m", "brokerName": "broker-a"},
            encode_message(topic="T", body=b"hi"),
        ),
    )
    assert orjson.loads(direct.body)["consumeResult"] == "CR_SUCCESS" and consumer.direct == [
        (b"hi", "broker-a")
    ]

    assert handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED](conn, req(40, {"consumerGroup": "CG"})) is None
    hb = inst.heartbeat_data().to_json()
    assert hb["clientID"] == "10.0.0.1@t" and hb["consumerDataSet"][0]["groupName"] == "CG"
    await inst.shutdown()
