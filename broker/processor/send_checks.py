"""The send processor's decision tables: request checks and put status → reply (no sockets).

:func:`check_send` is ``msgCheck`` (RocketMQ's order, codes and remarks, tabled in
:mod:`pocketmq.broker.processor.send`): broker role and start time, an order topic on a
non-writable broker, the topic name and the not-allowed-to-send system topics, the topic's
config (auto-created from its template when allowed, a ``%RETRY%`` topic created RW), the
topic's PERM_WRITE and the queue id. It reads and creates topic configs through ``topics`` and
nothing else, so a table test drives it with an in-memory :class:`TopicConfigManager`.

:func:`message_too_large` and :func:`properties_too_long` are the size rules (13 with
:data:`ILLEGAL_REMARK`); the send path inlines them (marked) and a test compares. As in
RocketMQ's CommitLog, ``maxMessageSize`` bounds the stored record (:data:`STORED_FIXED` bytes +
body + topic + properties), not the body alone: a 4 MiB body is refused at the 4 MiB default,
and a batch is refused when one record or all of them together pass it
(:mod:`pocketmq.broker.processor.batch_body`). A batch carrying a transaction type in its
sysFlag is refused (13), as ``CommitLog.asyncPutMessages`` does: its messages could never be
committed.
:data:`PUT_STATUS_REPLY` maps the store's put status to the reply's code and remark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pocketmq.broker.processor.message_props import CLUSTER_KEY, DELAY_KEY, TRAN_KEY
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import reply_template
from pocketmq.remoting.protocol.errors import (
    NoPermissionError,
    RemoteSystemError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from pocketmq.remoting.protocol.message import MAX_PROPERTIES_LENGTH
from pocketmq.remoting.protocol.route import (
    RETRY_GROUP_TOPIC_PREFIX,
    PermName,
    TopicConfig,
    TopicSysFlag,
    is_not_allowed_send_topic,
    topic_error,
)
from pocketmq.store import BrokerRole, FlushDiskType, PutMessageStatus

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.protocol.headers import SendMessageRequestHeader

__all__ = [
    "ILLEGAL_REMARK",
    "PUT_STATUS_REPLY",
    "STORED_FIXED",
    "SendSettings",
    "check_send",
    "message_too_large",
    "properties_too_long",
]

# Enum member hoisted for the per-request path (docs/development.md, hot paths).
_PERM_WRITE = int(PermName.PERM_WRITE)
#: topic names that passed the name checks are remembered; the set is cleared past this size
_OK_TOPICS_MAX = 100_000
#: A stored record's bytes besides body, topic and properties (``CommitLog.calMsgLength`` with
#: IPv4 hosts; each IPv6 host adds 12, not counted here).
STORED_FIXED = 91
#: the longest topic name (127) and properties (32767): a body up to ``maxMessageSize`` minus
#: these and ``STORED_FIXED`` cannot make the record too large, so only longer ones are measured
_MAX_TOPIC_AND_PROPS = 127 + MAX_PROPERTIES_LENGTH

ILLEGAL_REMARK = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit 128k, msg properties length limit 32k."
)
PUT_STATUS_REPLY: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK),
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
#: the reply of a status missing from :data:`PUT_STATUS_REPLY`
PUT_STATUS_DEFAULT: tuple[int, str | None] = (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT")


class SendSettings:
    """Per-config values of the send path, computed once per config object."""

    __slots__ = (
        "cfg", "cluster", "cluster_tail", "half_fast_max_props", "is_slave", "max_body", "max_body_fast",
        "policy_waits", "quick_checks", "region", "reject_transaction", "send_ok", "start_accept",
        "sync_flush_only", "sync_master_only", "tail_delay", "tail_tran", "trace_on", "writable",
    )  # fmt: skip

    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.cluster = cfg.broker_cluster_name
        #: what the common send's stored properties add to the request's (send.SendMessageProcessor.process)
        self.cluster_tail = f"\x02{CLUSTER_KEY}{self.cluster}"
        #: whether that tail holds a DELAY / TRAN_MSG key (a cluster name may hold anything)
        self.tail_delay = DELAY_KEY in self.cluster_tail
        self.tail_tran = TRAN_KEY in self.cluster_tail
        #: the send processor's half branch (``send.SendMessageProcessor.process``) takes request properties up to
        #: this long: their stored string (minus WAIT, plus the tail) then has at most
        #: MAX_PROPERTIES_LENGTH characters, so the general path's length check cannot refuse it
        self.half_fast_max_props = MAX_PROPERTIES_LENGTH - len(self.cluster_tail)
        self.region = cfg.region_id
        self.trace_on = "true" if cfg.trace_on else "false"
        #: the SEND_OK reply header cut where msgId, queueId, queueOffset and the opaque go
        #: (``send._reply``; None: replies are encoded the general way)
        self.send_ok = reply_template(
            {
                "MSG_REGION": self.region,
                "TRACE_ON": self.trace_on,
                "msgId": None,
                "queueId": None,
                "queueOffset": None,
            }
        )
        self.is_slave = cfg.is_slave
        #: ``rejectTransactionMessage`` (read per half otherwise: a pydantic attribute, ~0.8k instructions)
        self.reject_transaction = cfg.reject_transaction_message
        #: ``maxMessageSize``: the largest stored record
        self.max_body = cfg.store.max_message_size
        #: bodies up to this are within ``max_body`` whatever the topic and properties
        self.max_body_fast = self.max_body - STORED_FIXED - _MAX_TOPIC_AND_PROPS
        self.start_accept = cfg.start_accept_send_request_time_stamp
        self.writable = PermName.is_writeable(cfg.broker_permission)
        #: check_send's broker-wide checks all pass (a master, accepting, writable): a send to a
        #: topic it already passed, writable, with a queue id in range, needs no call of it
        self.quick_checks = not self.is_slave and not self.start_accept and self.writable
        # Whether a stored message waits for a flush (SYNC_FLUSH) or a slave (SYNC_MASTER).
        self.policy_waits = (
            cfg.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
            or cfg.store.broker_role is BrokerRole.SYNC_MASTER
        )
        # SYNC_FLUSH without replication: answered per group-commit round (send.py's docstring)
        self.sync_flush_only = (
            cfg.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
            and cfg.store.broker_role is not BrokerRole.SYNC_MASTER
        )
        # SYNC_MASTER without SYNC_FLUSH: answered from the slave's acknowledgement (replication_replies)
        self.sync_master_only = (
            cfg.store.broker_role is BrokerRole.SYNC_MASTER
            and cfg.store.flush_disk_type is not FlushDiskType.SYNC_FLUSH
        )


class _Peer(Protocol):
    @property
    def remote_addr(self) -> str: ...


def check_send(
    s: SendSettings,
    header: SendMessageRequestHeader,
    topics: TopicConfigManager,
    ok_topics: set[str],
    now_ms: Callable[[], int],
    peer: _Peer,
) -> TopicConfig:
    """``msgCheck``: the topic's config (auto-created if allowed), or raise the error reply.

    ``ok_topics`` remembers the names that passed the name checks (valid, not a system topic),
    so they are checked once per topic, not per message.
    """
    topic = header.topic
    if s.is_slave:
        raise ServiceNotAvailableError(
            f"the broker[{s.cfg.broker_ip1}] is a slave: sending message is forbidden"
        )
    if s.start_accept and now_ms() < s.start_accept:
        raise RemoteSystemError(f"broker unable to service, until {s.start_accept}")
    if not s.writable and topics.is_order_topic(topic):
        raise NoPermissionError(f"the broker[{s.cfg.broker_ip1}] sending message is forbidden")
    if topic not in ok_topics:
        err = topic_error(topic)
        if err is not None:
            raise RemoteSystemError(err)
        if is_not_allowed_send_topic(topic):
            raise NoPermissionError(f"Sending message to topic[{topic}] is forbidden.")
        if len(ok_topics) > _OK_TOPICS_MAX:  # bounded: topic names come from clients
            ok_topics.clear()
        ok_topics.add(topic)
    tc = topics.topic_config_table.get(topic)  # inline of TopicConfigManager.select_topic_config
    if tc is None:
        sys_flag = 0
        if header.unit_mode:
            is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
            sys_flag = TopicSysFlag.build(not is_retry, is_retry)
        tc = topics.create_topic_in_send_message_method(
            topic, header.default_topic, header.default_topic_queue_nums, sys_flag
        )
        if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            tc = topics.create_topic_in_send_message_back_method(
                topic, 1, PermName.PERM_READ | PermName.PERM_WRITE, sys_flag
            )
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
    if not tc.perm & _PERM_WRITE:
        # Java leaves this to the route (producers only pick writable queues); a client that
        # sends anyway gets the pull side's answer instead of a silently accepted message.
        raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
    queue_id = header.queue_id
    if queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:  # (no max() call)
        raise RemoteSystemError(
            f"request queueId[{header.queue_id}] is illegal, {tc} Producer: {peer.remote_addr}"
        )
    return tc


def message_too_large(s: SendSettings, body: bytes, topic: str, props: str) -> bool:
    """The stored record would be longer than ``maxMessageSize`` (13, :data:`ILLEGAL_REMARK`)."""
    return len(body) > s.max_body_fast and stored_size(len(body), topic, props) > s.max_body


def stored_size(body_len: int, topic: str, props: str) -> int:
    """The stored record's length (``calMsgLength``, IPv4 hosts)."""
    return STORED_FIXED + body_len + len(topic.encode()) + len(props.encode())


def properties_too_long(props: str) -> bool:
    """Stored properties longer than 32767 UTF-8 bytes (13); the encode only for long strings."""
    return len(props) > MAX_PROPERTIES_LENGTH and len(props.encode()) > MAX_PROPERTIES_LENGTH
