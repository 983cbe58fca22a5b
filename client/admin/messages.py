"""Message operations of :class:`~pocketmq.client.admin.MQAdmin`: look up, read ranges, send.

* by offset id (``queryMsgById``): the id *is* the store address + CommitLog offset, so one
  VIEW_MESSAGE_BY_ID to that broker;
* by key / unique key: QUERY_MESSAGE to every master of the topic (each searches its hash
  index), merged; the index may return hash collisions, so keys are compared exactly;
* ranges (``printMsg``, ``consumeMessage``): plain PULL_MESSAGE calls as group TOOLS_CONSUMER
  that never commit an offset;
* tracks: for each group consuming the topic, whether its offset on the message's queue has
  passed the message (Java ``MQAdminExt.messageTrackDetail``).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from typing import Any

from pocketmq.client.admin.base import MQAdminError
from pocketmq.client.admin.groups import GroupAdmin
from pocketmq.client.admin.model import MessageTrack, QueueRange
from pocketmq.client.api import decode_pull_result
from pocketmq.client.consumer.subscription import filter_by_tags, new_subscription
from pocketmq.client.message import MessageQueue, PullStatus, SendResult
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import pull_sys_flag
from pocketmq.remoting.protocol.errors import ConsumerNotOnlineError, RemotingError, ResponseError
from pocketmq.remoting.protocol.filter import SqlFilterError, compile_sql
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MessageDecodeError,
    MessageExt,
    decode_offset_msg_id,
)
from pocketmq.remoting.protocol.route import MASTER_ID, TOOLS_CONSUMER_GROUP, PermName

__all__ = ["MessageAdmin"]

#: Java ``Long.MAX_VALUE``: "no end" for time ranges.
MAX_TIME = (1 << 63) - 1
PULL_BATCH = 32


def _inflate(msgs: list[MessageExt]) -> list[MessageExt]:
    for m in msgs:
        if m.sys_flag & COMPRESSED_FLAG:
            with contextlib.suppress(zlib.error):
                m.body = zlib.decompress(m.body)
    return msgs


class MessageAdmin(GroupAdmin):
    # ------------------------------------------------------------------------------ lookups
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset msgId points at (VIEW_MESSAGE_BY_ID to the store address in it).

        Raises:
            MQAdminError: not an offset msgId; ResponseError: the broker has no such record.
        """
        try:
            ip, port, offset = decode_offset_msg_id(offset_msg_id.strip())
        except MessageDecodeError as exc:
            raise MQAdminError(f"{offset_msg_id!r} is not an offset message id: {exc}") from None
        if not 0 < port < 65536:
            # A producer's msgId (UNIQ_KEY) has the same length; its "port" is rarely plausible.
            raise MQAdminError(f"{offset_msg_id!r} is not an offset message id (port {port})")
        addr = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        return await self.api.view_message(addr, offset)

    async def query_by_key(
        self, topic: str, key: str, max_num: int = 64, begin_ms: int = 0, end_ms: int = MAX_TIME
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS contain ``key`` (exactly), oldest first.

        Raises: TopicRouteNotFoundError.
        """
        msgs = await self._query(topic, key, max_num, begin_ms, end_ms, unique=False)
        found = [m for m in msgs if key in (m.keys or "").split(" ")]
        return found[:max_num]

    async def query_by_unique_key(
        self, topic: str, uniq_key: str, begin_ms: int = 0, end_ms: int = MAX_TIME
    ) -> list[MessageExt]:
        """Every stored copy of the message the producer sent with this msgId (UNIQ_KEY).

        Raises: TopicRouteNotFoundError.
        """
        msgs = await self._query(topic, uniq_key, 32, begin_ms, end_ms, unique=True)
        return [m for m in msgs if m.uniq_key == uniq_key]

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique: bool
    ) -> list[MessageExt]:
        route = await self.topic_route(topic)
        results = await self.gather(
            self.api.query_message(addr, topic, key, max_num, begin_ms, end_ms, unique_key=unique)
            for _, addr in self.route_masters(route)
        )
        seen: set[str] = set()
        out: list[MessageExt] = []
        for batch in results:
            for m in batch:
                if m.msg_id not in seen:
                    seen.add(m.msg_id)
                    out.append(m)
        out.sort(key=lambda m: (m.store_timestamp, m.msg_id))
        return _inflate(out)

    async def find_message(self, msg_id: str, topic: str | None = None) -> list[MessageExt]:
        """By offset msgId; when that fails and ``topic`` is given, by unique key (what a
        producer's SendResult shows) — so either id form works.

        Raises:
            MQAdminError / ResponseError: nothing was found.
        """
        try:
            return [await self.view_message(msg_id)]
        except (MQAdminError, ResponseError, RemotingError):
            # a unique key can look like an offset id pointing at a host that is not a broker
            if topic is None:
                raise
        found = await self.query_by_unique_key(topic, msg_id)
        if not found:
            raise MQAdminError(f"no message {msg_id!r} in topic {topic!r}")
        return found

    async def message_tracks(self, msg: MessageExt) -> list[MessageTrack]:
        """For each group consuming the message's topic: CONSUMED, NOT_CONSUME_YET, NOT_ONLINE..."""
        route = await self.topic_route_or_none(msg.topic)
        if route is None:
            return []
        masters = self.route_masters(route)
        groups = await self.topic_groups(msg.topic)
        store = f"{msg.store_host[0]}:{msg.store_host[1]}"
        broker_name = next((n for n, a in masters if a == store), None)
        if broker_name is None:
            broker_name = next(
                (bd.broker_name for bd in route.broker_datas if store in bd.broker_addrs.values()), None
            )
        return [await self._track(msg, g, broker_name) for g in groups]

    async def _track(self, msg: MessageExt, group: str, broker_name: str | None) -> MessageTrack:
        try:
            conn = await self.consumer_connection(group)
        except ConsumerNotOnlineError:
            return MessageTrack(group, "NOT_ONLINE")
        except (ResponseError, MQAdminError) as exc:
            return MessageTrack(group, "UNKNOWN", str(exc))
        if conn.consume_type == "CONSUME_ACTIVELY":
            return MessageTrack(group, "PULL")
        if conn.message_model == "BROADCASTING":
            return MessageTrack(group, "CONSUME_BROADCASTING")
        try:
            stats = await self.consume_stats(group, msg.topic)
        except (ResponseError, MQAdminError) as exc:
            return MessageTrack(group, "UNKNOWN", str(exc))
        consumed = any(
            r.topic == msg.topic and r.queue_id == msg.queue_id and r.broker_name == broker_name
            and r.consumer_offset > msg.queue_offset
            for r in stats.rows
        )  # fmt: skip
        if not consumed:
            return MessageTrack(group, "NOT_CONSUME_YET")
        expr = dict(conn.subscriptions).get(msg.topic, "*")
        if conn.expression_type(msg.topic) == "SQL92":
            try:
                matched = compile_sql(expr).matches(msg.properties)
            except SqlFilterError:
                matched = False
        else:
            matched = bool(filter_by_tags(new_subscription(msg.topic, expr), [msg]))
        if not matched:
            return MessageTrack(group, "CONSUMED_BUT_FILTERED")
        return MessageTrack(group, "CONSUMED")

    async def consume_message_directly(self, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
        """Have one live consumer consume ``msg`` again (CONSUME_MESSAGE_DIRECTLY, relayed by the
        broker that stores it); returns the client's ConsumeMessageDirectlyResult."""
        addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
        name = await self.broker_name_of(addr)
        raw = await self.api.consume_message_directly(addr, group, client_id, msg.msg_id, name)
        return {str(k): v for k, v in raw.items()}

    # ------------------------------------------------------------------------------- ranges
    async def read_messages(
        self,
        topic: str,
        *,
        expression: str = "*",
        begin_ms: int | None = None,
        end_ms: int | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        max_count: int | None = None,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> list[QueueRange]:
        """Pull every readable queue of ``topic`` (or one broker/queue) between the offsets that
        ``begin_ms``/``end_ms`` map to (whole queue by default), at most ``max_count`` messages.

        Raises:
            TopicRouteNotFoundError; MQAdminError (no such broker/queue); ResponseError.
        """
        route = await self.topic_route(topic)
        sub = new_subscription(topic, expression)
        addrs = {bd.broker_name: bd.broker_addrs.get(MASTER_ID) or bd.select_broker_addr()
                 for bd in route.broker_datas}  # fmt: skip
        mqs = sorted(
            MessageQueue(topic, qd.broker_name, q)
            for qd in route.queue_datas
            if PermName.is_readable(qd.perm)
            for q in range(qd.read_queue_nums)
        )
        if broker_name is not None:
            mqs = [m for m in mqs if m.broker_name == broker_name]
        if queue_id is not None:
            mqs = [m for m in mqs if m.queue_id == queue_id]
        if not mqs:
            where = " ".join(x for x in (broker_name and f"broker {broker_name}",
                                         queue_id is not None and f"queue {queue_id}") if x)  # fmt: skip
            raise MQAdminError(f"topic {topic!r} has no readable queue {where}".rstrip())
        ranges: list[QueueRange] = []
        remaining = max_count
        for mq in mqs:
            addr = addrs.get(mq.broker_name)
            if addr is None:
                continue
            lo = await self.api.get_min_offset(addr, mq)
            hi = await self.api.get_max_offset(addr, mq)
            if begin_ms is not None:
                lo = max(lo, await self.api.search_offset(addr, mq, begin_ms))
            if end_ms is not None:
                hi = min(hi, await self.api.search_offset(addr, mq, end_ms))
            if offset is not None:
                lo = max(lo, offset)
            qr = QueueRange(mq.broker_name, mq.queue_id, lo, hi)
            ranges.append(qr)
            pos = lo
            while pos < hi and (remaining is None or remaining > 0):
                want = PULL_BATCH if remaining is None else min(PULL_BATCH, remaining)
                header = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=mq.queue_id, queue_offset=pos,
                    max_msg_nums=want, sys_flag=pull_sys_flag(False, False, True), commit_offset=0,
                    suspend_timeout_millis=0, subscription=sub.sub_string, sub_version=0,
                    expression_type=sub.expression_type,
                )  # fmt: skip
                result = await self.api.pull_message(addr, header, self.timeout)
                if result.status is PullStatus.OFFSET_ILLEGAL or result.next_begin_offset <= pos:
                    break
                msgs = [m for m in decode_pull_result(result, sub) if m.queue_offset < hi]
                if remaining is not None:
                    msgs = msgs[:remaining]
                    remaining -= len(msgs)
                qr.messages += msgs
                pos = result.next_begin_offset
            if remaining is not None and remaining <= 0:
                break
        return ranges

    # --------------------------------------------------------------------------------- send
    async def send_message(
        self, topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None,
        broker_name: str | None = None, queue_id: int | None = None, properties: dict[str, Any] | None = None,
    ) -> SendResult:  # fmt: skip
        """Send one message with a short-lived producer (to one queue when both ``broker_name``
        and ``queue_id`` are given).

        Raises: SendFailedError / ResponseError / MessageValidationError.
        """
        from pocketmq.client.message import Message
        from pocketmq.client.producer.producer import Producer

        producer = Producer(
            f"PID_MQADMIN_{os.getpid()}", ";".join(self.namesrv_addrs),
            send_msg_timeout=int(self.timeout * 1000), mq_client_api_timeout=int(self.timeout * 1000),
        )  # fmt: skip
        msg = Message(topic, body, tags=tags or None, keys=keys or None,
                      properties={str(k): str(v) for k, v in (properties or {}).items()})  # fmt: skip
        await producer.start()
        try:
            if broker_name is not None and queue_id is not None:
                return await producer.send(msg, queue=MessageQueue(topic, broker_name, queue_id))
            return await producer.send(msg)
        finally:
            await producer.shutdown()

    # ---------------------------------------------------------------------------- stats
    async def broker_stats(self, addr: str, stats_name: str, stats_key: str) -> dict[str, Any] | None:
        """VIEW_BROKER_STATS_DATA (``statsMinute``/``statsHour``/``statsDay`` with sum, tps, avgpt);
        None when the broker has no such stats or does not support the request."""
        from pocketmq.remoting.protocol.codes import RequestCode

        try:
            reply = await self.api.invoke_checked(
                addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key}
            )
        except ResponseError:
            return None
        return dict(fastjson.decode_object(reply.body or b"{}", "BrokerStatsData"))
