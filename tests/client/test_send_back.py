"""consumer/send_back.py: the re-send fallback and the instance's inner producer."""

from __future__ import annotations

from typing import Any

from pocketmq.client.config import ClientConfig
from pocketmq.client.consumer.send_back import inner_producer, send_message_back
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.lifecycle import RUNNING, SHUTDOWN
from pocketmq.client.producer.producer import Producer
from pocketmq.remoting.protocol.message import decode_message, encode_message
from pocketmq.remoting.protocol.topics import CLIENT_INNER_PRODUCER_GROUP


class RefusingApi:
    async def consumer_send_message_back(self, *args: Any, **kw: Any) -> None:
        raise ConnectionError("refused")


class FakeInner(Producer):
    def __init__(self) -> None:
        super().__init__(CLIENT_INNER_PRODUCER_GROUP)
        self.sent: list[Any] = []

    async def send(self, msg: Any, **kw: Any) -> Any:  # type: ignore[override]
        self.sent.append(msg)


async def test_refused_send_back_resends_through_the_inner_producer_and_release_detaches_it() -> None:
    inst = MQClientInstance(
        ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="10.0.0.1", instance_name="sb"), "10.0.0.1@sb"
    )
    inst.api = RefusingApi()  # type: ignore[assignment]
    inner = FakeInner()
    inner._life.state = RUNNING
    inst.register_producer(inner)
    assert await inner_producer(inst) is inner

    msg = decode_message(encode_message(topic="T", body=b"x", properties={"TAGS": "a"}))
    assert await send_message_back(inst, "CG", "%RETRY%CG", 16, msg, 0, "broker-a")
    (retry,) = inner.sent
    assert retry.topic == "%RETRY%CG" and retry.delay_level == 3
    assert retry.properties["RETRY_TOPIC"] == "T" and retry.properties["MAX_RECONSUME_TIMES"] == "17"

    await inst.release()  # no other client: the inner producer goes with the instance
    assert CLIENT_INNER_PRODUCER_GROUP not in inst.producers and inner._life.state is SHUTDOWN
