"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and V2 with ``m=true``.

Checks, in RocketMQ's order (``AbstractSendMessageProcessor.msgCheck`` + ``SendMessageProcessor``),
with RocketMQ's codes and remarks:

====  =========================================================================================
code  condition
====  =========================================================================================
14    the broker is a slave (SERVICE_NOT_AVAILABLE)
1     before ``startAcceptSendRequestTimeStamp``
16    broker not writable and the topic is an order topic
1     topic blank, with characters outside ``[%|a-zA-Z0-9_-]`` or longer than 127
16    topic in the not-allowed-to-send set (SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_*, ...), or a topic
      without PERM_WRITE
17    unknown topic and no auto-create (template missing or without PERM_INHERIT)
1     queueId >= max(readQueueNums, writeQueueNums)
26    ``%RETRY%<group>`` whose group does not exist (and no auto-create)
13    body longer than ``maxMessageSize``; properties longer than 32767 bytes; bad batch body;
      a batch to a ``%RETRY%`` topic; a batch whose header carries ``DELAY`` > 0
1     ``DELAY`` that is not an integer (Java's ``Integer.parseInt`` fails)
16    a transactional half message while ``rejectTransactionMessage`` (or no transaction service)
====  =========================================================================================

A ``%RETRY%<group>`` send at or past the group's max reconsume times goes to ``%DLQ%<group>``
(created write-only, as RocketMQ 4.x). ``DELAY`` > 0 (clamped to the highest level) stores the
message in ``SCHEDULE_TOPIC_XXXX`` for the schedule service (:mod:`pocketmq.broker.schedule`).

Stored properties = the request's, minus ``WAIT``, plus ``CLUSTER``. Batch records get the
header's properties appended to their own (reference §4.6). The put is synchronous on the loop.
A SYNC_FLUSH put waits for its group-commit round: the handler returns no reply and
:mod:`pocketmq.broker.processor.flush_replies` answers the send once its round is flushed (no
task per send). A SYNC_MASTER put (replication) makes the handler return an awaitable instead.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Container
from typing import TYPE_CHECKING, Any

from pocketmq.broker.processor.batch_body import batch_items
from pocketmq.broker.processor.common import born_host_of
from pocketmq.broker.processor.flush_replies import FlushReplies
from pocketmq.broker.processor.message_props import (
    DELAY_KEY,
    TRAN_KEY,
    apply_delay_level,
    delay_level_of,
    has_delay,
    stored_properties,
    strip_property,
)
from pocketmq.remoting.protocol.codes import (
    CURRENT_VERSION,
    RPC_TYPE_RESPONSE,
    VERSION_MAX_RECONSUME_HEADER,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import (
    MessageIllegalError,
    NoPermissionError,
    RemoteSystemError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader
from pocketmq.remoting.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    MULTI_TAGS_FLAG,
    HostAddress,
    MessageConst,
    get_property,
)
from pocketmq.remoting.protocol.route import (
    RETRY_GROUP_TOPIC_PREFIX,
    PermName,
    TopicConfig,
    TopicFilterType,
    TopicSysFlag,
    dlq_topic,
    is_not_allowed_send_topic,
    topic_error,
)
from pocketmq.store import AppendResult, BrokerRole, FlushDiskType, MessageInner, PutMessageStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.schedule import ScheduleMessageService
    from pocketmq.broker.state import BrokerState, Registrar
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore

DLQ_NUMS_PER_GROUP = 1
#: the longest not-yet-dispatched tail a send dispatches itself for a waiting pull (_dispatch_now)
_DISPATCH_NOW_MAX_BYTES = 256 * 1024

# Enum members hoisted: a class attribute read of an Enum costs ~80 ns, a module global ~20.
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS = int(ResponseCode.SUCCESS)
_JAVA = LanguageCode.JAVA
_PUT_OK = PutMessageStatus.PUT_OK
_MULTI_TAG = TopicFilterType.MULTI_TAG
_PERM_WRITE = int(PermName.PERM_WRITE)

_ILLEGAL_REMARK = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit 128k, msg properties length limit 32k."
)
_STATUS_REPLY: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, _ILLEGAL_REMARK),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, _ILLEGAL_REMARK),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full, messages are put to the slave, message store has been shut down, etc.",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


class _Settings:
    """Per-config values of the hot path, recomputed when the controller's config object changes."""

    __slots__ = (
        "cfg", "cluster", "is_slave", "max_body", "policy_waits", "region", "start_accept", "sync_flush_only",
        "trace_on", "writable",
    )  # fmt: skip

    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.cluster = cfg.broker_cluster_name
        self.region = cfg.region_id
        self.trace_on = "true" if cfg.trace_on else "false"
        self.is_slave = cfg.is_slave
        self.max_body = cfg.store.max_message_size
        self.start_accept = cfg.start_accept_send_request_time_stamp
        self.writable = PermName.is_writeable(cfg.broker_permission)
        # Whether a stored message waits for a flush (SYNC_FLUSH) or a slave (SYNC_MASTER).
        self.policy_waits = (
            cfg.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
            or cfg.store.broker_role is BrokerRole.SYNC_MASTER
        )
        # SYNC_FLUSH without replication: answered per group-commit round (module docstring)
        self.sync_flush_only = (
            cfg.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
            and cfg.store.broker_role is not BrokerRole.SYNC_MASTER
        )


class SendMessageProcessor:
    """Owns the send codes.

    Args:
        store: the message store (puts, and the dispatch-now shortcut).
        topics: topic configs (auto-creation, ``%DLQ%`` topics).
        groups: subscription groups (a ``%RETRY%`` send's max reconsume times).
        state: the broker's live config and store host.
        now_ms: wall clock (``startAcceptSendRequestTimeStamp``).
        held_queues: the ``(topic, queue_id)`` keys pulls are held on
            (:attr:`PullRequestHoldService.held_queues`): a put to one is dispatched at once.
        stats: counts stored sends.
        schedule: the delay service (``max_delay_level``); None ignores ``DELAY``.
        transactions: None, or ``prepare_message(inner) -> PutResult | Awaitable[PutResult]``.
    """

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        state: BrokerState,
        *,
        now_ms: Callable[[], int],
        held_queues: Container[tuple[str, int]],
        stats: BrokerStatsManager,
        schedule: ScheduleMessageService | None,
        transactions: Any = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.state = state
        self.now_ms = now_ms
        self.stats = stats
        self.schedule = schedule
        self.transactions = transactions
        self._s = _Settings(state.config)
        self._rng = random.Random()
        #: Topic names that passed the name checks (valid, not a system topic): checked once.
        self._ok_topics: set[str] = set()
        self._msgid_prefix: tuple[HostAddress, str] | None = None
        #: the pulls held per (topic, queue) (long polling): a live view
        self._held_pulls = held_queues
        #: SYNC_FLUSH sends waiting for their group-commit round
        self.flush_replies = FlushReplies(self._reply)

    def _settings(self) -> _Settings:
        s = self._s
        if s.cfg is not self.state.config:
            s = self._s = _Settings(self.state.config)
        return s

    def _dispatch_now(self) -> None:
        """Dispatch what was just put, here, so a pull held on its queue is answered at once.

        Otherwise the reput task dispatches it one loop turn later; doing it now takes that
        turn (and the task's wake-up) off the send-to-receive latency. Same work, same order:
        the reput task then finds nothing left. Only done when a pull waits on the queue, and
        only for a short backlog: a long one stays with the reput task, which yields between
        slices instead of holding the loop.
        """
        store = self.store
        if store.dispatch_behind_bytes > _DISPATCH_NOW_MAX_BYTES:
            return
        try:
            store.do_reput()
        except OSError:
            pass  # e.g. ENOSPC creating a ConsumeQueue file: the reput task retries and logs it

    def register(self, register: Registrar) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            register(code, self.process)

    # ------------------------------------------------------------------------------- entry
    def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        code = request.code
        if code == _SEND_MESSAGE:
            header = SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        else:
            header = SendMessageRequestHeader.from_ext_fields_v2(request.ext_fields)
        if header.batch or code == _SEND_BATCH_MESSAGE:
            return self._send_batch(conn, request, header)
        return self._send_single(conn, request, header)

    # -------------------------------------------------------------------------------- checks
    def check(self, conn: RemotingConnection, header: SendMessageRequestHeader) -> TopicConfig:
        """``msgCheck``: the topic's config (auto-created if allowed), or raise the error reply."""
        s = self._settings()
        topic = header.topic
        if s.is_slave:
            raise ServiceNotAvailableError(
                f"the broker[{s.cfg.broker_ip1}] is a slave: sending message is forbidden"
            )
        if s.start_accept and self.now_ms() < s.start_accept:
            raise RemoteSystemError(f"broker unable to service, until {s.start_accept}")
        tcm = self.topics
        if not s.writable and tcm.is_order_topic(topic):
            raise NoPermissionError(f"the broker[{s.cfg.broker_ip1}] sending message is forbidden")
        if topic not in self._ok_topics:
            err = topic_error(topic)
            if err is not None:
                raise RemoteSystemError(err)
            if is_not_allowed_send_topic(topic):
                raise NoPermissionError(f"Sending message to topic[{topic}] is forbidden.")
            if len(self._ok_topics) > 100_000:  # bounded: topic names come from clients
                self._ok_topics.clear()
            self._ok_topics.add(topic)
        tc = tcm.select_topic_config(topic)
        if tc is None:
            sys_flag = 0
            if header.unit_mode:
                is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                sys_flag = TopicSysFlag.build(not is_retry, is_retry)
            tc = tcm.create_topic_in_send_message_method(
                topic, header.default_topic, header.default_topic_queue_nums, sys_flag
            )
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = tcm.create_topic_in_send_message_back_method(
                    topic, 1, PermName.PERM_READ | PermName.PERM_WRITE, sys_flag
                )
            if tc is None:
                raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & _PERM_WRITE:
            # Java leaves this to the route (producers only pick writable queues); a client that
            # sends anyway gets the pull side's answer instead of a silently accepted message.
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        if header.queue_id >= max(tc.write_queue_nums, tc.read_queue_nums):
            raise RemoteSystemError(
                f"request queueId[{header.queue_id}] is illegal, {tc} Producer: {conn.remote_addr}"
            )
        return tc

    def _retry_and_dlq(
        self, request: RemotingCommand, header: SendMessageRequestHeader, inner: MessageInner, tc: TopicConfig
    ) -> TopicConfig:
        """``handleRetryAndDLQ``: a ``%RETRY%`` send past its max reconsume times goes to the DLQ."""
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            sgc = self.groups.find_subscription_group_config(group)
            if sgc is None:
                raise SubscriptionGroupNotExistError(f"subscription group not exist, {group}")
            max_times = sgc.retry_max_times
            if request.version >= VERSION_MAX_RECONSUME_HEADER and header.max_reconsume_times is not None:
                max_times = header.max_reconsume_times
            if (header.reconsume_times or 0) >= max_times:
                new_topic = dlq_topic(group)
                # PERM_WRITE only, as RocketMQ 4.x: a DLQ is read through admin queries
                tc = self.topics.create_topic_in_send_message_back_method(
                    new_topic, DLQ_NUMS_PER_GROUP, PermName.PERM_WRITE, 0
                )
                inner.topic = new_topic
                inner.queue_id = self._rng.randrange(99999999) % DLQ_NUMS_PER_GROUP
                props, _ = strip_property(inner.properties_string(), MessageConst.DELAY)
                inner.properties = props
        if tc.topic_filter_type == _MULTI_TAG:
            inner.sys_flag |= MULTI_TAGS_FLAG
        return tc

    # -------------------------------------------------------------------------------- single
    def _send_single(
        self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        tc = self.check(conn, header)
        s = self._s
        body = request.body or b""
        if len(body) > s.max_body:
            raise MessageIllegalError(_ILLEGAL_REMARK)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = self._rng.randrange(99999999) % max(1, tc.write_queue_nums)
        props, wait = stored_properties(header.properties, s.cluster)
        if len(props) > MAX_PROPERTIES_LENGTH and len(props.encode()) > MAX_PROPERTIES_LENGTH:
            raise MessageIllegalError(_ILLEGAL_REMARK)
        inner = MessageInner(
            header.topic,
            body,
            queue_id,
            header.flag,
            props,
            header.sys_flag,
            header.born_timestamp,
            born_host_of(conn),
            self.state.store_host,
            header.reconsume_times or 0,
        )
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or tc.topic_filter_type is _MULTI_TAG:
            self._retry_and_dlq(request, header, inner, tc)
        if DELAY_KEY in props and self.schedule is not None:
            try:
                apply_delay_level(inner, self.schedule.max_delay_level)
            except ValueError as exc:
                raise RemoteSystemError(str(exc)) from None
        if TRAN_KEY in props:
            tran = get_property(props, MessageConst.TRAN_MSG)
            if (
                tran is not None
                and tran.lower() == "true"
                and not (inner.reconsume_times > 0 and has_delay(props))
            ):
                return self._prepare_transaction(request, inner, queue_id, wait)
        store = self.store
        if wait and s.policy_waits:
            if not s.sync_flush_only:
                return self._reply_after(request, store.put_message_async(inner), queue_id, inner.topic)
            return self._put_then_flush(conn, request, store.put_message(inner), queue_id, inner.topic)
        result = store.put_message(inner)
        if (
            (inner.topic, inner.queue_id) in self._held_pulls and result.append is not None
        ):  # inline of longpolling.PullRequestHoldService.is_held
            self._dispatch_now()
        return self._reply(request, result, queue_id, inner.topic)

    def _prepare_transaction(
        self, request: RemotingCommand, inner: MessageInner, queue_id: int, wait: bool
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        cfg = self.state.config
        service = self.transactions
        if cfg.reject_transaction_message or service is None:
            raise NoPermissionError(f"the broker[{cfg.broker_ip1}] sending transaction message is forbidden")
        result = service.prepare_message(inner)
        if isinstance(result, PutResult):
            return self._reply(request, result, queue_id, inner.topic)
        return self._reply_after(request, result, queue_id, inner.topic)

    # --------------------------------------------------------------------------------- batch
    def _send_batch(
        self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        tc = self.check(conn, header)
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegalError(f"batch request does not support retry group {topic}")
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = self._rng.randrange(99999999) % max(1, tc.write_queue_nums)
        s = self._s
        batch_props, wait = stored_properties(header.properties, s.cluster)
        if DELAY_KEY in batch_props and _delay_or_error(batch_props) > 0:
            # CommitLog.asyncPutMessages: a batch cannot be delayed
            raise MessageIllegalError("batch messages cannot be delayed (DELAY)")
        sys_flag = header.sys_flag
        if tc.topic_filter_type == _MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        items = batch_items(request.body or b"", batch_props, s.max_body, _ILLEGAL_REMARK)
        # the shared fields once; the store encodes the items against them (no MessageInner each)
        template = MessageInner(
            topic, b"", queue_id, 0, "", sys_flag, header.born_timestamp, born_host_of(conn),
            self.state.store_host, header.reconsume_times or 0,
        )  # fmt: skip
        store = self.store
        if wait and s.policy_waits:
            if not s.sync_flush_only:
                return self._reply_after(request, store.put_batch_async(template, items), queue_id, topic)
            return self._put_then_flush(conn, request, store.put_batch(template, items), queue_id, topic)
        result = store.put_batch(template, items)
        if (
            (topic, queue_id) in self._held_pulls and result.append is not None
        ):  # inline of longpolling.PullRequestHoldService.is_held
            self._dispatch_now()
        return self._reply(request, result, queue_id, topic)

    def _put_then_flush(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
    ) -> RemotingCommand | None:
        """A failed put is answered now; a stored one once its round is flushed (FlushReplies)."""
        if result.append is None:
            return self._reply(request, result, queue_id, topic)
        self.flush_replies.add(self.store, conn, request, result, queue_id, topic)
        return None  # answered by FlushReplies, like a held pull

    # ------------------------------------------------------------------------------- replies
    async def _reply_after(
        self, request: RemotingCommand, pending: Awaitable[PutResult], queue_id: int, topic: str
    ) -> RemotingCommand:
        return self._reply(request, await pending, queue_id, topic)

    def _reply(
        self, request: RemotingCommand, result: PutResult, queue_id: int, topic: str
    ) -> RemotingCommand:
        status = result.status
        append = result.append
        s = self._s
        if append is not None:
            self.stats.on_put(topic, append.msg_num, append.wrote_bytes)
        if status is _PUT_OK and append is not None:
            # The hot path: one dict literal, the reply built directly.
            ext = {
                "MSG_REGION": s.region,
                "TRACE_ON": s.trace_on,
                "msgId": self._msg_id(append),
                "queueId": str(queue_id),
                "queueOffset": str(append.logics_offset),
            }
            return RemotingCommand(
                _SUCCESS, request.opaque, RPC_TYPE_RESPONSE, None, ext, None, _JAVA, CURRENT_VERSION,
                request.serialize_type,
            )  # fmt: skip
        code, remark = _STATUS_REPLY.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        ext = {"MSG_REGION": s.region, "TRACE_ON": s.trace_on}
        if append is not None and status.is_ok:
            ext["msgId"] = self._msg_id(append)
            ext["queueId"] = str(queue_id)
            ext["queueOffset"] = str(append.logics_offset)
        return RemotingCommand.response_to(request, code, remark, ext)

    def _msg_id(self, append: AppendResult) -> str:
        """Offset msgId(s): the store host's hex prefix is computed once per host."""
        cached = self._msgid_prefix
        host = append.store_host
        if cached is None or cached[0] != host:
            if len(host[0]) != 4:
                return append.msg_id
            cached = self._msgid_prefix = (
                host,
                (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper(),
            )
        prefix = cached[1]
        offsets = append.batch_offsets
        if offsets is None:
            return f"{prefix}{append.wrote_offset:016X}"
        # map over a bound %-format: no Python frame per message (a list comprehension has one)
        return ",".join(map(f"{prefix}%016X".__mod__, offsets))


def _delay_or_error(props: str) -> int:
    try:
        return delay_level_of(props)
    except ValueError as exc:
        raise RemoteSystemError(str(exc)) from None
