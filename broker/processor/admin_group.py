"""Groups, connections and offset tables: codes 43, 45, 200, 201, 203, 204, 207, 314.

=====  ===================================  ================================================================
code   request                              behaviour (RocketMQ ``AdminBrokerProcessor``)
=====  ===================================  ================================================================
200    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP  slave → 1; body = SubscriptionGroupConfig JSON (unreadable or an
                                            invalid group name → 1, empty body → no-op); subscriptionGroup.json
                                            written before the reply
201    GET_ALL_SUBSCRIPTIONGROUP_CONFIG     ``{"dataVersion","subscriptionGroupTable"}``
207    DELETE_SUBSCRIPTIONGROUP             slave → 1; config (and with ``removeOffset`` the group's offsets) gone
203    GET_CONSUMER_CONNECTION_LIST         ``ConsumerConnection``; 206 ``the consumer group[G] not online``
204    GET_PRODUCER_CONNECTION_LIST         ``ProducerConnection``; 1 ``the producer group[G] not exist``
43     GET_ALL_CONSUMER_OFFSET              consumerOffset.json content (compact), for slaves
45     GET_ALL_DELAY_OFFSET                 delayOffset.json content; 1 when there is no schedule service
314    CLONE_GROUP_OFFSET                   copy offsets of srcGroup to destGroup for one topic or all its
                                            topics (unless ``offline``, only topics srcGroup subscribes to)
=====  ===================================  ================================================================
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.processor.admin_base import AdminBase, fail, language_name, master_only, ok
from pocketmq.broker.processor.admin_checks import group_name_error
from pocketmq.remoting.protocol.bodies import (
    Connection,
    ConsumerConnection,
    DelayOffsetTable,
    ProducerConnection,
    SubscriptionGroupConfig,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
)

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger("pocketmq.broker.processor.admin")


@dataclass(eq=False, kw_only=True)
class GroupAdmin(AdminBase):
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    #: the schedule service (GET_ALL_DELAY_OFFSET, :func:`delay_offset_body`) or None
    schedule: Any

    # -- subscription groups ---------------------------------------------------------------------

    HANDLERS = {
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: "update_and_create_subscription_group",
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: "get_all_subscription_group",
        RequestCode.DELETE_SUBSCRIPTIONGROUP: "delete_subscription_group",
        RequestCode.GET_CONSUMER_CONNECTION_LIST: "get_consumer_connection_list",
        RequestCode.GET_PRODUCER_CONNECTION_LIST: "get_producer_connection_list",
        RequestCode.GET_ALL_CONSUMER_OFFSET: "get_all_consumer_offset",
        RequestCode.GET_ALL_DELAY_OFFSET: "get_all_delay_offset",
        RequestCode.CLONE_GROUP_OFFSET: "clone_group_offset",
    }

    @master_only
    async def update_and_create_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        if not request.body:
            return ok(request)  # Java: a null config is ignored
        try:
            sgc = SubscriptionGroupConfig.decode(request.body)
        except BodyFormatError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig body: {exc}")
        err = group_name_error(sgc.group_name)
        if err is not None:
            return fail(request, ResponseCode.SYSTEM_ERROR, err)
        logger.info("update or create subscription group %s, caller %s", sgc.group_name, conn.remote_addr)
        mgr = self.groups
        mgr.update_subscription_group_config(sgc)
        await self.persist(mgr)
        return ok(request)

    def get_all_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        return ok(request, self.groups.build_wrapper().encode())

    @master_only
    async def delete_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        logger.info(
            "delete subscription group %s (removeOffset=%s), caller %s",
            h.group_name,
            h.remove_offset,
            conn.remote_addr,
        )
        self.groups.delete_subscription_group_config(h.group_name)
        if h.remove_offset:
            self.offsets.remove_group(h.group_name)
        self.stats.on_group_deleted(h.group_name)
        await self.persist(self.groups, self.offsets)
        return ok(request)

    # -- connections ---------------------------------------------------------------------------
    def get_consumer_connection_list(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        cgi = self.consumers.get_consumer_group_info(h.consumer_group)
        if cgi is None:
            return fail(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{h.consumer_group}] not online",
            )
        body = ConsumerConnection(
            [
                Connection(info.client_id, info.remote_addr, language_name(info.language), info.version)
                for info in cgi.channels.values()
            ],
            dict(cgi.subscription_table),
            cgi.consume_type,
            cgi.message_model,
            cgi.consume_from_where,
        )
        return ok(request, body.encode())

    def get_producer_connection_list(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        channels = self.producers.get_channels(h.producer_group)
        if not channels:
            return fail(
                request, ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist"
            )
        body = ProducerConnection(
            [Connection(i.client_id, i.remote_addr, language_name(i.language), i.version) for i in channels]
        )
        return ok(request, body.encode())

    # -- offset tables ---------------------------------------------------------------------------
    def get_all_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return ok(request, self.offsets.encode_plain())

    def get_all_delay_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = delay_offset_body(self.schedule)
        if body is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return ok(request, body)

    def clone_group_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = CloneGroupOffsetRequestHeader.from_ext_fields(request.ext_fields)
        com = self.offsets
        topics = {h.topic} if h.topic and h.topic.strip() else com.topics_of_group(h.src_group)
        cgi = self.consumers.get_consumer_group_info(h.src_group)
        for topic in sorted(topics):
            if self.topics.select_topic_config(topic) is None:
                logger.warning("[cloneGroupOffset] topic config not exist, %s", topic)
                continue
            if (
                not h.offline
                and cgi is not None
                and cgi.subscription_table
                and topic not in cgi.subscription_table
            ):
                logger.warning(
                    "[cloneGroupOffset] the consumer group[%s], topic[%s] not exist", h.src_group, topic
                )
                continue
            # Java passes the request's (possibly blank) topic here; every listed topic is meant
            com.clone_offset(h.src_group, h.dest_group, topic)
        return ok(request)


def delay_offset_body(schedule_service: Any) -> bytes | None:
    """delayOffset.json content of the schedule service (its ``encode()`` or ``offset_table``)."""
    if schedule_service is None:
        return None
    encode = getattr(schedule_service, "encode", None)
    if callable(encode):
        data = encode()
        return data.encode() if isinstance(data, str) else bytes(data)
    table = getattr(schedule_service, "offset_table", None)
    if isinstance(table, dict):
        return DelayOffsetTable({int(k): int(v) for k, v in table.items()}).encode(pretty=False)
    return None
