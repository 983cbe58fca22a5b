"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

Checks and outcomes, in RocketMQ's order (``SendMessageProcessor.asyncConsumerSendMsgBack``):

====  =========================================================================================
code  condition
====  =========================================================================================
26    unknown group and ``autoCreateSubscriptionGroup=false``
16    broker not writable; the group's ``%RETRY%`` topic not writable
0     group ``retryQueueNums <= 0``: acknowledged, nothing stored
1     ``look message by offset failed, <offset>``: no message record at that commit-log offset
1     the store refused the put (remark = the put status name)
0     stored
====  =========================================================================================

The message at ``offset`` is copied: body, flag, sysFlag, born timestamp and host, store host and
properties kept, ``RETRY_TOPIC`` = its topic unless already set, ``ORIGIN_MESSAGE_ID`` = its own
unless already set (the offset msgId of the first delivery), ``WAIT=false``, ``DELAY`` = the retry
level (``0`` on a DLQ copy, as Java's ``setDelayTimeLevel(0)``), reconsume times + 1; the property
string is written in Java ``HashMap`` order, byte for byte what Apache 4.9.7 stores
(tests/broker/test_java_property_order.py).

The DLQ decision, delay level and DLQ topic are :mod:`pocketmq.broker.retry_policy`'s (shared
with a send to ``%RETRY%<group>``):

* ``reconsumeTimes >= max`` or ``delayLevel < 0`` → ``%DLQ%<group>`` queue 0, no delay. ``max`` is
  the group's ``retryMaxTimes`` (16), or the header's ``maxReconsumeTimes`` when the request's
  version is ≥ 121 (Java 3.4.9+ and ali-ons send it; the C++ 1.x client sends version 63 and only
  ``offset``, ``group`` and ``delayLevel``). The DLQ topic is created with 1 queue and
  ``PERM_WRITE`` only, as RocketMQ 4.x: not pullable until an admin grants read; admin queries
  (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID) read it.
* otherwise ``%RETRY%<group>`` (a random one of ``retryQueueNums`` queues, created RW on first
  use) with delay level ``delayLevel``, or ``3 + reconsumeTimes`` when 0 (clamped to the highest
  level): stored in ``SCHEDULE_TOPIC_XXXX`` and delivered by the schedule service when due.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.config_file import reply_when_durable
from pocketmq.broker.processor.message_props import apply_delay_level, java_properties_string
from pocketmq.broker.processor.peer_address import host_address
from pocketmq.broker.retry_policy import (
    dlq_queue_id,
    ensure_dlq_topic,
    goes_to_dlq,
    max_reconsume_times,
    retry_delay_level,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import NoPermissionError, SubscriptionGroupNotExistError
from pocketmq.remoting.protocol.headers import ConsumerSendMsgBackRequestHeader
from pocketmq.remoting.protocol.message import (
    MessageConst,
    MessageExt,
    pack_host_ip,
)
from pocketmq.remoting.protocol.route import (
    RMQ_SYS_SCHEDULE_TOPIC,
    PermName,
    TopicSysFlag,
    dlq_topic,
    retry_topic,
)
from pocketmq.store import MessageInner

if TYPE_CHECKING:
    from pocketmq.broker.schedule import ScheduleMessageService
    from pocketmq.broker.state import BrokerState, Registrar
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore


def _packed(host: tuple[str, int]) -> tuple[bytes, int]:
    try:
        return pack_host_ip(host[0]), host[1]
    except Exception:
        return host_address(f"{host[0]}:{host[1]}")


@dataclass(eq=False, kw_only=True)
class ConsumerSendMsgBackProcessor:
    """Owns CONSUMER_SEND_MSG_BACK; ``schedule`` None stores retries without a delay."""

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    state: BrokerState
    stats: BrokerStatsManager
    schedule: ScheduleMessageService | None

    def __post_init__(self) -> None:
        self._rng = random.Random()

    def register(self, register: Registrar) -> None:
        register(RequestCode.CONSUMER_SEND_MSG_BACK, self.process)

    def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        # a group, %RETRY% or %DLQ% topic auto-created here is written before the reply
        return reply_when_durable(self._send_back(conn, request), self.groups, self.topics)

    def _send_back(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        cfg = self.state.config
        group = h.group
        sgc = self.groups.find_subscription_group_config(group)
        if sgc is None:
            raise SubscriptionGroupNotExistError(f"subscription group not exist, {group}")
        if not PermName.is_writeable(cfg.broker_permission):
            raise NoPermissionError(f"the broker[{cfg.broker_ip1}] sending message is forbidden")
        if sgc.retry_queue_nums <= 0:
            return RemotingCommand.response_to(request)
        new_topic = retry_topic(group)
        sys_flag = TopicSysFlag.build(False, True) if h.unit_mode else 0
        tcm = self.topics
        tc = tcm.create_topic_in_send_message_back_method(
            new_topic, sgc.retry_queue_nums, PermName.PERM_WRITE | PermName.PERM_READ, sys_flag
        )
        if not PermName.is_writeable(tc.perm):
            raise NoPermissionError(f"the topic[{new_topic}] sending message is forbidden")
        queues = max(1, min(sgc.retry_queue_nums, tc.write_queue_nums))
        queue_id = self._rng.randrange(99999999) % queues
        msg = self.store.look_message_by_offset(h.offset) if h.offset >= 0 else None
        if msg is None:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}"
            )
        props = dict(msg.properties)
        back_topic = props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        max_times = max_reconsume_times(sgc.retry_max_times, request.version, h.max_reconsume_times)
        to_dlq = goes_to_dlq(msg.reconsume_times, max_times, h.delay_level)
        # Java's order of puts into the message's HashMap (RETRY_TOPIC, WAIT, DELAY, then
        # ORIGIN_MESSAGE_ID; a name already there keeps its place, as a dict's does): names
        # sharing a bucket come out in it, so the string below is Apache's byte for byte
        props[MessageConst.WAIT] = "false"
        if to_dlq:
            new_topic = dlq_topic(group)
            queue_id = dlq_queue_id(self._rng)
            ensure_dlq_topic(tcm, group)
            props[MessageConst.DELAY] = "0"  # Java's setDelayTimeLevel(0): no delay, name kept
        else:
            props[MessageConst.DELAY] = str(retry_delay_level(h.delay_level, msg.reconsume_times))
            # apply_delay_level writes where the message belongs after its delay
            props.pop(MessageConst.REAL_TOPIC, None)
            props.pop(MessageConst.REAL_QID, None)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
        inner = self._copy(msg, new_topic, queue_id, java_properties_string(props))
        schedule = self.schedule
        if not to_dlq and schedule is not None:
            apply_delay_level(inner, schedule.max_delay_level)
        result = self.store.put_message(inner)
        if not result.status.is_ok:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, result.status.name)
        stats = self.stats
        append = result.append
        if inner.topic == RMQ_SYS_SCHEDULE_TOPIC and append is not None:
            stats.on_put(inner.topic, 1, append.wrote_bytes)
        stats.on_send_back(group, back_topic)
        if to_dlq:
            stats.on_send_back_dlq(group, back_topic)
        return RemotingCommand.response_to(request)

    @staticmethod
    def _copy(msg: MessageExt, topic: str, queue_id: int, props: str) -> MessageInner:
        return MessageInner(
            topic,
            msg.body,
            queue_id,
            msg.flag,
            props,
            msg.sys_flag,
            msg.born_timestamp,
            _packed(msg.born_host),
            _packed(msg.store_host),
            msg.reconsume_times + 1,
        )
