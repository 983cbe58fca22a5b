"""Client registration: HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46),
LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42).

HEART_BEAT (``ClientManageProcessor.heartBeat``): for each consumer group, the group's config is
found (auto-created when allowed) and its ``%RETRY%<group>`` topic created with
``retryQueueNums`` queues; the consumer is registered with subscriptions whose tag codes are
recomputed server-side (C++ sends garbage ``codeSet``) and, for clustering push consumers, the
``%RETRY%<group>`` subscription added when missing; a membership change notifies the group's
consumers (NOTIFY_CONSUMER_IDS_CHANGED). Producers are registered per group. A malformed body is
answered SYSTEM_ERROR naming the bad field.

LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (``RebalanceLockManager``, reference §7.4): one lock table per
group; a queue is granted when free, held by the same client id (renewed) or not renewed for
60 s. Unknown groups are served like known ones (RocketMQ 4.x checks none): code 0 with the
granted queues. A body that does not parse (or lacks ``consumerGroup``/``clientId``) → 1.
Unlike RocketMQ, UNREGISTER_CLIENT of a consumer also releases that client's locks in its group
(a clean shutdown; a dropped connection keeps them until they expire, as RocketMQ).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.client_manager import ClientChannelInfo
from pocketmq.broker.config_file import reply_when_durable
from pocketmq.broker.state import HandlerTable
from pocketmq.remoting.protocol.bodies import (
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError, SubscriptionParseFailedError
from pocketmq.remoting.protocol.fastjson import BodyFormatError, decode_object, get_dict, get_str
from pocketmq.remoting.protocol.filter import SqlFilterError, compile_sql
from pocketmq.remoting.protocol.headers import UnregisterClientRequestHeader
from pocketmq.remoting.protocol.route import PermName, TopicSysFlag, retry_topic

if TYPE_CHECKING:
    from pocketmq.broker.broker2client import Broker2Client
    from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
    from pocketmq.broker.rebalance_lock import RebalanceLockManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.common.clock import Clock
    from pocketmq.remoting.transport.connection import RemotingConnection


def with_retry_subscription(cd: ConsumerData) -> tuple[SubscriptionData, ...]:
    """The heartbeat's subscriptions plus ``%RETRY%<group>`` ("*") for a clustering push consumer.

    Java clients subscribe to the retry topic themselves; ali-ons' first heartbeat does not yet,
    and a client that lost it would never see its retried messages: the broker adds it, so the
    group's subscription always lists it (consumer connection, consume stats, consumed-by-who).
    """
    subs = cd.subscription_data_set
    if (
        cd.message_model is not MessageModel.CLUSTERING
        or cd.consume_type is not ConsumeType.CONSUME_PASSIVELY
    ):
        return subs
    topic = retry_topic(cd.group_name)
    if any(sub.topic == topic for sub in subs):
        return subs
    version = max((sub.sub_version for sub in subs), default=0)
    return (*subs, SubscriptionData.build(topic, "*", sub_version=version))


@dataclass(eq=False, kw_only=True)
class ClientManageProcessor(HandlerTable):
    """Owns the client registration and queue-lock codes (module docstring)."""

    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    notifier: Broker2Client
    state: BrokerState
    clock: Clock

    HANDLERS = {
        RequestCode.HEART_BEAT: "heart_beat",
        RequestCode.UNREGISTER_CLIENT: "unregister_client",
        RequestCode.CHECK_CLIENT_CONFIG: "check_client_config",
        RequestCode.LOCK_BATCH_MQ: "lock_batch_mq",
        RequestCode.UNLOCK_BATCH_MQ: "unlock_batch_mq",
    }

    def heart_beat(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        try:
            data = HeartbeatData.decode(request.body or b"")
        except BodyFormatError as exc:
            raise RemoteSystemError(f"bad heartbeat body: {exc}") from None
        now = self.clock.monotonic_ms()
        info = ClientChannelInfo(
            conn, data.client_id, request.language, request.version, now, conn.remote_addr
        )
        for cd in data.consumer_data_set:
            sgc = self.groups.find_subscription_group_config(cd.group_name)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                sys_flag = TopicSysFlag.build(False, True) if cd.unit_mode else 0
                self.topics.create_topic_in_send_message_back_method(
                    retry_topic(cd.group_name),
                    sgc.retry_queue_nums,
                    PermName.PERM_READ | PermName.PERM_WRITE,
                    sys_flag,
                )
            changed = self.consumers.register_consumer(
                cd.group_name,
                ClientChannelInfo(
                    conn, data.client_id, request.language, request.version, now, conn.remote_addr
                ),
                cd.consume_type,
                cd.message_model,
                cd.consume_from_where,
                with_retry_subscription(cd),
            )
            if changed and notify:
                self.notifier.notify_consumer_ids_changed(cd.group_name)
        for pd in data.producer_data_set:
            self.producers.register_producer(
                pd.group_name,
                ClientChannelInfo(conn, info.client_id, info.language, info.version, now, info.remote_addr),
            )
        # a group or %RETRY% topic auto-created here is written before the reply acknowledges it
        return reply_when_durable(RemotingCommand.response_to(request), self.groups, self.topics)

    def unregister_client(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if h.producer_group:
            self.producers.unregister_producer(h.producer_group, conn)
        if h.consumer_group:
            # A consumer unregisters when it shuts down, after its last consumption: its queue
            # locks can go at once. librocketmq 1.x's UNLOCK_BATCH_MQ at shutdown leaves one
            # queue out, which would otherwise block its successor for the 60 s lock expiry.
            if h.client_id:
                self.locks.unlock_all(h.consumer_group, h.client_id)
            sgc = self.groups.find_subscription_group_config(h.consumer_group)
            notify = sgc.notify_consumer_ids_changed_enable if sgc is not None else True
            if self.consumers.unregister_consumer(h.consumer_group, conn) and notify:
                self.notifier.notify_consumer_ids_changed(h.consumer_group)
        return RemotingCommand.response_to(request)

    def check_client_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            obj = decode_object(request.body or b"", "checkClientRequestBody")
            raw = get_dict(obj, "subscriptionData")
            sub = SubscriptionData.from_json(raw) if raw else None
            get_str(obj, "group", "")
        except BodyFormatError as exc:
            raise RemoteSystemError(f"bad check client config body: {exc}") from None
        if sub is None or sub.expression_type == ExpressionType.TAG.value:
            return RemotingCommand.response_to(request)
        if not self.state.config.enable_property_filter:
            raise RemoteSystemError(
                f"The broker does not support consumer to filter message by {sub.expression_type}"
            )
        try:
            compile_sql(sub.sub_string)
        except SqlFilterError as exc:
            raise SubscriptionParseFailedError(f"Invalid MessageSelector. {exc}") from None
        return RemotingCommand.response_to(request)

    def lock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            body = LockBatchRequestBody.decode(request.body or b"")
        except BodyFormatError as exc:
            raise RemoteSystemError(f"bad lock body: {exc}") from None
        granted = self.locks.try_lock_batch(
            body.consumer_group, body.mq_set, body.client_id, self.clock.monotonic_ms()
        )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, None, None, LockBatchResponseBody(granted).encode()
        )

    def unlock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            body = UnlockBatchRequestBody.decode(request.body or b"")
        except BodyFormatError as exc:
            raise RemoteSystemError(f"bad unlock body: {exc}") from None
        self.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return RemotingCommand.response_to(request)
