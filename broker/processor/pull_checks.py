"""The pull processor's decision tables: request checks and store status → reply (no sockets).

:func:`check_pull` is the first half of ``PullMessageProcessor.processRequest`` (codes and
remarks tabled in :mod:`pocketmq.broker.processor.pull`): broker readable, the group known
(auto-created when allowed) and consume-enabled, the topic known and readable, the queue id in
``[0, readQueueNums)``. It reads configs through ``groups`` and ``topics`` and nothing else.

:func:`pull_outcome` maps the store's :class:`GetMessageStatus` to the reply code, then applies
the slave rules to the code, ``suggestWhichBrokerId`` and ``nextBeginOffset``:

=====================================================  =====================================
store status                                           code
=====================================================  =====================================
FOUND                                                  0 SUCCESS
NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING               20 PULL_RETRY_IMMEDIATELY
OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE                 19 PULL_NOT_FOUND
OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY                21 PULL_OFFSET_MOVED
NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE            21, or 19 when the request offset is 0
anything else                                          1 SYSTEM_ERROR
=====================================================  =====================================

``suggestWhichBrokerId`` is the group's ``whichBrokerWhenConsumeSlowly`` when the store says the
pull read data older than the in-memory window, else the group's ``brokerId`` (0 by default);
always the master (0) unless ``slaveReadEnable``.
On a slave without ``offsetCheckInSlave`` an OFFSET_MOVED becomes 20 with ``nextBeginOffset`` =
the request's offset (a slave does not move consumers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.errors import (
    NoPermissionError,
    RemoteSystemError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from pocketmq.remoting.protocol.route import MASTER_ID, PermName, TopicConfig
from pocketmq.store import GetMessageStatus, MessageStoreConfig

if TYPE_CHECKING:
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig
    from pocketmq.remoting.protocol.headers import PullMessageRequestHeader

__all__ = ["STATUS_CODE", "check_pull", "pull_outcome"]

# Enum members hoisted: once per pull (docs/development.md, hot paths)
_PERM_READ = int(PermName.PERM_READ)
_PULL_NOT_FOUND = int(ResponseCode.PULL_NOT_FOUND)
_PULL_OFFSET_MOVED = int(ResponseCode.PULL_OFFSET_MOVED)
_PULL_RETRY_IMMEDIATELY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_NO_MESSAGE_IN_QUEUE = GetMessageStatus.NO_MESSAGE_IN_QUEUE
_NO_MATCHED_LOGIC_QUEUE = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE

_S = GetMessageStatus
#: the statuses whose code does not depend on the request (the table above)
STATUS_CODE: dict[GetMessageStatus, int] = {
    _S.FOUND: ResponseCode.SUCCESS,
    _S.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    _S.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    _S.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    _S.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    _S.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    _S.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
#: ``STATUS_CODE`` by the member's name, as plain ints (``pull_outcome``)
_CODE_BY_NAME: dict[str, int] = {status._name_: int(code) for status, code in STATUS_CODE.items()}


class PullSettings(Protocol):
    """What the checks read of the broker config: a ``BrokerConfig``, or the pull processor's
    snapshot of one (read once per config object: a pydantic attribute read is a Python-level
    ``__getattr__`` hook, two per pull here otherwise)."""

    @property
    def broker_permission(self) -> int: ...
    @property
    def broker_ip1(self) -> str: ...
    @property
    def slave_read_enable(self) -> bool: ...
    @property
    def is_slave(self) -> bool: ...
    @property
    def store(self) -> MessageStoreConfig: ...


class _Peer(Protocol):
    @property
    def remote_addr(self) -> str: ...


def check_pull(
    cfg: PullSettings,
    header: PullMessageRequestHeader,
    groups: SubscriptionGroupManager,
    topics: TopicConfigManager,
    peer: _Peer,
) -> tuple[SubscriptionGroupConfig, TopicConfig]:
    """The group's and the topic's configs, or raise the error reply."""
    if not cfg.broker_permission & _PERM_READ:
        raise NoPermissionError(f"the broker[{cfg.broker_ip1}] pulling message is forbidden")
    group = header.consumer_group
    sgc = groups.find_subscription_group_config(group)
    if sgc is None:
        raise SubscriptionGroupNotExistError(f"subscription group [{group}] does not exist")
    if not sgc.consume_enable:
        raise NoPermissionError(f"subscription group no permission, {group}")
    topic = header.topic
    tc = topics.select_topic_config(topic)
    if tc is None:
        raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
    if not tc.perm & _PERM_READ:
        raise NoPermissionError(f"the topic[{topic}] pulling message is forbidden")
    queue_id = header.queue_id
    if queue_id < 0 or queue_id >= tc.read_queue_nums:
        raise RemoteSystemError(
            f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
            f"[{tc.read_queue_nums}] consumer:[{peer.remote_addr}]"
        )
    return sgc, tc


def pull_outcome(
    cfg: PullSettings,
    status: GetMessageStatus,
    request_offset: int,
    next_begin: int,
    from_slave: bool,
    which_broker: int,
    group_broker_id: int = MASTER_ID,
) -> tuple[int, int, int]:
    """``(code, suggestWhichBrokerId, nextBeginOffset)`` of a pull's reply.

    ``from_slave``: the store suggests pulling from a slave (the data read is older than the
    in-memory window); ``which_broker``: the group's ``whichBrokerWhenConsumeSlowly``;
    ``group_broker_id``: the group's ``brokerId`` (where it reads while it keeps up).
    """
    if status is _NO_MESSAGE_IN_QUEUE or status is _NO_MATCHED_LOGIC_QUEUE:
        code = _PULL_OFFSET_MOVED if request_offset != 0 else _PULL_NOT_FOUND
    else:
        # (by the member's name: an Enum's hash is a Python call, ~1k instructions a lookup)
        code = _CODE_BY_NAME.get(status._name_, _SYSTEM_ERROR)
    if cfg.slave_read_enable:
        suggest = which_broker if from_slave else group_broker_id
    else:
        suggest = MASTER_ID
    # (the code first: ``is_slave`` reads an Enum's value, a Python call, on every pull)
    if code == _PULL_OFFSET_MOVED and cfg.is_slave and not cfg.store.offset_check_in_slave:
        next_begin = request_offset
        code = _PULL_RETRY_IMMEDIATELY
    return code, suggest, next_begin
