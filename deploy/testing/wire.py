"""``Wire``: a bare RocketMQ remoting client for tests (what C++/ali-ons/Java send, built by hand).

It speaks the protocol directly (no SDK, no retries): one ``RemotingClient`` connection, helpers
for SEND_MESSAGE(_V2), PULL_MESSAGE and HEART_BEAT with explicit header fields, and ``call`` for
any request code -- handy for asserting exact response codes and for feeding servers bad input.
"""

from __future__ import annotations

from pocketmq.remoting.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import properties_to_string
from pocketmq.remoting.transport.client import RemotingClient

__all__ = ["Wire"]


class Wire:
    """A tiny protocol client over one connection (what C++/ali-ons/Java send, by hand)."""

    def __init__(self, addr: str, language: int = LanguageCode.JAVA, version: int = 409) -> None:
        self.addr = addr
        self.client = RemotingClient()
        self.language = language
        self.version = version

    async def close(self) -> None:
        await self.client.close()

    async def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None, timeout: float = 5.0
    ) -> RemotingCommand:
        req = RemotingCommand.request(code, ext, body, language=self.language)
        req.version = self.version
        return await self.client.invoke(self.addr, req, timeout)

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | None = None,
        queue_id: int = 0,
        props: dict[str, str] | None = None,
        v2: bool = True,
        group: str = "PG",
        **header: str,
    ) -> RemotingCommand:
        p: dict[str, str] = {}
        if keys:
            p["KEYS"] = keys
        if tags:
            p["TAGS"] = tags
        p["WAIT"] = "true"
        p.update(props or {})
        ext = {
            "producerGroup": group,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": str(queue_id),
            "sysFlag": "0",
            "bornTimestamp": "1700000000000",
            "flag": "0",
            "properties": properties_to_string(p),
            "reconsumeTimes": "0",
            "unitMode": "false",
        }
        ext.update(header)
        if v2:
            short = dict(zip(
                ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                 "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes",
                 "batch"],
                "abcdefghijklm", strict=True,
            ))  # fmt: skip
            ext = {short.get(k, k): v for k, v in ext.items()}
            return await self.call(RequestCode.SEND_MESSAGE_V2, ext, body)
        return await self.call(RequestCode.SEND_MESSAGE, ext, body)

    async def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "CG",
        max_nums: int = 32,
        sys_flag: int = 0x6,
        subscription: str = "*",
        suspend_ms: int = 15000,
        commit_offset: int = 0,
        timeout: float = 20.0,
        sub_version: int = 0,
        expression_type: str | None = None,
    ) -> RemotingCommand:
        ext = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": str(suspend_ms),
            "subscription": subscription,
            "subVersion": str(sub_version),
        }
        if expression_type is not None:
            ext["expressionType"] = expression_type
        return await self.call(RequestCode.PULL_MESSAGE, ext, timeout=timeout)

    async def heartbeat(
        self,
        client_id: str,
        *,
        consumer_group: str | None = None,
        topics: dict[str, str] | None = None,
        producer_group: str | None = None,
        sub_version: int = 1,
        expression_type: str = "TAG",
    ) -> RemotingCommand:
        consumers: tuple[ConsumerData, ...] = ()
        if consumer_group:
            subs = tuple(
                SubscriptionData.build(t, expr, sub_version=sub_version, expression_type=expression_type)
                for t, expr in (topics or {}).items()
            )
            consumers = (ConsumerData(consumer_group, subscription_data_set=subs),)
        producers = (ProducerData(producer_group),) if producer_group else ()
        body = HeartbeatData(client_id, producers, consumers).encode()
        return await self.call(RequestCode.HEART_BEAT, None, body)
