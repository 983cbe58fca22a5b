"""Topic administration: codes 17, 21, 202, 215, 300, 305, 306, 316, 329 and 5.x's 351.

=====  ===============================  ==================================================================
code   request                          behaviour (RocketMQ ``AdminBrokerProcessor``)
=====  ===============================  ==================================================================
17     UPDATE_AND_CREATE_TOPIC          slave → 1; invalid name → 1 (TopicValidator remark); system topic
                                        → 1 ``The topic[T] is conflict with system topic.``; else stored,
                                        topics.json written, and the broker re-registers with every name
                                        server *before* replying (so the route exists once mqadmin returns)
21     GET_ALL_TOPIC_CONFIG             ``TopicConfigSerializeWrapper``
351    GET_TOPIC_CONFIG (5.x)           ``TopicConfigAndQueueMapping``; 17 ``No topic in this broker. topic: T``
202    GET_TOPIC_STATS_INFO             per write queue min/max offset and last store time; 17 unknown
215    DELETE_TOPIC_IN_BROKER           slave → 1; validation as 17; config, consumer offsets, stats and
                                        the topic's ConsumeQueues are removed (unknown topic: still 0)
300    QUERY_TOPIC_CONSUME_BY_WHO       online groups subscribed + groups with committed offsets
305    GET_SYSTEM_TOPIC_LIST_FROM_BROKER  TopicValidator's system topics + this broker's built-ins
306    CLEAN_EXPIRED_CONSUMEQUEUE       CQ files below the CommitLog start, and queues whose data is gone
316    CLEAN_UNUSED_TOPIC               ConsumeQueues of topics no longer configured
329    DELETE_EXPIRED_COMMITLOG         20 rounds of manual expired-file deletion (``executeDeleteFilesManually``)
=====  ===============================  ==================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pocketmq.broker.processor.admin_base import (
    AdminBase,
    RegisterBroker,
    fail,
    master_only,
    ok,
    register_now,
)
from pocketmq.broker.processor.admin_checks import topic_config_of, topic_name_error
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import GroupList, TopicOffset, TopicStatsTable
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.header_codec import CommandHeader, header, wire
from pocketmq.remoting.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from pocketmq.remoting.protocol.route import SYSTEM_TOPICS, TopicList

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore


class _TopicHeader(Protocol):
    @property
    def topic(self) -> str: ...


_H = TypeVar("_H", bound=_TopicHeader)

logger = logging.getLogger("pocketmq.broker.processor.admin")

#: 5.x GET_TOPIC_CONFIG, answered so 5.x admin tools work too.
GET_TOPIC_CONFIG = RequestCode.GET_TOPIC_CONFIG
#: Java ``CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES``.
MANUAL_DELETE_ROUNDS = 20


@header
class GetTopicConfigRequestHeader(CommandHeader):
    topic: str = wire("topic")
    lo: bool | None = wire("lo", default=None)


@dataclass(eq=False, kw_only=True)
class TopicAdmin(AdminBase):
    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    register_broker: RegisterBroker

    # -- create / delete -------------------------------------------------------------------------

    HANDLERS = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: "update_and_create_topic",
        RequestCode.DELETE_TOPIC_IN_BROKER: "delete_topic",
        RequestCode.GET_ALL_TOPIC_CONFIG: "get_all_topic_config",
        GET_TOPIC_CONFIG: "get_topic_config",
        RequestCode.GET_TOPIC_STATS_INFO: "get_topic_stats_info",
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: "query_topic_consume_by_who",
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: "get_system_topic_list",
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "clean_expired_consume_queue",
        RequestCode.CLEAN_UNUSED_TOPIC: "clean_unused_topic",
        RequestCode.DELETE_EXPIRED_COMMITLOG: "delete_expired_commit_log",
    }

    def _invalid_topic(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        err = topic_name_error(topic, self.topics.is_system_topic(topic))
        return None if err is None else fail(request, ResponseCode.SYSTEM_ERROR, err)

    def _mutation_header(
        self, conn: RemotingConnection, request: RemotingCommand, parse: Callable[[Any], _H], action: str
    ) -> _H | RemotingCommand:
        """The parsed header of a create or delete, or its refusal (invalid or system topic)."""
        h = parse(request.ext_fields)
        logger.info("%s topic %s, caller %s", action, h.topic, conn.remote_addr)
        bad = self._invalid_topic(request, h.topic)
        return h if bad is None else bad

    @master_only
    async def update_and_create_topic(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = self._mutation_header(conn, request, CreateTopicRequestHeader.from_ext_fields, "update or create")
        if isinstance(h, RemotingCommand):
            return h
        tc = topic_config_of(h)
        if isinstance(tc, str):
            return fail(request, ResponseCode.SYSTEM_ERROR, tc)
        tcm = self.topics
        tcm.update_topic_config(tc)
        await self.persist(tcm)
        # Java registers synchronously (registerIncrementBrokerData): the route exists on reply.
        await register_now(self.register_broker)
        return ok(request)

    @master_only
    async def delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = self._mutation_header(conn, request, DeleteTopicRequestHeader.from_ext_fields, "delete")
        if isinstance(h, RemotingCommand):
            return h
        self.topics.delete_topic_config(h.topic)
        self.offsets.remove_topic(h.topic)
        self.store.delete_topics([h.topic])
        self.stats.on_topic_deleted(h.topic)
        await self.persist(self.topics, self.offsets)
        return ok(request)

    # -- reads ---------------------------------------------------------------------------------
    def get_all_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return ok(request, self.topics.build_wrapper().encode())

    def get_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetTopicConfigRequestHeader.from_ext_fields(request.ext_fields)
        tc = self.topics.select_topic_config(h.topic)
        if tc is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        return ok(request, fastjson.dumpb(tc.to_json()))

    def get_topic_stats_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields)
        topic = h.topic
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.store
        table = TopicStatsTable()
        for qid in range(tc.write_queue_nums):
            lo = max(0, store.get_min_offset_in_queue(topic, qid))
            hi = max(0, store.get_max_offset_in_queue(topic, qid))
            last = store.get_message_store_timestamp(topic, qid, hi - 1) if hi > 0 else 0
            table.offset_table[self.mq(topic, qid)] = TopicOffset(lo, hi, last)
        return ok(request, table.encode())

    def query_topic_consume_by_who(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields)
        groups = self.consumers.query_topic_consume_by_who(h.topic)
        groups |= self.offsets.groups_of_topic(h.topic)
        return ok(request, GroupList(sorted(groups)).encode())

    def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topics = sorted(SYSTEM_TOPICS | self.topics.system_topics)
        return ok(request, TopicList(topics).encode())

    # -- store cleanup triggers ------------------------------------------------------------------
    def clean_expired_consume_queue(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        logger.warning("invoke cleanExpiredConsumeQueue start (caller %s)", conn.remote_addr)
        removed = self.store.clean_expired_consume_queues()
        logger.warning("invoke cleanExpiredConsumeQueue end: %d files/queues removed", removed)
        return ok(request)

    def clean_unused_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        logger.warning("invoke cleanUnusedTopic start (caller %s)", conn.remote_addr)
        n = self.store.clean_unused_topics(self.topics.topic_config_table.keys())
        logger.warning("invoke cleanUnusedTopic end: %d topics' queues removed", n)
        return ok(request)

    def delete_expired_commit_log(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        logger.warning("invoke deleteExpiredCommitLog (caller %s)", conn.remote_addr)
        if not self.store.delete_expired_commit_log_now(MANUAL_DELETE_ROUNDS):
            return fail(request, ResponseCode.SYSTEM_ERROR, "the store's clean service is not running")
        return ok(request)
