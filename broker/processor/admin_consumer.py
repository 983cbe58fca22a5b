"""Consumption progress, resets and client calls: codes 208, 222, 303, 307, 308, 309, 317, 321.

=====  ===============================  ==================================================================
code   request                          behaviour (RocketMQ ``AdminBrokerProcessor`` / ``Broker2Client``)
=====  ===============================  ==================================================================
208    GET_CONSUME_STATS                per *read* queue of the given topic, or of every topic the group
                                        has offsets for (skipping topics an online group does not
                                        subscribe to): brokerOffset, consumerOffset, lastTimestamp (store
                                        time of the last consumed message); consumeTps = the group's
                                        GROUP_GET_NUMS minute rate
317    GET_BROKER_CONSUME_STATS         the same per *write* queue for every subscription group
                                        (``isOrder``: order topics only), with ``totalDiff``
303    QUERY_CONSUME_TIME_SPAN          per write queue min/max store time, consume time, delay; 17 unknown
308    QUERY_CORRECTION_OFFSET          per queue min offset of all other groups (``filterGroups`` left
                                        out); ``Long.MAX_VALUE`` where compareGroup is further behind
222    INVOKE_BROKER_TO_RESET_OFFSET    per write queue: offset by ``timestamp`` (-1 = max offset); taken
                                        when ``isForce`` or smaller than the committed offset; stored for
                                        the group, pushed oneway as RESET_CONSUMER_CLIENT_OFFSET (220) to
                                        every consumer connection (C++ ones get ``ResetOffsetBodyForC``);
                                        reply ``ResetOffsetBody``. Unknown topic / group without offsets
                                        on the topic → 1 (Java fails as soon as one queue has none;
                                        here such a queue takes the target), no consumer online → 206
                                        (offsets are stored anyway)
307    GET_CONSUMER_RUNNING_INFO        forwarded to the client's connection (``callClient``, 10 s);
309    CONSUME_MESSAGE_DIRECTLY         (309 with the message read by its offset msgId as body); not online
                                        → 1, client timeout → 207 CONSUME_MSG_TIMEOUT
321    QUERY_CONSUME_QUEUE              raw ConsumeQueue units from ``index`` (at most ``count``)
=====  ===============================  ==================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.processor.admin_base import AdminBase, fail, ok
from pocketmq.broker.processor.admin_bodies import (
    ConsumeQueueData,
    QueueTimeSpan,
    encode_consume_stats_list,
    encode_correction_offsets,
    encode_query_consume_queue,
    encode_time_spans,
)
from pocketmq.broker.stats import version_desc
from pocketmq.remoting.protocol.bodies import ConsumeStats, MessageQueue, OffsetWrapper, ResetOffsetBody
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingError, RemotingTimeoutError
from pocketmq.remoting.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.remoting.protocol.message import MessageDecodeError, decode_offset_msg_id

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.common.clock import Clock
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.remoting.transport.server import RemotingServer
    from pocketmq.store import MessageStore

logger = logging.getLogger("pocketmq.broker.processor.admin")

#: ``MQVersion.Version`` ordinals below which clients cannot take these requests.
V3_0_7_SNAPSHOT = 28
V3_1_8_SNAPSHOT = 62
JAVA_LONG_MAX = 2**63 - 1


@dataclass(eq=False, kw_only=True)
class ConsumerAdmin(AdminBase):
    #: Seconds to wait for a client's reply to a forwarded request (Java ``callClient``: 10 s).
    call_client_timeout = 10.0

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    #: calls and pushes to the clients' connections
    server: RemotingServer
    clock: Clock

    # -- consume stats ---------------------------------------------------------------------------

    HANDLERS = {
        RequestCode.GET_CONSUME_STATS: "get_consume_stats",
        RequestCode.GET_BROKER_CONSUME_STATS: "get_broker_consume_stats",
        RequestCode.QUERY_CONSUME_TIME_SPAN: "query_consume_time_span",
        RequestCode.QUERY_CORRECTION_OFFSET: "query_correction_offset",
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "reset_offset",
        RequestCode.GET_CONSUMER_RUNNING_INFO: "get_consumer_running_info",
        RequestCode.CONSUME_MESSAGE_DIRECTLY: "consume_message_directly",
        RequestCode.QUERY_CONSUME_QUEUE: "query_consume_queue",
    }

    def _fill_consume_stats(self, stats: ConsumeStats, group: str, topic: str, queue_nums: int) -> None:
        store = self.store
        com = self.offsets
        for qid in range(queue_nums):
            broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
            consumer_offset = max(0, com.query_offset(group, topic, qid))
            last = 0
            if consumer_offset > 0:
                ts = store.get_message_store_timestamp(topic, qid, consumer_offset - 1)
                last = ts if ts > 0 else 0
            stats.offset_table[self.mq(topic, qid)] = OffsetWrapper(broker_offset, consumer_offset, last)
        stats.consume_tps += self.stats.tps_group_get_nums(group, topic)

    def _subscribed_elsewhere(self, group: str, topic: str) -> bool:
        """Java skips a topic when the group is online with subscriptions that do not include it."""
        cgi = self.consumers.get_consumer_group_info(group)
        return cgi is not None and bool(cgi.subscription_table) and topic not in cgi.subscription_table

    def get_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        group = h.consumer_group
        topics: Iterable[str] = (
            [h.topic] if h.topic and h.topic.strip() else sorted(self.offsets.topics_of_group(group))
        )
        stats = ConsumeStats()
        for topic in topics:
            tc = self.topics.select_topic_config(topic)
            if tc is None:
                logger.warning("consumeStats, topic config not exist, %s", topic)
                continue
            if self._subscribed_elsewhere(group, topic):
                logger.warning("consumeStats, the consumer group[%s], topic[%s] not exist", group, topic)
                continue
            self._fill_consume_stats(stats, group, topic, tc.read_queue_nums)
        return ok(request, stats.encode())

    def get_broker_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsInBrokerHeader.from_ext_fields(request.ext_fields)
        total_diff = 0
        per_group: list[tuple[str, list[ConsumeStats]]] = []
        for group in list(self.groups.subscription_group_table):
            lst: list[ConsumeStats] = []
            for topic in sorted(self.offsets.topics_of_group(group)):
                tc = self.topics.select_topic_config(topic)
                if tc is None or (h.is_order and not tc.order) or self._subscribed_elsewhere(group, topic):
                    continue
                stats = ConsumeStats()
                self._fill_consume_stats(stats, group, topic, tc.write_queue_nums)
                total_diff += stats.compute_total_diff()
                lst.append(stats)
            per_group.append((group, lst))
        return ok(request, encode_consume_stats_list(self.state.broker_addr, per_group, total_diff))

    def query_consume_time_span(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumeTimeSpanRequestHeader.from_ext_fields(request.ext_fields)
        tc = self.topics.select_topic_config(h.topic)
        if tc is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.store
        now = self.clock.now_ms()
        spans = []
        for qid in range(tc.write_queue_nums):
            min_time = store.get_earliest_message_time(h.topic, qid)
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            max_time = store.get_message_store_timestamp(h.topic, qid, max_offset - 1)
            consumer_offset = self.offsets.query_offset(h.group, h.topic, qid)
            consume_time = (
                store.get_message_store_timestamp(h.topic, qid, consumer_offset - 1)
                if consumer_offset > 0
                else min_time
            )
            delay = 0
            # Java looks up offset -1 for a group without offsets; the next unconsumed one is meant
            next_offset = max(consumer_offset, store.get_min_offset_in_queue(h.topic, qid))
            if next_offset < max_offset:
                next_time = store.get_message_store_timestamp(h.topic, qid, next_offset)
                if next_time > 0:
                    delay = now - next_time
            spans.append(QueueTimeSpan(self.mq(h.topic, qid), min_time, max_time, consume_time, delay))
        return ok(request, encode_time_spans(spans))

    def query_correction_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryCorrectionOffsetHeader.from_ext_fields(request.ext_fields)
        skip = {g for g in (h.filter_groups or "").split(",") if g}
        com = self.offsets
        correction: dict[int, int] = {}
        for group in com.groups_of_topic(h.topic):
            if group in skip:
                continue
            for qid, offset in com.query_offsets(group, h.topic).items():
                if offset >= self.store.get_min_offset_in_queue(h.topic, qid):
                    correction[qid] = min(offset, correction.get(qid, JAVA_LONG_MAX))
        for qid, offset in com.query_offsets(h.compare_group, h.topic).items():
            if qid in correction and correction[qid] > offset:
                correction[qid] = JAVA_LONG_MAX
        return ok(request, encode_correction_offsets(dict(sorted(correction.items()))))

    # -- reset -----------------------------------------------------------------------------------
    def reset_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        logger.info(
            "[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%d, isForce=%s",
            conn.remote_addr, h.topic, h.group, h.timestamp, h.is_force,
        )  # fmt: skip
        tc = self.topics.select_topic_config(h.topic)
        if tc is None:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}",
            )
        store = self.store
        com = self.offsets
        committed_offsets = com.query_offsets(h.group, h.topic)
        if not committed_offsets:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            # Java fails on any queue without a commit; a queue never consumed simply takes the
            # target (mqadmin resetOffsetByTime would otherwise fail for most real groups)
            committed = committed_offsets.get(qid, -1)
            if h.timestamp == -1:
                target = store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            target = max(0, target)
            take = h.is_force or committed < 0 or target < committed
            table[self.mq(h.topic, qid)] = target if take else committed
        body = ResetOffsetBody(table)
        cgi = self.consumers.get_consumer_group_info(h.group)
        channels = list(cgi.channels.values()) if cgi is not None else []
        if not channels:
            # As Java: nothing changes; the tool then resets an offline group itself, reading the
            # old offsets first (committing here made it print the new ones as the old).
            remark = (
                f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
                f"Timestamp: {h.timestamp}"
            )
            logger.error(remark)
            return fail(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        for mq, offset in table.items():
            com.commit_offset(h.group, h.topic, mq.queue_id, offset)
        for info in channels:
            if info.version < V3_0_7_SNAPSHOT:
                return fail(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={info.version}",
                )
        ext = ResetOffsetRequestHeader(  # type: ignore[call-arg, unused-ignore]
            topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=h.is_force
        ).to_ext_fields()
        java_body = c_body = None
        for info in channels:
            if info.language == LanguageCode.CPP:
                payload = c_body = c_body or body.encode_for_c()
            else:
                payload = java_body = java_body or body.encode()
            push = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), payload, language=LanguageCode.JAVA
            )
            try:
                self.server.invoke_oneway(info.conn, push)
                logger.info(
                    "[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s",
                    h.topic,
                    h.group,
                    info.client_id,
                )
            except Exception as exc:
                logger.error(
                    "[reset-offset] reset offset exception. topic=%s, group=%s: %s", h.topic, h.group, exc
                )
        return ok(request, body.encode())

    # -- calls to a client -----------------------------------------------------------------------
    async def _call_consumer(
        self, code: int, request: RemotingCommand, group: str, client_id: str | None, body: bytes | None
    ) -> RemotingCommand:
        cgi = self.consumers.get_consumer_group_info(group)
        info = cgi.find_channel_by_client_id(client_id) if cgi is not None and client_id else None
        if info is None:
            return fail(
                request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        if info.version < V3_1_8_SNAPSHOT:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{version_desc(info.version)}> too low to finish, "
                "please upgrade it to V3_1_8_SNAPSHOT",
            )
        forward = RemotingCommand.request(
            code, dict(request.ext_fields or {}), body, language=LanguageCode.JAVA
        )
        try:
            reply = await self.server.invoke(info.conn, forward, self.call_client_timeout)
        except RemotingTimeoutError as exc:
            return fail(
                request, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}"
            )
        except (RemotingError, OSError) as exc:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            )
        return RemotingCommand.response_to(request, reply.code, reply.remark, reply.ext_fields, reply.body)

    async def get_consumer_running_info(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        return await self._call_consumer(
            RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.consumer_group, h.client_id, request.body
        )

    async def consume_message_directly(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        try:
            _, _, offset = decode_offset_msg_id(h.msg_id or "")
        except (MessageDecodeError, ValueError) as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"bad msgId {h.msg_id!r}: {exc}")
        message = self.store.get_message_bytes_by_offset(offset)
        if message is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        request.ext_fields = {**(request.ext_fields or {}), "brokerName": self.broker_name}
        return await self._call_consumer(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, request, h.consumer_group, h.client_id, message
        )

    # -- raw consume queue -----------------------------------------------------------------------
    def query_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumeQueueRequestHeader.from_ext_fields(request.ext_fields)
        read = self.store.read_consume_queue(h.topic, h.queue_id, h.index, h.count)
        if read is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"{h.queue_id}@{h.topic} is not exist!")
        sub = None
        filter_data = None
        if h.consumer_group is not None:
            sub = self.consumers.find_subscription_data(h.consumer_group, h.topic)
            # no SQL92 filter data exists for TAG subscriptions: Java prints its null as "null"
            filter_data = f"{h.consumer_group}@{h.topic} is not online!" if sub is None else "null"
        if read.units is None:
            return ok_remark(request, f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!")
        data = [ConsumeQueueData(phy, size, tags) for phy, size, tags in read.units]
        return ok(
            request, encode_query_consume_queue(read.min_offset, read.max_offset, data, sub, filter_data)
        )


def ok_remark(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark)
